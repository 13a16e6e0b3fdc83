//! P-256 scalar multiplication over 8 lanes (one job per 64-bit lane of a `zmm`), variable
//! base ([`mul_8`]: fixed 4-bit windows, a 16-entry table per lane) and fixed base
//! ([`mul_base_8`]: the portable comb's table, converted once, each entry broadcast to all
//! lanes and kept under the lane's mask). Field elements are 5 limbs of 52 bits in
//! Montgomery form with `R = 2^260`, products with `vpmadd52{l,h}uq` through the generic `mul_wide` / `redc` of the RSA code
//! (`N = 5`), every result fully reduced below `p` by a masked subtraction. The point
//! formulas are the portable ones (`p256::point::rcb_add` / `rcb_double`, generic over
//! [`CurveField`]); the window table is scanned whole per lane (`select`). The final
//! inversion of `Z` runs here too (Fermat, public exponent): affine `x, y` leave the lanes.
//!
//! Constant time as the portable code: no branch or address depends on a scalar or a point.

use core::arch::x86_64::*;

use std::sync::OnceLock;

use super::ops::{add, and, eq_vec, or_and, shr52, sra52, sub, MASK};
use super::{from_vec, mul_wide, redc, select, to_vec, IfmaCtx};
use crate::bigint::{from_radix, to_radix};
use crate::p256::field::{FieldP, Modulus};
use crate::p256::point::{rcb_add, rcb_double, CurveField};
use crate::token::IfmaToken;

const N: usize = 5;
const LANES: usize = 8;
/// `p` in radix 2^52.
const P: [u64; N] = [
    0xfffffffffffff,
    0xfffffffffff,
    0x0,
    0x1000000000,
    0xffffffff0000,
];
/// `2^520 mod p` (into Montgomery form by one product).
const R2: [u64; N] = [
    0x300,
    0xffffffff00000,
    0xffffefffffffb,
    0xfdfffffffffff,
    0x4ffffff,
];
/// `b 2^260 mod p`.
const B: [u64; N] = [
    0xdf6229c4bddfd,
    0xca8843090d89c,
    0x212ed6acf005c,
    0x83415a220abf7,
    0xc30061dd4874,
];
/// `2^260 mod p`: one.
const ONE: [u64; N] = [
    0x10,
    0xf000000000000,
    0xfffffffffffff,
    0xffeffffffffff,
    0xfffff,
];

/// The fixed-base comb table: 64 rows of 16 points, `X, Y, Z` each 5 radix-2^52 limbs.
type BaseTable = [[[[u64; N]; 3]; 16]; 64];

/// 8 field elements, one per lane, each below `p`, with the proof that IFMA is there.
#[derive(Clone, Copy)]
struct Fe8 {
    v: [__m512i; N],
    token: IfmaToken,
}

fn splat_limbs(c: &[u64; N]) -> [__m512i; N] {
    core::array::from_fn(|k| to_vec([c[k]; LANES]))
}

#[target_feature(enable = "avx512f,avx512ifma")]
fn reduce_below_p(s: [__m512i; N]) -> [__m512i; N] {
    // s < 2p, limbs normalised: t = s - p with a signed borrow chain; keep s where it borrowed.
    let p = splat_limbs(&P);
    let mask = _mm512_set1_epi64(MASK as i64);
    let mut t = [_mm512_setzero_si512(); N];
    let mut c = _mm512_setzero_si512();
    for k in 0..N {
        let x = add(sub(s[k], p[k]), c);
        c = sra52(x);
        t[k] = and(x, mask);
    }
    // c is all ones in lanes where s < p.
    core::array::from_fn(|k| {
        _mm512_or_si512(_mm512_and_si512(c, s[k]), _mm512_andnot_si512(c, t[k]))
    })
}

#[target_feature(enable = "avx512f,avx512ifma")]
fn fe_mul(a: &[__m512i; N], b: &[__m512i; N]) -> [__m512i; N] {
    let ctx = IfmaCtx {
        n: splat_limbs(&P),
        k0: to_vec([1; LANES]),
    };
    let mut t = [_mm512_setzero_si512(); 2 * N];
    mul_wide::<N, { 2 * N }>(a, b, &mut t);
    let mut r = [_mm512_setzero_si512(); N];
    redc::<N, { 2 * N }>(&mut t, &ctx, &mut r);
    reduce_below_p(r)
}

#[target_feature(enable = "avx512f,avx512ifma")]
fn fe_add(a: &[__m512i; N], b: &[__m512i; N]) -> [__m512i; N] {
    let mask = _mm512_set1_epi64(MASK as i64);
    let mut s = [_mm512_setzero_si512(); N];
    let mut c = _mm512_setzero_si512();
    for k in 0..N {
        let x = add(add(a[k], b[k]), c);
        c = shr52(x);
        s[k] = and(x, mask);
    }
    reduce_below_p(s)
}

