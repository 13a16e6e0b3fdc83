//! The backend-independent part of the multi-buffer exponentiation: a
//! [`LaneEngine`] multiplies `LANES` independent Montgomery numbers at once
//! (each lane with its own modulus), and [`run_jobs`] drives fixed-window
//! exponentiations on top of it.

use crate::bigint::{bits_at, MAX_LIMBS};

/// Exponent window width. A table of `2^WINDOW` powers is built per lane and
/// every window multiplies by one entry, fetched by a full-table masked scan.
pub(crate) const WINDOW: usize = 5;

/// One modular exponentiation `base^exp mod modulus` (all radix-2^64,
/// little-endian, same length `L`), plus the per-modulus constants.
pub(crate) struct ExpJob<'a> {
    /// Odd modulus with its top bit set (exactly `64 L` bits).
    pub modulus: &'a [u64],
    /// `-modulus^{-1} mod 2^64`.
    pub n0: u64,
    /// `R^2 mod modulus` for the engine's own `R`.
    pub rr: &'a [u64],
    /// `base < modulus`.
    pub base: &'a [u64],
    /// Secret exponent, `< 2^(64 L)`.
    pub exp: &'a [u64],
}

/// `LANES` side-by-side Montgomery multiplications.
///
/// Results may be "almost reduced" (`< 2 * modulus`, as long as inputs are),
/// the final reduction is done by the caller in radix 2^64.
pub(crate) trait LaneEngine {
    /// `LANES` numbers in the engine's representation.
    type Num: Copy;
    /// Per-lane moduli and Montgomery constants.
    type Ctx;
    /// Lanes per [`Self::Num`].
    const LANES: usize;
    fn ctx(&self, jobs: &[&ExpJob<'_>]) -> Self::Ctx;
    /// Packs one radix-2^64 value per lane.
    fn load(&self, vals: &[&[u64]]) -> Self::Num;
    /// Unpacks each lane to radix 2^64 (`out[lane]` has `L + 1` limbs).
    fn store(&self, x: &Self::Num, out: &mut [&mut [u64]]);
    fn mul(&self, ctx: &Self::Ctx, a: &Self::Num, b: &Self::Num) -> Self::Num;
    fn sqr(&self, ctx: &Self::Ctx, a: &Self::Num) -> Self::Num;
    /// `*x = self.mul(ctx, x, b)`; backends may avoid the copy of the result.
    fn mul_assign(&self, ctx: &Self::Ctx, x: &mut Self::Num, b: &Self::Num) {
        *x = self.mul(ctx, x, b);
    }
    /// `*x = self.sqr(ctx, x)`; backends may avoid the copy of the result.
    fn sqr_assign(&self, ctx: &Self::Ctx, x: &mut Self::Num) {
        *x = self.sqr(ctx, x);
    }
    /// Constant time: lane `l` of the result is lane `l` of `table[idx[l]]`,
    /// found by scanning the whole table with masks.
    fn select(&self, table: &[Self::Num], idx: &[u64]) -> Self::Num;
    /// Converts the window table (`2^WINDOW` entries, all secret; consumed,
    /// and wiped if copied) into the form [`Self::select_packed`] scans.
    /// Default: unchanged.
    fn pack_table(&self, table: Vec<Self::Num>) -> Vec<Self::Num> {
        table
    }
    /// Constant time, as [`Self::select`], on a table from
    /// [`Self::pack_table`].
    /// The result goes to `out` (its previous contents are ignored).
    fn select_packed(&self, packed: &[Self::Num], idx: &[u64], out: &mut Self::Num) {
        *out = self.select(packed, idx);
    }
    /// `self.sqr_assign(ctx, x)` together with part `part` (`0..WINDOW`, in
    /// order) of `self.select_packed(packed, idx, out)`: once the `WINDOW`
    /// parts have run, `out` holds the selection. Backends may stitch their
    /// part of the scan into the squaring (still a full masked scan over the
    /// parts). Default: the whole selection with the last part.
    fn sqr_assign_select_part(
        &self,
        ctx: &Self::Ctx,
        x: &mut Self::Num,
        packed: &[Self::Num],
        idx: &[u64],
        part: usize,
        out: &mut Self::Num,
    ) {
        self.sqr_assign(ctx, x);
        if part + 1 == WINDOW {
            self.select_packed(packed, idx, out);
        }
    }
    /// Overwrites secret temporaries.
    fn wipe(&self, x: &mut Self::Num);
}

/// Fixed-window exponentiation of one group of `E::LANES` lanes.
/// Returns each lane's `base^exp mod modulus` in the engine representation,
/// converted out of Montgomery form but possibly not fully reduced (`<= modulus`).
fn mod_exp_group<E: LaneEngine>(
    e: &E,
    ctx: &E::Ctx,
    jobs: &[&ExpJob<'_>],
    exp_bits: usize,
) -> E::Num {
    let lanes = E::LANES;
    debug_assert_eq!(jobs.len(), lanes);
    let l = jobs[0].modulus.len();
    let mut one_limbs = [0u64; MAX_LIMBS];
    one_limbs[0] = 1;
    let one_ref: &[u64] = &one_limbs[..l];
    let ones: Vec<&[u64]> = vec![one_ref; lanes];
    let one = e.load(&ones);
    let rrs: Vec<&[u64]> = jobs.iter().map(|j| j.rr).collect();
    let rr = e.load(&rrs);
    let bases: Vec<&[u64]> = jobs.iter().map(|j| j.base).collect();
    let mut base = e.load(&bases);

    let mut table: Vec<E::Num> = Vec::with_capacity(1 << WINDOW);
    table.push(e.mul(ctx, &rr, &one)); // R mod m: Montgomery one
    table.push(e.mul(ctx, &base, &rr)); // base * R mod m
    for k in 2..(1 << WINDOW) {
        let v = if k % 2 == 0 {
            e.sqr(ctx, &table[k / 2])
        } else {
            e.mul(ctx, &table[k - 1], &table[1])
        };
        table.push(v);
    }

    let mut table = e.pack_table(table);

    let nwin = exp_bits.div_ceil(WINDOW);
    let mut idx = [0u64; 16];
    let window = |idx: &mut [u64; 16], w: usize| {
        for (i, j) in idx.iter_mut().zip(jobs) {
            *i = bits_at(j.exp, w * WINDOW, WINDOW as u32);
        }
    };
    window(&mut idx, nwin - 1);
    let mut acc = table[0];
    e.select_packed(&table, &idx[..lanes], &mut acc);
    let mut t = acc;
    for w in (0..nwin - 1).rev() {
        // The next window's entry is found during the squarings (its index
        // does not depend on them).
        window(&mut idx, w);
        for part in 0..WINDOW {
            e.sqr_assign_select_part(ctx, &mut acc, &table, &idx[..lanes], part, &mut t);
        }
        e.mul_assign(ctx, &mut acc, &t);
    }
    e.wipe(&mut t);
    idx.fill(0);
    core::hint::black_box(&idx);
    let res = e.mul(ctx, &acc, &one);
    e.wipe(&mut acc);
    e.wipe(&mut base);
    for t in table.iter_mut() {
        e.wipe(t);
    }
    res
}

/// Runs every job, `E::LANES` at a time (a short last group is padded with
/// copies of its first job). All jobs must share one modulus length `L`.
/// Returns each result fully reduced, `L` limbs.
pub(crate) fn run_jobs<E: LaneEngine>(e: &E, jobs: &[ExpJob<'_>]) -> Vec<Vec<u64>> {
    by_groups(
        e,
        jobs,
        jobs.first().map_or(0, |j| j.modulus.len()),
        |ctx, group| mod_exp_group(e, ctx, group, 64 * group[0].modulus.len()),
    )
}

/// Exponentiations by *public* exponents (`jobs[i].exp`, e.g. RSA's `e`, at
/// most `L` limbs), `E::LANES` at a time: left-to-right square-and-multiply
/// over the longest exponent of the group, multiplying only at bits some lane
/// has set and keeping the product in those lanes alone. Variable time in the
/// exponents (public) only. Otherwise as [`run_jobs`].
pub(crate) fn run_public_jobs<E: LaneEngine>(e: &E, jobs: &[ExpJob<'_>]) -> Vec<Vec<u64>> {
    let mut one_limbs = [0u64; MAX_LIMBS];
    one_limbs[0] = 1;
    by_groups(e, jobs, 0, |ctx, group| {
        let one_ref: &[u64] = &one_limbs[..group[0].modulus.len()];
        let one = e.load(&vec![one_ref; E::LANES]);
        let rr = e.load(&group.iter().map(|j| j.rr).collect::<Vec<_>>());
        let base = e.load(&group.iter().map(|j| j.base).collect::<Vec<_>>());
        let x = e.mul(ctx, &base, &rr); // base R
        let mut acc = e.mul(ctx, &rr, &one); // R: Montgomery one
        let bits = group
            .iter()
            .map(|j| crate::bigint::bit_len_vartime(j.exp))
            .max()
            .unwrap_or(0);
        let mut idx = [0u64; 16];
        for b in (0..bits).rev() {
            e.sqr_assign(ctx, &mut acc);
            for (i, j) in idx.iter_mut().zip(group) {
                *i = bits_at(j.exp, b, 1);
            }
            if idx.iter().any(|&i| i != 0) {
                let t = e.mul(ctx, &acc, &x);
                acc = e.select(&[acc, t], &idx[..E::LANES]);
            }
        }
        e.mul(ctx, &acc, &one)
    })
}

/// The shared frame of [`run_jobs`] and [`run_public_jobs`]: checks that
/// every job has one modulus length `L` (and an exponent of exactly
/// `exp_limbs` limbs, or at most `L` when `exp_limbs` is 0), runs `group` on
/// each `E::LANES` jobs (a short last group padded with copies of its first
/// job), and returns each job's result fully reduced, `L` limbs (the engine
/// value is wiped after it is stored).
fn by_groups<E: LaneEngine>(
    e: &E,
    jobs: &[ExpJob<'_>],
    exp_limbs: usize,
    mut group: impl FnMut(&E::Ctx, &[&ExpJob<'_>]) -> E::Num,
) -> Vec<Vec<u64>> {
    let mut results = Vec::with_capacity(jobs.len());
    let Some(first) = jobs.first() else {
        return results;
    };
    let l = first.modulus.len();
    assert!(jobs.iter().all(|j| j.modulus.len() == l
        && j.base.len() == l
        && j.rr.len() == l
        && if exp_limbs == 0 {
            j.exp.len() <= l
        } else {
            j.exp.len() == exp_limbs
        }));
    assert!(E::LANES <= 16);
    for chunk in jobs.chunks(E::LANES) {
        let mut members: Vec<&ExpJob<'_>> = chunk.iter().collect();
        while members.len() < E::LANES {
            members.push(&chunk[0]);
        }
        let ctx = e.ctx(&members);
        let mut res = group(&ctx, &members);
        let mut outs: Vec<Vec<u64>> = vec![vec![0u64; l + 1]; E::LANES];
        {
            let mut refs: Vec<&mut [u64]> = outs.iter_mut().map(|v| v.as_mut_slice()).collect();
            e.store(&res, &mut refs);
        }
        e.wipe(&mut res);
        for (mut out, job) in outs.into_iter().zip(chunk) {
            let top = out[l];
            crate::bigint::reduce_once(&mut out[..l], top, job.modulus);
            out.truncate(l);
            results.push(out);
        }
    }
    results
}

/// Repeated Montgomery multiplication (or squaring when `b` is `None`) per
/// lane, kept in the engine representation; see `mont_mul_1024_lanes`.
pub(crate) fn mont_chain<E: LaneEngine, const L: usize>(
    e: &E,
    a: &[[u64; L]],
    b: Option<&[[u64; L]]>,
    n: &[[u64; L]],
    iterations: usize,
) -> Vec<[u64; L]> {
    let mut results = Vec::with_capacity(a.len());
    for start in (0..a.len()).step_by(E::LANES) {
        let lane_idx: Vec<usize> = (0..E::LANES)
            .map(|k| {
                if start + k < a.len() {
                    start + k
                } else {
                    start
                }
            })
            .collect();
        let n0s: Vec<u64> = lane_idx
            .iter()
            .map(|&i| crate::bigint::neg_inv_u64(n[i][0]))
            .collect();
        let jobs: Vec<ExpJob<'_>> = lane_idx
            .iter()
            .zip(&n0s)
            .map(|(&i, &n0)| ExpJob {
                modulus: &n[i],
                n0,
                rr: &n[i],
                base: &a[i],
                exp: &a[i],
            })
            .collect();
        let refs: Vec<&ExpJob<'_>> = jobs.iter().collect();
        let ctx = e.ctx(&refs);
        let av: Vec<&[u64]> = lane_idx.iter().map(|&i| &a[i][..]).collect();
        let mut x = e.load(&av);
        let bv = b.map(|b| {
            let bv: Vec<&[u64]> = lane_idx.iter().map(|&i| &b[i][..]).collect();
            e.load(&bv)
        });
        for _ in 0..iterations {
            match &bv {
                Some(bv) => e.mul_assign(&ctx, &mut x, bv),
                None => e.sqr_assign(&ctx, &mut x),
            }
        }
        let mut outs: Vec<Vec<u64>> = vec![vec![0u64; L + 1]; E::LANES];
        {
            let mut refs: Vec<&mut [u64]> = outs.iter_mut().map(|v| v.as_mut_slice()).collect();
            e.store(&x, &mut refs);
        }
        for (k, out) in outs
            .iter_mut()
            .enumerate()
            .take((a.len() - start).min(E::LANES))
        {
            let top = out[L];
            crate::bigint::reduce_once(&mut out[..L], top, &n[lane_idx[k]]);
            let mut r = [0u64; L];
            r.copy_from_slice(&out[..L]);
            results.push(r);
        }
    }
    results
}
