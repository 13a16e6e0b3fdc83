//! The 8-lane crypto_mb calls: one `mbx_rsa_private_crt_mb8` or `mbx_rsa_public_mb8` of one
//! key size, one `mbx_nistp256_ecdsa_sign_mb8` or `mbx_nistp256_ecdsa_verify_mb8`, one
//! `mbx_x25519_mb8` or `mbx_x25519_public_key_mb8`, with their lanes already validated.
//!
//! Owns the marshalling into crypto_mb's fixed 8-slot arrays (unused slots repeat a good lane),
//! the per-thread RSA scratch buffer, per-lane status decoding, and wiping the limb copies of
//! secret key parts and nonces once a call returns.

use std::cell::RefCell;

use super::lanes::{
    be_to_le_limbs, der_signature, is_f4, random_scalar, wipe_limbs, VerifyParts, LANES,
};
use super::{ffi, CryptoMbEngine};
use crate::engine::{wipe, LaneError, LaneResult, RsaLane, X25519Lane};

thread_local! {
    /// Per-thread scratch buffer for `mbx_rsa_private_crt_mb8` and `mbx_rsa_public_mb8`.
    static RSA_SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl CryptoMbEngine {
    /// One call of up to 8 RSA lanes of one size (`method`). `lanes` were validated.
    pub(super) fn rsa_batch(
        &self,
        method: &ffi::RsaMethod,
        bits: u32,
        lanes: &[&RsaLane<'_>],
    ) -> Vec<LaneResult> {
        debug_assert!(!lanes.is_empty() && lanes.len() <= LANES);
        let limbs = bits as usize / 128;
        let bytes = bits as usize / 8;
        // Per lane: p, q, dp, dq, qinv as little-endian limbs.
        let mut parts: Vec<[Vec<u64>; 5]> = Vec::with_capacity(lanes.len());
        let mut results: Vec<Option<LaneResult>> = vec![None; lanes.len()];
        for (i, lane) in lanes.iter().enumerate() {
            let k = lane.key;
            let conv = [&k.p, &k.q, &k.dp, &k.dq, &k.qinv].map(|v| be_to_le_limbs(v, limbs));
            if conv.iter().any(Option::is_none) {
                results[i] = Some(Err(LaneError::Failed(
                    "RSA CRT part longer than half the modulus".into(),
                )));
            }
            parts.push(conv.map(Option::unwrap_or_default));
        }
        let good: Vec<usize> = (0..lanes.len()).filter(|&i| results[i].is_none()).collect();
        if !good.is_empty() {
            let slot = slots(&good);
            let inputs: [&[u8]; 8] = std::array::from_fn(|j| lanes[slot[j]].input);
            let part =
                |n: usize| -> [&[u64]; 8] { std::array::from_fn(|j| parts[slot[j]][n].as_slice()) };
            call_and_decode(&good, bytes, &mut results, |outputs| {
                with_scratch(method, |s| {
                    self.lib.rsa_private_crt_mb8(
                        method,
                        &inputs,
                        outputs,
                        &part(0),
                        &part(1),
                        &part(2),
                        &part(3),
                        &part(4),
                        s,
                    )
                })
            });
        }
        for p in parts.iter_mut().flatten() {
            wipe_limbs(p);
        }
        results
            .into_iter()
            .map(|r| r.expect("every lane has a result"))
            .collect()
    }

    /// One `mbx_rsa_public_mb8` (e = 65537) of up to 8 lanes of one size (`method` from
    /// `mbx_RSA_pub65537_Method`): each lane's input raised to `e` mod `n`; a lane whose key has
    /// another exponent gets `Unsupported`. `lanes` were validated (input below `n`, `bits`
    /// bits); everything here is public.
    pub(super) fn rsa_public_batch(
        &self,
        method: &ffi::RsaMethod,
        bits: u32,
        lanes: &[&RsaLane<'_>],
    ) -> Vec<LaneResult> {
        debug_assert!(!lanes.is_empty() && lanes.len() <= LANES);
        let bytes = bits as usize / 8;
        let mut results: Vec<Option<LaneResult>> = vec![None; lanes.len()];
        let mut moduli: Vec<Vec<u64>> = Vec::with_capacity(lanes.len());
        for (i, lane) in lanes.iter().enumerate() {
            let n = be_to_le_limbs(&lane.key.n, bits as usize / 64).filter(|_| is_f4(lane.key));
            if n.is_none() {
                results[i] = Some(Err(LaneError::Unsupported));
            }
            moduli.push(n.unwrap_or_default());
        }
        let good: Vec<usize> = (0..lanes.len()).filter(|&i| results[i].is_none()).collect();
        if !good.is_empty() {
            let slot = slots(&good);
            let inputs: [&[u8]; 8] = std::array::from_fn(|j| lanes[slot[j]].input);
            let n: [&[u64]; 8] = std::array::from_fn(|j| moduli[slot[j]].as_slice());
            call_and_decode(&good, bytes, &mut results, |outputs| {
                with_scratch(method, |s| {
                    self.lib.rsa_public_mb8(method, &inputs, outputs, &n, s)
                })
            });
        }
        results
            .into_iter()
            .map(|r| r.expect("every lane has a result"))
            .collect()
    }

    /// One call of up to 8 ECDSA lanes, all valid.
    pub(super) fn ecdsa_batch(
        &self,
        lanes: &[(usize, [u8; 32], [u64; 4])],
    ) -> Vec<(usize, LaneResult)> {
        debug_assert!(!lanes.is_empty() && lanes.len() <= LANES);
        let slot = |j: usize| lanes.get(j).unwrap_or(&lanes[0]);
        let msg: [[u8; 32]; 8] = std::array::from_fn(|j| slot(j).1);
        let mut d: [[u64; 4]; 8] = std::array::from_fn(|j| slot(j).2);
        let mut k = [[0u64; 4]; 8];
        for kj in k.iter_mut().take(lanes.len()) {
            match random_scalar() {
                Ok(v) => *kj = v,
                Err(e) => {
                    for row in d.iter_mut() {
                        wipe_limbs(row);
                    }
                    return lanes
                        .iter()
                        .map(|l| (l.0, Err(LaneError::Failed(e.clone()))))
                        .collect();
                }
            }
        }
        for j in lanes.len()..LANES {
            k[j] = k[0];
        }
        let mut r = [[0u8; 32]; 8];
        let mut s = [[0u8; 32]; 8];
        let status = self
            .lib
            .nistp256_ecdsa_sign_mb8(&mut r, &mut s, &msg, &k, &d);
        for row in k.iter_mut().chain(d.iter_mut()) {
            wipe_limbs(row);
        }
        lanes
            .iter()
            .enumerate()
            .map(|(j, l)| {
                let res = match ffi::lane_status(status, j) {
                    0 => Ok(der_signature(&r[j], &s[j])),
                    code => Err(LaneError::Failed(format!(
                        "crypto_mb ECDSA lane status {code} ({})",
                        ffi::status_name(code)
                    ))),
                };
                (l.0, res)
            })
            .collect()
    }

    /// One `mbx_nistp256_ecdsa_verify_mb8` of up to 8 signatures (at least one): whether each
    /// verified (lane status 0); a failed call confirms none.
    pub(super) fn ecdsa_verify_batch(&self, parts: &[VerifyParts]) -> Vec<bool> {
        debug_assert!(!parts.is_empty() && parts.len() <= LANES);
        let p = slots(parts);
        let msg = std::array::from_fn(|j| p[j].msg);
        let x = std::array::from_fn(|j| p[j].x);
        let y = std::array::from_fn(|j| p[j].y);
        let r = std::array::from_fn(|j| p[j].r);
        let s = std::array::from_fn(|j| p[j].s);
        match self.lib.nistp256_ecdsa_verify_mb8(&r, &s, &msg, &x, &y) {
            Ok(status) => (0..parts.len())
                .map(|j| ffi::lane_status(status, j) == 0)
                .collect(),
            Err(_) => vec![false; parts.len()],
        }
    }

    /// One X25519 call of up to 8 lanes (`chunk`: indices into `lanes`, at least one):
    /// `mbx_x25519_public_key_mb8` when they are all base-point lanes (`base`), else
    /// `mbx_x25519_mb8`; each lane's result into `results`. The scalar and output copies are
    /// wiped after the call.
    pub(super) fn x25519_batch(
        &self,
        lanes: &[X25519Lane<'_>],
        chunk: &[usize],
        base: bool,
        results: &mut [Result<[u8; 32], LaneError>],
    ) {
        debug_assert!(!chunk.is_empty() && chunk.len() <= LANES);
        let slot = slots(chunk);
        let mut scalars: [[u8; 32]; 8] = std::array::from_fn(|j| *lanes[slot[j]].scalar);
        let points: [[u8; 32]; 8] = std::array::from_fn(|j| *lanes[slot[j]].point);
        let mut out = [[0u8; 32]; 8];
        let status = self
            .lib
            .x25519_mb8(&mut out, &scalars, (!base).then_some(&points));
        for s in &mut scalars {
            wipe(s);
        }
        for (j, &i) in chunk.iter().enumerate() {
            results[i] = match status {
                Ok(st) if ffi::lane_status(st, j) == 0 => Ok(out[j]),
                Ok(st) => Err(LaneError::Failed(
                    ffi::status_name(ffi::lane_status(st, j)).into(),
                )),
                Err(e) => Err(LaneError::Failed(e.into())),
            };
        }
        for o in &mut out {
            wipe(o);
        }
    }
}

/// What fills each of crypto_mb's 8 slots: the `good` lanes (at least one), then the first of
/// them again for the unused slots (each slot still gets its own output buffer).
fn slots<T: Copy>(good: &[T]) -> [T; LANES] {
    std::array::from_fn(|j| good.get(j).copied().unwrap_or(good[0]))
}

/// `f` with this thread's RSA scratch buffer, grown to `method.buf_size()`.
fn with_scratch<R>(method: &ffi::RsaMethod, f: impl FnOnce(&mut [u8]) -> R) -> R {
    RSA_SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < method.buf_size() {
            s.resize(method.buf_size(), 0);
        }
        f(&mut s)
    })
}

/// Runs one RSA call (`call`) with 8 fresh `bytes`-long output buffers, then gives each good
/// lane (slot `j` is `good[j]`) its output or its decoded lane status; the buffers are wiped.
fn call_and_decode(
    good: &[usize],
    bytes: usize,
    results: &mut [Option<LaneResult>],
    call: impl FnOnce(&mut [&mut [u8]; 8]) -> Result<ffi::MbxStatus, &'static str>,
) {
    let mut out_bufs: Vec<Vec<u8>> = (0..LANES).map(|_| vec![0u8; bytes]).collect();
    let mut it = out_bufs.iter_mut();
    let mut outputs: [&mut [u8]; 8] =
        std::array::from_fn(|_| it.next().expect("8 buffers").as_mut_slice());
    let status = call(&mut outputs);
    for (j, &i) in good.iter().enumerate() {
        results[i] = Some(match status {
            Err(e) => Err(LaneError::Failed(e.to_string())),
            Ok(st) => match ffi::lane_status(st, j) {
                0 => Ok(std::mem::take(&mut out_bufs[j])),
                code => Err(LaneError::Failed(format!(
                    "crypto_mb RSA lane status {code} ({})",
                    ffi::status_name(code)
                ))),
            },
        });
    }
    for b in out_bufs.iter_mut() {
        wipe(b);
    }
}
