//! RSA keys in CRT form and the batched private-key operation.

use core::fmt;

use crate::backend::Backend;
use crate::bigint::{
    add_into, bit_len_vartime, from_be_bytes, lt_vartime, mod_add, mod_exp_public_vartime, mod_sub,
    mont_mul_into, mul_into, neg_inv_u64, pow2_mod, reduce_once, to_be_bytes, wipe, MAX_LIMBS,
};
use crate::dispatch::with_engine;
use crate::engine::{run_jobs, run_public_jobs, ExpJob};
use crate::error::MathError;
use crate::kind::BackendKind;

/// Per-prime precomputation.
struct PrimeData {
    /// The prime, `L` limbs, top bit set.
    m: Vec<u64>,
    /// `-m^{-1} mod 2^64`.
    n0: u64,
    /// `R^2 mod m` for each backend's `R` (indexed by `BackendKind`).
    rr: [Vec<u64>; BackendKind::ALL.len()],
    /// CRT exponent (`dp` or `dq`), `L` limbs.
    exp: Vec<u64>,
}

impl PrimeData {
    fn new(m: Vec<u64>, exp: Vec<u64>) -> PrimeData {
        let l = m.len();
        let n0 = neg_inv_u64(m[0]);
        let rr = BackendKind::ALL.map(|k| pow2_mod(2 * k.montgomery_r_bits(64 * l), &m));
        PrimeData { m, n0, rr, exp }
    }

    /// `R^2 mod m` with `R = 2^(64 L)` (the radix-2^64 helpers' `R`).
    fn rr64(&self) -> &[u64] {
        &self.rr[BackendKind::Portable.index()]
    }

    /// `c mod m` for `c < 2^(128 L)` (`2 L` limbs). Constant time.
    fn reduce_wide(&self, c: &[u64], out: &mut [u64]) {
        let l = self.m.len();
        let mut hi = [0u64; MAX_LIMBS];
        let hi = &mut hi[..l];
        hi.copy_from_slice(&c[l..2 * l]);
        reduce_once(hi, 0, &self.m); // c_hi < 2^(64 L) < 2 m
        let mut lo = [0u64; MAX_LIMBS];
        let lo = &mut lo[..l];
        lo.copy_from_slice(&c[..l]);
        reduce_once(lo, 0, &self.m);
        let mut t = [0u64; MAX_LIMBS];
        let t = &mut t[..l];
        mont_mul_into(hi, self.rr64(), &self.m, self.n0, t); // c_hi * R mod m
        mod_add(t, lo, &self.m, out);
        wipe(hi);
        wipe(lo);
        wipe(t);
    }
}

impl Drop for PrimeData {
    fn drop(&mut self) {
        wipe(&mut self.m);
        wipe(&mut self.exp);
        for r in self.rr.iter_mut() {
            wipe(r);
        }
    }
}

/// One RSA private key in CRT form, with per-key precomputation (Montgomery
/// constants and `R^2 mod p`, `R^2 mod q` for every backend) done once.
///
/// `Debug` prints only the modulus size.
pub struct RsaCrtKey {
    n: Vec<u64>,
    n_bytes: usize,
    e: Vec<u64>,
    p: PrimeData,
    q: PrimeData,
    /// `qinv * R mod p`, `R = 2^(64 L)`.
    qinv_mont: Vec<u64>,
    /// `-n^{-1} mod 2^64` and `R^2 mod n` for each backend's `R` (public: for the batched
    /// public-key operation).
    n0: u64,
    rr_n: [Vec<u64>; BackendKind::ALL.len()],
}

impl fmt::Debug for RsaCrtKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RsaCrtKey")
            .field("modulus_bits", &self.modulus_bits())
            .finish_non_exhaustive()
    }
}

impl Drop for RsaCrtKey {
    fn drop(&mut self) {
        wipe(&mut self.qinv_mont);
    }
}

