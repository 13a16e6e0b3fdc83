//! The engine interface: one batch call with per-lane results, and a capability query.
//!
//! An engine computes raw private-key operations only: RSA `x^d mod n` on an already padded
//! block (or a ciphertext), ECDSA P-256 signatures over a digest. Hashing, padding, result
//! verification and fallback live in the provider, so every engine (crypto_mb, our own SIMD
//! engines, an offload device, plain software, an embedding binary's own such as the tests'
//! fault injector) is held to the same checks.
//! One exception, for devices that pad themselves: [`Engine::rsa_sign`] also gets how each
//! signature's block was made ([`SignView`]: scheme, digest, hash), so a PKCS#11 token can
//! sign with its own PSS or PKCS#1 v1.5 mechanism; the provider still checks the result (a
//! PSS result with the device's salt only as a valid EMSA-PSS encoding of the same hash).

pub mod crypto_mb;
pub mod mbmath;
pub mod software;

use std::fmt;
use std::time::Duration;

use crate::padding::SignView;

/// What an engine can do, for `doctor`, `/config_dump` and the batching decision.
#[derive(Debug, Clone)]
pub struct Capabilities {
    /// `crypto_mb`, `software`, `avx2`, `ifma`, or an extra engine's (`fault(software)`).
    pub name: String,
    /// True when a batch is cheaper per operation than BoringSSL one at a time.
    pub accelerated: bool,
    /// Operations per batch call (8 for crypto_mb).
    pub lanes: usize,
    /// RSA modulus sizes this engine computes (others go to the scalar path).
    pub rsa_bits: Vec<u32>,
    /// Whether it signs ECDSA P-256.
    pub ecdsa_p256: bool,
    /// Smallest batch worth sending to this engine: below it, the provider runs the operations
    /// on the scalar (BoringSSL) path, because one engine call costs about the same for 1 lane
    /// as for 8. Measured per engine and CPU (see `bench/`); 1 for scalar engines.
    pub rsa_min_batch: usize,
    pub ecdsa_min_batch: usize,
    /// Smallest batch of X25519 key exchanges worth computing on this engine (each exchange is
    /// two scalar multiplications: the key share and the shared secret); `usize::MAX` for
    /// engines without a batched X25519, whose handshakes compute it in BoringSSL.
    pub x25519_min_batch: usize,
    /// The engine waits rather than computes (an offload device, a remote signer): the
    /// provider runs its batches off the worker thread so the worker keeps serving. CPU
    /// engines compute on the worker, where the work belongs.
    pub offload: bool,
}

/// The key parts an RSA engine needs, big-endian, no leading zeros required.
/// `Debug` prints the modulus size only; the secret parts are wiped on drop.
pub struct RsaKeyParts {
    pub bits: u32,
    pub n: Vec<u8>,
    pub e: Vec<u8>,
    pub d: Vec<u8>,
    pub p: Vec<u8>,
    pub q: Vec<u8>,
    pub dp: Vec<u8>,
    pub dq: Vec<u8>,
    pub qinv: Vec<u8>,
    /// The same key as BoringSSL holds it, for engines that compute through BoringSSL (the
    /// software engine) and for the scalar path of partial batches.
    pub native: Option<boring::rsa::Rsa<boring::pkey::Private>>,
}

impl fmt::Debug for RsaKeyParts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RsaKeyParts({} bits, <secret parts redacted>)",
            self.bits
        )
    }
}

impl Drop for RsaKeyParts {
    fn drop(&mut self) {
        for v in [
            &mut self.d,
            &mut self.p,
            &mut self.q,
            &mut self.dp,
            &mut self.dq,
            &mut self.qinv,
        ] {
            wipe(v);
        }
    }
}

/// ECDSA P-256 key parts: the private scalar and the public point, big-endian 32 bytes each.
pub struct EcKeyParts {
    pub d: Vec<u8>,
    pub x: Vec<u8>,
    pub y: Vec<u8>,
    /// The same key as BoringSSL holds it (software engine, scalar path).
    pub native: Option<boring::ec::EcKey<boring::pkey::Private>>,
}

impl fmt::Debug for EcKeyParts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EcKeyParts(P-256, <secret redacted>)")
    }
}

impl Drop for EcKeyParts {
    fn drop(&mut self) {
        wipe(&mut self.d);
    }
}

/// Zero a secret buffer; `black_box` keeps the stores from being removed as dead.
pub(crate) fn wipe(v: &mut [u8]) {
    v.fill(0);
    std::hint::black_box(v);
}

/// Zero a secret string in place (its own allocation, taken without a copy) and empty it.
pub(crate) fn wipe_string(s: &mut String) {
    let mut bytes = std::mem::take(s).into_bytes();
    wipe(&mut bytes);
}

/// One RSA lane: `input^d mod n`. `input` is big-endian, exactly the modulus length, `< n`.
pub struct RsaLane<'a> {
    pub key: &'a RsaKeyParts,
    pub input: &'a [u8],
}

/// One ECDSA lane: sign `digest` (32 bytes, SHA-256 for P-256 in TLS).
pub struct EcdsaLane<'a> {
    pub key: &'a EcKeyParts,
    pub digest: &'a [u8],
}

