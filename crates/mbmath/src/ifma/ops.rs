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

/// The lanes of `v` equal to `c`.
#[inline(always)]
fn eq_mask(v: __m512i, c: u64) -> __mmask8 {
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

/// `s | (a & m)` per lane (one `vpternlogq`): with `m` all ones or all zeros
/// per lane, `a` or-ed into the lanes where `m` is set.
#[inline(always)]
pub(super) fn or_and(s: __m512i, a: __m512i, m: __m512i) -> __m512i {
    // SAFETY: as in `lo`.
    unsafe { _mm512_ternarylogic_epi64::<0xF8>(s, a, m) }
}

/// All ones in the lanes of `v` equal to `c`, zero elsewhere.
#[inline(always)]
pub(super) fn eq_vec(v: __m512i, c: u64) -> __m512i {
    // SAFETY: as in `lo`.
    unsafe { _mm512_maskz_set1_epi64(eq_mask(v, c), -1) }
}

/// All ones in every lane if `keep`, else zero (`keep` is public).
#[inline(always)]
pub(super) fn lane_mask(keep: bool) -> __m512i {
    // SAFETY: as in `lo`.
    unsafe { _mm512_set1_epi64(-i64::from(keep)) }
}

/// `a >> 51` per lane (the X25519 field's limb size).
#[inline(always)]
pub(super) fn shr51(a: __m512i) -> __m512i {
    // SAFETY: as in `lo`.
    unsafe { _mm512_srli_epi64::<51>(a) }
}

/// `a << S` per lane.
#[inline(always)]
pub(super) fn shl<const S: u32>(a: __m512i) -> __m512i {
    // SAFETY: as in `lo`.
    unsafe { _mm512_slli_epi64::<S>(a) }
}

/// `a >> s` per lane, logical, for a public shift count `s < 64`.
#[inline(always)]
pub(super) fn shr_var(a: __m512i, s: u32) -> __m512i {
    // SAFETY: as in `lo`.
    unsafe { _mm512_srlv_epi64(a, _mm512_set1_epi64(i64::from(s))) }
}

/// `c` in every lane.
#[inline(always)]
pub(super) fn splat(c: u64) -> __m512i {
    // SAFETY: as in `lo`.
    unsafe { _mm512_set1_epi64(c as i64) }
}

/// All ones in the lanes where `a` is negative (as a signed 64-bit value), zero elsewhere.
#[inline(always)]
pub(super) fn sign_mask(a: __m512i) -> __m512i {
    // SAFETY: as in `lo`.
    unsafe { _mm512_srai_epi64::<63>(a) }
}