fn parse(bytes: &[u8], limbs: usize, what: &'static str) -> Result<Vec<u64>, MathError> {
    let mut v = vec![0u64; limbs];
    if !from_be_bytes(bytes, &mut v) {
        return Err(MathError::InvalidKey(what));
    }
    Ok(v)
}

impl RsaCrtKey {
    /// Builds a key from big-endian components (leading zero bytes allowed).
    ///
    /// Supported: `n` of 2048, 3072 or 4096 bits with `p`, `q` both exactly
    /// half that size. Checks `n = p q`, `qinv q = 1 mod p`, `dp < p`,
    /// `dq < q`, odd primes. `d` is accepted for interface compatibility and
    /// only checked to be below `n`. Key loading is not part of the
    /// constant-time guarantee beyond the arithmetic itself (its validity
    /// checks branch on their outcome).
    #[allow(clippy::too_many_arguments)]
    pub fn from_components(
        n: &[u8],
        e: &[u8],
        d: &[u8],
        p: &[u8],
        q: &[u8],
        dp: &[u8],
        dq: &[u8],
        qinv: &[u8],
    ) -> Result<Self, MathError> {
        let n_full = parse(n, MAX_LIMBS, "modulus too large")?;
        let n_bits = bit_len_vartime(&n_full);
        if !matches!(n_bits, 2048 | 3072 | 4096) {
            return Err(MathError::Unsupported(
                "modulus size (supported: 2048, 3072, 4096 bits)",
            ));
        }
        let l = n_bits / 128; // limbs per prime
        let n = parse(n, 2 * l, "modulus")?;
        let e = parse(e, 2 * l, "public exponent too large")?;
        if bit_len_vartime(&e) < 2 || e[0] & 1 == 0 {
            return Err(MathError::InvalidKey("public exponent must be odd and > 1"));
        }
        let d = parse(d, 2 * l, "private exponent too large")?;
        if !lt_vartime(&d, &n) {
            return Err(MathError::InvalidKey(
                "private exponent not below the modulus",
            ));
        }
        let p = parse(p, l, "p is not half the modulus size")?;
        let q = parse(q, l, "q is not half the modulus size")?;
        for x in [&p, &q] {
            if x[l - 1] >> 63 == 0 {
                return Err(MathError::Unsupported(
                    "unbalanced primes (p and q must have half the modulus bits)",
                ));
            }
            if x[0] & 1 == 0 {
                return Err(MathError::InvalidKey("even prime"));
            }
        }
        let dp = parse(dp, l, "dp too large")?;
        let dq = parse(dq, l, "dq too large")?;
        let qinv = parse(qinv, l, "qinv too large")?;
        if !lt_vartime(&dp, &p) || !lt_vartime(&dq, &q) || !lt_vartime(&qinv, &p) {
            return Err(MathError::InvalidKey("CRT component not reduced"));
        }
        let mut pq = vec![0u64; 2 * l];
        mul_into(&p, &q, &mut pq);
        if pq != n {
            return Err(MathError::InvalidKey("n != p * q"));
        }
        let pd = PrimeData::new(p, dp);
        let qd = PrimeData::new(q, dq);
        // qinv_mont = qinv * R mod p; check qinv * q = 1 mod p.
        let mut qinv_mont = vec![0u64; l];
        mont_mul_into(&qinv, pd.rr64(), &pd.m, pd.n0, &mut qinv_mont);
        let mut q_mod_p = qd.m.clone();
        reduce_once(&mut q_mod_p, 0, &pd.m);
        let mut check = vec![0u64; l];
        mont_mul_into(&q_mod_p, &qinv_mont, &pd.m, pd.n0, &mut check); // q * qinv mod p
        let mut one = vec![0u64; l];
        one[0] = 1;
        if check != one {
            return Err(MathError::InvalidKey("qinv * q != 1 mod p"));
        }
        let n0 = neg_inv_u64(n[0]);
        let rr_n = BackendKind::ALL.map(|k| pow2_mod(2 * k.montgomery_r_bits(64 * n.len()), &n));
        Ok(RsaCrtKey {
            n,
            n_bytes: n_bits / 8,
            e,
            p: pd,
            q: qd,
            qinv_mont,
            n0,
            rr_n,
        })
    }

