//! A fault-injecting engine for tests: wraps a real engine and, on a schedule, returns errors,
//! wrong results, sleeps (a slow engine or device) or panics. Selected with
//! `engine: fault` in `quickshake.batching` plus `fault: {...}` settings, never by `auto`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{Capabilities, EcdsaLane, Engine, LaneError, LaneResult, RsaLane, X25519Lane};

/// What to inject, each applied to every `every`-th operation (1 = all).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultPlan {
    /// Lanes that fail with an engine error.
    pub error_every: Option<u64>,
    /// Lanes whose result is wrong (one bit flipped): the provider's check must catch these.
    pub corrupt_every: Option<u64>,
    /// Sleep this long per batch call (a slow engine).
    pub delay: Option<Duration>,
    /// Panic inside the batch call on every `panic_every`-th batch.
    pub panic_every: Option<u64>,
}

pub struct FaultEngine {
    inner: Box<dyn Engine>,
    plan: FaultPlan,
    caps: Capabilities,
    ops: AtomicU64,
    batches: AtomicU64,
}

impl FaultEngine {
    pub fn new(inner: Box<dyn Engine>, plan: FaultPlan) -> Self {
        let mut caps = inner.capabilities().clone();
        caps.name = format!("fault({})", caps.name);
        // A delayed engine models a device: it sleeps, so it is run off the worker thread.
        caps.offload = plan.delay.is_some();
        FaultEngine {
            inner,
            plan,
            caps,
            ops: AtomicU64::new(0),
            batches: AtomicU64::new(0),
        }
    }

    fn before_batch(&self) {
        let b = self.batches.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(d) = self.plan.delay {
            std::thread::sleep(d);
        }
        if self
            .plan
            .panic_every
            .is_some_and(|n| n > 0 && b.is_multiple_of(n))
        {
            panic!("fault engine: injected panic in batch {b}");
        }
    }

    fn after(&self, results: Vec<LaneResult>) -> Vec<LaneResult> {
        results
            .into_iter()
            .map(|r| {
                let op = self.ops.fetch_add(1, Ordering::Relaxed) + 1;
                let hit = |every: Option<u64>| every.is_some_and(|n| n > 0 && op.is_multiple_of(n));
                if hit(self.plan.error_every) {
                    return Err(LaneError::Failed("injected engine error".into()));
                }
                match r {
                    Ok(mut v) if hit(self.plan.corrupt_every) => {
                        if let Some(last) = v.last_mut() {
                            *last ^= 1;
                        }
                        Ok(v)
                    }
                    other => other,
                }
            })
            .collect()
    }
}

impl Engine for FaultEngine {
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn rsa_private(&self, lanes: &[RsaLane<'_>]) -> Vec<LaneResult> {
        self.before_batch();
        self.after(self.inner.rsa_private(lanes))
    }

    fn ecdsa_sign(&self, lanes: &[EcdsaLane<'_>]) -> Vec<LaneResult> {
        self.before_batch();
        self.after(self.inner.ecdsa_sign(lanes))
    }

    /// The inner engine's, untouched (a wrong share or secret fails its handshake's Finished).
    fn x25519(&self, lanes: &[X25519Lane<'_>]) -> Vec<Result<[u8; 32], LaneError>> {
        self.inner.x25519(lanes)
    }

    /// The inner engine's, untouched: the faults are in the private results it checks.
    fn rsa_public(&self, lanes: &[RsaLane<'_>]) -> Option<Vec<LaneResult>> {
        self.inner.rsa_public(lanes)
    }
}
