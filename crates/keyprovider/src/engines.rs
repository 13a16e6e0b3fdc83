//! Which engines this machine has, detected once per process. Tests hide engines with
//! `QUICKSHAKE_HIDE_ENGINES=crypto_mb` (or `all`), so the accelerated path and the no-engine
//! path both run on a machine that has the engine.

use std::sync::{Arc, OnceLock};

use crate::engine::crypto_mb::CryptoMbEngine;
use crate::engine::software::SoftwareEngine;
use crate::engine::Engine;

/// One engine this build knows, and whether it is usable here.
#[derive(Clone)]
pub struct EngineStatus {
    pub name: &'static str,
    pub engine: Result<Arc<dyn Engine>, String>,
}

/// The accelerated engines, best first. Detected once.
pub fn accelerated() -> &'static [EngineStatus] {
    static DETECTED: OnceLock<Vec<EngineStatus>> = OnceLock::new();
    DETECTED.get_or_init(|| {
        vec![EngineStatus {
            name: "crypto_mb",
            engine: CryptoMbEngine::load()
                .map(|e| Arc::new(e) as Arc<dyn Engine>)
                .map_err(|e| e.reason()),
        }]
    })
}

/// The software engine (always usable).
pub fn software() -> Arc<dyn Engine> {
    static SOFTWARE: OnceLock<Arc<dyn Engine>> = OnceLock::new();
    SOFTWARE
        .get_or_init(|| Arc::new(SoftwareEngine::default()))
        .clone()
}

/// The best usable accelerated engine, or why there is none.
pub fn best_accelerated() -> Result<Arc<dyn Engine>, String> {
    let mut reasons = Vec::new();
    for s in accelerated() {
        match &s.engine {
            Ok(e) => return Ok(e.clone()),
            Err(r) => reasons.push(format!("{}: {r}", s.name)),
        }
    }
    Err(reasons.join("; "))
}

/// A named engine, or why it is unusable.
pub fn by_name(name: &str) -> Result<Arc<dyn Engine>, String> {
    if name == "software" {
        return Ok(software());
    }
    match accelerated().iter().find(|s| s.name == name) {
        Some(s) => s.engine.clone(),
        None => Err(format!(
            "engine '{name}' is not built into this quickshake yet"
        )),
    }
}
