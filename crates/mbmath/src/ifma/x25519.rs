//! X25519 for 8 jobs at once: one Montgomery ladder per 64-bit lane of a `zmm`.
//!
//! A field element mod `p = 2^255 - 19` is 5 vectors of limbs in radix `2^51`, each limb
//! below `2^52` between operations (IFMA multiplies the low 52 bits of its inputs, so every
//! input must be below `2^52`). A product's column sums collect the low halves of
//! `a_i * b_j` in column `i + j` and twice the high halves (`2^52 = 2 * 2^51`) in column
//! `i + j + 1`; columns 5 to 9 fold into 0 to 4 times 19 (`2^255 = 19 mod p`); one parallel
//! carry pass (each limb's bits above 51 to the next, the top limb's times 19 to the first)
//! brings every limb back below `2^52`. Sums and differences (`a + 4 p - b`) take the same
//! carry pass. Column sums stay below `2^63` (bounds at each function).
//!
//! Constant time: straight-line code over all lanes; the ladder's swap is a masked exchange
//! whose mask is made from the scalar bit by arithmetic only (the bit's position is public).

use core::arch::x86_64::*;

use super::ops::{add, and, hi, lo, shl, shr51, shr_var, splat, sub, xor};
use super::{from_vec, to_vec};
use crate::field25519::{clamp, fe_from_bytes, fe_to_bytes, invert_with, wipe, A24};
use crate::token::IfmaToken;

type V = __m512i;
/// A field element in each of 8 lanes.
pub(super) type Fe8 = [V; 5];

const M51: u64 = (1 << 51) - 1;

/// One parallel carry pass. Inputs below `2^63`; outputs below `2^51 + 19 * 2^12 < 2^52`.
/// (Plain loops, no closures: a closure passed to a generic function is compiled without
/// this module's target features and cannot be inlined into it.)
#[inline(always)]
fn carry(c: [V; 5]) -> Fe8 {
    let m = splat(M51);
    let mut out = [zero(); 5];
    out[0] = lo(and(c[0], m), shr51(c[4]), splat(19));
    for i in 1..5 {
        out[i] = add(and(c[i], m), shr51(c[i - 1]));
    }
    out
}

/// `19 x` for `x < 2^58`.
#[inline(always)]
fn times19(x: V) -> V {
    add(add(x, shl::<1>(x)), shl::<4>(x))
}

/// Columns (low halves `l`, high halves `h` at the column of their product) to a reduced
/// element. `l[k] < 2^56`, `h[k] < 2^55`: `c_k = l_k + 2 h_(k-1) < 2^57`, folded `< 2^63`.
#[inline(always)]
fn reduce(l: [V; 9], h: [V; 9]) -> Fe8 {
    let mut c = [zero(); 10];
    c[0] = l[0];
    for k in 1..9 {
        c[k] = add(l[k], shl::<1>(h[k - 1]));
    }
    c[9] = shl::<1>(h[8]);
    let mut d = [zero(); 5];
    for k in 0..5 {
        d[k] = add(c[k], times19(c[k + 5]));
    }
    carry(d)
}

#[inline(always)]
pub(super) fn zero() -> V {
    splat(0)
}

/// `a * b`. Column sums: at most 5 terms below `2^52` each.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
pub(super) fn mul(a: &Fe8, b: &Fe8) -> Fe8 {
    let mut l = [zero(); 9];
    let mut h = [zero(); 9];
    for i in 0..5 {
        for j in 0..5 {
            l[i + j] = lo(l[i + j], a[i], b[j]);
            h[i + j] = hi(h[i + j], a[i], b[j]);
        }
    }
    reduce(l, h)
}

/// `a^2`: cross products once, columns doubled, then the squares added (at most 3 cross
/// terms per column, so doubled sums stay below `2^55`, plus one square: `< 2^56`).
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
pub(super) fn sqr(a: &Fe8) -> Fe8 {
    let mut l = [zero(); 9];
    let mut h = [zero(); 9];
    for i in 0..5 {
        for j in i + 1..5 {
            l[i + j] = lo(l[i + j], a[i], a[j]);
            h[i + j] = hi(h[i + j], a[i], a[j]);
        }
    }
    for k in 0..9 {
        l[k] = shl::<1>(l[k]);
        h[k] = shl::<1>(h[k]);
    }
    for i in 0..5 {
        l[2 * i] = lo(l[2 * i], a[i], a[i]);
        h[2 * i] = hi(h[2 * i], a[i], a[i]);
    }
    reduce(l, h)
}

#[target_feature(enable = "avx512f,avx512ifma")]
pub(super) fn sqr_n(a: &Fe8, n: usize) -> Fe8 {
    let mut x = *a;
    for _ in 0..n {
        x = sqr(&x);
    }
    x
}

