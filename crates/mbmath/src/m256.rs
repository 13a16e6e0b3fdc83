//! Plain-data conversions between four 64-bit lanes and a `__m256i`, shared
//! by the AVX2 and FMA backends.

use core::arch::x86_64::__m256i;

#[inline]
pub(crate) fn to_vec(x: [u64; 4]) -> __m256i {
    // SAFETY: `[u64; 4]` and `__m256i` are both 32 bytes of plain integer
    // data; every bit pattern is valid for both.
    unsafe { core::mem::transmute::<[u64; 4], __m256i>(x) }
}

#[inline]
pub(crate) fn from_vec(x: __m256i) -> [u64; 4] {
    // SAFETY: as in `to_vec`.
    unsafe { core::mem::transmute::<__m256i, [u64; 4]>(x) }
}
