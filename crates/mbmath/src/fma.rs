//! AVX2 + FMA3 backend: vertical radix-2^50 Montgomery arithmetic on double
//! precision floating point, 4 lanes per `ymm`, for AVX2-only CPUs (AMD Zen 3,
//! Intel before IFMA) where `vpmuludq` (32x32 bits) is the only integer
//! multiplier.
//!
//! # Exact products with FMA (Emmart & Weems, ARITH 2018, "dpf")
//!
//! Limbs are integers `< 2^50` held exactly in `f64`. With `C1 = 2^102` and
//! round-to-nearest, `h = fma(x, y, C1)` lies in `[2^102, 2^103)` (ulp
//! `2^50`), so its bit pattern is `bits(C1) + H` with `H = round(xy / 2^50)`:
//! the high half, already aligned to the next limb. The low half
//! `xy - H 2^50` (signed, `|.| <= 2^49`) is exact as `fma(x, y, -(h - C1))`.
//!
//! Up to four products of one column are summed in one *group*, taken in
//! pairs: the high halves of a pair by chaining the FMA (`h_1 = fma(x_1, y_1,
//! h_0)`, still inside the binade, so `d = h_1 - h_0` is exact), the low
//! halves `fma(x_k, y_k, -d)` by exact `f64` additions onto the magic
//! constant `M = 1.5 * 2^52` (folded into the first one:
//! `fma(x_0, y_0, (C1 + M) - h_0)`, where `C1 + M` and the difference are
//! representable). `|sum of lows| <= 4 * 2^49` keeps `M + sum` in `[2^52, 2^53]`,
//! whose bit pattern is `bits(M) + sum`. A group of four products costs
//! 8 FMA + 7 FADD/FSUB + 3 `vpaddq` into the 64-bit column accumulators
//! (4.5 ops per product; a single chain of four would need 2 `vpaddq` but is
//! slower: its ~28-cycle dependency chain fills the FP scheduler).
//!
//! The bias of each pattern (`bits(C1)`, `bits(M)`, both `0 mod 2^50`) is
//! never subtracted per product: the column accumulators start from
//! `2^60 - bias` (minus `2^10` where a carry arrives), the biases of every
//! column being measured once per context by running the same (data
//! independent) code on zero inputs. Complete columns are thus exact values
//! plus `2^60` (non-negative, so logical shifts give floor carries, and the
//! `2^10` each carry brings is cancelled by the next column's start value).
//!
//! Why 50-bit limbs and not 52 (one limb more, 21 instead of 20 for 1024
//! bits): with 52-bit limbs a product fills the whole binade, so every product
//! needs its own high pattern and its own magic conversion of the low half
//! (2 FMA + 2 FADD + 2 `vpaddq` each, 6 ops); 50-bit limbs let four products
//! share them.
//!
//! `N = ceil((64 L + 2) / 50)` limbs (21 for 1024-bit moduli), `R = 2^(50 N)
//! > 4 m`: products stay almost reduced (`< 2 m`). Montgomery digits
//! `(t_i k0) mod 2^50` use `vpmuludq` (three 32-bit products).
//!
//! # Rounding mode
//!
//! Exactness needs the MXCSR rounding control to be round-to-nearest (the
//! default) and the precision exception masked (also the default): the
//! [`crate::FmaToken`] checks both when created, and every dispatch to this
//! backend checks again (a thread may have changed MXCSR since).

use core::arch::x86_64::*;

use crate::bigint::{from_radix, to_radix};
use crate::engine::{ExpJob, LaneEngine};
use crate::m256::{from_vec, to_vec};
use crate::token::FmaToken;

const BITS: u32 = 50;
const MASK: u64 = (1 << BITS) - 1;
const LANES: usize = 4;

