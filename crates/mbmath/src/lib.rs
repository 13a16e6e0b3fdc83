//! Multi-buffer Montgomery arithmetic for batched RSA CRT private-key
//! operations.
//!
//! A queue of RSA private operations (e.g. 8 RSA-2048 signatures) becomes
//! 16 independent modular exponentiations (`c^dp mod p`, `c^dq mod q` per
//! key; every lane may use a different key). They are computed side by side
//! with one number per SIMD lane ("vertical" layout): lane `l` of limb
//! register `k` holds limb `k` of the `l`-th number.
//!
//! # Backends
//!
//! | [`BackendKind`] | lanes | limbs (1024-bit) | needs |
//! |---|---|---|---|
//! | `portable` | 1 (lanes in a loop) | 16 x 64 bit, `u128` products | nothing |
//! | `avx2` | 8 (two groups of 4 per `ymm`) | 37 x 28 bit, `vpmuludq`, lazy carries | AVX2 |
//! | `fma` | 4 per `ymm` | 21 x 50 bit in `f64`, exact products with two FMAs | AVX2 + FMA, MXCSR round-to-nearest |
//! | `ifma` | 8 per `zmm` | 20 x 52 bit, `vpmadd52{l,h}uq` | AVX-512F + IFMA |
//!
//! A backend is chosen at run time. SIMD backends are represented by
//! zero-sized witness tokens ([`Avx2Token`], [`FmaToken`], [`IfmaToken`]) that
//! can only be obtained after `is_x86_feature_detected!` confirmed the CPU
//! features (and, for `fma`, that the MXCSR rounding mode is
//! round-to-nearest, which its exact products rely on), so
//! no code path can call a `#[target_feature]` function without that proof
//! (the style of `ring`'s CPU feature tokens). [`Backend`] carries the token;
//! [`Backend::new`] / [`Backend::best`] obtain one.
//!
//! Prime sizes 1024, 1536 and 2048 bits (RSA-2048/3072/4096 with balanced
//! primes) are supported on every backend.
//!
//! # Why `unsafe`
//!
//! The SIMD backends call `core::arch::x86_64` intrinsics inside functions
//! compiled with `#[target_feature(enable = ...)]`. Calling such a function
//! is `unsafe` (the CPU must support the features); each call site is an
//! `unsafe` block justified by a witness token. The intrinsics themselves are
//! safe inside those functions except loads/stores through raw pointers,
//! which are only used on properly sized, in-bounds arrays. The `fma`
//! backend additionally reads MXCSR (`_mm_getcsr`, SSE, always present on
//! x86_64) and reinterprets `f64` vectors as integers (plain data). The crate uses
//! `#![deny(unsafe_op_in_unsafe_fn)]` and every `unsafe` block carries a
//! `// SAFETY:` comment. No other `unsafe` exists.
//!
//! # Constant time
//!
//! Everything that touches secret data (private exponents, primes, CRT
//! coefficient, the message and all intermediates) is written without
//! branches or memory indices depending on it:
//!
//! * fixed-window (5-bit) exponentiation over all `64 L` exponent bits; the
//!   table entry is fetched by scanning the whole table and combining with
//!   per-lane masks (`vpcmpeqq` / mask registers / arithmetic masks);
//! * the `fma` backend's floating-point operations (FMA, add, subtract on
//!   normal numbers or zero, round-to-nearest) have data-independent timing
//!   on the targeted CPUs; no value ever becomes subnormal, and the exact
//!   product splitting has no branch (biases are removed by constants);
//! * SIMD Montgomery products are "almost Montgomery" (`< 2p`, no per-step
//!   subtraction, since `4p < R`), the final reduction is a masked subtraction;
//! * reduction of the input mod `p`/`q`, CRT recombination
//!   `h = qinv (m1 - m2) mod p`, `m = m2 + h q` use masked add/subtract only.
//!
//! Vartime functions (public-key operations, input validation against the
//! public modulus) carry a `_vartime` suffix or say so in their docs.
//!
//! How this is checked:
//!
//! * `tests/ctgrind.rs` runs the `mbmath-ctgrind` binary under valgrind
//!   memcheck (`--error-exitcode=42`). The binary marks the key's secret
//!   fields and the message as undefined (valgrind client request
//!   `MAKE_MEM_UNDEFINED`, emitted with inline asm) and runs the full CRT
//!   signing path on the portable, AVX2 and FMA backends. Any branch or address
//!   that depends on secret data is reported by memcheck and fails the test.
//!   A deliberately leaky square-and-multiply and a secret-indexed table
//!   lookup are run by the same harness and must be flagged (exit 42). The
//!   test fails if valgrind is missing.
//! * valgrind cannot execute AVX-512, so the IFMA backend is covered by a
//!   dudect-style timing test instead (`tests/dudect.rs`, `--ignored`,
//!   Welch's t printed, not asserted).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod bigint;
mod engine;
mod portable;
mod rsa;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod fma;
#[cfg(target_arch = "x86_64")]
mod ifma;

