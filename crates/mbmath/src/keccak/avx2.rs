//! Keccak-f[1600] on 4 states at once with AVX2: state word `i` of 4 states is one `ymm`
//! (lane `l` = state `l`). AVX2 has no 64-bit rotation: `vpsllq`/`vpsrlq`/`vpor`; chi is
//! `vpandn` + `vpxor`. 25 state registers do not fit the 16 `ymm`s, the compiler spills.

use core::arch::x86_64::*;

use super::round::States;
use super::round::{keccak_f, Word};

#[derive(Clone, Copy)]
struct Y(__m256i);

// Every method is `#[inline(always)]` and only runs inlined into `permute4`, which is
// compiled with AVX2 and only called with an `Avx2Token`.
impl Word for Y {
    #[inline(always)]
    fn xor(self, b: Self) -> Self {
        // SAFETY: AVX2, see the comment above the impl.
        Y(unsafe { _mm256_xor_si256(self.0, b.0) })
    }
    #[inline(always)]
    fn rotl(self, n: u32) -> Self {
        // SAFETY: AVX2, see the comment above the impl. Counts of 64 give 0 (n = 0 is fine).
        Y(unsafe {
            _mm256_or_si256(
                _mm256_sllv_epi64(self.0, _mm256_set1_epi64x(i64::from(n))),
                _mm256_srlv_epi64(self.0, _mm256_set1_epi64x(i64::from(64 - n))),
            )
        })
    }
    #[inline(always)]
    fn chi(a: Self, b: Self, c: Self) -> Self {
        // SAFETY: AVX2, see the comment above the impl.
        Y(unsafe { _mm256_xor_si256(a.0, _mm256_andnot_si256(b.0, c.0)) })
    }
    #[inline(always)]
    fn xor_const(self, rc: u64) -> Self {
        // SAFETY: AVX2, see the comment above the impl.
        Y(unsafe { _mm256_xor_si256(self.0, _mm256_set1_epi64x(rc as i64)) })
    }
}

/// Keccak-f[1600] on the 4 states `4 half .. 4 half + 4` of `st` (`half` is 0 or 1).
///
/// # Safety
///
/// The CPU must support AVX2 (an `Avx2Token` proves it).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn permute4(st: &mut States, half: usize) {
    let o = 4 * (half & 1);
    // SAFETY: `st[i][o..o + 4]` is 4 `u64` = 32 bytes, in bounds (o <= 4); unaligned.
    let mut a: [Y; 25] =
        core::array::from_fn(|i| Y(unsafe { _mm256_loadu_si256(st[i][o..].as_ptr().cast()) }));
    keccak_f(&mut a);
    for (w, y) in st.iter_mut().zip(a) {
        // SAFETY: as for the loads.
        unsafe { _mm256_storeu_si256(w[o..].as_mut_ptr().cast(), y.0) };
    }
}
