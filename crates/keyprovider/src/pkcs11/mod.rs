//! The `pkcs11` provider: keys that never enter the gateway. Signs and decrypts through any
//! PKCS#11 module (SoftHSM2, a network HSM, an SGX enclave's PKCS#11 library, a cloud KMS
//! shim); Envoy's `sgx` provider shape maps onto it.
//!
//! [`build`] checks at start-up that the module loads, the token is there, the PIN logs in,
//! the key is found and matches the certificate (a test digest is signed by the token and
//! verified with the certificate's public key), and says which token and key it found. The
//! operations then run on the engine's bounded pool ([`engine`]), never on a worker, through
//! the provider framework like any engine: so every result is checked with the public key
//! before it leaves the provider. The PIN is read once and never logged, dumped or printed.

pub mod config;
pub mod engine;
pub mod error;
pub mod token;

use std::sync::Arc;
use std::time::{Duration, Instant};

use boring::hash::MessageDigest;
use boring::pkey::{PKey, Private, Public};
use quickshake_config::PrivateKeyProvider;
use quickshake_stats::Store;

use crate::error::ProviderError;
use crate::key::ProviderKey;
use crate::padding::{pkcs1_v15_hashed, pss_hashed, rsa_signature_is_valid, Digest, SignView};
use config::Pkcs11Config;
use engine::{Pkcs11Engine, Pkcs11Stats};
pub use error::{MismatchError, Pkcs11Error};
use token::{FoundToken, RsaMechanisms, TokenKeyType, TokenSession};

/// What [`build`] found and made.
pub struct Built {
    pub engine: Arc<Pkcs11Engine>,
    pub key: Arc<ProviderKey>,
    /// Module, token and key, for the log, `doctor` and `/config_dump`.
    pub description: String,
    pub key_type: String,
    /// Signatures per second measured at start (only when asked: `doctor`).
    pub measured_per_s: Option<f64>,
}

/// Whether a `private_key_provider` is decoded here rather than by the batching providers.
pub fn is_pkcs11(cfg: &PrivateKeyProvider) -> bool {
    matches!(cfg.provider_name.as_str(), "pkcs11" | "sgx")
}

/// Open the token, find and check the key, start the pool. `outer` is the certificate's own
/// key: with `fallback: true` a failing token's operations are redone with it.
pub fn build(
    cfg: &PrivateKeyProvider,
    outer: Option<PKey<Private>>,
    public: &PKey<Public>,
    store: &Store,
    scope: &str,
    measure: bool,
) -> Result<Built, ProviderError> {
    let mut p11 = config::decode(cfg)?;
    let fail = |source: Pkcs11Error| ProviderError::Pkcs11 {
        field: cfg.path.clone(),
        source,
    };
    let pin = p11.pin.read(&p11.pin_field)?;
    let ctx = token::load_module(&p11.module).map_err(fail)?;
    let found = token::find_token(&ctx, &p11).map_err(|e| fail(e.into()))?;
    let session = TokenSession::open_on(&ctx, &p11, &pin, &found).map_err(|e| fail(e.into()))?;
    // One session per pool thread, within the token's own limit (the start-up session is
    // closed before the pool opens its own).
    if let Some(max) = found.max_sessions {
        let max = usize::try_from(max).unwrap_or(usize::MAX).max(1);
        if p11.pool_size > max {
            tracing::warn!(
                field = %cfg.path,
                token = %found.label,
                "pool_size {} is above the token's session limit: {max} sessions",
                p11.pool_size
            );
            p11.pool_size = max;
        }
    }
    let mechs = match session.info.key_type {
        TokenKeyType::Rsa { .. } => {
            let m = RsaMechanisms::probe(&ctx, found.slot);
            if m.choose(true).is_none() && m.choose(false).is_none() {
                return Err(fail(Pkcs11Error::NoRsaMechanism {
                    token: found.label.clone(),
                }));
            }
            tracing::info!(
                field = %cfg.path,
                token = %found.label,
                "PKCS#11 RSA signatures: {}",
                m.describe()
            );
            m
        }
        TokenKeyType::EcdsaP256 => RsaMechanisms::default(),
    };
    check_matches(&session, mechs, public).map_err(|source| {
        fail(Pkcs11Error::Mismatch {
            key: p11.key_name(),
            token: found.label.clone(),
            source,
        })
    })?;
    let info = session.info.clone();
    let decrypt = match info.key_type {
        TokenKeyType::Rsa { .. } => {
            let ok = token::raw_rsa_decrypt_supported(&ctx, found.slot);
            if !ok {
                tracing::warn!(
                    field = %cfg.path,
                    token = %found.label,
                    "the token offers no raw RSA decryption (CKM_RSA_X_509): RSA key exchange \
                     turned off for this certificate (ECDHE suites are unaffected)"
                );
            }
            ok
        }
        TokenKeyType::EcdsaP256 => false,
    };
    if info.extractable || !info.sensitive {
        tracing::warn!(
            field = %cfg.path,
            token = %found.label,
            "the token's key is extractable or not sensitive: it can leave the token"
        );
    }
    let measured_per_s = if measure {
        Some(measure_rate(&session, mechs, Duration::from_millis(500)))
    } else {
        None
    };
    drop(session);
    if cfg.fallback && outer.is_none() {
        tracing::warn!(
            field = %cfg.path,
            "fallback: true has no effect: the certificate gives no private_key of its own, and \
             the token's key cannot leave the token"
        );
    }
    let key = match outer.filter(|_| cfg.fallback) {
        Some(k) => ProviderKey::from_pkey(k).map_err(|e| fail(e.into()))?,
        None => ProviderKey::from_public(public).map_err(|e| fail(e.into()))?,
    };
    let mut description = describe(&p11, &found, &info);
    if let TokenKeyType::Rsa { .. } = info.key_type {
        description.push_str(&format!(", {}", mechs.describe()));
    }
    let key_type = info.key_type.to_string();
    let engine = Pkcs11Engine::start(
        ctx,
        p11,
        pin,
        Pkcs11Stats::new(store, scope),
        decrypt,
        mechs,
    )
    .map_err(fail)?;
    tracing::info!(field = %cfg.path, "PKCS#11 key found: {description}");
    Ok(Built {
        engine: Arc::new(engine),
        key,
        description,
        key_type,
        measured_per_s,
    })
}