use core::fmt;

pub use rsa::{rsa_private_crt_batch, rsa_public_batch_vartime, RsaCrtKey};

#[doc(hidden)]
pub use rsa::rsa_private_crt_batch_unchecked;

/// Errors of this crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MathError {
    /// Key components are malformed or inconsistent.
    InvalidKey(&'static str),
    /// The key or operand size is not supported.
    Unsupported(&'static str),
    /// The input is not smaller than the modulus (or longer than it).
    InputOutOfRange,
    /// The requested backend cannot run on this CPU.
    BackendUnavailable(BackendKind),
}

impl fmt::Display for MathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MathError::InvalidKey(why) => write!(f, "invalid RSA key: {why}"),
            MathError::Unsupported(why) => write!(f, "unsupported: {why}"),
            MathError::InputOutOfRange => write!(f, "input is not smaller than the modulus"),
            MathError::BackendUnavailable(k) => {
                write!(f, "backend {k} is not available on this CPU")
            }
        }
    }
}

impl std::error::Error for MathError {}

/// The kinds of backend, without proof of availability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// Scalar `u64` code, runs everywhere.
    Portable,
    /// AVX2, 8 lanes of radix-2^28 numbers (two interleaved `ymm` groups of 4).
    Avx2,
    /// AVX2 + FMA3, 4 lanes of radix-2^50 numbers in `f64` per `ymm`.
    Fma,
    /// AVX-512 IFMA, 8 lanes of radix-2^52 numbers per `zmm`.
    Ifma,
}

impl BackendKind {
    /// All kinds, slowest first.
    pub const ALL: [BackendKind; 4] = [
        BackendKind::Portable,
        BackendKind::Avx2,
        BackendKind::Fma,
        BackendKind::Ifma,
    ];

    /// The name used in configuration and reports: `portable`, `avx2`, `fma`,
    /// `ifma`.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Portable => "portable",
            BackendKind::Avx2 => "avx2",
            BackendKind::Fma => "fma",
            BackendKind::Ifma => "ifma",
        }
    }

    /// Parses [`BackendKind::name`].
    pub fn from_name(s: &str) -> Option<BackendKind> {
        BackendKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Number of numbers one SIMD register (or one scalar pass) holds.
    pub fn lanes(self) -> usize {
        match self {
            BackendKind::Portable => 1,
            BackendKind::Avx2 => 8,
            BackendKind::Fma => 4,
            BackendKind::Ifma => 8,
        }
    }

    /// `log2(R)` of the backend's Montgomery radix for a modulus of
    /// `modulus_bits` bits (a multiple of 64): what [`mont_mul_1024_lanes`]
    /// divides by.
    pub fn montgomery_r_bits(self, modulus_bits: usize) -> usize {
        let l = modulus_bits / 64;
        match self {
            BackendKind::Portable => 64 * l,
            BackendKind::Avx2 => 28 * avx2_limbs(l),
            BackendKind::Fma => 50 * fma_limbs(l),
            BackendKind::Ifma => 52 * ifma_limbs(l),
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Radix-2^28 limbs used by the AVX2 backend for an `l`-limb (64-bit) modulus:
/// enough that `4 m < R`.
pub(crate) const fn avx2_limbs(l: usize) -> usize {
    (64 * l + 2).div_ceil(28)
}

/// Radix-2^50 limbs used by the FMA backend for an `l`-limb modulus (four
/// 100-bit products chain inside one `f64` binade; see `fma.rs`).
pub(crate) const fn fma_limbs(l: usize) -> usize {
    (64 * l + 2).div_ceil(50)
}

/// Radix-2^52 limbs used by the IFMA backend for an `l`-limb modulus.
pub(crate) const fn ifma_limbs(l: usize) -> usize {
    (64 * l + 2).div_ceil(52)
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Proof that the CPU supports AVX2. Zero-sized; only [`Avx2Token::new`]
/// creates one, after run-time feature detection.
#[derive(Debug, Clone, Copy)]
pub struct Avx2Token(());

impl Avx2Token {
    /// `Some` iff this CPU (and OS) supports AVX2.
    pub fn new() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                return Some(Avx2Token(()));
            }
        }
        None
    }
}

/// Proof that the CPU supports AVX2 and FMA3 and that this thread's MXCSR
/// rounding control is round-to-nearest with the precision exception masked
/// (the defaults, which the `fma` backend's exact products rely on).
/// Zero-sized; only [`FmaToken::new`] creates one. Every dispatch to the
/// backend checks MXCSR again (it is per thread and could have changed), and
/// fails with [`MathError::BackendUnavailable`] if it is not so.
#[derive(Debug, Clone, Copy)]
pub struct FmaToken(());

impl FmaToken {
    /// `Some` iff this CPU (and OS) supports AVX2 and FMA and the current
    /// rounding mode is round-to-nearest.
    pub fn new() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
                && mxcsr_round_to_nearest()
            {
                return Some(FmaToken(()));
            }
        }
        None
    }
}

