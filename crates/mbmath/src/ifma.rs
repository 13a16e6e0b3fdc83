//! AVX-512 IFMA backend: vertical radix-2^52 Montgomery arithmetic, 8 lanes
//! per `zmm`, products with `vpmadd52luq` / `vpmadd52huq`.
//!
//! A number of `L` 64-bit limbs uses `N = ceil((64 L + 2) / 52)` limbs of 52
//! bits (20 for 1024-bit moduli), so `R = 2^(52 N) > 4 m` and products stay
//! almost reduced (`< 2 m`).
//!
//! 1024-bit moduli (RSA-2048, the case that matters most) run the generated
//! straight-line kernels of [`kernel20`] (column sums as locals, one Karatsuba
//! step, row-by-row reduction with the next digit computed early, the next
//! window's table scan stitched into the squarings: see
//! `tools/gen_ifma_kernel20.py`). Other sizes (30 and 40 limbs) use the
//! generic code below: each 52x52-bit product adds its low half to column
//! `i + j` and its high half to column `i + j + 1`; columns collect at most
//! `4 N` terms below `2^52` (`< 2^60`) before the single normalisation per
//! multiplication; squaring computes cross products once, doubles the
//! columns, then adds the diagonal; products, reductions and table selection
//! write into their destination (no 2.5 KB column array or result returned by
//! value and copied).

use core::arch::x86_64::*;

use crate::bigint::{from_radix, to_radix};
use crate::engine::{ExpJob, LaneEngine, WINDOW};
use crate::token::IfmaToken;

mod kernel20;
mod ops;
pub(crate) mod p256;
pub(crate) mod x25519;
pub(crate) mod x25519_base;

use ops::{add, eq_vec, hi, lo, or_and, shr52, BITS, MASK};

const LANES: usize = 8;

/// IFMA engine for `N` radix-2^52 limbs (`N2 = 2 N`).
pub(crate) struct IfmaEngine<const N: usize, const N2: usize> {
    _token: IfmaToken,
}

impl<const N: usize, const N2: usize> IfmaEngine<N, N2> {
    pub(crate) fn new(token: IfmaToken) -> Self {
        assert_eq!(N2, 2 * N);
        IfmaEngine { _token: token }
    }
}

pub(crate) struct IfmaCtx<const N: usize> {
    n: [__m512i; N],
    k0: __m512i,
}

#[inline]
fn to_vec(x: [u64; 8]) -> __m512i {
    // SAFETY: `[u64; 8]` and `__m512i` are both 64 bytes of plain integer
    // data; every bit pattern is valid for both.
    unsafe { core::mem::transmute::<[u64; 8], __m512i>(x) }
}

#[inline]
fn from_vec(x: __m512i) -> [u64; 8] {
    // SAFETY: as in `to_vec`.
    unsafe { core::mem::transmute::<__m512i, [u64; 8]>(x) }
}

#[target_feature(enable = "avx512f,avx512ifma")]
fn zero<const N: usize>() -> [__m512i; N] {
    [_mm512_setzero_si512(); N]
}

/// Rank-4 update: for `k < 4`, `j < y.len()`, adds the low half of
/// `x[k] * y[j]` to `t[k + j]` and the high half to `t[k + j + 1]`. Each
/// touched column is loaded and stored once per eight multiply-adds.
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
fn rect4(t: &mut [__m512i], x: [__m512i; 4], y: &[__m512i]) {
    let m = y.len();
    let edge = |t: &mut [__m512i], c: usize| {
        let mut acc = t[c];
        for (k, &xk) in x.iter().enumerate() {
            if c >= k && c - k < m {
                acc = lo(acc, xk, y[c - k]);
            }
            if c > k && c - 1 - k < m {
                acc = hi(acc, xk, y[c - 1 - k]);
            }
        }
        t[c] = acc;
    };
    for c in 0..4.min(m + 4) {
        edge(t, c);
    }
    let zero = _mm512_setzero_si512();
    for c in 4..m {
        let l = lo(
            lo(lo(lo(t[c], x[0], y[c]), x[1], y[c - 1]), x[2], y[c - 2]),
            x[3],
            y[c - 3],
        );
        let h = hi(
            hi(hi(hi(zero, x[0], y[c - 1]), x[1], y[c - 2]), x[2], y[c - 3]),
            x[3],
            y[c - 4],
        );
        t[c] = add(l, h);
    }
    for c in m.max(4)..m + 4 {
        edge(t, c);
    }
}

