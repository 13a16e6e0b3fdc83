//! AVX2 backend: vertical radix-2^28 Montgomery arithmetic, 8 lanes as two
//! interleaved groups of 4 (one `ymm` per group and limb, one 64-bit element
//! per lane), products with `vpmuludq`.
//!
//! A number of `L` 64-bit limbs uses `N = ceil((64 L + 2) / 28)` limbs of 28
//! bits (37 for 1024-bit moduli), so `R = 2^(28 N) > 4 m` and Montgomery
//! products can stay "almost reduced" (`< 2 m`) without a final subtraction.
//! Carries are lazy: the `2 N`-column product/reduction accumulators collect
//! up to `2 N` products below `2^56` each (`< 2^63.3` for `N <= 74`), and are
//! normalised to 28 bits once per multiplication. Squaring computes each cross
//! product once (`2 a_i` times `a_j`, `< 2^57`).
//!
//! Two groups: a number of each of the 8 lanes is two arrays of `N` `ymm`
//! (group A = lanes 0-3, group B = lanes 4-7). The product passes run per
//! group (they are throughput bound); the reduction finds the quotient digits
//! of both groups side by side ([`W`] pairs), so the two serial digit chains
//! (`vpmulld`, mask, `vpmuludq`, add, shift per digit) overlap.
//!
//! Where the time went (1024-bit, Zen 4), and what changed against the
//! previous 4-lane version (~164 / 143 ns per lane for mul / sqr, now ~142 /
//! 118):
//!
//! * rank-4 updates keep the `y` window in registers instead of four memory
//!   operands per column;
//! * the reduction block's four low columns are not written back: the digit
//!   chain already has their carry, which goes to the next column directly
//!   (no store/load round trip, no separate carry pass);
//! * the column sums live in a scratch buffer of the engine whose first
//!   product block writes instead of adding: no 2.4 KB memset per product;
//! * digits with `vpmulld` (LLVM otherwise turned `(v k0) mod 2^28` with
//!   `vpmuludq` into a 64-bit product emulation);
//! * the final carry chains of the two groups run side by side.
//!
//! Outside the kernels: results are written in place (`sqr_assign` /
//! `mul_assign`, no 2.4 KB copy per call: ~137 / 112 ns), and the window
//! table is packed two entries per element, limb-major ([`pack`]).
//!
//! Interleaving the two groups everywhere (pairs in every loop) or software
//! pipelining the reduction (digits of one group during the other's update)
//! measured no faster: the loops run at ~0.6 cycles per product, close to the
//! `vpmuludq` + `vpaddq` issue limit (0.53 measured).

use core::arch::x86_64::*;
use core::cell::RefCell;

use crate::bigint::{from_radix, to_radix};
use crate::engine::{ExpJob, LaneEngine, WINDOW};
use crate::m256::{from_vec, to_vec};
use crate::token::Avx2Token;

const BITS: u32 = 28;
const MASK: u64 = (1 << BITS) - 1;
/// Lanes per `ymm` (one group).
const GL: usize = 4;
const LANES: usize = 2 * GL;

/// One limb of the two groups: `[A, B]`.
type W = [__m256i; 2];

/// A number of each lane: group A (lanes 0-3) then group B (lanes 4-7).
type Num<const N: usize> = [[__m256i; N]; 2];

/// AVX2 engine for `N` radix-2^28 limbs (`N2 = 2 N`, a separate parameter
/// because stable Rust cannot compute array lengths from generics).
pub(crate) struct Avx2Engine<const N: usize, const N2: usize> {
    _token: Avx2Token,
    /// Column sums of both groups, reused by every product (fully
    /// overwritten each time, so never zeroed).
    scratch: RefCell<[[__m256i; N2]; 2]>,
}

impl<const N: usize, const N2: usize> Avx2Engine<N, N2> {
    pub(crate) fn new(token: Avx2Token) -> Self {
        assert_eq!(N2, 2 * N);
        // SAFETY: `token` proves AVX2.
        let zero = unsafe { zero::<N2>() };
        Avx2Engine {
            _token: token,
            scratch: RefCell::new(zero),
        }
    }
}