/// The X25519 base point's u-coordinate (9): `X25519(k, 9)` is the public share of `k`.
pub use quickshake_mbmath::X25519_BASE_POINT as X25519_BASE;

/// One X25519 lane (RFC 7748): `X25519(scalar, point)`; `point` is the peer's key share or
/// the base point (9), for our own share.
pub struct X25519Lane<'a> {
    pub scalar: &'a [u8; 32],
    pub point: &'a [u8; 32],
}

/// Why one lane failed. Other lanes of the same batch are unaffected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaneError {
    #[error("this engine does not compute this key type or size")]
    Unsupported,
    #[error("engine error: {0}")]
    Failed(String),
}

/// Per-lane outcome: the result bytes (RSA: big-endian, modulus length; ECDSA: DER signature).
pub type LaneResult = Result<Vec<u8>, LaneError>;

/// A job for an engine's own threads: `true` runs it, `false` rejects it (its operations fail
/// without reaching the engine: the engine's queue is full).
pub type PoolJob = Box<dyn FnOnce(bool) + Send + 'static>;

/// An engine that blocks (a PKCS#11 token, a remote signer) and brings its own bounded pool
/// of threads, each with its own device session: the provider hands it whole batches.
pub trait Executor: Send + Sync {
    /// Queue a job for a pool thread; a full pool calls `job(false)` on the calling thread.
    fn execute(&self, job: PoolJob);
    /// The most an operation may take from queueing to result: past it the waiting handshake
    /// fails, whatever the device is doing, and a queued operation is not started.
    fn deadline(&self) -> Duration;
}

/// A computing engine. Implementations must be constant-time in the secret inputs, say how that
/// is checked, and never log key material.
pub trait Engine: Send + Sync + 'static {
    fn capabilities(&self) -> &Capabilities;
    /// Compute up to `capabilities().lanes` RSA private operations. Returns one result per lane,
    /// in order.
    fn rsa_private(&self, lanes: &[RsaLane<'_>]) -> Vec<LaneResult>;
    /// Sign up to `capabilities().lanes` ECDSA P-256 digests. One result per lane, in order.
    fn ecdsa_sign(&self, lanes: &[EcdsaLane<'_>]) -> Vec<LaneResult>;
    /// RSA signatures: `lanes[i].input` is the block we padded, `views[i]` how it was made
    /// (scheme, digest, hash). Engines that sign with a device's own padding (a PKCS#11
    /// token's PSS or PKCS#1 v1.5 mechanism) use the view; the rest compute the raw operation
    /// ([`rsa_private`](Self::rsa_private)), the default. A PSS result made this way carries the
    /// device's salt: the provider accepts it only as a valid EMSA-PSS encoding of the hash.
    /// Only batches holding signatures alone come here.
    fn rsa_sign(&self, lanes: &[RsaLane<'_>], views: &[&SignView]) -> Vec<LaneResult> {
        let _ = views;
        self.rsa_private(lanes)
    }
    /// RSA decryption (the TLS 1.2 RSA key exchange): the same raw operation as
    /// [`rsa_private`](Self::rsa_private), for engines that tell the two apart (a token's key
    /// usage); only batches holding decryptions alone come here.
    fn rsa_decrypt(&self, lanes: &[RsaLane<'_>]) -> Vec<LaneResult> {
        self.rsa_private(lanes)
    }
    /// Whether [`rsa_decrypt`](Self::rsa_decrypt) can work: a token that refuses raw RSA
    /// decryption says no, and its certificate's contexts leave out the RSA key exchange.
    fn rsa_decrypt_supported(&self) -> bool {
        true
    }
    /// The public-key operation `x^e mod n` on each lane's input, batched: the provider's check
    /// of RSA results (`lanes[i].input` is a result; the check compares the output with what was
    /// exponentiated). `None` where the engine has no batched public operation faster than
    /// BoringSSL one lane at a time for these lanes (the default): the provider then checks
    /// each result with BoringSSL. A lane's error sends that lane to BoringSSL's check.
    fn rsa_public(&self, lanes: &[RsaLane<'_>]) -> Option<Vec<LaneResult>> {
        let _ = lanes;
        None
    }
    /// ECDSA verification of each lane's signature (`signatures[i]`, DER) over its digest with
    /// its key's public point, batched: the provider's check of ECDSA results. `true` only for
    /// a signature the engine verified; `false` (or `None` for the whole batch, the default:
    /// no batched verification faster than BoringSSL's) leaves that lane to BoringSSL's check,
    /// so a `false` never rejects a signature by itself.
    fn ecdsa_verify(&self, lanes: &[EcdsaLane<'_>], signatures: &[&[u8]]) -> Option<Vec<bool>> {
        let _ = (lanes, signatures);
        None
    }
    /// X25519 for each lane, batched (the key exchange of TLS 1.3 handshakes). An all-zero
    /// output is returned as computed; the provider rejects it. Engines without one (the
    /// default) fail every lane `Unsupported`, and report `x25519_min_batch: usize::MAX`.
    fn x25519(&self, lanes: &[X25519Lane<'_>]) -> Vec<Result<[u8; 32], LaneError>> {
        vec![Err(LaneError::Unsupported); lanes.len()]
    }
    /// The engine's own pool, for engines that block (see [`Executor`]); `None` for the rest.
    fn executor(&self) -> Option<&dyn Executor> {
        None
    }
}