/// `2^102`: puts `xy + C1` into the binade of ulp `2^50`.
const C1: f64 = 5070602400912917605986812821504.0;
/// `1.5 * 2^52`: `M + v` has bit pattern `bits(M) + v` for integers `|v| <= 2^51`.
const MAGIC: f64 = 6755399441055744.0;
/// `C1 + MAGIC` (`2^102 + 2^52 + 2^51`), exactly representable.
const C1M: f64 = C1 + MAGIC;
/// `2^52`, to turn integers `< 2^52` into `f64` (`bits(2^52) | v` is `2^52 + v`).
const TWO52: f64 = 4503599627370496.0;
/// Bias of a group's high pattern.
const B_HI: u64 = C1.to_bits();
/// Bias of a group's low pattern.
const B_LO: u64 = MAGIC.to_bits();
/// Offset that keeps complete columns non-negative.
const OFFSET: u64 = 1 << 60;

/// FMA engine for `N` radix-2^50 limbs (`N2 = 2 N`).
pub(crate) struct FmaEngine<const N: usize, const N2: usize> {
    _token: FmaToken,
}

impl<const N: usize, const N2: usize> FmaEngine<N, N2> {
    pub(crate) fn new(token: FmaToken) -> Self {
        assert_eq!(N2, 2 * N);
        FmaEngine { _token: token }
    }
}

pub(crate) struct FmaCtx<const N: usize, const N2: usize> {
    n: [__m256d; N],
    k0: __m256i,
    k0_hi: __m256i,
    /// Start values of the columns for a multiplication / a squaring.
    init_mul: [__m256i; N2],
    init_sqr: [__m256i; N2],
}

#[inline]
fn to_vecd(x: [f64; 4]) -> __m256d {
    // SAFETY: `[f64; 4]` and `__m256d` are both 32 bytes of `f64`s.
    unsafe { core::mem::transmute::<[f64; 4], __m256d>(x) }
}

#[inline]
fn from_vecd(x: __m256d) -> [f64; 4] {
    // SAFETY: as in `to_vecd`.
    unsafe { core::mem::transmute::<__m256d, [f64; 4]>(x) }
}

// The wrappers below are only called from `#[target_feature(enable =
// "avx2,fma")]` functions (inlined there), which only run after an
// `FmaToken` proved AVX2 and FMA present.

#[inline(always)]
fn fmadd(a: __m256d, b: __m256d, c: __m256d) -> __m256d {
    // SAFETY: see the comment above the wrappers.
    unsafe { _mm256_fmadd_pd(a, b, c) }
}

#[inline(always)]
fn fmsub(a: __m256d, b: __m256d, c: __m256d) -> __m256d {
    // SAFETY: see the comment above the wrappers.
    unsafe { _mm256_fmsub_pd(a, b, c) }
}

#[inline(always)]
fn fadd(a: __m256d, b: __m256d) -> __m256d {
    // SAFETY: see the comment above the wrappers.
    unsafe { _mm256_add_pd(a, b) }
}

#[inline(always)]
fn fsub(a: __m256d, b: __m256d) -> __m256d {
    // SAFETY: see the comment above the wrappers.
    unsafe { _mm256_sub_pd(a, b) }
}

#[inline(always)]
fn splat(x: f64) -> __m256d {
    // SAFETY: see the comment above the wrappers.
    unsafe { _mm256_set1_pd(x) }
}

#[inline(always)]
fn splat_i(x: u64) -> __m256i {
    // SAFETY: see the comment above the wrappers.
    unsafe { _mm256_set1_epi64x(x as i64) }
}

#[inline(always)]
fn bits(a: __m256d) -> __m256i {
    // SAFETY: see the comment above the wrappers.
    unsafe { _mm256_castpd_si256(a) }
}

#[inline(always)]
fn add(a: __m256i, b: __m256i) -> __m256i {
    // SAFETY: see the comment above the wrappers.
    unsafe { _mm256_add_epi64(a, b) }
}

#[inline(always)]
fn shr50(a: __m256i) -> __m256i {
    // SAFETY: see the comment above the wrappers.
    unsafe { _mm256_srli_epi64::<50>(a) }
}