pub(crate) struct Avx2Ctx<const N: usize> {
    n: Num<N>,
    k0: W,
}

/// Both groups' lanes of `x[0..8]`.
#[inline]
fn to_w(x: [u64; LANES]) -> W {
    [
        to_vec([x[0], x[1], x[2], x[3]]),
        to_vec([x[4], x[5], x[6], x[7]]),
    ]
}

#[target_feature(enable = "avx2")]
fn zero<const N: usize>() -> Num<N> {
    [[_mm256_setzero_si256(); N]; 2]
}

#[inline(always)]
fn add1(a: __m256i, b: __m256i) -> __m256i {
    // SAFETY: only called from `#[target_feature(enable = "avx2")]` functions
    // (inlined there), which only run after an `Avx2Token` was obtained.
    unsafe { _mm256_add_epi64(a, b) }
}

#[inline(always)]
fn mul1(a: __m256i, b: __m256i) -> __m256i {
    // SAFETY: as in `add1`.
    unsafe { _mm256_mul_epu32(a, b) }
}

#[inline(always)]
fn add(a: W, b: W) -> W {
    // SAFETY: only called from `#[target_feature(enable = "avx2")]` functions
    // (inlined there), which only run after an `Avx2Token` was obtained.
    unsafe { [_mm256_add_epi64(a[0], b[0]), _mm256_add_epi64(a[1], b[1])] }
}

#[inline(always)]
fn mul(a: W, b: W) -> W {
    // SAFETY: as in `add`.
    unsafe { [_mm256_mul_epu32(a[0], b[0]), _mm256_mul_epu32(a[1], b[1])] }
}

#[inline(always)]
fn and(a: W, b: __m256i) -> W {
    // SAFETY: as in `add`.
    unsafe { [_mm256_and_si256(a[0], b), _mm256_and_si256(a[1], b)] }
}

#[inline(always)]
fn shr(a: W) -> W {
    // SAFETY: as in `add`.
    unsafe { [_mm256_srli_epi64::<28>(a[0]), _mm256_srli_epi64::<28>(a[1])] }
}

/// Rank-4 update of the columns `from <= c < y.len() + 3` (`from` is 0, or 4
/// when the caller has already accounted for the lowest four):
/// `t[c] += sum_k x[k] * y[c - k]` over `k < 4`, `0 <= c - k < y.len()`.
///
/// The full columns keep the `y` window in registers (four columns per step,
/// so each `y` limb is loaded once and no register moves are needed): per four
/// products one `y` load and one column load/store. With memory operands
/// instead (five loads per four products) the engine was load bound.
#[inline(always)]
fn rect4<const INIT: bool>(t: &mut [__m256i], x: [__m256i; 4], y: &[__m256i], from: usize) {
    let m = y.len();
    debug_assert!(from == 0 || (from == 4 && m >= 4 && !INIT));
    let t = &mut t[..m + 3];
    for c in from..3.min(m + 3) {
        put::<INIT>(t, c, edge(&x, y, c));
    }
    let dot = |a: __m256i, b: __m256i, c: __m256i, d: __m256i| {
        add1(
            add1(mul1(x[0], a), mul1(x[1], b)),
            add1(mul1(x[2], c), mul1(x[3], d)),
        )
    };
    let mut c = from.max(3);
    let (mut w1, mut w2, mut w3) = match y.get(c.wrapping_sub(3)..c) {
        Some(&[a, b, c]) => (c, b, a),
        _ => (x[0], x[0], x[0]), // unused: m < c + 4
    };
    while c + 4 <= m {
        let (y0, y1, y2, y3) = (y[c], y[c + 1], y[c + 2], y[c + 3]);
        put::<INIT>(t, c, dot(y0, w1, w2, w3));
        put::<INIT>(t, c + 1, dot(y1, y0, w1, w2));
        put::<INIT>(t, c + 2, dot(y2, y1, y0, w1));
        put::<INIT>(t, c + 3, dot(y3, y2, y1, y0));
        (w1, w2, w3) = (y3, y2, y1);
        c += 4;
    }
    for c in c..m {
        put::<INIT>(t, c, dot(y[c], y[c - 1], y[c - 2], y[c - 3]));
    }
    for c in m.max(from).max(3)..m + 3 {
        put::<INIT>(t, c, edge(&x, y, c));
    }
}

