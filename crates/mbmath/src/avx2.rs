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

/// `t = a * b` (column sums, not normalised).
#[target_feature(enable = "avx2")]
#[inline]
fn mul_wide<const N: usize, const N2: usize>(a: &[__m256i; N], b: &[__m256i; N]) -> [__m256i; N2] {
    let mut t = [_mm256_setzero_si256(); N2];
    for i in 0..N {
        let ai = a[i];
        for j in 0..N {
            t[i + j] = _mm256_add_epi64(t[i + j], _mm256_mul_epu32(ai, b[j]));
        }
    }
    t
}

/// `t = a^2` (column sums, not normalised).
#[target_feature(enable = "avx2")]
#[inline]
fn sqr_wide<const N: usize, const N2: usize>(a: &[__m256i; N]) -> [__m256i; N2] {
    let mut t = [_mm256_setzero_si256(); N2];
    for i in 0..N {
        let ai = a[i];
        let ai2 = _mm256_add_epi64(ai, ai);
        t[2 * i] = _mm256_add_epi64(t[2 * i], _mm256_mul_epu32(ai, ai));
        for j in (i + 1)..N {
            t[i + j] = _mm256_add_epi64(t[i + j], _mm256_mul_epu32(ai2, a[j]));
        }
    }
    t
}

/// Montgomery reduction of the column sums `t` (`< 4 m^2`): returns
/// `t / R mod m`, normalised, `< 2 m`.
#[target_feature(enable = "avx2")]
#[inline]
fn redc<const N: usize, const N2: usize>(t: &mut [__m256i; N2], ctx: &Avx2Ctx<N>) -> [__m256i; N] {
    let mask = _mm256_set1_epi64x(MASK as i64);
    let n = &ctx.n;
    for i in 0..N {
        // m = t_i * k0 mod 2^28 (vpmuludq reads the low 32 bits of t_i).
        let m = _mm256_and_si256(_mm256_mul_epu32(t[i], ctx.k0), mask);
        let ti = _mm256_add_epi64(t[i], _mm256_mul_epu32(m, n[0]));
        t[i + 1] = _mm256_add_epi64(t[i + 1], _mm256_srli_epi64::<28>(ti));
        for j in 1..N {
            t[i + j] = _mm256_add_epi64(t[i + j], _mm256_mul_epu32(m, n[j]));
        }
    }
    let mut r = [_mm256_setzero_si256(); N];
    let mut carry = _mm256_setzero_si256();
    for k in 0..N {
        let v = _mm256_add_epi64(t[N + k], carry);
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
