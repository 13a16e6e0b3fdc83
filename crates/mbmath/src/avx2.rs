//! AVX2 backend: vertical radix-2^28 Montgomery arithmetic, 4 lanes per
//! `ymm` (one 64-bit element per lane), products with `vpmuludq`.
//!
//! A number of `L` 64-bit limbs uses `N = ceil((64 L + 2) / 28)` limbs of 28
//! bits (37 for 1024-bit moduli), so `R = 2^(28 N) > 4 m` and Montgomery
//! products can stay "almost reduced" (`< 2 m`) without a final subtraction.
//! Carries are lazy: the `2 N`-column product/reduction accumulators collect
//! up to `2 N` products below `2^56` each (`< 2^63.3` for `N <= 74`), and are
//! normalised to 28 bits once per multiplication. Squaring computes each cross
//! product once (`2 a_i` times `a_j`, `< 2^57`).

use core::arch::x86_64::*;

use crate::bigint::{from_radix, to_radix};
use crate::engine::{ExpJob, LaneEngine};
use crate::Avx2Token;

const BITS: u32 = 28;
const MASK: u64 = (1 << BITS) - 1;
const LANES: usize = 4;

/// AVX2 engine for `N` radix-2^28 limbs (`N2 = 2 N`, a separate parameter
/// because stable Rust cannot compute array lengths from generics).
pub(crate) struct Avx2Engine<const N: usize, const N2: usize> {
    _token: Avx2Token,
}

impl<const N: usize, const N2: usize> Avx2Engine<N, N2> {
    pub(crate) fn new(token: Avx2Token) -> Self {
        assert_eq!(N2, 2 * N);
        Avx2Engine { _token: token }
    }
}

pub(crate) struct Avx2Ctx<const N: usize> {
    n: [__m256i; N],
    k0: __m256i,
}

#[inline]
fn to_vec(x: [u64; 4]) -> __m256i {
    // SAFETY: `[u64; 4]` and `__m256i` are both 32 bytes of plain integer
    // data; every bit pattern is valid for both.
    unsafe { core::mem::transmute::<[u64; 4], __m256i>(x) }
}

#[inline]
fn from_vec(x: __m256i) -> [u64; 4] {
    // SAFETY: as in `to_vec`.
    unsafe { core::mem::transmute::<__m256i, [u64; 4]>(x) }
}

#[target_feature(enable = "avx2")]
fn zero<const N: usize>() -> [__m256i; N] {
    [_mm256_setzero_si256(); N]
}

#[inline(always)]
fn add(a: __m256i, b: __m256i) -> __m256i {
    // SAFETY: only called from `#[target_feature(enable = "avx2")]` functions
    // (inlined there), which only run after an `Avx2Token` was obtained.
    unsafe { _mm256_add_epi64(a, b) }
}

#[inline(always)]
fn mul(a: __m256i, b: __m256i) -> __m256i {
    // SAFETY: as in `add`.
    unsafe { _mm256_mul_epu32(a, b) }
}

/// Rank-4 update: `t[col + k + j] += x[k] * y[j]` for `k < 4`, `j < y.len()`.
/// One load/store of each touched column per four products: the point of
/// the 4-row blocking (one row at a time is store bound).
#[target_feature(enable = "avx2")]
#[inline]
fn rect4(t: &mut [__m256i], x: [__m256i; 4], y: &[__m256i]) {
    let m = y.len();
    let edge = |t: &mut [__m256i], c: usize| {
        for (k, &xk) in x.iter().enumerate() {
            if c >= k && c - k < m {
                t[c] = add(t[c], mul(xk, y[c - k]));
            }
        }
    };
    for c in 0..3.min(m + 3) {
        edge(t, c);
    }
    for c in 3..m {
        let s = add(
            add(mul(x[0], y[c]), mul(x[1], y[c - 1])),
            add(mul(x[2], y[c - 2]), mul(x[3], y[c - 3])),
        );
        t[c] = add(t[c], s);
    }
    for c in m.max(3)..m + 3 {
        edge(t, c);
    }
}