/// `t[c] = s` (the column's first contribution) or `t[c] += s`.
#[inline(always)]
fn put<const INIT: bool>(t: &mut [__m256i], c: usize, s: __m256i) {
    t[c] = if INIT { s } else { add1(t[c], s) };
}

/// The products of column `c` of a rank-4 update where some `y[c - k]` are
/// out of range (at least one is in range). A function, not a closure:
/// closures cannot be forced inline, and an out-of-line one is compiled
/// without AVX2.
#[inline(always)]
fn edge(x: &[__m256i; 4], y: &[__m256i], c: usize) -> __m256i {
    let mut s = None;
    for (k, &xk) in x.iter().enumerate() {
        if c >= k && c - k < y.len() {
            let p = mul1(xk, y[c - k]);
            s = Some(s.map_or(p, |s| add1(s, p)));
        }
    }
    s.unwrap_or(x[0])
}

/// `t = a * b` (column sums, not normalised; every column of `t` is
/// written, its previous contents are ignored), one group.
#[target_feature(enable = "avx2")]
#[inline]
fn mul_wide<const N: usize, const N2: usize>(
    t: &mut [__m256i; N2],
    a: &[__m256i; N],
    b: &[__m256i; N],
) {
    // The first block writes columns 0..N+3, so only the rest is zeroed.
    rect4::<true>(&mut t[..], [a[0], a[1], a[2], a[3]], b, 0);
    t[N + 3..].fill(_mm256_setzero_si256());
    let q = N / 4 * 4;
    for i in (4..q).step_by(4) {
        rect4::<false>(&mut t[i..], [a[i], a[i + 1], a[i + 2], a[i + 3]], b, 0);
    }
    for i in q..N {
        for j in 0..N {
            t[i + j] = add1(t[i + j], mul1(a[i], b[j]));
        }
    }
}

/// `t = a^2` (column sums, not normalised; every column of `t` is written,
/// its previous contents are ignored), one group: each cross product once,
/// as `(2 a_i) a_j < 2^57`.
#[target_feature(enable = "avx2")]
#[inline]
fn sqr_wide<const N: usize, const N2: usize>(t: &mut [__m256i; N2], a: &[__m256i; N]) {
    // Block 0's rank-4 part writes columns 4..N+3; the rest is zeroed.
    let d: [__m256i; 4] = [a[0], a[1], a[2], a[3]].map(|v| add1(v, v));
    rect4::<true>(&mut t[4..], d, &a[4..], 0);
    t[..4].fill(_mm256_setzero_si256());
    t[N + 3..].fill(_mm256_setzero_si256());
    let q = N / 4 * 4;
    for i in (0..q).step_by(4) {
        let d: [__m256i; 4] = core::array::from_fn(|k| add1(a[i + k], a[i + k]));
        // 4x4 diagonal block.
        for k in 0..4 {
            t[2 * (i + k)] = add1(t[2 * (i + k)], mul1(a[i + k], a[i + k]));
            for l in (k + 1)..4 {
                t[2 * i + k + l] = add1(t[2 * i + k + l], mul1(d[k], a[i + l]));
            }
        }
        // Rows i..i+4 against columns j >= i + 4 (block 0: done above).
        if i > 0 {
            rect4::<false>(&mut t[2 * i + 4..], d, &a[i + 4..], 0);
        }
    }
    for i in q..N {
        let d = add1(a[i], a[i]);
        t[2 * i] = add1(t[2 * i], mul1(a[i], a[i]));
        for j in (i + 1)..N {
            t[i + j] = add1(t[i + j], mul1(d, a[j]));
        }
    }
}

