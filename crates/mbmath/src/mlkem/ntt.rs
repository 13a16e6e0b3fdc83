//! ML-KEM-768's K-PKE.Encrypt arithmetic (FIPS 203, Algorithm 14, lines 18-21: `NTT(y)`,
//! `A_hat^T y_hat`, `t_hat^T y_hat`, the inverse NTTs and the sums) written once over a
//! "coefficient" type [`Coeff`]: a `u32` (one encapsulation at a time, the portable
//! reference) or 8 `u32` lanes of a `ymm` (`mlkem::avx2`: 8 encapsulations side by side, lane
//! `l` holding encapsulation `l`'s coefficient: the "vertical" layout of the RSA and X25519
//! kernels, so the NTT has no shuffles).
//!
//! Arithmetic mod `q` in Montgomery form with `R = 2^16`: [`Coeff::mont_mul`] gives
//! `a b R^-1 mod q`, canonical, for `a, b < q`; twiddles are stored times `R`, so multiplying
//! by one is exact. A product in the NTT domain carries a factor `R^-1`, which the inverse
//! NTT's final scaling (`128^-1 R^2`) removes.
//!
//! Constant time: every value stays in `[0, q)` by a masked (`u32`) or `vpminud` conditional
//! subtraction; no branch or index depends on a coefficient (the loops and twiddle indices are
//! fixed).

use crate::mlkem::poly::{csub, Poly, N, Q};

/// Module rank of ML-KEM-768.
pub(crate) const K: usize = 3;

/// `-q^-1 mod 2^16`.
const QINV_NEG: u32 = 3327;
/// `2^16 mod q`.
const MONT: u32 = 2285;

const fn pow17(mut e: u32) -> u32 {
    let (mut r, mut b) = (1u32, 17u32);
    while e > 0 {
        if e & 1 == 1 {
            r = r * b % Q;
        }
        b = b * b % Q;
        e >>= 1;
    }
    r
}

const fn bitrev7(i: u32) -> u32 {
    (i.reverse_bits() >> 25) & 0x7f
}

/// `17^BitRev7(i) R mod q` (FIPS 203, Appendix A, in Montgomery form).
const ZETAS: [u32; 128] = {
    let mut z = [0u32; 128];
    let mut i = 0;
    while i < 128 {
        z[i] = pow17(bitrev7(i as u32)) * MONT % Q;
        i += 1;
    }
    z
};

/// `17^(2 BitRev7(i) + 1) R mod q`: the base-case products' `gamma`.
const GAMMAS: [u32; 128] = {
    let mut z = [0u32; 128];
    let mut i = 0;
    while i < 128 {
        z[i] = pow17(2 * bitrev7(i as u32) + 1) * MONT % Q;
        i += 1;
    }
    z
};

/// `128^-1 R^2 mod q`: the inverse NTT's scaling, which also removes the `R^-1` of a product.
const INV128_R2: u32 = 3303 * MONT % Q * MONT % Q;

/// One coefficient, or one per lane; values in `[0, q)`.
pub(crate) trait Coeff: Copy {
    /// Lanes.
    const WIDTH: usize;
    /// `x` in every lane.
    fn splat(x: u32) -> Self;
    /// `a + b mod q`.
    fn add(self, b: Self) -> Self;
    /// `a - b mod q`.
    fn sub(self, b: Self) -> Self;
    /// `a b 2^-16 mod q`.
    fn mont_mul(self, b: Self) -> Self;
    /// The `N * WIDTH` lanes of a polynomial as `u32`s: coefficient `k` of lane `l` at
    /// `k * WIDTH + l`.
    fn flat(p: &[Self; N]) -> &[u32];
    /// As [`Coeff::flat`], writable (values must stay below `q`).
    fn flat_mut(p: &mut [Self; N]) -> &mut [u32];
}

impl Coeff for u32 {
    const WIDTH: usize = 1;
    #[inline(always)]
    fn splat(x: u32) -> Self {
        x
    }
    #[inline(always)]
    fn add(self, b: Self) -> Self {
        csub(self + b)
    }
    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        csub(self + Q - b)
    }
    #[inline(always)]
    fn mont_mul(self, b: Self) -> Self {
        // x < q^2 < 2^24; x + t q < 2^28; the result is below q + 2^8 < 2q.
        let x = self * b;
        let t = x.wrapping_mul(QINV_NEG) & 0xffff;
        csub((x + t * Q) >> 16)
    }
    fn flat(p: &[Self; N]) -> &[u32] {
        p
    }
    fn flat_mut(p: &mut [Self; N]) -> &mut [u32] {
        p
    }
}

/// The NTT (FIPS 203, Algorithm 9), in place.
#[inline(always)]
pub(crate) fn ntt<W: Coeff>(f: &mut [W; N]) {
    let mut k = 1;
    let mut len = 128;
    while len >= 2 {
        for start in (0..N).step_by(2 * len) {
            let zeta = W::splat(ZETAS[k]);
            k += 1;
            for j in start..start + len {
                let t = f[j + len].mont_mul(zeta);
                f[j + len] = f[j].sub(t);
                f[j] = f[j].add(t);
            }
        }
        len /= 2;
    }
}

