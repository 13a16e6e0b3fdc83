//! X25519 public keys for 8 scalars at once by the Edwards form's fixed-base comb (see
//! `crate::x25519_base`, whose table, recoding and one-at-a-time reference this follows), on the
//! field arithmetic of `ifma::x25519`.
//!
//! The table is the same for every lane, so each lookup broadcasts every entry of the row and
//! keeps, per lane, the one its digit names (`or_and` under an all-ones/all-zeros lane mask);
//! a negative digit exchanges `y + x` and `y - x` and negates `2 d x y` under the lane's sign
//! mask. Constant time as the ladder: no branch or address depends on a digit.

use core::arch::x86_64::*;

use super::ops::{and, eq_vec, or_and, sign_mask, splat, sub, xor};
use super::x25519::{cswap, fadd, fsub, mul, sqr, sqr_n, zero, Fe8};
use super::{from_vec, to_vec};
use crate::field25519::{fe_to_bytes, invert_with};
use crate::token::IfmaToken;
use crate::x25519_base::{signed_digits, table, Niels};

type V = __m512i;

/// A point in extended coordinates in each lane.
struct Ext8 {
    x: Fe8,
    y: Fe8,
    z: Fe8,
    t: Fe8,
}

/// Row `pos`'s entry per lane for the lanes' digits `e` (`[-8, 8]` as signed 64-bit lanes).
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn select(row: &[Niels; 8], e: V) -> [Fe8; 3] {
    let neg = sign_mask(e);
    let abs = sub(xor(e, neg), neg);
    let mut t = [[zero(); 5]; 3];
    // Digit 0: the identity (1, 1, 0).
    let m = eq_vec(abs, 0);
    t[0][0] = or_and(t[0][0], splat(1), m);
    t[1][0] = or_and(t[1][0], splat(1), m);
    for (j, entry) in row.iter().enumerate() {
        let m = eq_vec(abs, j as u64 + 1);
        for (dst, src) in t.iter_mut().zip([&entry.ypx, &entry.ymx, &entry.xy2d]) {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = or_and(*d, splat(s), m);
            }
        }
    }
    let [mut ypx, mut ymx, xy2d] = t;
    cswap(neg, &mut ypx, &mut ymx);
    let n = fsub(&[zero(); 5], &xy2d);
    let mut out = xy2d;
    for (o, nl) in out.iter_mut().zip(n) {
        *o = xor(*o, and(neg, xor(*o, nl)));
    }
    [ypx, ymx, out]
}

/// `p = (E F : G H : F G : E H)`, per lane.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn set_efgh(p: &mut Ext8, e: &Fe8, f: &Fe8, g: &Fe8, h: &Fe8) {
    p.x = mul(e, f);
    p.y = mul(g, h);
    p.z = mul(f, g);
    p.t = mul(e, h);
}

/// `p` plus a table point, per lane (ref10's `ge_madd`, then to extended coordinates).
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn madd(p: &mut Ext8, q: &[Fe8; 3]) {
    let a = mul(&fadd(&p.y, &p.x), &q[0]);
    let b = mul(&fsub(&p.y, &p.x), &q[1]);
    let c = mul(&q[2], &p.t);
    let d = fadd(&p.z, &p.z);
    let (e, h, g, f) = (fsub(&a, &b), fadd(&a, &b), fadd(&d, &c), fsub(&d, &c));
    set_efgh(p, &e, &f, &g, &h);
}

/// `2 p`, per lane (dbl-2008-hwcd with `a = -1`).
#[target_feature(enable = "avx512f,avx512ifma")]
fn dbl(p: &mut Ext8) {
    let a = sqr(&p.x);
    let b = sqr(&p.y);
    let zz = sqr(&p.z);
    let c = fadd(&zz, &zz);
    let e = fsub(&fsub(&sqr(&fadd(&p.x, &p.y)), &a), &b);
    let g = fsub(&b, &a);
    let f = fsub(&g, &c);
    let h = fsub(&[zero(); 5], &fadd(&a, &b));
    set_efgh(p, &e, &f, &g, &h);
}

/// `X25519(scalars[l], 9)` for the 8 lanes.
pub(crate) fn x25519_base_8(_token: IfmaToken, scalars: &[[u8; 32]; 8]) -> [[u8; 32]; 8] {
    // SAFETY: `_token` proves AVX-512F and IFMA.
    unsafe { comb(scalars) }
}

#[target_feature(enable = "avx512f,avx512ifma")]
fn comb(scalars: &[[u8; 32]; 8]) -> [[u8; 32]; 8] {
    let mut digits = [[0i8; 64]; 8];
    for (d, s) in digits.iter_mut().zip(scalars) {
        *d = signed_digits(s);
    }
    let mut e = [zero(); 64];
    for (i, v) in e.iter_mut().enumerate() {
        let mut lanes = [0u64; 8];
        for (lane, d) in lanes.iter_mut().zip(&digits) {
            *lane = i64::from(d[i]) as u64;
        }
        *v = to_vec(lanes);
    }
    crate::field25519::wipe(&mut digits);
    let one: Fe8 = [splat(1), zero(), zero(), zero(), zero()];
    let mut h = Ext8 {
        x: [zero(); 5],
        y: one,
        z: one,
        t: [zero(); 5],
    };
    let rows = table();
    for i in (1..64).step_by(2) {
        madd(&mut h, &select(&rows[i / 2], e[i]));
    }
    for _ in 0..4 {
        dbl(&mut h);
    }
    for i in (0..64).step_by(2) {
        madd(&mut h, &select(&rows[i / 2], e[i]));
    }
    // u = (Z + Y) / (Z - Y). The closures inherit this function's target features.
    let den = fsub(&h.z, &h.y);
    let inv = invert_with(&den, |a, b| mul(a, b), |a, n| sqr_n(a, n));
    let u = mul(&fadd(&h.z, &h.y), &inv);
    let limbs: [[u64; 8]; 5] = core::array::from_fn(|i| from_vec(u[i]));
    core::array::from_fn(|l| fe_to_bytes(&core::array::from_fn(|i| limbs[i][l])))
}
