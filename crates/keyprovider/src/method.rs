//! BoringSSL's asynchronous private key method, backed by a provider: `sign`/`decrypt` prepare
//! the input (hash and pad), queue it on this worker and return at once; the handshake resumes
//! when the batch holding the operation is processed.

use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use boring::ssl::{
    AsyncPrivateKeyMethod, AsyncPrivateKeyMethodError, BoxPrivateKeyMethodFuture, SslRef,
    SslSignatureAlgorithm,
};
use tokio::sync::oneshot;

use crate::key::{KeyType, ProviderKey};
use crate::padding::{pkcs1_v15, pss, SigAlg};
use crate::provider::ProviderCore;
use crate::queue::{submit, OpKind, OpResult, PendingOp};

/// The key method installed on a certificate's `SSL_CTX`. Cheap to clone.
#[derive(Clone)]
pub struct ProviderMethod {
    pub(crate) core: Arc<ProviderCore>,
    /// Swapped on key rotation; each operation takes the key current when it starts.
    pub(crate) key: Arc<ArcSwap<ProviderKey>>,
}

impl ProviderMethod {
    pub fn new(core: Arc<ProviderCore>, key: Arc<ProviderKey>) -> Self {
        ProviderMethod {
            core,
            key: Arc::new(ArcSwap::new(key)),
        }
    }

    /// Replace the key for operations that start from now on.
    pub fn replace_key(&self, key: Arc<ProviderKey>) {
        self.key.store(key);
    }

    fn queue(
        &self,
        kind: OpKind,
        key: Arc<ProviderKey>,
        input: Vec<u8>,
    ) -> BoxPrivateKeyMethodFuture {
        let (tx, rx) = oneshot::channel::<OpResult>();
        submit(
            &self.core,
            PendingOp {
                kind,
                key,
                input,
                enqueued: Instant::now(),
                reply: tx,
            },
        );
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
        _ssl: &mut SslRef,
        input: &[u8],
        alg: SslSignatureAlgorithm,
        _output: &mut [u8],
    ) -> Result<BoxPrivateKeyMethodFuture, AsyncPrivateKeyMethodError> {
        let key = self.key.load_full();
        let alg = SigAlg::from_boring(alg).ok_or(AsyncPrivateKeyMethodError)?;
        let (kind, prepared) = match (alg, key.key_type) {
            (SigAlg::RsaPkcs1(d), KeyType::Rsa { .. }) => {
                (OpKind::RsaSign, pkcs1_v15(d, input, key.rsa_len()))
            }
            (SigAlg::RsaPss(d), KeyType::Rsa { bits }) => {
                (OpKind::RsaSign, pss(d, input, bits as usize))
            }
            (SigAlg::Ecdsa(d), KeyType::EcdsaP256) => (
                OpKind::EcdsaSign,
                // ECDSA uses the leftmost 256 bits of a longer digest (FIPS 186-4 6.4).
                d.digest(input).map(|mut h| {
                    h.truncate(32);
                    h
                }),
            ),
            _ => return Err(AsyncPrivateKeyMethodError),
        };
        let prepared = prepared.map_err(|_| AsyncPrivateKeyMethodError)?;
        Ok(self.queue(kind, key, prepared))
    }

    fn decrypt(
        &self,
        _ssl: &mut SslRef,
        input: &[u8],
        _output: &mut [u8],
    ) -> Result<BoxPrivateKeyMethodFuture, AsyncPrivateKeyMethodError> {
        let key = self.key.load_full();
        let k = key.rsa_len();
        if k == 0 || input.len() != k {
            return Err(AsyncPrivateKeyMethodError);
        }
        Ok(self.queue(OpKind::RsaDecrypt, key, input.to_vec()))
    }
}