/// One or two products `x_k y_k` of a column: (low half sum plus `start -
/// C1`, high halves plus `C1`) as `f64`. The second high half is chained.
#[inline(always)]
fn pair(p: &[(__m256d, __m256d)], start: f64) -> (__m256d, __m256d) {
    let (x0, y0) = p[0];
    let h0 = fmadd(x0, y0, splat(C1));
    let lo = fmadd(x0, y0, fsub(splat(start), h0));
    if p.len() > 1 {
        let (x1, y1) = p[1];
        let h1 = fmadd(x1, y1, h0);
        (fadd(lo, fmsub(x1, y1, fsub(h1, h0))), h1)
    } else {
        (lo, h0)
    }
}

/// Exact sum of up to four products `x_k y_k` (`x_k, y_k < 2^50`) of one
/// column as `(low, high)` bit patterns: `sum = (low - B_LO) + (high - j B_HI) 2^50`
/// where `j` is the number of pairs. Products are taken in pairs (short
/// dependency chains); the pairs' low halves are summed in `f64`.
#[inline(always)]
fn group(p: &[(__m256d, __m256d)]) -> (__m256i, __m256i) {
    let (lo, h) = pair(&p[..p.len().min(2)], C1M);
    if p.len() > 2 {
        let (lo2, h2) = pair(&p[2..], C1);
        (bits(fadd(lo, lo2)), add(bits(h), bits(h2)))
    } else {
        (bits(lo), bits(h))
    }
}

/// Adds the group of column `c` (pairs in `p`): low pattern and the previous
/// column's high pattern to `t[c]`; keeps this column's high pattern.
#[inline(always)]
fn column(t: &mut [__m256i], c: usize, p: &[(__m256d, __m256d)], hprev: &mut __m256i) {
    let (lo, hi) = group(p);
    t[c] = add(add(t[c], lo), *hprev);
    *hprev = hi;
}

/// `t[c] += x[k] y[c - k]` over `k < R`, `c - k < y.len()`, for the columns
/// `c` in `from..to` (low pattern of each column's group to `t[c]`, high
/// pattern to `t[c + 1]`). Column ranges let the reduction split a rank-4
/// update around the next digits' computation.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn rect_cols<const R: usize>(
    t: &mut [__m256i],
    x: &[__m256d; R],
    y: &[__m256d],
    from: usize,
    to: usize,
) {
    let m = y.len();
    let end = (m + R - 1).min(to);
    if m == 0 || from >= end {
        return;
    }
    let mut hprev = _mm256_setzero_si256();
    let edge = |c: usize| {
        let mut p = [(x[0], y[0]); R];
        let mut len = 0;
        for (k, &xk) in x.iter().enumerate() {
            if c >= k && c - k < m {
                p[len] = (xk, y[c - k]);
                len += 1;
            }
        }
        (p, len)
    };
    let a1 = (R - 1).min(end).max(from);
    let b1 = m.min(end).max(a1);
    for c in from..a1 {
        let (p, len) = edge(c);
        column(t, c, &p[..len], &mut hprev);
    }
    for c in a1..b1 {
        let p: [(__m256d, __m256d); R] = core::array::from_fn(|k| (x[k], y[c - k]));
        column(t, c, &p, &mut hprev);
    }
    for c in b1..end {
        let (p, len) = edge(c);
        column(t, c, &p[..len], &mut hprev);
    }
    t[end] = add(t[end], hprev);
}

/// All columns of `rect_cols`.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn rect<const R: usize>(t: &mut [__m256i], x: &[__m256d; R], y: &[__m256d]) {
    rect_cols::<R>(t, x, y, 0, usize::MAX);
}

/// `t = init + a * b` as biased column sums. Rows in blocks of four.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn mul_wide<const N: usize, const N2: usize>(
    a: &[__m256d; N],
    b: &[__m256d; N],
    init: &[__m256i; N2],
) -> [__m256i; N2] {
    let mut t = *init;
    let q = N / 4 * 4;
    for i in (0..q).step_by(4) {
        rect::<4>(&mut t[i..], &[a[i], a[i + 1], a[i + 2], a[i + 3]], b);
    }
    for i in q..N {
        rect::<1>(&mut t[i..], &[a[i]], b);
    }
    t
}

