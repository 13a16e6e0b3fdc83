//! BoringSSL's asynchronous private key method, backed by a provider: `sign`/`decrypt` prepare
//! the input (hash and pad), queue it on this worker and return at once; the handshake resumes
//! when the batch holding the operation is processed.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use boring::ex_data::Index;
use boring::ssl::{
    AsyncPrivateKeyMethod, AsyncPrivateKeyMethodError, BoxPrivateKeyMethodFuture, Ssl, SslRef,
    SslSignatureAlgorithm,
};

use crate::engine::wipe;
use crate::key::{KeyType, ProviderKey};
use crate::op::{HandshakeWait, KexShare, OpKind, PendingOp};
use crate::padding::{pkcs1_v15_hashed, pss_hashed, SigAlg, SignView};
use crate::queue::Queues;

/// The SSL ex_data slot holding a handshake's [`HandshakeWait`] (`None`: BoringSSL had no
/// index to give; each operation then has a budget of its own).
fn wait_index() -> Option<Index<Ssl, HandshakeWait>> {
    static INDEX: OnceLock<Option<Index<Ssl, HandshakeWait>>> = OnceLock::new();
    *INDEX.get_or_init(|| Ssl::new_ex_index().ok())
}

/// The wait shared by every operation of `ssl`'s handshake (created by its first).
fn handshake_wait(ssl: &mut SslRef) -> HandshakeWait {
    let Some(index) = wait_index() else {
        return HandshakeWait::default();
    };
    if let Some(wait) = ssl.ex_data(index) {
        return wait.clone();
    }
    let wait = HandshakeWait::default();
    ssl.set_ex_data(index, wait.clone());
    wait
}

/// The key method installed on a certificate's `SSL_CTX`: one key, fixed for the life of the
/// context, so a handshake always signs with the key of the certificate it was given. Key
/// rotation builds a new context with a new method for the new key, sharing the same
/// [`Queues`] (and so the same per-worker queues, engine and stats). Cheap to clone.
#[derive(Clone)]
pub struct ProviderMethod {
    queues: Arc<Queues>,
    key: Arc<ProviderKey>,
}

impl ProviderMethod {
    pub fn new(queues: Arc<Queues>, key: Arc<ProviderKey>) -> Self {
        ProviderMethod { queues, key }
    }

    /// The queues (and provider) this method feeds.
    pub fn queues(&self) -> &Arc<Queues> {
        &self.queues
    }

    /// Whether handshakes may use the TLS 1.2 RSA key exchange with this key (false when the
    /// key's token refuses raw RSA decryption: the context then leaves those suites out).
    pub fn rsa_key_exchange(&self) -> bool {
        self.key.rsa.is_none() || self.queues.provider().rsa_decrypt_supported()
    }

    /// Whether handshakes on this certificate may queue their X25519 key exchange here
    /// ([`x25519`](Self::x25519)): `batch_key_exchange` is on and the engine has a batched X25519.
    pub fn batches_key_exchange(&self) -> bool {
        self.queues.provider().batches_key_exchange()
    }

    /// Queue one X25519 key exchange of `ssl`'s handshake with the peer's 32-byte share.
    /// Resolves to our share and the secret, or to `None` when the handshake should compute it
    /// itself (not batched here, a batch below the crossover, an engine error, a low-order
    /// share).
    pub fn x25519(
        &self,
        ssl: &mut SslRef,
        peer: &[u8],
    ) -> Pin<Box<dyn Future<Output = Option<KexShare>> + Send>> {
        if peer.len() != 32 || !self.batches_key_exchange() {
            return Box::pin(async { None });
        }
        let (op, rx) = PendingOp::new(OpKind::X25519, self.key.clone(), peer.to_vec());
        self.queues.submit(op.in_handshake(handshake_wait(ssl)));
        Box::pin(async move {
            let mut bytes = rx.await.ok()?.ok()?;
            let share = (bytes.len() == 64).then(|| {
                let mut s = KexShare {
                    public: [0; 32],
                    secret: [0; 32],
                };
                s.public.copy_from_slice(&bytes[..32]);
                s.secret.copy_from_slice(&bytes[32..]);
                s
            });
            wipe(&mut bytes);
            share
        })
    }

    fn queue(
        &self,
        ssl: &mut SslRef,
        kind: OpKind,
        input: Vec<u8>,
        signing: Option<SignView>,
    ) -> BoxPrivateKeyMethodFuture {
        let (op, rx) = PendingOp::new(kind, self.key.clone(), input);
        let op = op.in_handshake(handshake_wait(ssl));
        let op = match signing {
            Some(view) => op.with_signing(view),
            None => op,
        };
        self.queues.submit(op);
        Box::pin(async move {
            let result = rx.await.map_err(|_| AsyncPrivateKeyMethodError)?;
            let bytes = result.map_err(|_| AsyncPrivateKeyMethodError)?;
            let finish: boring::ssl::BoxPrivateKeyMethodFinish =
                Box::new(move |_ssl: &mut SslRef, out: &mut [u8]| {
                    let dst = out
                        .get_mut(..bytes.len())
                        .ok_or(AsyncPrivateKeyMethodError)?;
                    dst.copy_from_slice(&bytes);
                    Ok(bytes.len())
                });
            Ok(finish)
        })
    }
}

impl AsyncPrivateKeyMethod for ProviderMethod {
    fn sign(
        &self,
        ssl: &mut SslRef,
        input: &[u8],
        alg: SslSignatureAlgorithm,
        _output: &mut [u8],
    ) -> Result<BoxPrivateKeyMethodFuture, AsyncPrivateKeyMethodError> {
        let key = &self.key;
        let alg = SigAlg::from_boring(alg).ok_or(AsyncPrivateKeyMethodError)?;
        let rsa_view = |pss: bool, digest: crate::padding::Digest| {
            digest
                .digest(input)
                .map(|hash| SignView { pss, digest, hash })
        };
        let (kind, prepared, signing) = match (alg, key.key_type) {
            (SigAlg::RsaPkcs1(d), KeyType::Rsa { .. }) => {
                let view = rsa_view(false, d).map_err(|_| AsyncPrivateKeyMethodError)?;
                let block = pkcs1_v15_hashed(d, &view.hash, key.rsa_len());
                (OpKind::RsaSign, block, Some(view))
            }
            (SigAlg::RsaPss(d), KeyType::Rsa { bits }) => {
                let view = rsa_view(true, d).map_err(|_| AsyncPrivateKeyMethodError)?;
                let block = pss_hashed(d, &view.hash, bits as usize);
                (OpKind::RsaSign, block, Some(view))
            }
            (SigAlg::Ecdsa(d), KeyType::EcdsaP256) => (
                OpKind::EcdsaSign,
                // ECDSA uses the leftmost 256 bits of a longer digest (FIPS 186-4 6.4).
                d.digest(input).map(|mut h| {
                    h.truncate(32);
                    h
                }),
                None,
            ),
            _ => return Err(AsyncPrivateKeyMethodError),
        };
        let prepared = prepared.map_err(|_| AsyncPrivateKeyMethodError)?;
        Ok(self.queue(ssl, kind, prepared, signing))
    }

    fn decrypt(
        &self,
        ssl: &mut SslRef,
        input: &[u8],
        _output: &mut [u8],
    ) -> Result<BoxPrivateKeyMethodFuture, AsyncPrivateKeyMethodError> {
        let key = &self.key;
        let k = key.rsa_len();
        if k == 0 || input.len() != k {
            return Err(AsyncPrivateKeyMethodError);
        }
        Ok(self.queue(ssl, OpKind::RsaDecrypt, input.to_vec(), None))
    }
}
