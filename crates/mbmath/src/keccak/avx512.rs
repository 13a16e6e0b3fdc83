//! Keccak-f[1600] on 8 states at once with AVX-512F: state word `i` of the 8 states is one
//! `zmm` (lane `l` = state `l`), 25 registers for the state; theta's five-way XOR and chi
//! are `vpternlogq`, rho's rotations `vprolq`.

use core::arch::x86_64::*;

use super::round::States;
use super::round::{keccak_f, Word};

#[derive(Clone, Copy)]
struct Z(__m512i);

// Every method is `#[inline(always)]` and only runs inlined into `permute8`, which is
// compiled with AVX-512F and only called with an `IfmaToken` (AVX-512F + IFMA detected).
impl Word for Z {
    #[inline(always)]
    fn xor(self, b: Self) -> Self {
        // SAFETY: AVX-512F, see the comment above the impl.
        Z(unsafe { _mm512_xor_si512(self.0, b.0) })
    }
    #[inline(always)]
    fn xor5(self, b: Self, c: Self, d: Self, e: Self) -> Self {
        // SAFETY: AVX-512F, see the comment above the impl.
        unsafe {
            let t = _mm512_ternarylogic_epi64::<0x96>(self.0, b.0, c.0);
            Z(_mm512_ternarylogic_epi64::<0x96>(t, d.0, e.0))
        }
    }
    #[inline(always)]
    fn rotl(self, n: u32) -> Self {
        // SAFETY: AVX-512F, see the comment above the impl.
        Z(unsafe { _mm512_rolv_epi64(self.0, _mm512_set1_epi64(i64::from(n))) })
    }
    #[inline(always)]
    fn chi(a: Self, b: Self, c: Self) -> Self {
        // 0xD2: a ^ (!b & c).
        // SAFETY: AVX-512F, see the comment above the impl.
        Z(unsafe { _mm512_ternarylogic_epi64::<0xD2>(a.0, b.0, c.0) })
    }
    #[inline(always)]
    fn xor_const(self, rc: u64) -> Self {
        // SAFETY: AVX-512F, see the comment above the impl.
        Z(unsafe { _mm512_xor_si512(self.0, _mm512_set1_epi64(rc as i64)) })
    }
}

/// Keccak-f[1600] on all 8 states of `st`.
///
/// # Safety
///
/// The CPU must support AVX-512F (an `IfmaToken` proves it).
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn permute8(st: &mut States) {
    // SAFETY: each `st[i]` is 8 `u64` = 64 bytes, in bounds; unaligned loads/stores.
    let mut a: [Z; 25] =
        core::array::from_fn(|i| Z(unsafe { _mm512_loadu_si512(st[i].as_ptr().cast()) }));
    keccak_f(&mut a);
    for (w, z) in st.iter_mut().zip(a) {
        // SAFETY: as for the loads.
        unsafe { _mm512_storeu_si512(w.as_mut_ptr().cast(), z.0) };
    }
}