/// `t = a * b` (column sums, not normalised).
#[target_feature(enable = "avx2")]
#[inline]
fn mul_wide<const N: usize, const N2: usize>(a: &[__m256i; N], b: &[__m256i; N]) -> [__m256i; N2] {
    let mut t = [_mm256_setzero_si256(); N2];
    let q = N / 4 * 4;
    for i in (0..q).step_by(4) {
        rect4(&mut t[i..], [a[i], a[i + 1], a[i + 2], a[i + 3]], b);
    }
    for i in q..N {
        for j in 0..N {
            t[i + j] = add(t[i + j], mul(a[i], b[j]));
        }
    }
    t
}

/// `t = a^2` (column sums, not normalised): each cross product once, as
/// `(2 a_i) a_j < 2^57`.
#[target_feature(enable = "avx2")]
#[inline]
fn sqr_wide<const N: usize, const N2: usize>(a: &[__m256i; N]) -> [__m256i; N2] {
    let mut t = [_mm256_setzero_si256(); N2];
    let q = N / 4 * 4;
    for i in (0..q).step_by(4) {
        let d: [__m256i; 4] = core::array::from_fn(|k| add(a[i + k], a[i + k]));
        // 4x4 diagonal block.
        for k in 0..4 {
            t[2 * (i + k)] = add(t[2 * (i + k)], mul(a[i + k], a[i + k]));
            for l in (k + 1)..4 {
                t[2 * i + k + l] = add(t[2 * i + k + l], mul(d[k], a[i + l]));
            }
        }
        // Rows i..i+4 against columns j >= i + 4.
        rect4(&mut t[2 * i + 4..], d, &a[i + 4..]);
    }
    for i in q..N {
        let d = add(a[i], a[i]);
        t[2 * i] = add(t[2 * i], mul(a[i], a[i]));
        for j in (i + 1)..N {
            t[i + j] = add(t[i + j], mul(d, a[j]));
        }
    }
    t
}

/// Montgomery reduction of the column sums `t` (`< 4 m^2`): returns
/// `t / R mod m`, normalised, `< 2 m`. Rows are reduced four at a time: the
/// four quotient digits are found sequentially from the low columns, then
/// `m_k * n` is added as one rank-4 update and the low carries propagated.
#[target_feature(enable = "avx2")]
#[inline]
fn redc<const N: usize, const N2: usize>(t: &mut [__m256i; N2], ctx: &Avx2Ctx<N>) -> [__m256i; N] {
    let mask = _mm256_set1_epi64x(MASK as i64);
    let n = &ctx.n;
    let k0 = ctx.k0;
    let digit = |v: __m256i| _mm256_and_si256(mul(v, k0), mask);
    let q = N / 4 * 4;
    for i in (0..q).step_by(4) {
        let v0 = t[i];
        let m0 = digit(v0);
        let c = _mm256_srli_epi64::<28>(add(v0, mul(m0, n[0])));
        let v1 = add(add(t[i + 1], mul(m0, n[1])), c);
        let m1 = digit(v1);
        let c = _mm256_srli_epi64::<28>(add(v1, mul(m1, n[0])));
        let v2 = add(add(add(t[i + 2], mul(m0, n[2])), mul(m1, n[1])), c);
        let m2 = digit(v2);
        let c = _mm256_srli_epi64::<28>(add(v2, mul(m2, n[0])));
        let v3 = add(
            add(
                add(t[i + 3], mul(m0, n[3])),
                add(mul(m1, n[2]), mul(m2, n[1])),
            ),
            c,
        );
        let m3 = digit(v3);
        rect4(&mut t[i..], [m0, m1, m2, m3], n);
        for k in i..i + 4 {
            t[k + 1] = add(t[k + 1], _mm256_srli_epi64::<28>(t[k]));
        }
    }
    for i in q..N {
        let m = digit(t[i]);
        let ti = add(t[i], mul(m, n[0]));
        t[i + 1] = add(t[i + 1], _mm256_srli_epi64::<28>(ti));
        for j in 1..N {
            t[i + j] = add(t[i + j], mul(m, n[j]));
        }
    }
    let mut r = [_mm256_setzero_si256(); N];
    let mut carry = _mm256_setzero_si256();
    for k in 0..N {
        let v = add(t[N + k], carry);
        r[k] = _mm256_and_si256(v, mask);
        carry = _mm256_srli_epi64::<28>(v);
    }
    r
}

