//! `with_engine!`: the one place that maps a backend (with its witness token)
//! and a prime size to a concrete [`LaneEngine`](crate::engine::LaneEngine).

/// Dispatches `$body` with `$e` bound to the engine for `($backend, $limbs)`,
/// for the supported prime sizes (16/24/32 limbs of 64 bits).
macro_rules! with_engine {
    ($backend:expr, $limbs:expr, |$e:ident| $body:expr) => {{
        #[allow(unused_imports)]
        use $crate::engine::LaneEngine as _;
        match ($backend, $limbs) {
            ($crate::backend::Backend::Portable, 16) => {
                let $e = $crate::portable::PortableEngine::<16>;
                Ok($body)
            }
            ($crate::backend::Backend::Portable, 24) => {
                let $e = $crate::portable::PortableEngine::<24>;
                Ok($body)
            }
            ($crate::backend::Backend::Portable, 32) => {
                let $e = $crate::portable::PortableEngine::<32>;
                Ok($body)
            }
            #[cfg(target_arch = "x86_64")]
            ($crate::backend::Backend::Avx2(t), 16) => {
                let $e = $crate::avx2::Avx2Engine::<{ $crate::kind::avx2_limbs(16) }, { 2 * $crate::kind::avx2_limbs(16) }>::new(t);
                Ok($body)
            }
            #[cfg(target_arch = "x86_64")]
            ($crate::backend::Backend::Avx2(t), 24) => {
                let $e = $crate::avx2::Avx2Engine::<{ $crate::kind::avx2_limbs(24) }, { 2 * $crate::kind::avx2_limbs(24) }>::new(t);
                Ok($body)
            }
            #[cfg(target_arch = "x86_64")]
            ($crate::backend::Backend::Avx2(t), 32) => {
                let $e = $crate::avx2::Avx2Engine::<{ $crate::kind::avx2_limbs(32) }, { 2 * $crate::kind::avx2_limbs(32) }>::new(t);
                Ok($body)
            }
            // MXCSR is per thread and may have changed since the token was made.
            #[cfg(target_arch = "x86_64")]
            ($crate::backend::Backend::Fma(_), _) if !$crate::token::mxcsr_round_to_nearest() => {
                Err($crate::error::MathError::BackendUnavailable(
                    $crate::kind::BackendKind::Fma,
                ))
            }
            #[cfg(target_arch = "x86_64")]
            ($crate::backend::Backend::Fma(t), 16) => {
                let $e = $crate::fma::FmaEngine::<{ $crate::kind::fma_limbs(16) }, { 2 * $crate::kind::fma_limbs(16) }>::new(t);
                Ok($body)
            }
            #[cfg(target_arch = "x86_64")]
            ($crate::backend::Backend::Fma(t), 24) => {
                let $e = $crate::fma::FmaEngine::<{ $crate::kind::fma_limbs(24) }, { 2 * $crate::kind::fma_limbs(24) }>::new(t);
                Ok($body)
            }
            #[cfg(target_arch = "x86_64")]
            ($crate::backend::Backend::Fma(t), 32) => {
                let $e = $crate::fma::FmaEngine::<{ $crate::kind::fma_limbs(32) }, { 2 * $crate::kind::fma_limbs(32) }>::new(t);
                Ok($body)
            }
            #[cfg(target_arch = "x86_64")]
            ($crate::backend::Backend::Ifma(t), 16) => {
                let $e = $crate::ifma::IfmaEngine::<{ $crate::kind::ifma_limbs(16) }, { 2 * $crate::kind::ifma_limbs(16) }>::new(t);
                Ok($body)
            }
            #[cfg(target_arch = "x86_64")]
            ($crate::backend::Backend::Ifma(t), 24) => {
                let $e = $crate::ifma::IfmaEngine::<{ $crate::kind::ifma_limbs(24) }, { 2 * $crate::kind::ifma_limbs(24) }>::new(t);
                Ok($body)
            }
            #[cfg(target_arch = "x86_64")]
            ($crate::backend::Backend::Ifma(t), 32) => {
                let $e = $crate::ifma::IfmaEngine::<{ $crate::kind::ifma_limbs(32) }, { 2 * $crate::kind::ifma_limbs(32) }>::new(t);
                Ok($body)
            }
            _ => Err($crate::error::MathError::Unsupported("modulus size (supported: 1024, 1536, 2048-bit primes)")),
        }
    }};
}
pub(crate) use with_engine;
