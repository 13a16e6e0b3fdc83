//! AVX-512 IFMA backend: vertical radix-2^52 Montgomery arithmetic, 8 lanes
//! per `zmm`, products with `vpmadd52luq` / `vpmadd52huq`.
//!
//! A number of `L` 64-bit limbs uses `N = ceil((64 L + 2) / 52)` limbs of 52
//! bits (20 for 1024-bit moduli), so `R = 2^(52 N) > 4 m` and products stay
//! almost reduced (`< 2 m`). Each 52x52-bit product adds its low half to
//! column `i + j` and its high half to column `i + j + 1`; columns collect at
//! most `4 N` terms below `2^52` (`< 2^60`) before the single normalisation per
//! multiplication. Squaring computes cross products once, doubles the
//! columns, then adds the diagonal.

use core::arch::x86_64::*;

use crate::bigint::{from_radix, to_radix};
use crate::engine::{ExpJob, LaneEngine};
use crate::IfmaToken;

const BITS: u32 = 52;
const MASK: u64 = (1 << BITS) - 1;
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

/// `t = a * b` as column sums of 52-bit halves (not normalised).
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
fn mul_wide<const N: usize, const N2: usize>(a: &[__m512i; N], b: &[__m512i; N]) -> [__m512i; N2] {
    let mut t = [_mm512_setzero_si512(); N2];
    for i in 0..N {
        let ai = a[i];
        for j in 0..N {
            t[i + j] = _mm512_madd52lo_epu64(t[i + j], ai, b[j]);
            t[i + j + 1] = _mm512_madd52hi_epu64(t[i + j + 1], ai, b[j]);
        }
    }
    t
}

/// `t = a^2` as column sums (not normalised).
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
fn sqr_wide<const N: usize, const N2: usize>(a: &[__m512i; N]) -> [__m512i; N2] {
    let mut t = [_mm512_setzero_si512(); N2];
    for i in 0..N {
        let ai = a[i];
        for j in (i + 1)..N {
            t[i + j] = _mm512_madd52lo_epu64(t[i + j], ai, a[j]);
            t[i + j + 1] = _mm512_madd52hi_epu64(t[i + j + 1], ai, a[j]);
        }
    }
    for x in t.iter_mut() {
        *x = _mm512_add_epi64(*x, *x);
    }
    for i in 0..N {
        let ai = a[i];
        t[2 * i] = _mm512_madd52lo_epu64(t[2 * i], ai, ai);
        t[2 * i + 1] = _mm512_madd52hi_epu64(t[2 * i + 1], ai, ai);
    }
    t
}

/// Montgomery reduction of the column sums `t` (value `< 4 m^2`): returns
/// `t / R mod m`, normalised, `< 2 m`.
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
fn redc<const N: usize, const N2: usize>(t: &mut [__m512i; N2], ctx: &IfmaCtx<N>) -> [__m512i; N] {
    let n = &ctx.n;
    let zero = _mm512_setzero_si512();
    for i in 0..N {
        // m = t_i * k0 mod 2^52 (vpmadd52luq reads the low 52 bits of t_i).
        let m = _mm512_madd52lo_epu64(zero, t[i], ctx.k0);
        let ti = _mm512_madd52lo_epu64(t[i], m, n[0]);
        t[i + 1] = _mm512_madd52hi_epu64(t[i + 1], m, n[0]);
        t[i + 1] = _mm512_add_epi64(t[i + 1], _mm512_srli_epi64::<52>(ti));
        for j in 1..N {
            t[i + j] = _mm512_madd52lo_epu64(t[i + j], m, n[j]);
            t[i + j + 1] = _mm512_madd52hi_epu64(t[i + j + 1], m, n[j]);
        }
    }
    let mask = _mm512_set1_epi64(MASK as i64);
    let mut r = [zero; N];
    let mut carry = zero;
    for k in 0..N {
        let v = _mm512_add_epi64(t[N + k], carry);
        r[k] = _mm512_and_si512(v, mask);
        carry = _mm512_srli_epi64::<52>(v);
    }
    r
}

#[target_feature(enable = "avx512f,avx512ifma")]
fn mont_mul<const N: usize, const N2: usize>(
    ctx: &IfmaCtx<N>,
    a: &[__m512i; N],
    b: &[__m512i; N],
) -> [__m512i; N] {
    let mut t = mul_wide::<N, N2>(a, b);
    redc::<N, N2>(&mut t, ctx)
}

#[target_feature(enable = "avx512f,avx512ifma")]
fn mont_sqr<const N: usize, const N2: usize>(ctx: &IfmaCtx<N>, a: &[__m512i; N]) -> [__m512i; N] {
    let mut t = sqr_wide::<N, N2>(a);
    redc::<N, N2>(&mut t, ctx)
}

#[target_feature(enable = "avx512f,avx512ifma")]
fn select<const N: usize>(table: &[[__m512i; N]], idx: __m512i) -> [__m512i; N] {
    let mut r = [_mm512_setzero_si512(); N];
    for (k, e) in table.iter().enumerate() {
        let mask = _mm512_cmpeq_epi64_mask(idx, _mm512_set1_epi64(k as i64));
        for l in 0..N {
            r[l] = _mm512_mask_mov_epi64(r[l], mask, e[l]);
        }
    }
    r
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
        // SAFETY: `self` holds an `IfmaToken`, proof that the CPU has
        // AVX-512F and AVX-512 IFMA.
        unsafe { mont_mul::<N, N2>(ctx, a, b) }
    }

    fn sqr(&self, ctx: &IfmaCtx<N>, a: &[__m512i; N]) -> [__m512i; N] {
        // SAFETY: `self` holds an `IfmaToken` (AVX-512F + IFMA present).
        unsafe { mont_sqr::<N, N2>(ctx, a) }
    }

    fn select(&self, table: &[[__m512i; N]], idx: &[u64]) -> [__m512i; N] {
        let idx = to_vec(core::array::from_fn(|l| idx[l]));
        // SAFETY: `self` holds an `IfmaToken` (AVX-512F + IFMA present).
        unsafe { select::<N>(table, idx) }
    }

    fn wipe(&self, x: &mut [__m512i; N]) {
        // SAFETY: `self` holds an `IfmaToken` (AVX-512F + IFMA present).
        *x = unsafe { zero::<N>() };
        core::hint::black_box(x);
    }
}