/// `t = init + a^2` as biased column sums: cross products once, doubled,
/// then the diagonal.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn sqr_wide<const N: usize, const N2: usize>(
    a: &[__m256d; N],
    init: &[__m256i; N2],
) -> [__m256i; N2] {
    let mut t = [_mm256_setzero_si256(); N2];
    let q = N / 4 * 4;
    for i in (0..q).step_by(4) {
        let x = [a[i], a[i + 1], a[i + 2], a[i + 3]];
        let c = 2 * i;
        let put = |t: &mut [__m256i; N2], col: usize, p: &[(__m256d, __m256d)]| {
            let (lo, hi) = group(p);
            t[col] = add(t[col], lo);
            t[col + 1] = add(t[col + 1], hi);
        };
        put(&mut t, c + 1, &[(x[0], x[1])]);
        put(&mut t, c + 2, &[(x[0], x[2])]);
        put(&mut t, c + 3, &[(x[0], x[3]), (x[1], x[2])]);
        put(&mut t, c + 4, &[(x[1], x[3])]);
        put(&mut t, c + 5, &[(x[2], x[3])]);
        rect::<4>(&mut t[c + 4..], &x, &a[i + 4..]);
    }
    for i in q..N {
        rect::<1>(&mut t[2 * i + 1..], &[a[i]], &a[i + 1..]);
    }
    for (x, &s) in t.iter_mut().zip(init) {
        *x = add(add(*x, *x), s);
    }
    for i in 0..N {
        let (lo, hi) = group(&[(a[i], a[i])]);
        t[2 * i] = add(t[2 * i], lo);
        t[2 * i + 1] = add(t[2 * i + 1], hi);
    }
    t
}

/// Montgomery digit `(w k0) mod 2^50` (only the low 50 bits of `w` matter),
/// with `vpmuludq`, returned as `f64`.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn digit(w: __m256i, k0: __m256i, k0_hi: __m256i) -> __m256d {
    let mid = add(
        _mm256_mul_epu32(_mm256_srli_epi64::<32>(w), k0),
        _mm256_mul_epu32(w, k0_hi),
    );
    let m = add(_mm256_mul_epu32(w, k0), _mm256_slli_epi64::<32>(mid));
    let m = _mm256_and_si256(m, splat_i(MASK));
    fsub(
        _mm256_castsi256_pd(_mm256_or_si256(m, splat_i(TWO52.to_bits()))),
        splat(TWO52),
    )
}

