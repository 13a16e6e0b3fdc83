//! The operation types the pipeline passes along: what an operation computes, which queue it
//! waits in, its input and reply channel, and why it may produce no result. A leaf: the key
//! method creates operations, the queues hold them, the provider computes them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::key::ProviderKey;
use crate::padding::SignView;

/// Which queue an operation waits in (and which histogram its batch is counted in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpClass {
    Rsa,
    Ecdsa,
    /// TLS 1.3 key exchanges (X25519), batched for handshakes whose certificate has this
    /// provider; not private-key operations, but computed on the same engine and worker.
    Kex,
}

/// What an operation computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    RsaSign,
    RsaDecrypt,
    EcdsaSign,
    /// Our X25519 key share and the shared secret for the peer's share in `input` (32 bytes);
    /// the result is the share followed by the secret (64 bytes).
    X25519,
}

impl OpKind {
    pub fn class(self) -> OpClass {
        match self {
            OpKind::RsaSign | OpKind::RsaDecrypt => OpClass::Rsa,
            OpKind::EcdsaSign => OpClass::Ecdsa,
            OpKind::X25519 => OpClass::Kex,
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
    /// A key exchange left to BoringSSL (a batch below the engine's crossover, an engine error
    /// or a low-order peer share): the handshake computes it itself.
    #[error("key exchange left to the handshake")]
    Inline,
}

pub type OpResult = Result<Vec<u8>, OpError>;

/// How long a handshake's operations have waited for their batches so far, shared by its
/// operations (its key exchange, then its signature): the latency budget is the handshake's.
#[derive(Debug, Clone, Default)]
pub struct HandshakeWait(Arc<AtomicU64>);

impl HandshakeWait {
    /// The wait so far.
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }

    /// Add an operation's wait; the handshake's total.
    pub fn add(&self, waited: Duration) -> Duration {
        let ns = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(self.0.fetch_add(ns, Ordering::Relaxed).saturating_add(ns))
    }
}

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
    /// When it was queued, on the event loop's clock.
    pub enqueued: Instant,
    /// Its handshake's wait so far (a fresh one for an operation on its own).
    pub handshake: HandshakeWait,
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
            enqueued: crate::timer::now(),
            handshake: HandshakeWait::default(),
            reply,
        };
        (op, rx)
    }

    /// The same operation, as part of a handshake whose operations share one budget.
    pub fn in_handshake(mut self, handshake: HandshakeWait) -> PendingOp {
        self.handshake = handshake;
        self
    }

    /// The same operation, carrying how its RSA signature is made (see [`signing`](Self::signing)).
    pub fn with_signing(mut self, view: SignView) -> PendingOp {
        self.signing = Some(view);
        self
    }
}

/// Our X25519 key share and the shared secret of one handshake's key exchange, from a batch.
/// `Debug` prints neither; the secret is wiped on drop.
pub struct KexShare {
    pub public: [u8; 32],
    pub secret: [u8; 32],
}

impl std::fmt::Debug for KexShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KexShare(X25519, <secret redacted>)")
    }
}

impl Drop for KexShare {
    fn drop(&mut self) {
        self.secret.fill(0);
        std::hint::black_box(&mut self.secret);
    }
}