fn describe(p11: &Pkcs11Config, t: &FoundToken, k: &token::KeyInfo) -> String {
    format!(
        "module {}, token '{}' (serial {}, {} {}), key '{}' id {} ({}{}), pool {} sessions, deadline {:?}",
        p11.module.display(),
        t.label,
        t.serial,
        t.manufacturer,
        t.model,
        k.label,
        if k.id.is_empty() { "-" } else { &k.id },
        k.key_type,
        if !k.extractable && k.sensitive {
            ", non-extractable"
        } else {
            ", EXTRACTABLE"
        },
        p11.pool_size,
        p11.deadline
    )
}

const CHECK_MESSAGE: &[u8] = b"quickshake pkcs11 start-up check";

/// A test signature request with the mechanism the token serves best (PKCS#1 v1.5 first, then
/// PSS): the view and our padded block for an RSA key of `bits` bits.
fn rsa_test_request(mechs: RsaMechanisms, bits: u32) -> Result<(SignView, Vec<u8>), MismatchError> {
    let pss = mechs.choose(false).is_none();
    let view = SignView {
        pss,
        digest: Digest::Sha256,
        hash: Digest::Sha256
            .digest(CHECK_MESSAGE)
            .map_err(MismatchError::Hash)?,
    };
    let block = if pss {
        pss_hashed(view.digest, &view.hash, bits as usize)
    } else {
        pkcs1_v15_hashed(view.digest, &view.hash, (bits as usize).div_ceil(8))
    }
    .map_err(MismatchError::Padding)?;
    Ok((view, block))
}

/// Sign a test digest with the token and verify it with the certificate's public key.
fn check_matches(
    session: &TokenSession,
    mechs: RsaMechanisms,
    public: &PKey<Public>,
) -> Result<(), MismatchError> {
    match session.info.key_type {
        TokenKeyType::Rsa { .. } => {
            let rsa = public
                .rsa()
                .map_err(|_| MismatchError::CertificateKeyType("RSA"))?;
            if rsa.n().to_vec() != session.info.modulus {
                return Err(MismatchError::Modulus);
            }
            let (view, block) = rsa_test_request(mechs, rsa.n().num_bits() as u32)?;
            let (sig, _) = session.rsa_sign(mechs, &view, &block)?;
            if rsa_signature_is_valid(&rsa, &block, &view, &sig) {
                Ok(())
            } else {
                Err(MismatchError::DoesNotVerify)
            }
        }
        TokenKeyType::EcdsaP256 => {
            let ec = public
                .ec_key()
                .map_err(|_| MismatchError::CertificateKeyType("EC"))?;
            let digest = boring::hash::hash(MessageDigest::sha256(), CHECK_MESSAGE)?;
            let der = session.ecdsa_sign(&digest)?;
            let sig = boring::ecdsa::EcdsaSig::from_der(&der)?;
            if sig.verify(&digest, &ec).unwrap_or(false) {
                Ok(())
            } else {
                Err(MismatchError::DoesNotVerify)
            }
        }
    }
}

/// Signatures per second on one session, for `doctor`.
fn measure_rate(session: &TokenSession, mechs: RsaMechanisms, for_at_least: Duration) -> f64 {
    let started = Instant::now();
    let mut n = 0u32;
    let rsa = match session.info.key_type {
        TokenKeyType::Rsa { bits } => match rsa_test_request(mechs, bits) {
            Ok(r) => Some(r),
            Err(_) => return 0.0,
        },
        TokenKeyType::EcdsaP256 => None,
    };
    let digest = [7u8; 32];
    while started.elapsed() < for_at_least || n == 0 {
        let ok = match &rsa {
            Some((view, block)) => session.rsa_sign(mechs, view, block).is_ok(),
            None => session.ecdsa_sign(&digest).is_ok(),
        };
        if !ok {
            return 0.0;
        }
        n += 1;
    }
    f64::from(n) / started.elapsed().as_secs_f64()
}