#[target_feature(enable = "avx2")]
fn mont_mul<const N: usize, const N2: usize>(
    ctx: &Avx2Ctx<N>,
    a: &[__m256i; N],
    b: &[__m256i; N],
) -> [__m256i; N] {
    let mut t = mul_wide::<N, N2>(a, b);
    redc::<N, N2>(&mut t, ctx)
}

#[target_feature(enable = "avx2")]
fn mont_sqr<const N: usize, const N2: usize>(ctx: &Avx2Ctx<N>, a: &[__m256i; N]) -> [__m256i; N] {
    let mut t = sqr_wide::<N, N2>(a);
    redc::<N, N2>(&mut t, ctx)
}

#[target_feature(enable = "avx2")]
fn select<const N: usize>(table: &[[__m256i; N]], idx: __m256i) -> [__m256i; N] {
    let mut r = [_mm256_setzero_si256(); N];
    for (k, e) in table.iter().enumerate() {
        let mask = _mm256_cmpeq_epi64(idx, _mm256_set1_epi64x(k as i64));
        for l in 0..N {
            r[l] = _mm256_or_si256(r[l], _mm256_and_si256(e[l], mask));
        }
    }
    r
}

impl<const N: usize, const N2: usize> LaneEngine for Avx2Engine<N, N2> {
    type Num = [__m256i; N];
    type Ctx = Avx2Ctx<N>;
    const LANES: usize = LANES;

    fn ctx(&self, jobs: &[&ExpJob<'_>]) -> Avx2Ctx<N> {
        let vals: Vec<&[u64]> = jobs.iter().map(|j| j.modulus).collect();
        let n = self.load(&vals);
        let k0 = to_vec([0, 1, 2, 3].map(|l| jobs[l].n0 & MASK));
        Avx2Ctx { n, k0 }
    }

    fn load(&self, vals: &[&[u64]]) -> [__m256i; N] {
        let mut limbs = [[0u64; N]; LANES];
        for (lane, v) in limbs.iter_mut().zip(vals) {
            to_radix(v, BITS, lane);
        }
        core::array::from_fn(|k| to_vec([0, 1, 2, 3].map(|l| limbs[l][k])))
    }

    fn store(&self, x: &[__m256i; N], out: &mut [&mut [u64]]) {
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

    fn mul(&self, ctx: &Avx2Ctx<N>, a: &[__m256i; N], b: &[__m256i; N]) -> [__m256i; N] {
        // SAFETY: `self` holds an `Avx2Token`, proof that the CPU has AVX2.
        unsafe { mont_mul::<N, N2>(ctx, a, b) }
    }

    fn sqr(&self, ctx: &Avx2Ctx<N>, a: &[__m256i; N]) -> [__m256i; N] {
        // SAFETY: `self` holds an `Avx2Token`, proof that the CPU has AVX2.
        unsafe { mont_sqr::<N, N2>(ctx, a) }
    }

    fn select(&self, table: &[[__m256i; N]], idx: &[u64]) -> [__m256i; N] {
        let idx = to_vec([idx[0], idx[1], idx[2], idx[3]]);
        // SAFETY: `self` holds an `Avx2Token`, proof that the CPU has AVX2.
        unsafe { select::<N>(table, idx) }
    }

    fn wipe(&self, x: &mut [__m256i; N]) {
        // SAFETY: `self` holds an `Avx2Token`, proof that the CPU has AVX2.
        *x = unsafe { zero::<N>() };
        core::hint::black_box(x);
    }
}