/// True iff MXCSR selects round-to-nearest (RC = 00) and masks the precision
/// exception (PM = 1), as the `fma` backend requires.
#[cfg(target_arch = "x86_64")]
pub(crate) fn mxcsr_round_to_nearest() -> bool {
    // SAFETY: `stmxcsr` only needs SSE, part of the x86_64 baseline; it reads
    // this thread's MXCSR and has no other effect.
    #[allow(deprecated)]
    let csr = unsafe { core::arch::x86_64::_mm_getcsr() };
    (csr >> 13) & 3 == 0 && csr & (1 << 12) != 0
}

/// Proof that the CPU supports AVX-512F and AVX-512 IFMA. Zero-sized; only
/// [`IfmaToken::new`] creates one, after run-time feature detection.
#[derive(Debug, Clone, Copy)]
pub struct IfmaToken(());

impl IfmaToken {
    /// `Some` iff this CPU (and OS) supports AVX-512F and AVX-512 IFMA.
    pub fn new() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512ifma")
            {
                return Some(IfmaToken(()));
            }
        }
        None
    }
}

/// A backend together with the proof that this CPU can run it.
#[derive(Debug, Clone, Copy)]
pub enum Backend {
    /// Scalar code.
    Portable,
    /// AVX2 code.
    Avx2(Avx2Token),
    /// AVX2 + FMA floating-point code.
    Fma(FmaToken),
    /// AVX-512 IFMA code.
    Ifma(IfmaToken),
}

impl Backend {
    /// The backend of kind `kind`, if this CPU supports it.
    pub fn new(kind: BackendKind) -> Result<Backend, MathError> {
        let b = match kind {
            BackendKind::Portable => Some(Backend::Portable),
            BackendKind::Avx2 => Avx2Token::new().map(Backend::Avx2),
            BackendKind::Fma => FmaToken::new().map(Backend::Fma),
            BackendKind::Ifma => IfmaToken::new().map(Backend::Ifma),
        };
        b.ok_or(MathError::BackendUnavailable(kind))
    }

    /// The fastest backend this CPU supports.
    pub fn best() -> Backend {
        IfmaToken::new()
            .map(Backend::Ifma)
            .or_else(|| Avx2Token::new().map(Backend::Avx2))
            .unwrap_or(Backend::Portable)
    }

    /// The kind of this backend.
    pub fn kind(&self) -> BackendKind {
        match self {
            Backend::Portable => BackendKind::Portable,
            Backend::Avx2(_) => BackendKind::Avx2,
            Backend::Fma(_) => BackendKind::Fma,
            Backend::Ifma(_) => BackendKind::Ifma,
        }
    }
}

/// The backends this CPU can run, slowest first (always starts with
/// [`BackendKind::Portable`]).
pub fn available_backends() -> Vec<BackendKind> {
    BackendKind::ALL
        .into_iter()
        .filter(|&k| Backend::new(k).is_ok())
        .collect()
}

