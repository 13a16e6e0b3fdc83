//! The fault-injecting engine, a test double: wraps a real engine and, on a schedule, returns
//! errors, wrong results, sleeps (a slow engine or device) or panics. Selected with
//! `engine: fault` in `quickshake.batching` plus `fault: {...}` settings, never by `auto`, and
//! only in binaries that register it ([`engines`]): the test-only `quickshake-test`, and tests
//! that build providers in-process. The release `quickshake` refuses such a config at load.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quickshake_keyprovider::engine::software::SoftwareEngine;
use quickshake_keyprovider::engine::{
    Capabilities, EcdsaLane, Engine, LaneError, LaneResult, RsaLane, X25519Lane,
};
use quickshake_keyprovider::{EngineFactory, ExtraEngines, ProviderError};
use serde_json::Value;

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

/// The name `engine:` selects the fault engine with (and its settings block's key).
pub const NAME: &str = "fault";

/// The engines a test binary adds: `fault`, software wrapped in a [`FaultEngine`].
pub fn engines() -> ExtraEngines {
    ExtraEngines::default().with(NAME, Arc::new(FaultFactory))
}

/// Builds a [`FaultEngine`] over software from a provider's `fault: {...}` block.
pub struct FaultFactory;

impl EngineFactory for FaultFactory {
    fn build(
        &self,
        settings: Option<&Value>,
        path: &str,
    ) -> Result<Arc<dyn Engine>, ProviderError> {
        let plan = FaultPlan::parse(settings, path)?;
        Ok(Arc::new(FaultEngine::new(
            Box::new(SoftwareEngine::default()),
            plan,
        )))
    }
}

impl FaultPlan {
    /// The plan a `fault` block (at `path`) gives: `error_every`, `corrupt_every`,
    /// `panic_every` (positive integers), `delay` (a duration); every error names its field.
    pub fn parse(block: Option<&Value>, path: &str) -> Result<FaultPlan, ProviderError> {
        let invalid = |field: String, reason: &str| ProviderError::Invalid {
            field,
            reason: reason.to_owned(),
        };
        let Some(v) = block else {
            return Ok(FaultPlan::default());
        };
        let obj = v
            .as_object()
            .ok_or_else(|| invalid(path.to_owned(), "expected a mapping"))?;
        let mut plan = FaultPlan::default();
        for (k, v) in obj {
            let p = format!("{path}.{k}");
            let every = || {
                v.as_u64()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| invalid(p.clone(), "expected a positive integer"))
            };
            match k.as_str() {
                "error_every" => plan.error_every = Some(every()?),
                "corrupt_every" => plan.corrupt_every = Some(every()?),
                "panic_every" => plan.panic_every = Some(every()?),
                "delay" => {
                    plan.delay = Some(
                        quickshake_config::parse_duration(v, &p)
                            .map_err(|e| invalid(p.clone(), &e.to_string()))?,
                    )
                }
                _ => return Err(invalid(p, "unknown field")),
            }
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_parses_and_names_the_field_at_fault() {
        let plan = FaultPlan::parse(
            Some(&serde_json::json!({"error_every": 2, "delay": "5ms"})),
            "p.fault",
        )
        .expect("valid");
        assert_eq!(plan.error_every, Some(2));
        assert_eq!(plan.delay, Some(Duration::from_millis(5)));
        assert_eq!(
            FaultPlan::parse(None, "p.fault").expect("none"),
            FaultPlan::default()
        );
        for (block, field) in [
            (serde_json::json!({"error_every": 0}), "p.fault.error_every"),
            (serde_json::json!({"bogus": 1}), "p.fault.bogus"),
            (serde_json::json!(3), "p.fault"),
        ] {
            let err = FaultPlan::parse(Some(&block), "p.fault")
                .expect_err("invalid")
                .to_string();
            assert!(err.starts_with(&format!("{field}: ")), "{err}");
        }
    }
}