/// Montgomery reduction of the column sums `t` (started from the context's
/// `init_*`): returns `t / R mod m`, normalised, `< 2 m`. Rows in blocks of
/// four with the same `rect` calls as `mul_wide` (hence the same biases):
/// the four digits are found from the low columns first (recomputing the
/// few products they need, with explicit bias corrections for the exact
/// carries), then `m_k * n` is added as one rank-4 update.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn redc<const N: usize, const N2: usize>(
    t: &mut [__m256i; N2],
    ctx: &FmaCtx<N, N2>,
) -> [__m256d; N] {
    let n = &ctx.n;
    let (k0, k0h) = (ctx.k0, ctx.k0_hi);
    let one = |x, y| group(&[(x, y)]);
    // Bias corrections (wrapping): `-B_LO` and `-(B_LO + B_HI)`.
    let neg_lo = splat_i(B_LO.wrapping_neg());
    let neg_lohi = splat_i(B_LO.wrapping_add(B_HI).wrapping_neg());
    let q = N / 4 * 4;
    // The four digits of the block at column `i`. Column i lacks one low
    // group, supplied by `l00`: exact after it.
    let digits = |t: &[__m256i; N2], i: usize| -> [__m256d; 4] {
        let w0 = t[i];
        let m0 = digit(w0, k0, k0h);
        let (l00, h00) = one(m0, n[0]);
        let c0 = shr50(add(w0, l00));
        let (l01, h01) = one(m0, n[1]);
        let w1 = add(add(t[i + 1], add(h00, l01)), c0);
        let m1 = digit(w1, k0, k0h);
        let (l10, h10) = one(m1, n[0]);
        let c1 = shr50(add(add(w1, l10), neg_lo));
        let (l02, h02) = one(m0, n[2]);
        let (l11, h11) = one(m1, n[1]);
        let w2 = add(
            add(add(t[i + 2], add(h01, h10)), add(l02, l11)),
            add(c1, neg_lohi),
        );
        let m2 = digit(w2, k0, k0h);
        let (l20, h20) = one(m2, n[0]);
        let c2 = shr50(add(add(w2, l20), neg_lo));
        // Only the low 50 bits matter for the last digit (biases are 0 mod 2^50).
        let (l03, _) = one(m0, n[3]);
        let (l12, _) = one(m1, n[2]);
        let (l21, _) = one(m2, n[1]);
        let w3 = add(
            add(add(t[i + 3], add(h02, h11)), add(h20, c2)),
            add(l03, add(l12, l21)),
        );
        let m3 = digit(w3, k0, k0h);
        [m0, m1, m2, m3]
    };
    if q > 0 {
        let mut ms = digits(t, 0);
        for i in (0..q).step_by(4) {
            // Columns i..i+8 first: then the next block's digits are known
            // and their (latency bound) computation overlaps the rest.
            rect_cols::<4>(&mut t[i..], &ms, n, 0, 8);
            for k in i..i + 4 {
                t[k + 1] = add(t[k + 1], shr50(t[k]));
            }
            let cur = ms;
            if i + 4 < q {
                ms = digits(t, i + 4);
            }
            rect_cols::<4>(&mut t[i..], &cur, n, 8, usize::MAX);
        }
    }
    for i in q..N {
        let m = digit(t[i], k0, k0h);
        rect::<1>(&mut t[i..], &[m], n);
        t[i + 1] = add(t[i + 1], shr50(t[i]));
    }
    let mask = splat_i(MASK);
    let two52 = splat_i(TWO52.to_bits());
    let mut r = [_mm256_setzero_pd(); N];
    let mut carry = _mm256_setzero_si256();
    for k in 0..N {
        let v = add(t[N + k], carry);
        let limb = _mm256_or_si256(_mm256_and_si256(v, mask), two52);
        r[k] = fsub(_mm256_castsi256_pd(limb), splat(TWO52));
        carry = shr50(v);
    }
    r
}

#[target_feature(enable = "avx2,fma")]
fn mont_mul<const N: usize, const N2: usize>(
    ctx: &FmaCtx<N, N2>,
    a: &[__m256d; N],
    b: &[__m256d; N],
) -> [__m256d; N] {
    let mut t = mul_wide::<N, N2>(a, b, &ctx.init_mul);
    redc::<N, N2>(&mut t, ctx)
}

#[target_feature(enable = "avx2,fma")]
fn mont_sqr<const N: usize, const N2: usize>(
    ctx: &FmaCtx<N, N2>,
    a: &[__m256d; N],
) -> [__m256d; N] {
    let mut t = sqr_wide::<N, N2>(a, &ctx.init_sqr);
    redc::<N, N2>(&mut t, ctx)
}

/// Column start values `2^60 - 2^10 [c > 0] - bias`, the biases measured by
/// running the product code on zeros (it is data independent).
#[target_feature(enable = "avx2,fma")]
fn init_values<const N: usize, const N2: usize>() -> ([__m256i; N2], [__m256i; N2]) {
    let z = [_mm256_setzero_pd(); N];
    let zi = [_mm256_setzero_si256(); N2];
    let wide = mul_wide::<N, N2>(&z, &z, &zi);
    let sqr = sqr_wide::<N, N2>(&z, &zi);
    let mut init_mul = zi;
    let mut init_sqr = zi;
    for c in 0..N2 {
        let off = OFFSET.wrapping_sub(if c > 0 { OFFSET >> BITS } else { 0 });
        // The bias is the same in every lane; the reduction adds `wide` again.
        let w = from_vec(wide[c])[0];
        let s = from_vec(sqr[c])[0];
        init_mul[c] = splat_i(off.wrapping_sub(w.wrapping_mul(2)));
        init_sqr[c] = splat_i(off.wrapping_sub(w).wrapping_sub(s));
    }
    (init_mul, init_sqr)
}

