//! Portable backend: plain `u64` CIOS Montgomery multiplication, one lane at a
//! time. Runs on every target and is the reference the SIMD backends are
//! tested against.

use crate::bigint::{ct_assign, mask_from_bit, mont_mul, wipe};
use crate::engine::{ExpJob, LaneEngine};

/// Scalar engine for moduli of `L` 64-bit limbs (one lane per "group").
pub(crate) struct PortableEngine<const L: usize>;

pub(crate) struct PortableCtx<const L: usize> {
    n: [u64; L],
    n0: u64,
}

impl<const L: usize> LaneEngine for PortableEngine<L> {
    type Num = [u64; L];
    type Ctx = PortableCtx<L>;
    const LANES: usize = 1;

    fn ctx(&self, jobs: &[&ExpJob<'_>]) -> PortableCtx<L> {
        let mut n = [0u64; L];
        n.copy_from_slice(jobs[0].modulus);
        PortableCtx { n, n0: jobs[0].n0 }
    }

    fn load(&self, vals: &[&[u64]]) -> [u64; L] {
        let mut x = [0u64; L];
        x.copy_from_slice(vals[0]);
        x
    }

    fn store(&self, x: &[u64; L], out: &mut [&mut [u64]]) {
        out[0][..L].copy_from_slice(x);
        out[0][L] = 0;
    }

    fn mul(&self, ctx: &PortableCtx<L>, a: &[u64; L], b: &[u64; L]) -> [u64; L] {
        mont_mul(a, b, &ctx.n, ctx.n0)
    }

    fn sqr(&self, ctx: &PortableCtx<L>, a: &[u64; L]) -> [u64; L] {
        mont_mul(a, a, &ctx.n, ctx.n0)
    }

    fn select(&self, table: &[[u64; L]], idx: &[u64]) -> [u64; L] {
        let mut r = [0u64; L];
        for (k, entry) in table.iter().enumerate() {
            // eq = 1 iff idx == k, computed without branches.
            let x = idx[0] ^ k as u64;
            let eq = ((x | x.wrapping_neg()) >> 63) ^ 1;
            ct_assign(mask_from_bit(eq), entry, &mut r);
        }
        r
    }

    fn wipe(&self, x: &mut [u64; L]) {
        wipe(x);
    }
}
