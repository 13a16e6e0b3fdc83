//! Zero-sized witness tokens: proof that the CPU supports a SIMD backend's
//! features (and, for `fma`, that MXCSR is set up as its exact products
//! need). Their field is private to this module, so the constructors here,
//! which run `is_x86_feature_detected!` (and read MXCSR) first, are the only
//! way to obtain one; every call of a `#[target_feature]` function elsewhere
//! is justified by a token (see the crate docs, "Why `unsafe`").

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
/// fails with
/// [`MathError::BackendUnavailable`](crate::MathError::BackendUnavailable)
/// if it is not so.
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