/// `t += a * b` as column sums of 52-bit halves (not normalised); the caller
/// passes `t` zeroed (the columns are written in place, not returned: no copy
/// of the 2 N columns).
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
fn mul_wide<const N: usize, const N2: usize>(
    a: &[__m512i; N],
    b: &[__m512i; N],
    t: &mut [__m512i; N2],
) {
    let q = N / 4 * 4;
    for i in (0..q).step_by(4) {
        rect4(&mut t[i..], [a[i], a[i + 1], a[i + 2], a[i + 3]], b);
    }
    for i in q..N {
        for j in 0..N {
            t[i + j] = lo(t[i + j], a[i], b[j]);
            t[i + j + 1] = hi(t[i + j + 1], a[i], b[j]);
        }
    }
}

/// `t = a^2` as column sums (not normalised): cross products once, doubled,
/// plus the diagonal; the caller passes `t` zeroed.
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
fn sqr_wide<const N: usize, const N2: usize>(a: &[__m512i; N], t: &mut [__m512i; N2]) {
    let q = N / 4 * 4;
    for i in (0..q).step_by(4) {
        for k in 0..4 {
            for l in (k + 1)..4 {
                t[2 * i + k + l] = lo(t[2 * i + k + l], a[i + k], a[i + l]);
                t[2 * i + k + l + 1] = hi(t[2 * i + k + l + 1], a[i + k], a[i + l]);
            }
        }
        rect4(
            &mut t[2 * i + 4..],
            [a[i], a[i + 1], a[i + 2], a[i + 3]],
            &a[i + 4..],
        );
    }
    for i in q..N {
        for j in (i + 1)..N {
            t[i + j] = lo(t[i + j], a[i], a[j]);
            t[i + j + 1] = hi(t[i + j + 1], a[i], a[j]);
        }
    }
    for x in t.iter_mut() {
        *x = add(*x, *x);
    }
    for i in 0..N {
        t[2 * i] = lo(t[2 * i], a[i], a[i]);
        t[2 * i + 1] = hi(t[2 * i + 1], a[i], a[i]);
    }
}

/// Montgomery reduction of the column sums `t` (value `< 4 m^2`): writes
/// `t / R mod m`, normalised, `< 2 m`, to `r`. Four rows at a time: the quotient
/// digits are found sequentially from the low columns, then `m_k * n` is
/// added as one rank-4 update and the low carries propagated.
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
fn redc<const N: usize, const N2: usize>(
    t: &mut [__m512i; N2],
    ctx: &IfmaCtx<N>,
    r: &mut [__m512i; N],
) {
    let n = &ctx.n;
    let k0 = ctx.k0;
    let zero = _mm512_setzero_si512();
    // m = v * k0 mod 2^52 (vpmadd52luq reads the low 52 bits of v).
    let digit = |v: __m512i| lo(zero, v, k0);
    let q = N / 4 * 4;
    for i in (0..q).step_by(4) {
        let v0 = t[i];
        let m0 = digit(v0);
        let c = shr52(lo(v0, m0, n[0]));
        let v1 = add(lo(hi(t[i + 1], m0, n[0]), m0, n[1]), c);
        let m1 = digit(v1);
        let c = shr52(lo(v1, m1, n[0]));
        let v2 = add(
            lo(hi(lo(hi(t[i + 2], m0, n[1]), m0, n[2]), m1, n[0]), m1, n[1]),
            c,
        );
        let m2 = digit(v2);
        let c = shr52(lo(v2, m2, n[0]));
        let u3 = lo(hi(lo(hi(t[i + 3], m0, n[2]), m0, n[3]), m1, n[1]), m1, n[2]);
        let v3 = add(lo(hi(u3, m2, n[0]), m2, n[1]), c);
        let m3 = digit(v3);
        rect4(&mut t[i..], [m0, m1, m2, m3], n);
        for k in i..i + 4 {
            t[k + 1] = add(t[k + 1], shr52(t[k]));
        }
    }
    for i in q..N {
        let m = digit(t[i]);
        let ti = lo(t[i], m, n[0]);
        t[i + 1] = hi(t[i + 1], m, n[0]);
        t[i + 1] = add(t[i + 1], shr52(ti));
        for j in 1..N {
            t[i + j] = lo(t[i + j], m, n[j]);
            t[i + j + 1] = hi(t[i + j + 1], m, n[j]);
        }
    }
    let mask = _mm512_set1_epi64(MASK as i64);
    let mut carry = zero;
    for k in 0..N {
        let v = add(t[N + k], carry);
        r[k] = _mm512_and_si512(v, mask);
        carry = shr52(v);
    }
}

