//! The operation types the pipeline passes along: what an operation computes, which queue it
//! waits in, its input and reply channel, and why it may produce no result. A leaf: the key
//! method creates operations, the queues hold them, the provider computes them.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;

use crate::key::ProviderKey;
use crate::padding::SignView;

/// Which queue an operation waits in (and which histogram its batch is counted in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpClass {
    Rsa,
    Ecdsa,
}

/// What an operation computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    RsaSign,
    RsaDecrypt,
    EcdsaSign,
}

impl OpKind {
    pub fn class(self) -> OpClass {
        match self {
            OpKind::RsaSign | OpKind::RsaDecrypt => OpClass::Rsa,
            OpKind::EcdsaSign => OpClass::Ecdsa,
        }
    }
}

/// Why an operation produced no result (its handshake fails).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    #[error("engine failed and fallback is off: {0}")]
    Engine(String),
    #[error("result failed the public-key check twice")]
    Verify,
    #[error("unsupported operation for this key")]
    Unsupported,
}

pub type OpResult = Result<Vec<u8>, OpError>;

/// One queued operation. It holds the key it started with.
pub struct PendingOp {
    pub kind: OpKind,
    pub key: Arc<ProviderKey>,
    /// RSA: the padded block or ciphertext (modulus length). ECDSA: the digest.
    pub input: Vec<u8>,
    /// RSA signatures: the scheme, digest and hash `input` was padded from, for engines that
    /// sign with a device's own padding (PKCS#11 `CKM_RSA_PKCS_PSS`/`CKM_RSA_PKCS`); other
    /// engines use `input` and ignore it. `None` for decryptions and ECDSA.
    pub signing: Option<SignView>,
    pub enqueued: Instant,
    pub reply: oneshot::Sender<OpResult>,
}

impl PendingOp {
    /// A new operation and the receiver its result arrives on.
    pub fn new(
        kind: OpKind,
        key: Arc<ProviderKey>,
        input: Vec<u8>,
    ) -> (PendingOp, oneshot::Receiver<OpResult>) {
        let (reply, rx) = oneshot::channel();
        let op = PendingOp {
            kind,
            key,
            input,
            signing: None,
            enqueued: Instant::now(),
            reply,
        };
        (op, rx)
    }

    /// The same operation, carrying how its RSA signature is made (see [`signing`](Self::signing)).
    pub fn with_signing(mut self, view: SignView) -> PendingOp {
        self.signing = Some(view);
        self
    }
}