    /// Bits of the modulus `n` (2048, 3072 or 4096).
    pub fn modulus_bits(&self) -> usize {
        self.n_bytes * 8
    }

    /// Bytes of the modulus `n` (the length of every result).
    pub fn modulus_bytes(&self) -> usize {
        self.n_bytes
    }

    /// The modulus, big-endian, `modulus_bytes()` long.
    pub fn modulus_be(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.n_bytes];
        to_be_bytes(&self.n, &mut out);
        out
    }

    fn limbs(&self) -> usize {
        self.p.m.len()
    }

    /// `input < n` check on the (public) input length and value. Vartime.
    fn check_input_vartime(&self, input: &[u8]) -> Result<Vec<u64>, MathError> {
        let mut c = vec![0u64; self.n.len()];
        if input.len() > self.n_bytes || !from_be_bytes(input, &mut c) || !lt_vartime(&c, &self.n) {
            return Err(MathError::InputOutOfRange);
        }
        Ok(c)
    }

    /// Public-key operation `m^e mod n` (vartime: for verification only).
    pub fn public_vartime(&self, input: &[u8]) -> Result<Vec<u8>, MathError> {
        let c = self.check_input_vartime(input)?;
        let r = mod_exp_public_vartime(&c, &self.e, &self.n);
        let mut out = vec![0u8; self.n_bytes];
        to_be_bytes(&r, &mut out);
        Ok(out)
    }

    /// Exposes the memory of the secret fields (primes, CRT exponents,
    /// `R^2` values, `qinv`) to `f(ptr, len_bytes)`. Used only by the
    /// constant-time harness to mark them undefined under valgrind.
    #[doc(hidden)]
    pub fn for_each_secret_region(&self, mut f: impl FnMut(*const u8, usize)) {
        let mut region = |v: &[u64]| f(v.as_ptr().cast::<u8>(), core::mem::size_of_val(v));
        for pd in [&self.p, &self.q] {
            region(&pd.m);
            region(&pd.exp);
            for r in &pd.rr {
                region(r);
            }
        }
        region(&self.qinv_mont);
    }
}

/// RSA private-key operation `x^d mod n` by CRT for a batch of lanes, each
/// with its own key and big-endian input (`input < n`). All exponentiations
/// of the batch (two per lane) run side by side on `backend`: a SIMD group is
/// 4 exponentiations (2 RSA operations) on AVX2 and 8 (4 RSA operations) on
/// IFMA, and a partly filled group costs as much as a full one, so a batch of
/// 8 is 4 AVX2 groups or 2 IFMA groups with every lane busy. Any number of
/// lanes is accepted; keys of different sizes may be mixed.
///
/// Returns one result per lane: the `modulus_bytes()`-long big-endian
/// output, or [`MathError::InputOutOfRange`] if the input is not below `n`
/// (this check is on the input only and is vartime; everything else is
/// constant time). The result is not verified with the public exponent; use
/// [`rsa_public_batch_vartime`] for a fault check if wanted.
pub fn rsa_private_crt_batch(
    backend: Backend,
    lanes: &[(&RsaCrtKey, &[u8])],
) -> Vec<Result<Vec<u8>, MathError>> {
    let mut out: Vec<Result<Vec<u8>, MathError>> = Vec::with_capacity(lanes.len());
    let mut valid: Vec<(usize, &RsaCrtKey, Vec<u64>)> = Vec::new();
    for (i, (key, input)) in lanes.iter().enumerate() {
        match key.check_input_vartime(input) {
            Ok(c) => {
                valid.push((i, key, c));
                out.push(Ok(Vec::new()));
            }
            Err(e) => out.push(Err(e)),
        }
    }
    let jobs: Vec<(&RsaCrtKey, &[u64])> =
        valid.iter().map(|(_, k, c)| (*k, c.as_slice())).collect();
    let results = private_crt_limbs(backend, &jobs);
    for ((i, _, _), r) in valid.iter().zip(results) {
        out[*i] = r;
    }
    for (_, _, c) in valid.iter_mut() {
        wipe(c);
    }
    out
}

