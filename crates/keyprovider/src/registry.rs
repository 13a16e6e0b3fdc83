//! The provider registry: builds a key setup for each `private_key_provider`, reports what
//! each key got (`doctor`, `/config_dump`), and carries providers across key rotation.
//!
//! Rotation goes through [`Providers::setup`] like start-up: the same certificate field with
//! the same provider settings gets the same [`Queues`] back (its per-worker queues, engine and
//! stats survive), bound to the new key in a new [`ProviderMethod`]; old contexts keep the old
//! method and key until their connections finish. A field whose settings changed gets a new
//! provider; the old one goes when its last context does, and the workers drop its queues
//! (see `queue`). So rotating a key any number of times leaves the number of providers and
//! queues flat.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use boring::pkey::{PKey, Private, Public};
use quickshake_config::{read_data_source, DataSource, PrivateKeyProvider};
use quickshake_stats::Store;
use serde_json::{json, Value};

use crate::batch::{Batching, BatchingMode};
use crate::config::{self, EngineChoice, ProviderConfig};
use crate::engine::Engine;
use crate::engines::{software, EngineUnavailable, Engines};
use crate::error::ProviderError;
use crate::extension;
use crate::key::{KeyType, ProviderKey};
use crate::method::ProviderMethod;
use crate::options::ProviderOptions;
use crate::pkcs11;
use crate::provider::{Placement, ProviderCore, ProviderSettings};
use crate::queue::Queues;
use crate::stats::ProviderStats;

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
    /// How operations are batched (`None` where nothing is: the key in-process, a token).
    pub batching: Option<Batching>,
    pub poll_delay_ms: f64,
    pub fallback: bool,
    pub fallback_active: bool,
    pub reason: String,
    /// PKCS#11 providers: module, token, key type, signatures/s measured (doctor only).
    pub token: Option<Value>,
}

impl ProviderReport {
    pub fn to_json(&self) -> Value {
        json!({
            "field": self.field,
            "provider_name": self.provider_name,
            "engine": self.engine,
            "batching": self.batching.map(|b| b.mode.name()),
            "max_batch_delay": self
                .batching
                .filter(|b| b.mode == BatchingMode::Budget)
                .map(|b| format!("{}s", b.budget().as_secs_f64())),
            "queues": self.batching.map(|b| b.scope.name()),
            "poll_delay": format!("{}s", self.poll_delay_ms / 1000.0),
            "fallback": self.fallback,
            "fallback_active": self.fallback_active,
            "why": self.reason,
            "pkcs11": self.token,
        })
    }
}

/// Everything of a provider config but its key: equal settings mean a rotation may keep the
/// provider.
#[derive(Debug, Clone, PartialEq)]
struct Settings {
    provider_name: String,
    engine: EngineChoice,
    batching: Batching,
    envoy_semantics: bool,
    fallback: bool,
}

impl Settings {
    fn of(cfg: &PrivateKeyProvider, d: &ProviderConfig) -> Settings {
        Settings {
            provider_name: d.provider_name.clone(),
            engine: d.engine.clone(),
            batching: d.batching,
            envoy_semantics: d.envoy_semantics,
            fallback: cfg.fallback,
        }
    }
}

/// What a certificate field got last time.
enum Previous {
    /// A provider: reused while its settings hold and a context still uses it.
    Provider {
        settings: Settings,
        queues: Weak<Queues>,
        description: String,
    },
    /// The key in-process (no usable engine, `fallback: true`), already counted in stats.
    Inline { settings: Settings },
}

/// What [`Providers::setup`] keeps from a field's previous setup.
enum Reuse {
    /// The same provider, for a new key.
    Provider(Arc<Queues>, String),
    /// The key was already in-process (and counted in the `fallback` gauge).
    CountedInline,
    Nothing,
}

/// The provider registry: builds a key setup for each `private_key_provider`.
pub struct Providers {
    store: Store,
    options: ProviderOptions,
    engines: Engines,
    reports: Mutex<Vec<ProviderReport>>,
    /// By (stat scope, config field).
    previous: Mutex<HashMap<(String, String), Previous>>,
}