/// The inverse NTT (FIPS 203, Algorithm 10) of `f R^-1` (a product's output), in place: the
/// result is exact.
#[inline(always)]
pub(crate) fn intt_of_product<W: Coeff>(f: &mut [W; N]) {
    let mut k = 127;
    let mut len = 2;
    while len <= 128 {
        for start in (0..N).step_by(2 * len) {
            let zeta = W::splat(ZETAS[k]);
            k -= 1;
            for j in start..start + len {
                let t = f[j];
                f[j] = t.add(f[j + len]);
                f[j + len] = f[j + len].sub(t).mont_mul(zeta);
            }
        }
        len *= 2;
    }
    let s = W::splat(INV128_R2);
    for c in f.iter_mut() {
        *c = c.mont_mul(s);
    }
}

/// `acc += f g R^-1` in the NTT domain (FIPS 203, Algorithms 11 and 12).
#[inline(always)]
pub(crate) fn mul_acc<W: Coeff>(acc: &mut [W; N], f: &[W; N], g: &[W; N]) {
    for i in 0..N / 2 {
        let (a0, a1, b0, b1) = (f[2 * i], f[2 * i + 1], g[2 * i], g[2 * i + 1]);
        let a1b1 = a1.mont_mul(b1);
        let c0 = a0.mont_mul(b0).add(a1b1.mont_mul(W::splat(GAMMAS[i])));
        let c1 = a0.mont_mul(b1).add(a1.mont_mul(b0));
        acc[2 * i] = acc[2 * i].add(c0);
        acc[2 * i + 1] = acc[2 * i + 1].add(c1);
    }
}

/// Where the polynomials of one encryption live in [`Work::polys`]: `A_hat[i][j]` at
/// `SLOT_A + K i + j`, then `t_hat`, `y` (becomes `y_hat`), `e1`, `e2`, `Decompress_1(m)`, and
/// the outputs `u` and `v`.
pub(crate) const SLOT_A: usize = 0;
/// `t_hat[j]`.
pub(crate) const SLOT_T: usize = SLOT_A + K * K;
/// `y[j]`.
pub(crate) const SLOT_Y: usize = SLOT_T + K;
/// `e1[i]`.
pub(crate) const SLOT_E1: usize = SLOT_Y + K;
/// `e2`.
pub(crate) const SLOT_E2: usize = SLOT_E1 + K;
/// `Decompress_1(m)`.
pub(crate) const SLOT_MU: usize = SLOT_E2 + 1;
/// `u[i]`.
pub(crate) const SLOT_U: usize = SLOT_MU + 1;
/// `v`.
pub(crate) const SLOT_V: usize = SLOT_U + K;
/// Slots in all.
const SLOTS: usize = SLOT_V + 1;

/// The polynomials of `W::WIDTH` encryptions, lane by lane.
pub(crate) struct Work<W: Coeff> {
    pub(crate) polys: Vec<[W; N]>,
    /// Slots from here on hold secrets.
    secret_from: usize,
}

impl<W: Coeff> Work<W> {
    /// All zero, in the vertical layout (the `SLOT_*` constants).
    pub(crate) fn vertical() -> Self {
        Work {
            polys: vec![[W::splat(0); N]; SLOTS],
            secret_from: SLOT_Y,
        }
    }

    /// All zero, in the spread layout (the `SPREAD_*` constants).
    pub(crate) fn spread() -> Self {
        Work {
            polys: vec![[W::splat(0); N]; SPREAD_SLOTS],
            secret_from: SPREAD_Y,
        }
    }

    /// Sets slot `s` from `lanes[l]` for every lane (further lanes keep what they held).
    pub(crate) fn load(&mut self, s: usize, lanes: &[&Poly]) {
        let flat = W::flat_mut(&mut self.polys[s]);
        for (l, p) in lanes.iter().enumerate().take(W::WIDTH) {
            for (k, &c) in p.iter().enumerate() {
                flat[k * W::WIDTH + l] = u32::from(c);
            }
        }
    }

    /// Slot `s`'s polynomial of every lane into `out[l]`.
    pub(crate) fn store(&self, s: usize, out: &mut [&mut Poly]) {
        let flat = W::flat(&self.polys[s]);
        for (l, p) in out.iter_mut().enumerate().take(W::WIDTH) {
            for (k, c) in p.iter_mut().enumerate() {
                *c = flat[k * W::WIDTH + l] as u16;
            }
        }
    }

    /// Zeroes the slots that hold secrets (all but the public `A_hat` and `t_hat`).
    pub(crate) fn wipe(&mut self) {
        for p in self.polys[self.secret_from..].iter_mut() {
            p.fill(W::splat(0));
        }
        std::hint::black_box(&mut self.polys);
    }
}