/// Dispatches `$body` with `$e` bound to the engine for `($backend, $limbs)`,
/// for the supported prime sizes (16/24/32 limbs of 64 bits).
macro_rules! with_engine {
    ($backend:expr, $limbs:expr, |$e:ident| $body:expr) => {{
        #[allow(unused_imports)]
        use $crate::engine::LaneEngine as _;
        match ($backend, $limbs) {
            (Backend::Portable, 16) => {
                let $e = $crate::portable::PortableEngine::<16>;
                Ok($body)
            }
            (Backend::Portable, 24) => {
                let $e = $crate::portable::PortableEngine::<24>;
                Ok($body)
            }
            (Backend::Portable, 32) => {
                let $e = $crate::portable::PortableEngine::<32>;
                Ok($body)
            }
            #[cfg(target_arch = "x86_64")]
            (Backend::Avx2(t), 16) => {
                let $e = $crate::avx2::Avx2Engine::<{ $crate::avx2_limbs(16) }, { 2 * $crate::avx2_limbs(16) }>::new(t);
                Ok($body)
            }
            #[cfg(target_arch = "x86_64")]
            (Backend::Avx2(t), 24) => {
                let $e = $crate::avx2::Avx2Engine::<{ $crate::avx2_limbs(24) }, { 2 * $crate::avx2_limbs(24) }>::new(t);
                Ok($body)
            }
            #[cfg(target_arch = "x86_64")]
            (Backend::Avx2(t), 32) => {
                let $e = $crate::avx2::Avx2Engine::<{ $crate::avx2_limbs(32) }, { 2 * $crate::avx2_limbs(32) }>::new(t);
                Ok($body)
            }
            // MXCSR is per thread and may have changed since the token was made.
            #[cfg(target_arch = "x86_64")]
            (Backend::Fma(_), _) if !$crate::mxcsr_round_to_nearest() => {
                Err(MathError::BackendUnavailable(BackendKind::Fma))
            }
            #[cfg(target_arch = "x86_64")]
            (Backend::Fma(t), 16) => {
                let $e = $crate::fma::FmaEngine::<{ $crate::fma_limbs(16) }, { 2 * $crate::fma_limbs(16) }>::new(t);
                Ok($body)
            }
            #[cfg(target_arch = "x86_64")]
            (Backend::Fma(t), 24) => {
                let $e = $crate::fma::FmaEngine::<{ $crate::fma_limbs(24) }, { 2 * $crate::fma_limbs(24) }>::new(t);
                Ok($body)
            }
            #[cfg(target_arch = "x86_64")]
            (Backend::Fma(t), 32) => {
                let $e = $crate::fma::FmaEngine::<{ $crate::fma_limbs(32) }, { 2 * $crate::fma_limbs(32) }>::new(t);
                Ok($body)
            }
            #[cfg(target_arch = "x86_64")]
            (Backend::Ifma(t), 16) => {
                let $e = $crate::ifma::IfmaEngine::<{ $crate::ifma_limbs(16) }, { 2 * $crate::ifma_limbs(16) }>::new(t);
                Ok($body)
            }
            #[cfg(target_arch = "x86_64")]
            (Backend::Ifma(t), 24) => {
                let $e = $crate::ifma::IfmaEngine::<{ $crate::ifma_limbs(24) }, { 2 * $crate::ifma_limbs(24) }>::new(t);
                Ok($body)
            }
            #[cfg(target_arch = "x86_64")]
            (Backend::Ifma(t), 32) => {
                let $e = $crate::ifma::IfmaEngine::<{ $crate::ifma_limbs(32) }, { 2 * $crate::ifma_limbs(32) }>::new(t);
                Ok($body)
            }
            _ => Err(MathError::Unsupported("modulus size (supported: 1024, 1536, 2048-bit primes)")),
        }
    }};
}
pub(crate) use with_engine;

/// Micro-benchmark / test entry point: for every lane `i`, starting from
/// `x = a[i]`, performs `iterations` Montgomery multiplications
/// `x = x * b[i] * R^-1 mod n[i]` on `backend` (numbers kept in the backend's
/// representation throughout), and returns the fully reduced `x` per lane.
/// `R = 2^backend.kind().montgomery_r_bits(1024)`.
///
/// Numbers are little-endian 64-bit limbs. Each `n[i]` must be odd with its
/// top bit set; `a[i], b[i] < n[i]`. Any number of lanes (padded internally
/// to the backend's lane count).
pub fn mont_mul_1024_lanes(
    backend: Backend,
    a: &[[u64; 16]],
    b: &[[u64; 16]],
    n: &[[u64; 16]],
    iterations: usize,
) -> Result<Vec<[u64; 16]>, MathError> {
    mont_chain_1024(backend, a, Some(b), n, iterations)
}

/// Like [`mont_mul_1024_lanes`] with dedicated squaring: `x = x^2 R^-1 mod n`.
pub fn mont_sqr_1024_lanes(
    backend: Backend,
    a: &[[u64; 16]],
    n: &[[u64; 16]],
    iterations: usize,
) -> Result<Vec<[u64; 16]>, MathError> {
    mont_chain_1024(backend, a, None, n, iterations)
}

fn mont_chain_1024(
    backend: Backend,
    a: &[[u64; 16]],
    b: Option<&[[u64; 16]]>,
    n: &[[u64; 16]],
    iterations: usize,
) -> Result<Vec<[u64; 16]>, MathError> {
    if a.len() != n.len() || b.is_some_and(|b| b.len() != a.len()) {
        return Err(MathError::Unsupported("lane slices of different lengths"));
    }
    for m in n {
        if m[0] & 1 == 0 || m[15] >> 63 == 0 {
            return Err(MathError::Unsupported(
                "modulus must be odd with its top bit set",
            ));
        }
    }
    with_engine!(backend, 16usize, |e| engine::mont_chain(
        &e, a, b, n, iterations
    ))
}
