//! quickshake's own multi-buffer RSA engines (`avx2`, `ifma`, and `portable` for tests), from
//! `quickshake-mbmath`: one RSA CRT exponentiation per SIMD lane, 8 operations (16 modular
//! exponentiations) per batch. Constant time is the arithmetic crate's (checked there under
//! valgrind for portable/avx2, by a timing test for ifma). ECDSA is not computed here: the
//! provider sends ECDSA lanes to the scalar path.

use std::sync::{Arc, Mutex};

use quickshake_mbmath::{
    rsa_private_crt_batch, rsa_public_batch, x25519_batch, Backend, BackendKind, MathError,
    RsaCrtKey, X25519Job,
};

use super::{
    Capabilities, EcdsaLane, Engine, LaneError, LaneResult, RsaKeyParts, RsaLane, X25519Lane,
};

/// Keys converted to the engine's form are kept for reuse (bounded; rotation adds new ones).
const KEY_CACHE: usize = 64;

/// Fewest lanes for which the batched public operation (the check of RSA results) beats
/// BoringSSL one at a time: on Zen 4 an 8-lane ifma group of RSA-2048 public operations
/// (e = 65537) takes ~44 µs, BoringSSL 14.6 µs per operation (`bench/engine`'s
/// `rsa2048-public` lines): a tie at 3 lanes, a win from 4.
const PUBLIC_MIN_BATCH: usize = 4;

/// Fewest key exchanges per batch for which the batched X25519 beats BoringSSL's: on Zen 4 one
/// 8-lane ifma ladder takes ~57 µs (`bench/engine`'s `x25519` lines), two of BoringSSL's scalar
/// multiplications (key share from its base-point table, then the shared secret) ~30 µs:
/// a batch of 2 exchanges (4 lanes) already wins.
const X25519_MIN_BATCH: usize = 2;

pub struct MbMathEngine {
    backend: Backend,
    caps: Capabilities,
    cache: Mutex<Vec<(Vec<u8>, Arc<RsaCrtKey>)>>,
}

impl MbMathEngine {
    /// The engine for one backend, if this CPU runs it. `rsa_min_batch` is the measured
    /// crossover below which BoringSSL one at a time is cheaper (see `bench/engine`).
    pub fn new(kind: BackendKind, rsa_min_batch: usize) -> Result<Self, MathError> {
        let backend = Backend::new(kind)?;
        // ifma's batched ladder; portable's for tests on CPUs without IFMA.
        let x25519 = matches!(kind, BackendKind::Ifma | BackendKind::Portable);
        Ok(MbMathEngine {
            backend,
            caps: Capabilities {
                name: kind.name().to_string(),
                accelerated: kind != BackendKind::Portable,
                lanes: 8,
                rsa_bits: vec![2048, 3072, 4096],
                ecdsa_p256: false,
                rsa_min_batch,
                ecdsa_min_batch: usize::MAX,
                x25519_min_batch: if x25519 { X25519_MIN_BATCH } else { usize::MAX },
                offload: false,
            },
            cache: Mutex::new(Vec::new()),
        })
    }

    fn key(&self, parts: &RsaKeyParts) -> Result<Arc<RsaCrtKey>, LaneError> {
        if let Ok(cache) = self.cache.lock() {
            if let Some((_, k)) = cache.iter().find(|(n, _)| *n == parts.n) {
                return Ok(k.clone());
            }
        }
        let key = RsaCrtKey::from_components(
            &parts.n,
            &parts.e,
            &parts.d,
            &parts.p,
            &parts.q,
            &parts.dp,
            &parts.dq,
            &parts.qinv,
        )
        .map(Arc::new)
        .map_err(lane_error)?;
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= KEY_CACHE {
                cache.remove(0);
            }
            cache.push((parts.n.clone(), key.clone()));
        }
        Ok(key)
    }

    /// `f` over the lanes whose keys convert (each lane's input with its engine key); a lane
    /// whose key does not convert gets that error, the rest `f`'s results in lane order.
    fn per_key(
        &self,
        lanes: &[RsaLane<'_>],
        f: impl FnOnce(&[(&RsaCrtKey, &[u8])]) -> Vec<Result<Vec<u8>, MathError>>,
    ) -> Vec<LaneResult> {
        let keys: Vec<Result<Arc<RsaCrtKey>, LaneError>> =
            lanes.iter().map(|l| self.key(l.key)).collect();
        let mut out: Vec<LaneResult> = keys.iter().map(|k| k.clone().map(|_| Vec::new())).collect();
        let jobs: Vec<(usize, &RsaCrtKey, &[u8])> = keys
            .iter()
            .zip(lanes)
            .enumerate()
            .filter_map(|(i, (k, l))| k.as_ref().ok().map(|k| (i, k.as_ref(), l.input)))
            .collect();
        let batch: Vec<(&RsaCrtKey, &[u8])> =
            jobs.iter().map(|(_, k, input)| (*k, *input)).collect();
        for ((i, _, _), r) in jobs.iter().zip(f(&batch)) {
            out[*i] = r.map_err(lane_error);
        }
        out
    }
}

fn lane_error(e: MathError) -> LaneError {
    match e {
        MathError::Unsupported(_) => LaneError::Unsupported,
        other => LaneError::Failed(other.to_string()),
    }
}

impl Engine for MbMathEngine {
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn rsa_private(&self, lanes: &[RsaLane<'_>]) -> Vec<LaneResult> {
        self.per_key(lanes, |batch| rsa_private_crt_batch(self.backend, batch))
    }

    fn ecdsa_sign(&self, lanes: &[EcdsaLane<'_>]) -> Vec<LaneResult> {
        vec![Err(LaneError::Unsupported); lanes.len()]
    }

    /// ifma only (the backend measured faster than BoringSSL at it), RSA-2048 keys, batches of
    /// at least [`PUBLIC_MIN_BATCH`] lanes.
    fn rsa_public(&self, lanes: &[RsaLane<'_>]) -> Option<Vec<LaneResult>> {
        let rsa2048 = lanes.iter().filter(|l| l.key.bits == 2048).count();
        if self.backend.kind() != BackendKind::Ifma || rsa2048 < PUBLIC_MIN_BATCH {
            return None;
        }
        Some(self.per_key(lanes, |batch| rsa_public_batch(self.backend, batch)))
    }

    /// ifma and portable; the other backends have none (`x25519_batch` says `Unsupported`).
    fn x25519(&self, lanes: &[X25519Lane<'_>]) -> Vec<Result<[u8; 32], LaneError>> {
        let jobs: Vec<X25519Job<'_>> = lanes
            .iter()
            .map(|l| X25519Job {
                scalar: l.scalar,
                point: l.point,
            })
            .collect();
        match x25519_batch(self.backend, &jobs) {
            Ok(out) => out.into_iter().map(Ok).collect(),
            Err(e) => vec![Err(lane_error(e)); lanes.len()],
        }
    }
}
