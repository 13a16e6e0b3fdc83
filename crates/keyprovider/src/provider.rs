//! A provider instance (one per certificate field): its engine and the processing of a batch
//! (engine call, per-lane check with the public key, software redo, replies, stats) — *how* a
//! batch is computed and checked — and *where* it runs, a [`Placement`] fixed at construction.
//! *When* a batch runs is decided by the queues (`queue`), which only hand batches in.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::check::{result_is_valid, scalar_one, Batched};
use crate::engine::{
    wipe, EcdsaLane, Engine, Executor, LaneError, LaneResult, RsaLane, X25519Lane, X25519_BASE,
};
use crate::op::{OpClass, OpError, OpKind, OpResult, PendingOp};
use crate::padding::SignView;
use crate::stats::ProviderStats;

/// How long an operation has waited since it was queued, on the event loop's clock.
fn waited(op: &PendingOp) -> std::time::Duration {
    crate::timer::now().saturating_duration_since(op.enqueued)
}

/// Where a provider's batches are computed. Fixed when the provider is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// On the worker that queued them (CPU engines, default): the most handshakes per core.
    Worker,
    /// On the worker's lower-priority batch thread (`--batch-threads`, CPU engines): the
    /// kernel preempts the batch whenever the worker has a request to answer.
    BatchThread,
    /// On the runtime's blocking pool (offload engines, which wait rather than compute).
    Blocking,
    /// On the engine's own bounded pool (engines with an [`Executor`], e.g. PKCS#11: one token
    /// session per thread), with the engine's per-operation deadline enforced on the worker.
    Pool,
}

impl Placement {
    /// Offload engines always wait off the worker; CPU engines where the options say.
    pub fn for_engine(engine: &dyn Engine, batch_threads: bool) -> Placement {
        if engine.executor().is_some() {
            Placement::Pool
        } else if engine.capabilities().offload {
            Placement::Blocking
        } else if batch_threads {
            Placement::BatchThread
        } else {
            Placement::Worker
        }
    }
}

/// How a provider treats its engine's batches, fixed at construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderSettings {
    /// Send batches below the engine's crossover to the scalar path (quickshake.batching);
    /// Envoy's cryptomb always uses its engine.
    pub use_crossover: bool,
    /// On an engine error, redo the operation in software instead of failing the handshake.
    pub fallback: bool,
    pub placement: Placement,
    /// Batch X25519 key exchanges ([`OpClass::Kex`]) on the engine; only set where the
    /// engine has a batched X25519.
    pub batch_key_exchange: bool,
}

pub struct ProviderCore {
    engine: Arc<dyn Engine>,
    settings: ProviderSettings,
    stats: ProviderStats,
    created: Instant,
    /// Batches computing on the batch thread now, and a signal when one finishes: adaptive
    /// batching keeps filling the next batch meanwhile, as it would while the worker computed.
    in_flight: AtomicUsize,
    batch_done: tokio::sync::Notify,
    /// Seconds after `created` of the last problem logged (+1; 0 = never).
    last_log: AtomicU64,
}

impl ProviderCore {
    pub fn new(engine: Arc<dyn Engine>, settings: ProviderSettings, stats: ProviderStats) -> Self {
        ProviderCore {
            engine,
            settings,
            stats,
            created: Instant::now(),
            in_flight: AtomicUsize::new(0),
            batch_done: tokio::sync::Notify::new(),
            last_log: AtomicU64::new(0),
        }
    }

    /// Operations per batch: the engine's lanes, 1 to 8.
    pub fn lanes(&self) -> usize {
        self.engine.capabilities().lanes.clamp(1, 8)
    }

    pub fn engine_name(&self) -> &str {
        &self.engine.capabilities().name
    }

    /// Whether this provider can decrypt for the TLS 1.2 RSA key exchange.
    pub fn rsa_decrypt_supported(&self) -> bool {
        self.engine.rsa_decrypt_supported()
    }

    pub fn settings(&self) -> ProviderSettings {
        self.settings
    }

    /// Whether handshakes may queue their X25519 key exchange here ([`OpClass::Kex`]).
    pub fn batches_key_exchange(&self) -> bool {
        self.settings.batch_key_exchange
    }

    pub fn stats(&self) -> &ProviderStats {
        &self.stats
    }