impl Providers {
    /// A registry; detects the engines once, under `options.engines`.
    pub fn new(store: Store, options: ProviderOptions) -> Self {
        let engines = Engines::detect(&options.engines);
        Providers {
            store,
            options,
            engines,
            reports: Mutex::new(Vec::new()),
            previous: Mutex::new(HashMap::new()),
        }
    }

    /// The engines detected for this registry.
    pub fn engines(&self) -> &Engines {
        &self.engines
    }

    /// What each provider-held key got, in configuration order.
    pub fn reports(&self) -> Vec<ProviderReport> {
        self.reports.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// How many providers (per-field queue sets) are alive now.
    pub fn live_providers(&self) -> usize {
        self.previous.lock().map_or(0, |p| {
            p.values()
                .filter(
                    |v| matches!(v, Previous::Provider { queues, .. } if queues.strong_count() > 0),
                )
                .count()
        })
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
    /// listener stat scope. Called again for the same field on rotation.
    pub fn setup(
        &self,
        cfg: &PrivateKeyProvider,
        outer: Option<PKey<Private>>,
        public: &PKey<Public>,
        scope: &str,
    ) -> Result<KeySetup, ProviderError> {
        if pkcs11::is_pkcs11(cfg) {
            return self.setup_pkcs11(cfg, outer, public, scope);
        }
        let decoded = config::decode(cfg)?;
        let extra = self.extra_engine(cfg, &decoded)?;
        let key = load_provider_key(cfg, &decoded.private_key, public)?;
        let settings = Settings::of(cfg, &decoded);
        let id = (scope.to_string(), cfg.path.clone());
        let counted_inline = match self.reuse(&id, &settings) {
            Reuse::Provider(queues, description) => {
                return Ok(KeySetup::Provider {
                    method: ProviderMethod::new(queues, key),
                    description,
                })
            }
            Reuse::CountedInline => true,
            Reuse::Nothing => false,
        };
        let stats = ProviderStats::new(&self.store, scope);
        let (engine, why) = match self.choose_engine(&decoded, &key.key_type, extra) {
            Ok(found) => found,
            Err(reason) => {
                let setup = self.no_engine(cfg, &decoded, outer, key, reason)?;
                if !counted_inline {
                    stats.fallback.inc();
                }
                self.remember(id, Previous::Inline { settings });
                return Ok(setup);
            }
        };
        let name = engine.capabilities().name.clone();
        stats.set_engine(&name);
        let mode = decoded.batching.describe();
        self.report(cfg, &decoded, Some(name.clone()), false, why);
        let placement = Placement::for_engine(engine.as_ref(), self.options.batch_threads);
        let batch_key_exchange =
            decoded.batch_key_exchange && engine.capabilities().x25519_min_batch != usize::MAX;
        let stats = if batch_key_exchange {
            stats.with_key_exchange()
        } else {
            stats
        };
        let core = Arc::new(ProviderCore::new(
            engine,
            ProviderSettings {
                use_crossover: !decoded.envoy_semantics,
                fallback: cfg.fallback,
                placement,
                batch_key_exchange,
            },
            stats,
        ));
        let kex = if batch_key_exchange {
            ", X25519 batched"
        } else {
            ""
        };
        let queues = Arc::new(Queues::new(decoded.batching, core));
        let description = format!(
            "{} (engine {name}, batching {mode}, fallback {}{kex})",
            decoded.provider_name, cfg.fallback
        );
        Ok(self.provide(id, settings, queues, key, description))
    }

    /// [`Providers::setup`] for a QUIC listener's certificate: it joins a live provider of the
    /// same listener scope (a TCP listener on the same address, built before it) with the same
    /// settings, so QUIC and TCP handshakes of that address share one provider and its
    /// per-worker queues, and a batch may hold both. Without one, as `setup`.
    pub fn setup_joining(
        &self,
        cfg: &PrivateKeyProvider,
        outer: Option<PKey<Private>>,
        public: &PKey<Public>,
        scope: &str,
    ) -> Result<KeySetup, ProviderError> {
        if pkcs11::is_pkcs11(cfg) {
            // A token's pool is built per setup; nothing live to join.
            return self.setup(cfg, outer, public, scope);
        }
        let decoded = config::decode(cfg)?;
        let settings = Settings::of(cfg, &decoded);
        let Some((queues, description)) = self.live_in_scope(scope, &settings) else {
            return self.setup(cfg, outer, public, scope);
        };
        let key = load_provider_key(cfg, &decoded.private_key, public)?;
        let id = (scope.to_string(), cfg.path.clone());
        Ok(self.provide(id, settings, queues, key, description))
    }

    /// Remember `queues` as field `id`'s live provider (a rotation or a QUIC listener of the
    /// same scope can find it again) and hand out a method signing with `key` through it.
    fn provide(
        &self,
        id: (String, String),
        settings: Settings,
        queues: Arc<Queues>,
        key: Arc<ProviderKey>,
        description: String,
    ) -> KeySetup {
        self.remember(
            id,
            Previous::Provider {
                settings,
                queues: Arc::downgrade(&queues),
                description: description.clone(),
            },
        );
        KeySetup::Provider {
            method: ProviderMethod::new(queues, key),
            description,
        }
    }

    /// A live provider of `scope` with `settings`.
    fn live_in_scope(&self, scope: &str, settings: &Settings) -> Option<(Arc<Queues>, String)> {
        let p = self.previous.lock().ok()?;
        p.iter().find_map(|((s, _), v)| match v {
            Previous::Provider {
                settings: had,
                queues,
                description,
            } if s == scope && had == settings => {
                queues.upgrade().map(|q| (q, description.clone()))
            }
            _ => None,
        })
    }

    /// A `pkcs11` (or `sgx`) provider: the token checked at start, its own pool of sessions,
    /// through the same queue, provider checks and stats as every engine. Built anew on each
    /// setup (the token holds the key: a certificate rotation re-checks it).
    fn setup_pkcs11(
        &self,
        cfg: &PrivateKeyProvider,
        outer: Option<PKey<Private>>,
        public: &PKey<Public>,
        scope: &str,
    ) -> Result<KeySetup, ProviderError> {
        let built = pkcs11::build(
            cfg,
            outer,
            public,
            &self.store,
            scope,
            self.options.measure_tokens,
        )?;
        let stats = ProviderStats::new(&self.store, scope);
        stats.set_engine("pkcs11");
        let engine: Arc<dyn Engine> = built.engine;
        let placement = Placement::for_engine(engine.as_ref(), false);
        let core = Arc::new(ProviderCore::new(
            engine,
            ProviderSettings {
                use_crossover: false,
                fallback: cfg.fallback,
                placement,
                batch_key_exchange: false,
            },
            stats,
        ));
        // One lane: every operation goes to the pool at once.
        let queues = Arc::new(Queues::new(
            Batching::per_worker(BatchingMode::Adaptive, Duration::from_millis(1)),
            core,
        ));
        self.keep_report(ProviderReport {
            field: cfg.path.clone(),
            provider_name: cfg.provider_name.clone(),
            engine: Some("pkcs11".into()),
            batching: None,
            poll_delay_ms: 0.0,
            fallback: cfg.fallback,
            fallback_active: false,
            reason: built.description.clone(),
            token: Some(json!({
                "description": built.description,
                "key_type": built.key_type,
                "signatures_per_s": built.measured_per_s,
            })),
        });
        let description = format!(
            "{} ({}, fallback {})",
            cfg.provider_name, built.description, cfg.fallback
        );
        Ok(KeySetup::Provider {
            method: ProviderMethod::new(queues, built.key),
            description,
        })
    }

    /// What a field's last setup left that this one can keep.
    fn reuse(&self, id: &(String, String), settings: &Settings) -> Reuse {
        let Ok(p) = self.previous.lock() else {
            return Reuse::Nothing;
        };
        match p.get(id) {
            Some(Previous::Provider {
                settings: s,
                queues,
                description,
            }) if s == settings => match queues.upgrade() {
                Some(q) => Reuse::Provider(q, description.clone()),
                None => Reuse::Nothing,
            },
            Some(Previous::Inline { settings: s }) if s == settings => Reuse::CountedInline,
            _ => Reuse::Nothing,
        }
    }

    /// Record what a field got; forget providers no context uses any more.
    fn remember(&self, id: (String, String), what: Previous) {
        if let Ok(mut p) = self.previous.lock() {
            p.retain(|_, v| match v {
                Previous::Provider { queues, .. } => queues.strong_count() > 0,
                Previous::Inline { .. } => true,
            });
            p.insert(id, what);
        }
    }

    /// A new engine from the factory the binary registered for `engine: NAME`, when the config
    /// names an engine this crate does not hold; refused when the binary has none of that name
    /// (the release binary has none: `engine: fault` is only in `quickshake-test`).
    fn extra_engine(
        &self,
        cfg: &PrivateKeyProvider,
        d: &ProviderConfig,
    ) -> Result<Option<Arc<dyn Engine>>, ProviderError> {
        let EngineChoice::Extra { name, settings } = &d.engine else {
            return Ok(None);
        };
        let extra = &self.options.extra_engines;
        let Some(factory) = extra.get(name) else {
            return Err(extension::unknown_engine(
                name,
                format!("{}.typed_config.engine", cfg.path),
                extra,
            ));
        };
        let path = format!("{}.typed_config.{name}", cfg.path);
        factory.build(settings.as_ref(), &path).map(Some)
    }

    /// The engine for a decoded config, with the reason it was chosen; or why none is usable.
    /// `extra` is the engine [`Self::extra_engine`] built for it, if any.
    fn choose_engine(
        &self,
        d: &ProviderConfig,
        key: &KeyType,
        extra: Option<Arc<dyn Engine>>,
    ) -> Result<(Arc<dyn Engine>, String), EngineUnavailable> {
        match &d.engine {
            EngineChoice::Auto if d.envoy_semantics => self
                .engines
                .best_accelerated(key)
                .map(|e| (e, "best accelerated engine on this machine".to_string())),
            EngineChoice::Auto => Ok(match self.engines.best_accelerated(key) {
                Ok(e) => (
                    e,
                    "engine: auto picked the best accelerated engine".to_string(),
                ),
                Err(why) => (
                    software(),
                    format!("engine: auto found no accelerated engine ({why}); software"),
                ),
            }),
            EngineChoice::Named(name) => self
                .engines
                .by_name(name)
                .map(|e| (e, format!("engine: {name} as configured"))),
            EngineChoice::Qat => Err(EngineUnavailable(self.engines.qat_status())),
            EngineChoice::Extra { name, .. } => extra
                .map(|e| (e, format!("engine: {name}, supplied by this binary")))
                .ok_or_else(|| EngineUnavailable(format!("engine {name} is not in this binary"))),
        }
    }

    /// No usable engine: Envoy's rule. With `fallback: true` the key is used in-process (said
    /// once in the log and in stats); without, start-up fails saying why.
    fn no_engine(
        &self,
        cfg: &PrivateKeyProvider,
        decoded: &ProviderConfig,
        outer: Option<PKey<Private>>,
        key: Arc<ProviderKey>,
        reason: EngineUnavailable,
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
        self.report(cfg, decoded, None, true, reason.0);
        let Some(key) = outer.or_else(|| key.pkey.clone()) else {
            return Err(ProviderError::Invalid {
                field: cfg.path.clone(),
                reason: "fallback needs the certificate's own private_key".into(),
            });
        };
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
        let batching = engine.as_ref().map(|_| d.batching);
        self.keep_report(ProviderReport {
            field: cfg.path.clone(),
            provider_name: d.provider_name.clone(),
            engine,
            batching,
            poll_delay_ms: d.batching.poll_delay.as_secs_f64() * 1000.0,
            fallback: cfg.fallback,
            fallback_active,
            reason,
            token: None,
        });
    }

    /// Record `report` as its field's report. A reload rebuilds the same certificate: keep one
    /// report per config field.
    fn keep_report(&self, report: ProviderReport) {
        if let Ok(mut r) = self.reports.lock() {
            r.retain(|old| old.field != report.field);
            r.push(report);
        }
    }
}

/// The files a provider's key is read from (for the rotation watcher): its `private_key`
/// when that is a file. Empty for inline keys and for configs that do not decode.
pub fn key_files(cfg: &PrivateKeyProvider) -> Vec<PathBuf> {
    match config::decode(cfg).map(|d| d.private_key) {
        Ok(DataSource::Filename(p)) => vec![p],
        _ => Vec::new(),
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
    if !key.pkey.as_ref().is_some_and(|k| k.public_eq(public)) {
        return Err(ProviderError::Key {
            field,
            file,
            reason: "private key does not match the certificate's public key".into(),
        });
    }
    Ok(key)
}
