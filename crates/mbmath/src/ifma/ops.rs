//! The IFMA backend's lane-wise operations on `zmm` values (52-bit limbs in
//! 64-bit lanes), shared by the generic code and the generated kernels.
//!
//! Each is `#[inline(always)]` and only called from functions compiled with
//! `#[target_feature(enable = "avx512f,avx512ifma")]`, which only run after an
//! `IfmaToken` was obtained.

use core::arch::x86_64::*;

/// Bits per limb.
pub(super) const BITS: u32 = 52;
/// The low `BITS` bits.
pub(super) const MASK: u64 = (1 << BITS) - 1;

/// `acc + lo52(a * b)` per lane (low 52 bits of `a`, `b` multiplied).
#[inline(always)]
pub(super) fn lo(acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
    // SAFETY: only called from `#[target_feature(enable = "avx512f,avx512ifma")]`
    // functions (inlined there), which only run after an `IfmaToken` was obtained.
    unsafe { _mm512_madd52lo_epu64(acc, a, b) }
}

/// `acc + hi52(a * b)` per lane.
#[inline(always)]
pub(super) fn hi(acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
    // SAFETY: as in `lo`.
    unsafe { _mm512_madd52hi_epu64(acc, a, b) }
}

/// `a + b` per lane.
#[inline(always)]
pub(super) fn add(a: __m512i, b: __m512i) -> __m512i {
    // SAFETY: as in `lo`.
    unsafe { _mm512_add_epi64(a, b) }
}

/// `a & b` per lane.
#[inline(always)]
pub(super) fn and(a: __m512i, b: __m512i) -> __m512i {
    // SAFETY: as in `lo`.
    unsafe { _mm512_and_si512(a, b) }
}

/// `a >> 52` per lane.
#[inline(always)]
pub(super) fn shr52(a: __m512i) -> __m512i {
    // SAFETY: as in `lo`.
    unsafe { _mm512_srli_epi64::<52>(a) }
}

/// Lanes of `a` where `k` is set, of `src` elsewhere.
#[inline(always)]
pub(super) fn mov_masked(src: __m512i, k: __mmask8, a: __m512i) -> __m512i {
    // SAFETY: as in `lo`.
    unsafe { _mm512_mask_mov_epi64(src, k, a) }
}

/// The lanes of `v` equal to `c`.
#[inline(always)]
pub(super) fn eq_mask(v: __m512i, c: u64) -> __mmask8 {
    // SAFETY: as in `lo`.
    unsafe { _mm512_cmpeq_epi64_mask(v, _mm512_set1_epi64(c as i64)) }
}

/// `a - b` per lane (wrapping).
#[inline(always)]
pub(super) fn sub(a: __m512i, b: __m512i) -> __m512i {
    // SAFETY: as in `lo`.
    unsafe { _mm512_sub_epi64(a, b) }
}

/// `a ^ b` per lane.
#[inline(always)]
pub(super) fn xor(a: __m512i, b: __m512i) -> __m512i {
    // SAFETY: as in `lo`.
    unsafe { _mm512_xor_si512(a, b) }
}

/// `a >> 52` per lane, arithmetic (signed column sums and borrows).
#[inline(always)]
pub(super) fn sra52(a: __m512i) -> __m512i {
    // SAFETY: as in `lo`.
    unsafe { _mm512_srai_epi64::<52>(a) }
}