#[target_feature(enable = "avx512f,avx512ifma")]
fn fe_sub(a: &[__m512i; N], b: &[__m512i; N]) -> [__m512i; N] {
    let mask = _mm512_set1_epi64(MASK as i64);
    let p = splat_limbs(&P);
    let mut d = [_mm512_setzero_si512(); N];
    let mut c = _mm512_setzero_si512();
    for k in 0..N {
        let x = add(sub(a[k], b[k]), c);
        c = sra52(x);
        d[k] = and(x, mask);
    }
    // Where a < b (c all ones), add p; the carry out of 2^260 is dropped.
    let mut r = [_mm512_setzero_si512(); N];
    let mut cc = _mm512_setzero_si512();
    for k in 0..N {
        let x = add(add(d[k], and(p[k], c)), cc);
        cc = shr52(x);
        r[k] = and(x, mask);
    }
    r
}

impl CurveField for Fe8 {
    #[inline(always)]
    fn mul(&self, b: &Self) -> Self {
        // SAFETY: `self.token` proves AVX-512F and IFMA.
        let v = unsafe { fe_mul(&self.v, &b.v) };
        Fe8 {
            v,
            token: self.token,
        }
    }
    #[inline(always)]
    fn add(&self, b: &Self) -> Self {
        // SAFETY: as in `mul`.
        let v = unsafe { fe_add(&self.v, &b.v) };
        Fe8 {
            v,
            token: self.token,
        }
    }
    #[inline(always)]
    fn sub(&self, b: &Self) -> Self {
        // SAFETY: as in `mul`.
        let v = unsafe { fe_sub(&self.v, &b.v) };
        Fe8 {
            v,
            token: self.token,
        }
    }
    #[inline(always)]
    fn double(&self) -> Self {
        self.add(self)
    }
    #[inline(always)]
    fn curve_b(&self) -> Self {
        Fe8 {
            v: splat_limbs(&B),
            token: self.token,
        }
    }
}

/// Lane `l` holds `vals[l]` (radix 2^64, below `p`) in Montgomery form.
#[target_feature(enable = "avx512f,avx512ifma")]
fn load(vals: &[[u64; 4]; LANES]) -> [__m512i; N] {
    let mut limbs = [[0u64; N]; LANES];
    for (lane, v) in limbs.iter_mut().zip(vals) {
        to_radix(v, 52, lane);
    }
    let x: [__m512i; N] = core::array::from_fn(|k| to_vec(core::array::from_fn(|l| limbs[l][k])));
    fe_mul(&x, &splat_limbs(&R2))
}

/// The canonical values (radix 2^64) of the lanes.
#[target_feature(enable = "avx512f,avx512ifma")]
fn store(x: &[__m512i; N]) -> [[u64; 4]; LANES] {
    let mut one = [0u64; N];
    one[0] = 1;
    let v = fe_mul(x, &splat_limbs(&one));
    let mut limbs = [[0u64; N]; LANES];
    for (k, vk) in v.iter().enumerate() {
        for (l, x) in from_vec(*vk).into_iter().enumerate() {
            limbs[l][k] = x;
        }
    }
    let mut out = [[0u64; 4]; LANES];
    for (o, lane) in out.iter_mut().zip(&limbs) {
        from_radix(lane, 52, o);
    }
    out
}

/// Results of [`mul_8`], per lane: canonical affine coordinates (radix 2^64) and whether
/// the point is the identity.
pub(crate) struct Affine8 {
    pub(crate) x: [[u64; 4]; LANES],
    pub(crate) y: [[u64; 4]; LANES],
    pub(crate) identity: [bool; LANES],
}

/// The affine coordinates of `k_l Q_l` for 8 lanes (affine inputs below `p`, on the curve;
/// scalars below `2^256`), and per lane whether the result is the identity (then both are 0).
pub(crate) fn mul_8(
    token: IfmaToken,
    qx: &[[u64; 4]; LANES],
    qy: &[[u64; 4]; LANES],
    k: &[[u64; 4]; LANES],
) -> Affine8 {
    // SAFETY: `token` proves AVX-512F and IFMA.
    unsafe { mul_8_impl(token, qx, qy, k) }
}