/// `x = x * b / R mod m` (`b = None`: `x = x^2 / R mod m`), the result written
/// straight into `x` (the product is complete before `redc` writes).
#[target_feature(enable = "avx512f,avx512ifma")]
fn mont_assign<const N: usize, const N2: usize>(
    ctx: &IfmaCtx<N>,
    x: &mut [__m512i; N],
    b: Option<&[__m512i; N]>,
) {
    // 1024-bit moduli (RSA-2048's primes): the generated straight-line kernels
    // (`N` is a constant, so this choice is made at compile time).
    if let (Ok(x20), Ok(n20)) = (
        <&mut [__m512i; 20]>::try_from(&mut x[..]),
        <&[__m512i; 20]>::try_from(&ctx.n[..]),
    ) {
        match b.map(|b| <&[__m512i; 20]>::try_from(&b[..])) {
            None => return kernel20::sqr20(x20, n20, ctx.k0),
            Some(Ok(b20)) => return kernel20::mul20(x20, b20, n20, ctx.k0),
            Some(Err(_)) => {}
        }
    }
    let mut t = [_mm512_setzero_si512(); N2];
    match b {
        Some(b) => mul_wide::<N, N2>(x, b, &mut t),
        None => sqr_wide::<N, N2>(x, &mut t),
    }
    redc::<N, N2>(&mut t, ctx, x);
}

/// Lane `l` of `r` = lane `l` of `table[idx_l]`, scanning the whole table:
/// `r` starts at zero and every entry is or-ed in under its all-ones/all-zeros
/// lane mask (each `idx_l < table.len()`, so exactly one entry matches per
/// lane). Logic ops, not merge-masked moves: those cost IFMA issue slots on
/// Zen 4.
#[target_feature(enable = "avx512f,avx512ifma")]
fn select<const N: usize>(table: &[[__m512i; N]], idx: __m512i, r: &mut [__m512i; N]) {
    *r = [_mm512_setzero_si512(); N];
    for (k, e) in table.iter().enumerate() {
        let mask = eq_vec(idx, k as u64);
        for l in 0..N {
            r[l] = or_and(r[l], e[l], mask);
        }
    }
}

impl<const N: usize, const N2: usize> LaneEngine for IfmaEngine<N, N2> {
    type Num = [__m512i; N];
    type Ctx = IfmaCtx<N>;
    const LANES: usize = LANES;