/// K-PKE.Encrypt's lines 18-21 on `w`: `y_hat = NTT(y)`, `u = NTT^-1(A_hat^T y_hat) + e1`,
/// `v = NTT^-1(t_hat^T y_hat) + e2 + mu`.
#[inline(always)]
pub(crate) fn encrypt_core<W: Coeff>(w: &mut Work<W>) {
    let (inp, out) = w.polys.split_at_mut(SLOT_U);
    for j in 0..K {
        ntt(&mut inp[SLOT_Y + j]);
    }
    let (u, v) = out.split_at_mut(K);
    for (i, acc) in u.iter_mut().enumerate() {
        acc.fill(W::splat(0));
        for j in 0..K {
            mul_acc(acc, &inp[SLOT_A + K * j + i], &inp[SLOT_Y + j]);
        }
        intt_of_product(acc);
        for (a, e) in acc.iter_mut().zip(&inp[SLOT_E1 + i]) {
            *a = a.add(*e);
        }
    }
    let acc = &mut v[0];
    acc.fill(W::splat(0));
    for j in 0..K {
        mul_acc(acc, &inp[SLOT_T + j], &inp[SLOT_Y + j]);
    }
    intt_of_product(acc);
    for (k, a) in acc.iter_mut().enumerate() {
        *a = a.add(inp[SLOT_E2][k]).add(inp[SLOT_MU][k]);
    }
}

/// The "spread" layout, for few encryptions on wide lanes: encryption `e` takes lanes
/// `4 e .. 4 e + 4` and its own independent polynomials go side by side, so one pass does the
/// three `NTT(y_j)` (lane `4 e + j`), and one pass of products and one inverse NTT give
/// `u_0, u_1, u_2, v` (lane `4 e + i`). Slots (secrets from `SPREAD_Y` on):
/// `SPREAD_M + j` holds `A_hat[j][0..3], t_hat[j]`; `SPREAD_Y` holds `y_0..2, 0`;
/// `SPREAD_YB + j` gets `y_hat_j` in all 4 lanes; `SPREAD_E` holds `e1_0..2, e2`;
/// `SPREAD_MU` holds `0, 0, 0, mu`; `SPREAD_OUT` gets the result.
pub(crate) const SPREAD: usize = K + 1;
/// See [`SPREAD`].
pub(crate) const SPREAD_M: usize = 0;
/// See [`SPREAD`].
pub(crate) const SPREAD_Y: usize = SPREAD_M + K;
/// See [`SPREAD`].
const SPREAD_YB: usize = SPREAD_Y + 1;
/// See [`SPREAD`].
pub(crate) const SPREAD_E: usize = SPREAD_YB + K;
/// See [`SPREAD`].
pub(crate) const SPREAD_MU: usize = SPREAD_E + 1;
/// See [`SPREAD`].
pub(crate) const SPREAD_OUT: usize = SPREAD_MU + 1;
/// Slots of the spread layout.
const SPREAD_SLOTS: usize = SPREAD_OUT + 1;

/// K-PKE.Encrypt's lines 18-21 for `W::WIDTH / 4` encryptions in the spread layout.
#[inline(always)]
pub(crate) fn encrypt_spread_core<W: Coeff>(w: &mut Work<W>) {
    let p = &mut w.polys;
    ntt(&mut p[SPREAD_Y]);
    let (lo, hi) = p.split_at_mut(SPREAD_YB);
    let y = W::flat(&lo[SPREAD_Y]);
    for (j, yb) in hi[..K].iter_mut().enumerate() {
        let yb = W::flat_mut(yb);
        for k in 0..N {
            for e in 0..W::WIDTH / SPREAD {
                let base = k * W::WIDTH + SPREAD * e;
                let v = y[base + j];
                yb[base..base + SPREAD].fill(v);
            }
        }
    }
    let (inp, out) = p.split_at_mut(SPREAD_OUT);
    let acc = &mut out[0];
    acc.fill(W::splat(0));
    for j in 0..K {
        mul_acc(acc, &inp[SPREAD_M + j], &inp[SPREAD_YB + j]);
    }
    intt_of_product(acc);
    for (k, a) in acc.iter_mut().enumerate() {
        *a = a.add(inp[SPREAD_E][k]).add(inp[SPREAD_MU][k]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_matches_schoolbook() {
        let f: [u32; N] = core::array::from_fn(|i| (i as u32 * 37) % Q);
        let g: [u32; N] = core::array::from_fn(|i| (i as u32 * i as u32 + 5) % Q);
        let mut want = [0i64; N];
        for i in 0..N {
            for j in 0..N {
                let p = i64::from(f[i]) * i64::from(g[j]);
                if i + j < N {
                    want[i + j] += p;
                } else {
                    want[i + j - N] -= p;
                }
            }
        }
        let (mut fh, mut gh) = (f, g);
        ntt(&mut fh);
        ntt(&mut gh);
        let mut acc = [0u32; N];
        mul_acc(&mut acc, &fh, &gh);
        intt_of_product(&mut acc);
        for i in 0..N {
            assert_eq!(i64::from(acc[i]), want[i].rem_euclid(i64::from(Q)), "{i}");
        }
        // NTT^-1(NTT(f) R^-1) = f.
        let mut back = fh.map(|c| c.mont_mul(1));
        intt_of_product(&mut back);
        assert_eq!(back, f);
    }
}