/// Montgomery reduction of the column sums `t` (`< 4 m^2`) of both groups:
/// returns `t / R mod m`, normalised, `< 2 m`. Rows are reduced four at a
/// time: the four quotient digits are found sequentially from the low
/// columns (both groups' chains side by side, so they overlap), then
/// `m_k * n` is added to the columns above the block as one rank-4 update per
/// group, with the block's carry (the block's own columns are not written).
#[target_feature(enable = "avx2")]
#[inline]
fn redc<const N: usize, const N2: usize>(
    t: &mut [[__m256i; N2]; 2],
    ctx: &Avx2Ctx<N>,
    r: &mut Num<N>,
) {
    let mask = _mm256_set1_epi64x(MASK as i64);
    let n = &ctx.n;
    let nw = |j: usize| [n[0][j], n[1][j]];
    let tw = |t: &[[__m256i; N2]; 2], j: usize| [t[0][j], t[1][j]];
    let k0 = ctx.k0;
    // `(v k0) mod 2^28` needs only the low 32 bits of each 64-bit lane:
    // `vpmulld` (the high halves multiply k0's zero high half).
    let digit = |v: W| {
        and(
            [
                _mm256_mullo_epi32(v[0], k0[0]),
                _mm256_mullo_epi32(v[1], k0[1]),
            ],
            mask,
        )
    };
    let q = N / 4 * 4;
    for i in (0..q).step_by(4) {
        let v0 = tw(t, i);
        let m0 = digit(v0);
        let c = shr(add(v0, mul(m0, nw(0))));
        let v1 = add(add(tw(t, i + 1), mul(m0, nw(1))), c);
        let m1 = digit(v1);
        let c = shr(add(v1, mul(m1, nw(0))));
        let v2 = add(add(add(tw(t, i + 2), mul(m0, nw(2))), mul(m1, nw(1))), c);
        let m2 = digit(v2);
        let c = shr(add(v2, mul(m2, nw(0))));
        let v3 = add(
            add(
                add(tw(t, i + 3), mul(m0, nw(3))),
                add(mul(m1, nw(2)), mul(m2, nw(1))),
            ),
            c,
        );
        let m3 = digit(v3);
        // Columns i..i+4 are now multiples of 2^28; their carry goes to
        // column i + 4 directly (not through memory), and the rank-4 update
        // skips them.
        let c4 = shr(add(v3, mul(m3, nw(0))));
        for g in 0..2 {
            let tg = &mut t[g];
            tg[i + 4] = add1(tg[i + 4], c4[g]);
            rect4::<false>(&mut tg[i..], [m0[g], m1[g], m2[g], m3[g]], &n[g], 4);
        }
    }
    for i in q..N {
        let m = digit(tw(t, i));
        for g in 0..2 {
            let tg = &mut t[g];
            let ti = add1(tg[i], mul1(m[g], n[g][0]));
            tg[i + 1] = add1(tg[i + 1], _mm256_srli_epi64::<28>(ti));
            for j in 1..N {
                tg[i + j] = add1(tg[i + j], mul1(m[g], n[g][j]));
            }
        }
    }
    // Carry normalisation: a serial chain per group, the two side by side.
    let mut carry = [_mm256_setzero_si256(); 2];
    let [ra, rb] = r;
    for (k, (ra, rb)) in ra.iter_mut().zip(rb.iter_mut()).enumerate() {
        let v = add(tw(t, N + k), carry);
        *ra = _mm256_and_si256(v[0], mask);
        *rb = _mm256_and_si256(v[1], mask);
        carry = shr(v);
    }
}

/// `out = a b / R mod m` (`out` may be `a`'s storage: `a` is read first).
#[target_feature(enable = "avx2")]
fn mont_mul<const N: usize, const N2: usize>(
    t: &mut [[__m256i; N2]; 2],
    ctx: &Avx2Ctx<N>,
    a: &Num<N>,
    b: &Num<N>,
    out: &mut Num<N>,
) {
    for g in 0..2 {
        mul_wide::<N, N2>(&mut t[g], &a[g], &b[g]);
    }
    redc::<N, N2>(t, ctx, out)
}

/// `x = x^2 / R mod m`.
#[target_feature(enable = "avx2")]
fn mont_sqr<const N: usize, const N2: usize>(
    t: &mut [[__m256i; N2]; 2],
    ctx: &Avx2Ctx<N>,
    x: &mut Num<N>,
) {
    for g in 0..2 {
        sqr_wide::<N, N2>(&mut t[g], &x[g]);
    }
    redc::<N, N2>(t, ctx, x)
}