    fn ctx(&self, jobs: &[&ExpJob<'_>]) -> IfmaCtx<N> {
        let vals: Vec<&[u64]> = jobs.iter().map(|j| j.modulus).collect();
        let n = self.load(&vals);
        let k0 = to_vec(core::array::from_fn(|l| jobs[l].n0 & MASK));
        IfmaCtx { n, k0 }
    }

    fn load(&self, vals: &[&[u64]]) -> [__m512i; N] {
        let mut limbs = [[0u64; N]; LANES];
        for (lane, v) in limbs.iter_mut().zip(vals) {
            to_radix(v, BITS, lane);
        }
        core::array::from_fn(|k| to_vec(core::array::from_fn(|l| limbs[l][k])))
    }

    fn store(&self, x: &[__m512i; N], out: &mut [&mut [u64]]) {
        let mut limbs = [[0u64; N]; LANES];
        for (k, v) in x.iter().enumerate() {
            let lanes = from_vec(*v);
            for l in 0..LANES {
                limbs[l][k] = lanes[l];
            }
        }
        for (o, lane) in out.iter_mut().zip(&limbs) {
            from_radix(lane, BITS, o);
        }
    }

    fn mul(&self, ctx: &IfmaCtx<N>, a: &[__m512i; N], b: &[__m512i; N]) -> [__m512i; N] {
        let mut x = *a;
        self.mul_assign(ctx, &mut x, b);
        x
    }

    fn sqr(&self, ctx: &IfmaCtx<N>, a: &[__m512i; N]) -> [__m512i; N] {
        let mut x = *a;
        self.sqr_assign(ctx, &mut x);
        x
    }

    fn mul_assign(&self, ctx: &IfmaCtx<N>, x: &mut [__m512i; N], b: &[__m512i; N]) {
        // SAFETY: `self` holds an `IfmaToken`, proof that the CPU has
        // AVX-512F and AVX-512 IFMA.
        unsafe { mont_assign::<N, N2>(ctx, x, Some(b)) }
    }

    fn sqr_assign(&self, ctx: &IfmaCtx<N>, x: &mut [__m512i; N]) {
        // SAFETY: `self` holds an `IfmaToken` (AVX-512F + IFMA present).
        unsafe { mont_assign::<N, N2>(ctx, x, None) }
    }

    fn select(&self, table: &[[__m512i; N]], idx: &[u64]) -> [__m512i; N] {
        let mut r = table[0];
        self.select_packed(table, idx, &mut r);
        r
    }

    fn select_packed(&self, table: &[[__m512i; N]], idx: &[u64], out: &mut [__m512i; N]) {
        let idx = to_vec(core::array::from_fn(|l| idx[l]));
        // SAFETY: `self` holds an `IfmaToken` (AVX-512F + IFMA present).
        unsafe { select::<N>(table, idx, out) }
    }

    fn sqr_assign_select_part(
        &self,
        ctx: &IfmaCtx<N>,
        x: &mut [__m512i; N],
        table: &[[__m512i; N]],
        idx: &[u64],
        part: usize,
        out: &mut [__m512i; N],
    ) {
        // 1024-bit moduli with the 32-entry table: the squaring with its part
        // of the scan stitched in (5 parts of 7 entries cover the table).
        if let (Ok(x20), Ok(n20), Ok(t20), Ok(o20)) = (
            <&mut [__m512i; 20]>::try_from(&mut x[..]),
            <&[__m512i; 20]>::try_from(&ctx.n[..]),
            <&[[__m512i; 20]; 32]>::try_from(table_20(table)),
            <&mut [__m512i; 20]>::try_from(&mut out[..]),
        ) {
            if WINDOW == 5 {
                let idx = to_vec(core::array::from_fn(|l| idx[l]));
                // SAFETY: `self` holds an `IfmaToken` (AVX-512F + IFMA present).
                unsafe { kernel20::sqr20_select(x20, n20, ctx.k0, t20, idx, part, o20) };
                return;
            }
        }
        self.sqr_assign(ctx, x);
        if part + 1 == WINDOW {
            self.select_packed(table, idx, out);
        }
    }

    fn wipe(&self, x: &mut [__m512i; N]) {
        // SAFETY: `self` holds an `IfmaToken` (AVX-512F + IFMA present).
        *x = unsafe { zero::<N>() };
        core::hint::black_box(x);
    }
}

/// `t` as a slice of 20-limb numbers when `N = 20`, else empty.
fn table_20<const N: usize>(t: &[[__m512i; N]]) -> &[[__m512i; 20]] {
    if N != 20 {
        return &[];
    }
    // SAFETY: `N == 20`, so `[__m512i; N]` is `[__m512i; 20]`: same size,
    // alignment and layout; the slice keeps `t`'s length and lifetime.
    unsafe { core::slice::from_raw_parts(t.as_ptr().cast::<[__m512i; 20]>(), t.len()) }
}