#[target_feature(enable = "avx512f,avx512ifma")]
fn mul_8_impl(
    token: IfmaToken,
    qx: &[[u64; 4]; LANES],
    qy: &[[u64; 4]; LANES],
    k: &[[u64; 4]; LANES],
) -> Affine8 {
    let fe = |v| Fe8 { v, token };
    let zero = fe([_mm512_setzero_si512(); N]);
    let one = fe(splat_limbs(&ONE));
    let identity = [zero, one, zero];
    let q = [fe(load(qx)), fe(load(qy)), one];
    // Table of j Q, each point as 15 vectors for `select`.
    let flat = |p: &[Fe8; 3]| -> [__m512i; 3 * N] { core::array::from_fn(|i| p[i / N].v[i % N]) };
    let unflat = |f: &[__m512i; 3 * N]| -> [Fe8; 3] {
        core::array::from_fn(|c| fe(core::array::from_fn(|i| f[c * N + i])))
    };
    let mut pts = [identity; 16];
    pts[1] = q;
    for j in 2..16 {
        pts[j] = if j % 2 == 0 {
            rcb_double(&pts[j / 2])
        } else {
            rcb_add(&pts[j - 1], &q)
        };
    }
    let table: [[__m512i; 3 * N]; 16] = core::array::from_fn(|j| flat(&pts[j]));
    let mut acc = identity;
    let mut entry = [_mm512_setzero_si512(); 3 * N];
    for w in (0..64).rev() {
        if w != 63 {
            for _ in 0..4 {
                acc = rcb_double(&acc);
            }
        }
        let idx = to_vec(core::array::from_fn(|l| {
            (k[l][w / 16] >> ((w % 16) * 4)) & 15
        }));
        select::<{ 3 * N }>(&table, idx, &mut entry);
        acc = rcb_add(&acc, &unflat(&entry));
    }
    to_affine_8(&acc, one)
}

/// Affine coordinates of 8 projective points: `Z^-1 = Z^(p-2)` (public exponent).
#[target_feature(enable = "avx512f,avx512ifma")]
fn to_affine_8(acc: &[Fe8; 3], one: Fe8) -> Affine8 {
    let e = {
        let mut e = <FieldP as Modulus>::M;
        e[0] -= 2;
        e
    };
    let mut inv = one;
    for i in (0..256).rev() {
        inv = inv.mul(&inv);
        if (e[i / 64] >> (i % 64)) & 1 == 1 {
            inv = inv.mul(&acc[2]);
        }
    }
    let x = store(&acc[0].mul(&inv).v);
    let y = store(&acc[1].mul(&inv).v);
    let z = store(&acc[2].v);
    // Whether a lane's result is the identity is public (it fails that job).
    let identity = core::array::from_fn(|l| z[l] == [0; 4]);
    Affine8 { x, y, identity }
}

/// The portable comb table (`T[w][j] = j 16^w G`) in this module's form: per entry `X, Y, Z`
/// as radix-2^52 limbs of `c 2^260 mod p` (120 KiB, built once).
fn base_table_52() -> &'static BaseTable {
    static TABLE: OnceLock<Box<BaseTable>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Box::new([[[[0u64; N]; 3]; 16]; 64]);
        for (row, prow) in t.iter_mut().zip(crate::p256::point::base_table()) {
            for (e, p) in row.iter_mut().zip(prow) {
                for (c, v) in e.iter_mut().zip(p.coordinates_r260()) {
                    to_radix(&v, 52, c);
                }
            }
        }
        t
    })
}

/// `k_l G` for 8 lanes by the fixed-base comb: 64 complete additions of table entries, each
/// fetched per lane by scanning its row's 16 entries (broadcast and masked).
pub(crate) fn mul_base_8(token: IfmaToken, k: &[[u64; 4]; LANES]) -> Affine8 {
    let table = base_table_52();
    // SAFETY: `token` proves AVX-512F and IFMA.
    unsafe { mul_base_8_impl(token, table, k) }
}

#[target_feature(enable = "avx512f,avx512ifma")]
fn mul_base_8_impl(token: IfmaToken, table: &BaseTable, k: &[[u64; 4]; LANES]) -> Affine8 {
    let fe = |v| Fe8 { v, token };
    let zero = fe([_mm512_setzero_si512(); N]);
    let one = fe(splat_limbs(&ONE));
    let mut acc = [zero, one, zero];
    for (w, row) in table.iter().enumerate() {
        let idx = to_vec(core::array::from_fn(|l| {
            (k[l][w / 16] >> ((w % 16) * 4)) & 15
        }));
        let mut entry = [[_mm512_setzero_si512(); N]; 3];
        for (j, e) in row.iter().enumerate() {
            let mask = eq_vec(idx, j as u64);
            for (r, c) in entry.iter_mut().zip(e) {
                for (ri, &ci) in r.iter_mut().zip(c) {
                    *ri = or_and(*ri, _mm512_set1_epi64(ci as i64), mask);
                }
            }
        }
        acc = rcb_add(&acc, &entry.map(fe));
    }
    to_affine_8(&acc, one)
}