/// `x = x b / R mod m`.
#[target_feature(enable = "avx2")]
fn mont_mul_assign<const N: usize, const N2: usize>(
    t: &mut [[__m256i; N2]; 2],
    ctx: &Avx2Ctx<N>,
    x: &mut Num<N>,
    b: &Num<N>,
) {
    for g in 0..2 {
        mul_wide::<N, N2>(&mut t[g], &x[g], &b[g]);
    }
    redc::<N, N2>(t, ctx, x)
}

#[target_feature(enable = "avx2")]
fn select<const N: usize>(table: &[Num<N>], idx: W) -> Num<N> {
    let mut r = [[_mm256_setzero_si256(); N]; 2];
    for (k, e) in table.iter().enumerate() {
        let kk = _mm256_set1_epi64x(k as i64);
        for g in 0..2 {
            let mask = _mm256_cmpeq_epi64(idx[g], kk);
            for l in 0..N {
                r[g][l] = _mm256_or_si256(r[g][l], _mm256_and_si256(e[g][l], mask));
            }
        }
    }
    r
}

/// Packs a table of `2 h` entries into `h` numbers' worth of memory, limb
/// major: element `(g N + l) h + k` of the flattened result holds limb `l`
/// (group `g`) of entry `k` in its low 32 bits and of entry `k + h` in its
/// high 32 bits (limbs are `< 2^28`). The per-window scan then reads half the
/// bytes (the 32-entry 1024-bit table is 37 KB packed, 75 KB unpacked: more
/// than L1 either way) in nearly sequential order.
#[target_feature(enable = "avx2")]
fn pack<const N: usize>(table: &[Num<N>]) -> Vec<Num<N>> {
    let h = table.len() / 2;
    let mut packed = vec![[[_mm256_setzero_si256(); N]; 2]; h];
    let flat = packed.as_flattened_mut().as_flattened_mut();
    for g in 0..2 {
        for l in 0..N {
            for k in 0..h {
                flat[(g * N + l) * h + k] =
                    _mm256_or_si256(table[k][g][l], _mm256_slli_epi64::<32>(table[k + h][g][l]));
            }
        }
    }
    packed
}

/// Limbs per chunk of [`select_packed`]: the chunk's accumulators stay in
/// registers (13 + the mask).
const SEL_CHUNK: usize = 13;

/// Constant-time scan of a [`pack`]ed table: every element is read and
/// masked. `idx2` holds each lane's index in both 32-bit halves. Every limb
/// of `r` is written.
#[target_feature(enable = "avx2")]
fn select_packed<const N: usize>(packed: &[Num<N>], idx2: W, r: &mut Num<N>) {
    let h = packed.len();
    let flat = packed.as_flattened().as_flattened();
    let low = _mm256_set1_epi64x(0xffff_ffff);
    for g in 0..2 {
        // Mask of entry k: 32-bit halves all ones where the lane's index is
        // k (low) or k + h (high); at most one half of one entry is set.
        let mut masks = [_mm256_setzero_si256(); 1 << (WINDOW - 1)];
        let masks = &mut masks[..h];
        for (k, m) in masks.iter_mut().enumerate() {
            let k = k as i64;
            *m = _mm256_cmpeq_epi32(idx2[g], _mm256_set1_epi64x(k | ((k + h as i64) << 32)));
        }
        // Chunks of SEL_CHUNK limbs; the last one overlaps the previous
        // (recomputing the same values) when N is not a multiple.
        let mut l0 = 0;
        loop {
            let s = l0.min(N - SEL_CHUNK);
            let base = &flat[(g * N + s) * h..(g * N + s + SEL_CHUNK) * h];
            let mut acc = [_mm256_setzero_si256(); SEL_CHUNK];
            for (k, &m) in masks.iter().enumerate() {
                for (j, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_or_si256(*a, _mm256_and_si256(base[j * h + k], m));
                }
            }
            for (j, &a) in acc.iter().enumerate() {
                r[g][s + j] = _mm256_or_si256(_mm256_and_si256(a, low), _mm256_srli_epi64::<32>(a));
            }
            l0 += SEL_CHUNK;
            if l0 >= N {
                break;
            }
        }
    }
}

