//! Asynchronous private key providers, as Envoy's `private_key_provider` configures them.
//!
//! This crate owns the provider framework (registry by `provider_name`, typed configs with
//! checked `@type` URLs, Envoy's `fallback`), the per-worker batching queues (Envoy's timer
//! semantics and quickshake's adaptive mode), the engine interface with its engines (Intel
//! crypto_mb loaded at run time, BoringSSL software, a fault injector), and the checks around
//! every operation: hashing and padding in, public-key verification of every RSA result out.
//!
//! It must not own sockets or event loops (it runs on the worker that calls it) and never
//! writes key material to logs, stats, errors or `Debug`. `unsafe` is confined to the crypto_mb
//! FFI module, which says why it needs it.
#![deny(unsafe_code)]

pub mod batch;
pub mod config;
pub mod engine;
pub mod engines;
pub mod key;
pub mod method;
pub mod padding;
pub mod priority;
pub mod provider;
pub mod queue;
pub mod stats;

use std::sync::{Arc, Mutex};

use boring::pkey::{PKey, Private, Public};
use quickshake_config::{read_data_source, DataSource, PrivateKeyProvider};
use quickshake_stats::Store;
use serde_json::{json, Value};

pub use batch::BatchingMode;
pub use config::{EngineChoice, ProviderConfig};
pub use key::ProviderKey;
pub use method::ProviderMethod;

use crate::engine::fault::FaultEngine;
use crate::engine::Engine;
use crate::provider::ProviderCore;
use crate::stats::ProviderStats;

/// Provider errors: each names the config field and, for keys, the file.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    #[error("{field}: {file}: {reason}")]
    Key {
        field: String,
        file: String,
        reason: String,
    },
    #[error(transparent)]
    Config(#[from] quickshake_config::ConfigError),
}

/// How a certificate's private key is used.
pub enum KeySetup {
    /// In-process, by BoringSSL (no provider, or a provider's fallback).
    Inline {
        key: PKey<Private>,
        description: String,
    },
    /// Through a provider's asynchronous key method.
    Provider {
        method: ProviderMethod,
        description: String,
    },
}

/// What `doctor` and `/config_dump` report for one provider-held key.
#[derive(Debug, Clone)]
pub struct ProviderReport {
    pub field: String,
    pub provider_name: String,
    pub engine: Option<String>,
    pub batching: Option<String>,
    pub poll_delay_ms: f64,
    pub fallback: bool,
    pub fallback_active: bool,
    pub reason: String,
}

impl ProviderReport {
    pub fn to_json(&self) -> Value {
        json!({
            "field": self.field,
            "provider_name": self.provider_name,
            "engine": self.engine,
            "batching": self.batching,
            "poll_delay": format!("{}s", self.poll_delay_ms / 1000.0),
            "fallback": self.fallback,
            "fallback_active": self.fallback_active,
            "why": self.reason,
        })
    }
}

/// The provider registry: builds a key setup for each `private_key_provider`.
pub struct Providers {
    store: Store,
    reports: Mutex<Vec<ProviderReport>>,
}

impl Providers {
    pub fn new(store: Store) -> Self {
        Providers {
            store,
            reports: Mutex::new(Vec::new()),
        }
    }