/// [`rsa_private_crt_batch`] without the input range check: every input must
/// be below its key's modulus and at most `modulus_bytes()` long (otherwise
/// the output is garbage). Entirely constant time; used by the valgrind
/// harness.
#[doc(hidden)]
pub fn rsa_private_crt_batch_unchecked(
    backend: Backend,
    lanes: &[(&RsaCrtKey, &[u8])],
) -> Vec<Vec<u8>> {
    let cs: Vec<(&RsaCrtKey, Vec<u64>)> = lanes
        .iter()
        .map(|(k, input)| {
            let mut c = vec![0u64; k.n.len()];
            let _ = from_be_bytes(input, &mut c);
            (*k, c)
        })
        .collect();
    let jobs: Vec<(&RsaCrtKey, &[u64])> = cs.iter().map(|(k, c)| (*k, c.as_slice())).collect();
    private_crt_limbs(backend, &jobs)
        .into_iter()
        .map(|r| r.expect("supported key sizes only"))
        .collect()
}

/// Core of the batch: inputs already parsed to `2 L` limbs and below `n`.
fn private_crt_limbs(
    backend: Backend,
    lanes: &[(&RsaCrtKey, &[u64])],
) -> Vec<Result<Vec<u8>, MathError>> {
    let mut out: Vec<Result<Vec<u8>, MathError>> = vec![Ok(Vec::new()); lanes.len()];
    // Group by prime size (public).
    let mut sizes: Vec<usize> = lanes.iter().map(|(k, _)| k.limbs()).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let bk = backend.kind().index();
    for l in sizes {
        let idx: Vec<usize> = (0..lanes.len())
            .filter(|&i| lanes[i].0.limbs() == l)
            .collect();
        // Reduce inputs mod p and mod q.
        let mut bases: Vec<Vec<u64>> = Vec::with_capacity(2 * idx.len());
        for &i in &idx {
            let (key, c) = lanes[i];
            for pd in [&key.p, &key.q] {
                let mut b = vec![0u64; l];
                pd.reduce_wide(c, &mut b);
                bases.push(b);
            }
        }
        let jobs: Vec<ExpJob<'_>> = idx
            .iter()
            .enumerate()
            .flat_map(|(j, &i)| {
                let key = lanes[i].0;
                [(&key.p, &bases[2 * j]), (&key.q, &bases[2 * j + 1])]
            })
            .map(|(pd, b)| ExpJob {
                modulus: &pd.m,
                n0: pd.n0,
                rr: &pd.rr[bk],
                base: b,
                exp: &pd.exp,
            })
            .collect();
        let res = with_engine!(backend, l, |e| run_jobs(&e, &jobs));
        drop(jobs);
        for b in bases.iter_mut() {
            wipe(b);
        }
        let mut res = match res {
            Ok(r) => r,
            Err(err) => {
                for &i in &idx {
                    out[i] = Err(err.clone());
                }
                continue;
            }
        };
        for (j, &i) in idx.iter().enumerate() {
            let key = lanes[i].0;
            out[i] = Ok(crt_combine(key, &res[2 * j], &res[2 * j + 1]));
        }
        for r in res.iter_mut() {
            wipe(r);
        }
    }
    out
}