impl<const N: usize, const N2: usize> LaneEngine for Avx2Engine<N, N2> {
    type Num = Num<N>;
    type Ctx = Avx2Ctx<N>;
    const LANES: usize = LANES;

    fn ctx(&self, jobs: &[&ExpJob<'_>]) -> Avx2Ctx<N> {
        let vals: Vec<&[u64]> = jobs.iter().map(|j| j.modulus).collect();
        let n = self.load(&vals);
        let k0 = to_w(core::array::from_fn(|l| jobs[l].n0 & MASK));
        Avx2Ctx { n, k0 }
    }

    fn load(&self, vals: &[&[u64]]) -> Num<N> {
        let mut limbs = [[0u64; N]; LANES];
        for (lane, v) in limbs.iter_mut().zip(vals) {
            to_radix(v, BITS, lane);
        }
        core::array::from_fn(|g| {
            core::array::from_fn(|k| to_vec(core::array::from_fn(|l| limbs[g * GL + l][k])))
        })
    }

    fn store(&self, x: &Num<N>, out: &mut [&mut [u64]]) {
        let mut limbs = [[0u64; N]; LANES];
        for (g, xg) in x.iter().enumerate() {
            for (k, &v) in xg.iter().enumerate() {
                for (l, w) in from_vec(v).into_iter().enumerate() {
                    limbs[g * GL + l][k] = w;
                }
            }
        }
        for (o, lane) in out.iter_mut().zip(&limbs) {
            from_radix(lane, BITS, o);
        }
    }

    fn mul(&self, ctx: &Avx2Ctx<N>, a: &Num<N>, b: &Num<N>) -> Num<N> {
        let mut r = *a;
        // SAFETY: `self` holds an `Avx2Token`, proof that the CPU has AVX2.
        unsafe { mont_mul::<N, N2>(&mut self.scratch.borrow_mut(), ctx, a, b, &mut r) };
        r
    }

    fn sqr(&self, ctx: &Avx2Ctx<N>, a: &Num<N>) -> Num<N> {
        let mut r = *a;
        // SAFETY: `self` holds an `Avx2Token`, proof that the CPU has AVX2.
        unsafe { mont_sqr::<N, N2>(&mut self.scratch.borrow_mut(), ctx, &mut r) };
        r
    }

    fn mul_assign(&self, ctx: &Avx2Ctx<N>, x: &mut Num<N>, b: &Num<N>) {
        // SAFETY: `self` holds an `Avx2Token`, proof that the CPU has AVX2.
        unsafe { mont_mul_assign::<N, N2>(&mut self.scratch.borrow_mut(), ctx, x, b) }
    }

    fn sqr_assign(&self, ctx: &Avx2Ctx<N>, x: &mut Num<N>) {
        // SAFETY: `self` holds an `Avx2Token`, proof that the CPU has AVX2.
        unsafe { mont_sqr::<N, N2>(&mut self.scratch.borrow_mut(), ctx, x) }
    }

    fn select(&self, table: &[Num<N>], idx: &[u64]) -> Num<N> {
        let idx = to_w(core::array::from_fn(|l| idx[l]));
        // SAFETY: `self` holds an `Avx2Token`, proof that the CPU has AVX2.
        unsafe { select::<N>(table, idx) }
    }

    fn pack_table(&self, mut table: Vec<Num<N>>) -> Vec<Num<N>> {
        assert!(table.len().is_multiple_of(2));
        // SAFETY: `self` holds an `Avx2Token`, proof that the CPU has AVX2.
        let packed = unsafe { pack::<N>(&table) };
        for t in table.iter_mut() {
            self.wipe(t);
        }
        packed
    }

    fn select_packed(&self, packed: &[Num<N>], idx: &[u64], out: &mut Num<N>) {
        let idx = to_w(core::array::from_fn(|l| idx[l] | (idx[l] << 32)));
        // SAFETY: `self` holds an `Avx2Token`, proof that the CPU has AVX2.
        unsafe { select_packed::<N>(packed, idx, out) }
    }

    fn wipe(&self, x: &mut Num<N>) {
        // SAFETY: `self` holds an `Avx2Token`, proof that the CPU has AVX2.
        *x = unsafe { zero::<N>() };
        core::hint::black_box(x);
    }
}
