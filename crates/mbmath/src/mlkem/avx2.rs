//! K-PKE.Encrypt's arithmetic (`mlkem::ntt`) on 8 encryptions at once with AVX2: one `u32`
//! lane of a `ymm` per encryption. Montgomery products with `vpmulld`, conditional
//! subtractions with `vpminud` (`min(r, r - q)`: `r - q` wraps above `r` when `r < q`).

use core::arch::x86_64::*;

use crate::mlkem::ntt::{encrypt_core, encrypt_spread_core, Coeff, Work};
use crate::mlkem::poly::{N, Q};
use crate::token::Avx2Token;

/// 8 coefficients, one per encryption.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub(crate) struct Y8(__m256i);

#[inline(always)]
fn csub(r: __m256i) -> __m256i {
    // SAFETY: only inlined into `encrypt8` (AVX2, see `Y8`'s impl).
    unsafe { _mm256_min_epu32(r, _mm256_sub_epi32(r, _mm256_set1_epi32(Q as i32))) }
}

// Every method is `#[inline(always)]` and, but for `flat`/`flat_mut` (plain data), only runs
// inlined into `encrypt8`, compiled with AVX2 and called with an `Avx2Token`.
impl Coeff for Y8 {
    const WIDTH: usize = 8;
    #[inline(always)]
    fn splat(x: u32) -> Self {
        Y8(to_vec([x; 8]))
    }
    #[inline(always)]
    fn add(self, b: Self) -> Self {
        // SAFETY: AVX2, see the comment above the impl.
        Y8(csub(unsafe { _mm256_add_epi32(self.0, b.0) }))
    }
    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        // SAFETY: AVX2, see the comment above the impl.
        Y8(csub(unsafe {
            _mm256_sub_epi32(_mm256_add_epi32(self.0, _mm256_set1_epi32(Q as i32)), b.0)
        }))
    }
    #[inline(always)]
    fn mont_mul(self, b: Self) -> Self {
        // As `u32`'s: x < 2^24, x + t q < 2^28, result < 2q.
        // SAFETY: AVX2, see the comment above the impl.
        Y8(csub(unsafe {
            let x = _mm256_mullo_epi32(self.0, b.0);
            let t = _mm256_and_si256(
                _mm256_mullo_epi32(x, _mm256_set1_epi32(3327)),
                _mm256_set1_epi32(0xffff),
            );
            _mm256_srli_epi32::<16>(_mm256_add_epi32(
                x,
                _mm256_mullo_epi32(t, _mm256_set1_epi32(Q as i32)),
            ))
        }))
    }
    fn flat(p: &[Self; N]) -> &[u32] {
        // SAFETY: `Y8` is `repr(transparent)` over `__m256i`, 32 bytes of plain integers, so
        // `[Y8; N]` is `8 N` initialized `u32`s, suitably aligned for `u32`.
        unsafe { core::slice::from_raw_parts(p.as_ptr().cast::<u32>(), 8 * N) }
    }
    fn flat_mut(p: &mut [Self; N]) -> &mut [u32] {
        // SAFETY: as in `flat`; every bit pattern is a valid `__m256i`.
        unsafe { core::slice::from_raw_parts_mut(p.as_mut_ptr().cast::<u32>(), 8 * N) }
    }
}

#[inline(always)]
fn to_vec(x: [u32; 8]) -> __m256i {
    // SAFETY: `[u32; 8]` and `__m256i` are both 32 bytes of plain integer data; every bit
    // pattern is valid for both.
    unsafe { core::mem::transmute::<[u32; 8], __m256i>(x) }
}

/// `encrypt_core` on 8 encryptions (the token proves AVX2).
pub(crate) fn encrypt8(_token: Avx2Token, w: &mut Work<Y8>) {
    // SAFETY: the token proves AVX2.
    unsafe { encrypt8_avx2(w) }
}

#[target_feature(enable = "avx2")]
unsafe fn encrypt8_avx2(w: &mut Work<Y8>) {
    encrypt_core(w);
}

/// `encrypt_spread_core` on 2 encryptions (the token proves AVX2).
pub(crate) fn encrypt2_spread(_token: Avx2Token, w: &mut Work<Y8>) {
    // SAFETY: the token proves AVX2.
    unsafe { encrypt2_spread_avx2(w) }
}

#[target_feature(enable = "avx2")]
unsafe fn encrypt2_spread_avx2(w: &mut Work<Y8>) {
    encrypt_spread_core(w);
}