#[target_feature(enable = "avx2,fma")]
fn zero<const N: usize>() -> [__m256d; N] {
    [_mm256_setzero_pd(); N]
}

#[target_feature(enable = "avx2,fma")]
fn select<const N: usize>(table: &[[__m256d; N]], idx: __m256i) -> [__m256d; N] {
    let mut r = [_mm256_setzero_si256(); N];
    for (k, e) in table.iter().enumerate() {
        let mask = _mm256_cmpeq_epi64(idx, _mm256_set1_epi64x(k as i64));
        for l in 0..N {
            r[l] = _mm256_or_si256(r[l], _mm256_and_si256(bits(e[l]), mask));
        }
    }
    r.map(|v| _mm256_castsi256_pd(v))
}

impl<const N: usize, const N2: usize> LaneEngine for FmaEngine<N, N2> {
    type Num = [__m256d; N];
    type Ctx = FmaCtx<N, N2>;
    const LANES: usize = LANES;

    fn ctx(&self, jobs: &[&ExpJob<'_>]) -> FmaCtx<N, N2> {
        let vals: Vec<&[u64]> = jobs.iter().map(|j| j.modulus).collect();
        let n = self.load(&vals);
        let k0 = [0, 1, 2, 3].map(|l| jobs[l].n0 & MASK);
        // SAFETY: `self` holds an `FmaToken`, proof that the CPU has AVX2 and FMA.
        let (init_mul, init_sqr) = unsafe { init_values::<N, N2>() };
        FmaCtx {
            n,
            k0: to_vec(k0),
            k0_hi: to_vec(k0.map(|k| k >> 32)),
            init_mul,
            init_sqr,
        }
    }

    fn load(&self, vals: &[&[u64]]) -> [__m256d; N] {
        let mut limbs = [[0u64; N]; LANES];
        for (lane, v) in limbs.iter_mut().zip(vals) {
            to_radix(v, BITS, lane);
        }
        core::array::from_fn(|k| to_vecd([0, 1, 2, 3].map(|l| limbs[l][k] as f64)))
    }

    fn store(&self, x: &[__m256d; N], out: &mut [&mut [u64]]) {
        let mut limbs = [[0u64; N]; LANES];
        for (k, v) in x.iter().enumerate() {
            let lanes = from_vecd(*v);
            for l in 0..LANES {
                limbs[l][k] = lanes[l] as u64;
            }
        }
        for (o, lane) in out.iter_mut().zip(&limbs) {
            from_radix(lane, BITS, o);
        }
    }

    fn mul(&self, ctx: &FmaCtx<N, N2>, a: &[__m256d; N], b: &[__m256d; N]) -> [__m256d; N] {
        // SAFETY: `self` holds an `FmaToken`, proof that the CPU has AVX2 and FMA.
        unsafe { mont_mul::<N, N2>(ctx, a, b) }
    }

    fn sqr(&self, ctx: &FmaCtx<N, N2>, a: &[__m256d; N]) -> [__m256d; N] {
        // SAFETY: `self` holds an `FmaToken`, proof that the CPU has AVX2 and FMA.
        unsafe { mont_sqr::<N, N2>(ctx, a) }
    }

    fn select(&self, table: &[[__m256d; N]], idx: &[u64]) -> [__m256d; N] {
        let idx = to_vec([idx[0], idx[1], idx[2], idx[3]]);
        // SAFETY: `self` holds an `FmaToken`, proof that the CPU has AVX2 and FMA.
        unsafe { select::<N>(table, idx) }
    }

    fn wipe(&self, x: &mut [__m256d; N]) {
        // SAFETY: `self` holds an `FmaToken`, proof that the CPU has AVX2 and FMA.
        *x = unsafe { zero::<N>() };
        core::hint::black_box(x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants() {
        assert_eq!(C1, 2f64.powi(102));
        assert_eq!(MAGIC, 1.5 * 2f64.powi(52));
        assert_eq!(C1M.to_bits(), 0x4650_0000_0000_0006);
        assert_eq!(B_LO & MASK, 0);
        assert_eq!(B_HI & MASK, 0);
    }
}