/// `m = m2 + q * (qinv (m1 - m2) mod p)`, constant time. `m1 < p`, `m2 < q`.
fn crt_combine(key: &RsaCrtKey, m1: &[u64], m2: &[u64]) -> Vec<u8> {
    let l = key.limbs();
    let p = &key.p;
    let mut buf = [0u64; 5 * MAX_LIMBS]; // 9 L limbs needed, L <= 32
    let (m2p, rest) = buf.split_at_mut(l);
    let (diff, rest) = rest.split_at_mut(l);
    let (h, rest) = rest.split_at_mut(l);
    let (hq, rest) = rest.split_at_mut(2 * l);
    let (m2w, rest) = rest.split_at_mut(2 * l);
    let m = &mut rest[..2 * l];
    m2p.copy_from_slice(m2);
    reduce_once(m2p, 0, &p.m); // m2 < q < 2p
    mod_sub(m1, m2p, &p.m, diff);
    mont_mul_into(diff, &key.qinv_mont, &p.m, p.n0, h); // (m1 - m2) qinv mod p
    mul_into(h, &key.q.m, hq);
    m2w[..l].copy_from_slice(m2);
    add_into(hq, m2w, m); // < p q = n, no carry
    let mut bytes = vec![0u8; key.n_bytes];
    to_be_bytes(m, &mut bytes);
    wipe(&mut buf);
    bytes
}

/// The public-key operation `x^e mod n` for a batch of lanes on `backend`
/// (the fault check of private results: `rsa_public_batch(b, [(k, s)])[0]`
/// equals the input `s` was made from), 8 lanes per IFMA group. Variable
/// time: everything it touches is public. Moduli of 2048 bits only (the
/// backends' widest numbers); other lanes get [`MathError::Unsupported`], and
/// [`MathError::InputOutOfRange`] for an input not below `n`.
pub fn rsa_public_batch(
    backend: Backend,
    lanes: &[(&RsaCrtKey, &[u8])],
) -> Vec<Result<Vec<u8>, MathError>> {
    const LIMBS: usize = 32;
    let mut out: Vec<Result<Vec<u8>, MathError>> = Vec::with_capacity(lanes.len());
    let mut valid: Vec<(usize, &RsaCrtKey, Vec<u64>)> = Vec::new();
    for (i, (key, input)) in lanes.iter().enumerate() {
        if key.n.len() != LIMBS {
            out.push(Err(MathError::Unsupported(
                "batched public operation: 2048-bit moduli only",
            )));
            continue;
        }
        match key.check_input_vartime(input) {
            Ok(c) => {
                valid.push((i, key, c));
                out.push(Ok(Vec::new()));
            }
            Err(e) => out.push(Err(e)),
        }
    }
    if valid.is_empty() {
        return out;
    }
    let bk = backend.kind().index();
    let jobs: Vec<ExpJob<'_>> = valid
        .iter()
        .map(|(_, k, c)| ExpJob {
            modulus: &k.n,
            n0: k.n0,
            rr: &k.rr_n[bk],
            base: c,
            exp: &k.e,
        })
        .collect();
    match with_engine!(backend, LIMBS, |e| run_public_jobs(&e, &jobs)) {
        Ok(res) => {
            for ((i, k, _), r) in valid.iter().zip(res) {
                let mut bytes = vec![0u8; k.n_bytes];
                to_be_bytes(&r, &mut bytes);
                out[*i] = Ok(bytes);
            }
        }
        Err(err) => {
            for (i, _, _) in &valid {
                out[*i] = Err(err.clone());
            }
        }
    }
    out
}

/// Public-key operation `x^e mod n` for a batch of lanes (portable, vartime;
/// e.g. to verify signatures as a fault-attack countermeasure), one lane at a
/// time with the radix-2^64 code.
pub fn rsa_public_batch_vartime(lanes: &[(&RsaCrtKey, &[u8])]) -> Vec<Result<Vec<u8>, MathError>> {
    lanes.iter().map(|(k, x)| k.public_vartime(x)).collect()
}