    /// What each provider-held key got, in configuration order.
    pub fn reports(&self) -> Vec<ProviderReport> {
        self.reports.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Extra `/config_dump` sections describing providers and engines.
    pub fn config_dump(&self) -> Vec<Value> {
        vec![json!({
            "@type": "type.googleapis.com/quickshake.admin.v1.PrivateKeyProvidersConfigDump",
            "providers": self.reports().iter().map(ProviderReport::to_json).collect::<Vec<_>>(),
        })]
    }

    /// Set up one certificate's provider. `outer` is the certificate's own `private_key`, if
    /// any (Envoy falls back to it); `public` is the certificate's public key; `scope` is the
    /// listener stat scope.
    pub fn setup(
        &self,
        cfg: &PrivateKeyProvider,
        outer: Option<PKey<Private>>,
        public: &PKey<Public>,
        scope: &str,
    ) -> Result<KeySetup, ProviderError> {
        let decoded = config::decode(cfg)?;
        let key = load_provider_key(cfg, &decoded.private_key, public)?;
        let stats = ProviderStats::new(&self.store, scope);
        let (engine, why) = match choose_engine(&decoded) {
            Ok(found) => found,
            Err(reason) => return self.no_engine(cfg, &decoded, outer, key, &stats, reason),
        };
        let name = engine.capabilities().name.clone();
        stats.set_engine(&name);
        let mode = match decoded.mode {
            BatchingMode::Timer => format!("timer ({:?})", decoded.poll_delay),
            BatchingMode::Adaptive => "adaptive".to_string(),
        };
        self.report(cfg, &decoded, Some(name.clone()), false, why);
        let core = Arc::new(ProviderCore::new(
            engine,
            decoded.mode,
            decoded.poll_delay,
            !decoded.envoy_semantics,
            cfg.fallback,
            stats,
        ));
        Ok(KeySetup::Provider {
            method: ProviderMethod::new(core, key),
            description: format!(
                "{} (engine {name}, batching {mode}, fallback {})",
                decoded.provider_name, cfg.fallback
            ),
        })
    }

    /// No usable engine: Envoy's rule. With `fallback: true` the key is used in-process (said
    /// once in the log and in stats); without, start-up fails saying why.
    fn no_engine(
        &self,
        cfg: &PrivateKeyProvider,
        decoded: &ProviderConfig,
        outer: Option<PKey<Private>>,
        key: Arc<ProviderKey>,
        stats: &ProviderStats,
        reason: String,
    ) -> Result<KeySetup, ProviderError> {
        if !cfg.fallback {
            return Err(ProviderError::Invalid {
                field: cfg.path.clone(),
                reason: format!(
                    "provider '{}' has no usable accelerated engine on this machine ({reason}); \
                     set `fallback: true` to use the key in-process, or see `quickshake doctor`",
                    decoded.provider_name
                ),
            });
        }
        tracing::warn!(
            field = %cfg.path,
            provider = %decoded.provider_name,
            "no usable accelerated engine ({reason}); fallback: using the key in-process"
        );
        stats.fallback.inc();
        self.report(cfg, decoded, None, true, reason);
        let key = outer.unwrap_or_else(|| key.pkey.clone());
        Ok(KeySetup::Inline {
            key,
            description: format!(
                "{} (fallback: key in-process, no accelerated engine)",
                decoded.provider_name
            ),
        })
    }

    fn report(
        &self,
        cfg: &PrivateKeyProvider,
        d: &ProviderConfig,
        engine: Option<String>,
        fallback_active: bool,
        reason: String,
    ) {
        let batching = engine.as_ref().map(|_| match d.mode {
            BatchingMode::Timer => "timer".to_string(),
            BatchingMode::Adaptive => "adaptive".to_string(),
        });
        if let Ok(mut r) = self.reports.lock() {
            // A reload rebuilds the same certificate: keep one report per config field.
            r.retain(|old| old.field != cfg.path);
            r.push(ProviderReport {
                field: cfg.path.clone(),
                provider_name: d.provider_name.clone(),
                engine,
                batching,
                poll_delay_ms: d.poll_delay.as_secs_f64() * 1000.0,
                fallback: cfg.fallback,
                fallback_active,
                reason,
            });
        }
    }
}

/// The engine for a decoded config, with the reason it was chosen; or why none is usable.
fn choose_engine(d: &ProviderConfig) -> Result<(Arc<dyn Engine>, String), String> {
    match &d.engine {
        EngineChoice::Auto if d.envoy_semantics => engines::best_accelerated()
            .map(|e| (e, "best accelerated engine on this machine".to_string())),
        EngineChoice::Auto => Ok(match engines::best_accelerated() {
            Ok(e) => (
                e,
                "engine: auto picked the best accelerated engine".to_string(),
            ),
            Err(why) => (
                engines::software(),
                format!("engine: auto found no accelerated engine ({why}); software"),
            ),
        }),
        EngineChoice::Named(name) => {
            engines::by_name(name).map(|e| (e, format!("engine: {name} as configured")))
        }
        EngineChoice::Qat => Err(engines::qat_status()),
        EngineChoice::Fault(plan) => {
            let inner: Box<dyn Engine> = Box::new(engine::software::SoftwareEngine::default());
            Ok((
                Arc::new(FaultEngine::new(inner, plan.clone())),
                "engine: fault (tests)".to_string(),
            ))
        }
    }
}

fn load_provider_key(
    cfg: &PrivateKeyProvider,
    ds: &DataSource,
    public: &PKey<Public>,
) -> Result<Arc<ProviderKey>, ProviderError> {
    let field = format!("{}.typed_config.private_key", cfg.path);
    let file = match ds {
        DataSource::Filename(p) => p.display().to_string(),
        _ => "<inline>".to_string(),
    };
    let pem = read_data_source(ds, &field)?;
    if let Some(warning) = quickshake_config::key_file_permission_warning(ds) {
        tracing::warn!(field = %field, "{warning}");
    }
    let key = ProviderKey::from_pem(&pem, &field, &file)?;
    if !key.pkey.public_eq(public) {
        return Err(ProviderError::Key {
            field,
            file,
            reason: "private key does not match the certificate's public key".into(),
        });
    }
    Ok(key)
}
