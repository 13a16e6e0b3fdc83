//! Keccak-f[1600] over up to 8 independent states at once: the permutation behind SHA3 and
//! SHAKE (`sha3`), run by the best code the backend's token allows.
//!
//! * `Ifma` (its token proves AVX-512F): `keccak::avx512`, all 8 states in one pass;
//! * `Avx2` and `Fma` (both imply AVX2): `keccak::avx2`, 4 states per pass (one pass for up
//!   to 4 states, two for more);
//! * `Portable`: `keccak::round::keccak_f` on `u64`, one state after the other: the reference.
//!
//! The three share one permutation (`keccak::round`), generic over the word type. A lone state
//! always takes the `u64` code (faster than a SIMD pass with the other lanes idle).
//!
//! Measured (AVX-512 IFMA Xeon, shared machine): about 65-90 ns per state and permutation on
//! `ifma` with 8 states, 190-230 on `avx2` with 4 or 8, 270-300 on `portable`.
//!
//! Constant time: the permutation is a fixed sequence of bitwise operations and constant
//! rotations; the only branches are on the backend and the (public) number of states.

mod round;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

pub(crate) use round::{States, LANES};

use crate::backend::Backend;
#[cfg(target_arch = "x86_64")]
use crate::token::{Avx2Token, IfmaToken};

/// How a [`Backend`] runs the permutation (its token resolved once).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Permuter {
    /// One state at a time in `u64`.
    Portable,
    /// 4 states per `ymm` pass.
    #[cfg(target_arch = "x86_64")]
    Avx2(Avx2Token),
    /// 8 states per `zmm` pass.
    #[cfg(target_arch = "x86_64")]
    Avx512(IfmaToken),
}

impl Permuter {
    /// The permutation code for `backend`.
    pub(crate) fn new(backend: Backend) -> Permuter {
        match backend {
            Backend::Portable => Permuter::Portable,
            #[cfg(target_arch = "x86_64")]
            Backend::Ifma(t) => Permuter::Avx512(t),
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2(t) => Permuter::Avx2(t),
            // An FmaToken implies AVX2; the check is repeated to obtain the token.
            #[cfg(target_arch = "x86_64")]
            Backend::Fma(_) => Avx2Token::new().map_or(Permuter::Portable, Permuter::Avx2),
            #[allow(unreachable_patterns)]
            _ => Permuter::Portable,
        }
    }

    /// Keccak-f[1600] on states `0..lanes` of `st` (the others may change too).
    pub(crate) fn permute(self, st: &mut States, lanes: usize) {
        // One state alone: the `u64` code beats a SIMD pass with the other lanes idle.
        let this = if lanes == 1 { Permuter::Portable } else { self };
        match this {
            Permuter::Portable => {
                for l in 0..lanes.min(LANES) {
                    let mut a: [u64; 25] = core::array::from_fn(|i| st[i][l]);
                    round::keccak_f(&mut a);
                    for (w, x) in st.iter_mut().zip(a) {
                        w[l] = x;
                    }
                }
            }
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the IfmaToken proves AVX-512F.
            Permuter::Avx512(_) => unsafe { avx512::permute8(st) },
            #[cfg(target_arch = "x86_64")]
            Permuter::Avx2(_) => {
                for half in 0..lanes.min(LANES).div_ceil(4) {
                    // SAFETY: the Avx2Token proves AVX2.
                    unsafe { avx2::permute4(st, half) };
                }
            }
        }
    }
}