#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
pub(super) fn fadd(a: &Fe8, b: &Fe8) -> Fe8 {
    let mut s = [zero(); 5];
    for i in 0..5 {
        s[i] = add(a[i], b[i]);
    }
    carry(s)
}

/// `a - b + 4 p` (limbs of `b` below `2^52 < 4 p`'s limbs; sums below `2^54`).
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
pub(super) fn fsub(a: &Fe8, b: &Fe8) -> Fe8 {
    let mut s = [zero(); 5];
    for i in 0..5 {
        let four_p = splat(if i == 0 {
            (1 << 53) - 76
        } else {
            (1 << 53) - 4
        });
        s[i] = sub(add(a[i], four_p), b[i]);
    }
    carry(s)
}

/// `s + a24 e`: `a24 e_i < 2^69` as low half in column `i`, twice the high half in `i + 1`
/// (column 5's, times 19, in column 0: `2 * 19 * 2^17`, one IFMA multiply-add).
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn add_a24_times(s: &Fe8, e: &Fe8) -> Fe8 {
    let k = splat(A24);
    let mut g = [zero(); 5];
    let mut t = [zero(); 5];
    for i in 0..5 {
        g[i] = hi(zero(), e[i], k);
        t[i] = lo(s[i], e[i], k);
    }
    t[0] = lo(t[0], g[4], splat(38));
    for i in 1..5 {
        t[i] = add(t[i], shl::<1>(g[i - 1]));
    }
    carry(t)
}

/// Exchange `a` and `b` in the lanes where `mask` is all ones.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
pub(super) fn cswap(mask: V, a: &mut Fe8, b: &mut Fe8) {
    for i in 0..5 {
        let t = and(mask, xor(a[i], b[i]));
        a[i] = xor(a[i], t);
        b[i] = xor(b[i], t);
    }
}

/// Lane `l` of limb `i` from `limbs[l][i]`.
fn transpose(limbs: &[[u64; 5]; 8]) -> Fe8 {
    core::array::from_fn(|i| to_vec(core::array::from_fn(|l| limbs[l][i])))
}

/// `X25519(scalars[l], points[l])` for the 8 lanes.
pub(crate) fn x25519_8(
    _token: IfmaToken,
    scalars: &[[u8; 32]; 8],
    points: &[[u8; 32]; 8],
) -> [[u8; 32]; 8] {
    // SAFETY: `_token` proves AVX-512F and IFMA.
    unsafe { ladder(scalars, points) }
}

#[target_feature(enable = "avx512f,avx512ifma")]
fn ladder(scalars: &[[u8; 32]; 8], points: &[[u8; 32]; 8]) -> [[u8; 32]; 8] {
    // Each lane's clamped scalar as 4 little-endian words, word `w` of all lanes in `k[w]`.
    let mut words = [[0u64; 8]; 4];
    for (l, s) in scalars.iter().enumerate() {
        let c = clamp(s);
        for (w, word) in words.iter_mut().enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(&c[8 * w..8 * w + 8]);
            word[l] = u64::from_le_bytes(b);
        }
    }
    let k: [V; 4] = core::array::from_fn(|w| to_vec(words[w]));
    wipe(&mut words);

    let x1 = transpose(&core::array::from_fn(|l| fe_from_bytes(&points[l])));
    let one: Fe8 = [splat(1), zero(), zero(), zero(), zero()];
    let (mut x2, mut z2, mut x3, mut z3) = (one, [zero(); 5], x1, one);
    let mut swap = zero();
    let bit1 = splat(1);
    for t in (0..255u32).rev() {
        let bit = and(shr_var(k[(t / 64) as usize], t % 64), bit1);
        let mask = sub(zero(), xor(swap, bit));
        cswap(mask, &mut x2, &mut x3);
        cswap(mask, &mut z2, &mut z3);
        swap = bit;
        let a = fadd(&x2, &z2);
        let aa = sqr(&a);
        let b = fsub(&x2, &z2);
        let bb = sqr(&b);
        let e = fsub(&aa, &bb);
        let c = fadd(&x3, &z3);
        let d = fsub(&x3, &z3);
        let da = mul(&d, &a);
        let cb = mul(&c, &b);
        x3 = sqr(&fadd(&da, &cb));
        z3 = mul(&x1, &sqr(&fsub(&da, &cb)));
        x2 = mul(&aa, &bb);
        z2 = mul(&e, &add_a24_times(&aa, &e));
    }
    let mask = sub(zero(), swap);
    cswap(mask, &mut x2, &mut x3);
    cswap(mask, &mut z2, &mut z3);
    // The closures inherit this function's target features.
    let inv = invert_with(&z2, |a, b| mul(a, b), |a, n| sqr_n(a, n));
    let x = mul(&x2, &inv);
    let limbs: [[u64; 8]; 5] = core::array::from_fn(|i| from_vec(x[i]));
    core::array::from_fn(|l| fe_to_bytes(&core::array::from_fn(|i| limbs[i][l])))
}