    /// The smallest batch of `class` worth this engine's batch call (`usize::MAX`: it does not
    /// batch the class, or this provider always uses the engine and has no crossover).
    pub fn min_batch(&self, class: OpClass) -> usize {
        let caps = self.engine.capabilities();
        match class {
            OpClass::Rsa if self.settings.use_crossover => caps.rsa_min_batch,
            OpClass::Ecdsa if self.settings.use_crossover && caps.ecdsa_p256 => {
                caps.ecdsa_min_batch
            }
            OpClass::Kex => caps.x25519_min_batch,
            // Envoy's semantics: every batch goes to the engine, any size gains.
            OpClass::Rsa => 2,
            OpClass::Ecdsa if caps.ecdsa_p256 => 2,
            OpClass::Ecdsa => usize::MAX,
        }
    }

    /// Whether a batch is computing off the worker (on the batch thread) right now.
    pub fn computing(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
    }

    /// Resolves when a batch computing off the worker finishes. Enable it (or poll it once)
    /// before checking [`computing`](Self::computing) so a finish in between is not missed.
    pub fn batch_done(&self) -> tokio::sync::futures::Notified<'_> {
        self.batch_done.notified()
    }

    /// Compute one batch and reply to every operation in it, where this provider's
    /// [`Placement`] says (the worker keeps serving meanwhile unless it is the worker).
    pub fn dispatch(self: &Arc<Self>, class: OpClass, batch: Vec<PendingOp>) {
        match self.settings.placement {
            Placement::Worker => self.process(class, batch),
            Placement::Blocking => match tokio::runtime::Handle::try_current() {
                Ok(handle) => {
                    let core = self.clone();
                    handle.spawn_blocking(move || core.process(class, batch));
                }
                // Not on an event loop (a blocking caller): compute here.
                Err(_) => self.process(class, batch),
            },
            Placement::Pool => match self.engine.executor() {
                Some(exec) => self.dispatch_to_pool(exec, class, batch),
                None => self.process(class, batch),
            },
            Placement::BatchThread => {
                let caps = self.engine.capabilities();
                // Batches that run on the scalar path anyway stay on the worker.
                let small = self.settings.use_crossover
                    && batch.len() < caps.rsa_min_batch.min(caps.ecdsa_min_batch);
                if small {
                    return self.process(class, batch);
                }
                let core = self.clone();
                self.in_flight.fetch_add(1, Ordering::AcqRel);
                let job = Box::new(move || {
                    core.process(class, batch);
                    core.in_flight.fetch_sub(1, Ordering::AcqRel);
                    core.batch_done.notify_waiters();
                });
                if let Err(job) = crate::priority::run_on_batch_thread(job) {
                    job();
                }
            }
        }
    }

    /// Hand a batch to the engine's pool. On an event loop, each operation's handshake waits
    /// through a timer task on this worker: past the deadline it fails at once, whatever the
    /// device is doing (a stalled token hangs a pool thread, never a handshake).
    fn dispatch_to_pool(
        self: &Arc<Self>,
        exec: &dyn Executor,
        class: OpClass,
        mut batch: Vec<PendingOp>,
    ) {
        let deadline = exec.deadline();
        let handle = tokio::runtime::Handle::try_current();
        // Watched operations count as failed in their timer task when the deadline passes.
        let watched = handle.is_ok();
        if let Ok(handle) = handle {
            for op in &mut batch {
                let (tx, rx) = tokio::sync::oneshot::channel();
                let reply = std::mem::replace(&mut op.reply, tx);
                let at = tokio::time::Instant::from_std(op.enqueued + deadline);
                let stats = self.stats.clone();
                handle.spawn(async move {
                    let result = match tokio::time::timeout_at(at, rx).await {
                        Ok(Ok(r)) => r,
                        Ok(Err(_)) => Err(OpError::Engine("operation dropped".into())),
                        Err(_) => {
                            stats.failed.inc();
                            Err(OpError::Engine("deadline passed".into()))
                        }
                    };
                    let _ = reply.send(result);
                });
            }
        }
        let core = self.clone();
        exec.execute(Box::new(move |run: bool| {
            let (live, late): (Vec<PendingOp>, Vec<PendingOp>) = batch
                .into_iter()
                .partition(|op| run && waited(op) < deadline);
            for op in late {
                if !(run && watched) {
                    core.stats.failed.inc();
                }
                let why = if run {
                    "deadline passed before it started"
                } else {
                    "queue full"
                };
                let _ = op.reply.send(Err(OpError::Engine(why.into())));
            }
            if !live.is_empty() {
                core.process(class, live);
            }
        }));
    }

    /// Compute one batch and reply to every operation in it, on the calling thread.
    fn process(&self, class: OpClass, batch: Vec<PendingOp>) {
        let caps = self.engine.capabilities();
        let size = batch.len();
        let min = match class {
            OpClass::Rsa => {
                self.stats.rsa_queue_sizes.record(size as f64);
                caps.rsa_min_batch
            }
            OpClass::Ecdsa => {
                self.stats.ecdsa_queue_sizes.record(size as f64);
                caps.ecdsa_min_batch
            }
            OpClass::Kex => return self.process_kex(batch),
        };
        for op in &batch {
            match op.kind {
                OpKind::RsaSign => self.stats.rsa_sign.inc(),
                OpKind::RsaDecrypt => self.stats.rsa_decrypt.inc(),
                OpKind::EcdsaSign => self.stats.ecdsa_sign.inc(),
                OpKind::X25519 => {}
            }
        }
        // Operations the engine does not compute (a key size, ECDSA) and, for
        // quickshake.batching, batches below the engine's crossover run one at a time on BoringSSL.
        let supported = match class {
            OpClass::Rsa => batch.iter().all(|op| {
                op.key
                    .rsa
                    .as_ref()
                    .is_some_and(|k| caps.rsa_bits.contains(&k.bits))
            }),
            OpClass::Ecdsa => caps.ecdsa_p256,
            OpClass::Kex => false,
        };
        let scalar = !supported || (self.settings.use_crossover && size < min);
        let results = if scalar {
            self.stats.scalar_path.add(size as u64);
            batch.iter().map(scalar_one).collect()
        } else {
            self.run_engine(class, &batch)
        };
        let backs = match class {
            OpClass::Rsa => self.batched_public(&batch, &results),
            OpClass::Ecdsa => self.batched_verify(&batch, &results),
            OpClass::Kex => Vec::new(),
        };
        for (i, (op, raw)) in batch.into_iter().zip(results).enumerate() {
            let back = backs.get(i).and_then(|b| b.as_ref());
            let result = self.check(&op, raw, back);
            if result.is_err() {
                self.stats.failed.inc();
            }
            self.stats
                .op_wait_ms
                .record(waited(&op).as_secs_f64() * 1000.0);
            // The handshake may be gone (client closed); nothing to do then.
            let _ = op.reply.send(result);
        }
    }

    /// Key exchanges: a fresh scalar per exchange from BoringSSL's RNG, our share
    /// `X25519(k, 9)` and the secret `X25519(k, peer)`, all in one engine call. There is no
    /// check of the results to make, nor a need for one: the scalar is ephemeral (no
    /// long-term key for a fault to leak), and a wrong share or secret only fails that
    /// handshake's Finished. A batch below the engine's crossover, an engine error and an
    /// all-zero secret (a low-order peer share) go back to the handshake, which computes (and
    /// rejects) as BoringSSL always does.
    fn process_kex(&self, batch: Vec<PendingOp>) {
        let size = batch.len();
        let results = if size < self.engine.capabilities().x25519_min_batch {
            vec![Err(OpError::Inline); size]
        } else {
            self.run_kex(&batch)
        };
        for (op, result) in batch.into_iter().zip(results) {
            if let Some(kex) = &self.stats.kex {
                match result {
                    Ok(_) => kex.batched.inc(),
                    Err(_) => kex.inline.inc(),
                }
            }
            let _ = op.reply.send(result);
        }
        if let Some(kex) = &self.stats.kex {
            kex.queue_sizes.record(size as f64);
        }
    }

    fn run_kex(&self, batch: &[PendingOp]) -> Vec<OpResult> {
        let mut scalars = vec![[0u8; 32]; batch.len()];
        if scalars
            .iter_mut()
            .any(|s| boring::rand::rand_bytes(s).is_err())
        {
            return vec![Err(OpError::Inline); batch.len()];
        }
        let peers: Vec<[u8; 32]> = batch
            .iter()
            .map(|op| op.input.as_slice().try_into().unwrap_or(X25519_BASE))
            .collect();
        let lanes: Vec<X25519Lane<'_>> = scalars
            .iter()
            .zip(&peers)
            .flat_map(|(scalar, peer)| {
                [
                    X25519Lane {
                        scalar,
                        point: &X25519_BASE,
                    },
                    X25519Lane {
                        scalar,
                        point: peer,
                    },
                ]
            })
            .collect();
        let outcome = catch_unwind(AssertUnwindSafe(|| self.engine.x25519(&lanes)));
        let n = lanes.len();
        drop(lanes);
        for s in &mut scalars {
            wipe(s);
        }
        let out = match outcome {
            Ok(out) if out.len() == n => out,
            _ => {
                self.log_once("the engine's X25519 failed; the handshakes compute it");
                return vec![Err(OpError::Inline); batch.len()];
            }
        };
        batch
            .iter()
            .zip(out.chunks(2))
            .map(|(op, pair)| match pair {
                [Ok(share), Ok(secret)] if op.input.len() == 32 && secret != &[0u8; 32] => {
                    let mut v = Vec::with_capacity(64);
                    v.extend_from_slice(share);
                    v.extend_from_slice(secret);
                    Ok(v)
                }
                _ => Err(OpError::Inline),
            })
            .collect()
    }

    /// The engine call, contained: a panic fails the lanes of this batch only.
    fn run_engine(&self, class: OpClass, batch: &[PendingOp]) -> Vec<LaneResult> {
        let outcome = catch_unwind(AssertUnwindSafe(|| match class {
            OpClass::Rsa => {
                let lanes: Vec<RsaLane<'_>> = batch
                    .iter()
                    .filter_map(|op| {
                        op.key.rsa.as_ref().map(|key| RsaLane {
                            key,
                            input: &op.input,
                        })
                    })
                    .collect();
                if lanes.len() != batch.len() {
                    return vec![Err(LaneError::Unsupported); batch.len()];
                }
                if batch.iter().all(|op| op.kind == OpKind::RsaDecrypt) {
                    return self.engine.rsa_decrypt(&lanes);
                }
                let views: Vec<&SignView> = batch
                    .iter()
                    .filter(|op| op.kind == OpKind::RsaSign)
                    .filter_map(|op| op.signing.as_ref())
                    .collect();
                if views.len() == batch.len() {
                    return self.engine.rsa_sign(&lanes, &views);
                }
                self.engine.rsa_private(&lanes)
            }
            OpClass::Kex => vec![Err(LaneError::Unsupported); batch.len()],
            OpClass::Ecdsa => {
                let lanes: Vec<EcdsaLane<'_>> = batch
                    .iter()
                    .filter_map(|op| {
                        op.key.ec.as_ref().map(|key| EcdsaLane {
                            key,
                            digest: &op.input,
                        })
                    })
                    .collect();
                if lanes.len() != batch.len() {
                    return vec![Err(LaneError::Unsupported); batch.len()];
                }
                self.engine.ecdsa_sign(&lanes)
            }
        }));
        match outcome {
            Ok(r) if r.len() == batch.len() => r,
            Ok(_) => vec![
                Err(LaneError::Failed(
                    "engine returned the wrong number of lanes".into()
                ));
                batch.len()
            ],
            Err(_) => vec![Err(LaneError::Failed("engine panicked".into())); batch.len()],
        }
    }

    /// Each RSA result raised to `e` mod `n` by the engine's batched public operation, where it
    /// has one for these lanes (empty, or `None` for a lane, where not: that lane is checked by
    /// BoringSSL).
    fn batched_public(&self, batch: &[PendingOp], results: &[LaneResult]) -> Vec<Option<Batched>> {
        let (index, lanes): (Vec<usize>, Vec<RsaLane<'_>>) = batch
            .iter()
            .zip(results)
            .enumerate()
            .filter_map(|(i, (op, r))| {
                let key = op.key.rsa.as_ref()?;
                let input = r.as_ref().ok()?;
                Some((i, RsaLane { key, input }))
            })
            .unzip();
        if lanes.is_empty() {
            return Vec::new();
        }
        let Some(backs) = self.engine.rsa_public(&lanes) else {
            return Vec::new();
        };
        let mut out = vec![None; batch.len()];
        for (i, back) in index.into_iter().zip(backs) {
            out[i] = back.ok().map(Batched::RsaBack);
        }
        out
    }

    /// The ECDSA signatures the engine's batched verification confirmed, where it has one for
    /// these lanes (`None` for a lane it did not confirm: BoringSSL verifies that one).
    fn batched_verify(&self, batch: &[PendingOp], results: &[LaneResult]) -> Vec<Option<Batched>> {
        let mut index = Vec::with_capacity(batch.len());
        let mut lanes = Vec::with_capacity(batch.len());
        let mut sigs: Vec<&[u8]> = Vec::with_capacity(batch.len());
        for (i, (op, r)) in batch.iter().zip(results).enumerate() {
            if let (Some(key), Ok(sig)) = (op.key.ec.as_ref(), r) {
                index.push(i);
                lanes.push(EcdsaLane {
                    key,
                    digest: &op.input,
                });
                sigs.push(sig);
            }
        }
        if lanes.is_empty() {
            return Vec::new();
        }
        let Some(verified) = self.engine.ecdsa_verify(&lanes, &sigs) else {
            return Vec::new();
        };
        let mut out = vec![None; batch.len()];
        for (i, ok) in index.into_iter().zip(verified) {
            out[i] = ok.then_some(Batched::EcdsaVerified);
        }
        out
    }

    /// Check a lane's result (`back`: the result raised to `e` by the engine's batched public
    /// operation, if it ran; else BoringSSL computes it); redo in software when the check fails,
    /// or on an engine error when fallback is on.
    fn check(&self, op: &PendingOp, raw: LaneResult, back: Option<&Batched>) -> OpResult {
        match raw {
            Ok(v) if result_is_valid(op, &v, back) => Ok(v),
            Ok(_) => {
                self.stats.verify_failed.inc();
                self.log_once("an engine result failed the public-key check; redone in software");
                self.software_redo(op)
            }
            Err(LaneError::Unsupported) => self.software_redo(op),
            Err(LaneError::Failed(reason)) => {
                self.stats.engine_error.inc();
                self.log_once(&format!(
                    "engine {} failed: {reason}",
                    self.engine.capabilities().name
                ));
                if self.settings.fallback {
                    self.software_redo(op)
                } else {
                    Err(OpError::Engine(reason))
                }
            }
        }
    }

    fn software_redo(&self, op: &PendingOp) -> OpResult {
        self.stats.software_retry.inc();
        match scalar_one(op) {
            Ok(v) if result_is_valid(op, &v, None) => Ok(v),
            Ok(_) => Err(OpError::Verify),
            Err(_) => Err(OpError::Unsupported),
        }
    }

    /// Log a provider problem once per burst (the first, then at most once a minute).
    fn log_once(&self, msg: &str) {
        let now = self.created.elapsed().as_secs() + 1;
        let last = self.last_log.load(Ordering::Relaxed);
        if (last == 0 || now >= last + 60)
            && self
                .last_log
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                engine = %self.engine.capabilities().name,
                "{msg} (further reports within a minute are counted, not logged)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::test_rsa2048 as rsa2048;

    /// Batched key exchanges agree with the peer's own X25519 (the peer's secret from our
    /// share is ours); a low-order share and a batch below the crossover go back to the
    /// handshake.
    #[test]
    fn batched_x25519_agrees_with_the_peer() {
        use crate::engine::mbmath::MbMathEngine;
        use quickshake_mbmath::{x25519_portable, BackendKind};
        let engine = Arc::new(MbMathEngine::new(BackendKind::Portable, 1).expect("portable"));
        let stats = ProviderStats::new(&quickshake_stats::Store::new(), "t.").with_key_exchange();
        let core = ProviderCore::new(
            engine,
            ProviderSettings {
                use_crossover: true,
                fallback: false,
                placement: Placement::Worker,
                batch_key_exchange: true,
            },
            stats,
        );
        let peer_keys: Vec<[u8; 32]> = (1..=3u8).map(|i| [i.wrapping_mul(29); 32]).collect();
        let mut shares: Vec<Vec<u8>> = peer_keys
            .iter()
            .map(|k| x25519_portable(k, &X25519_BASE).to_vec())
            .collect();
        shares.push(vec![0; 32]);
        let (ops, mut rxs): (Vec<_>, Vec<_>) = shares
            .iter()
            .map(|s| PendingOp::new(OpKind::X25519, rsa2048(), s.clone()))
            .unzip();
        core.process_kex(ops);
        for (k, rx) in peer_keys.iter().zip(&mut rxs) {
            let v = rx.try_recv().expect("replied").expect("batched");
            let share: [u8; 32] = v[..32].try_into().expect("64 bytes");
            assert_eq!(x25519_portable(k, &share)[..], v[32..]);
        }
        assert_eq!(rxs[3].try_recv().expect("replied"), Err(OpError::Inline));
        // Alone: below the engine's crossover (2).
        let (op, mut rx) = PendingOp::new(OpKind::X25519, rsa2048(), shares[0].clone());
        core.process_kex(vec![op]);
        assert_eq!(rx.try_recv().expect("replied"), Err(OpError::Inline));
    }
}
