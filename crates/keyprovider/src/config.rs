//! Decoding each provider's `typed_config`, with its `@type` URL checked and every error naming
//! the field path.

use std::time::Duration;

use quickshake_config::{parse_duration, DataSource, PrivateKeyProvider};

use crate::batch::{Batching, BatchingMode, QueueScope};
use crate::error::ProviderError;

pub const CRYPTOMB_TYPES: [&str; 2] = [
    "type.googleapis.com/envoy.extensions.private_key_providers.cryptomb.v3alpha.CryptoMbPrivateKeyMethodConfig",
    "type.googleapis.com/envoy.extensions.private_key_providers.cryptomb.v3.CryptoMbPrivateKeyMethodConfig",
];
pub const BATCHING_TYPE: &str =
    "type.googleapis.com/quickshake.private_key_providers.v1.BatchingConfig";
/// Envoy's QAT provider; seed 000 prints the type with `QAT` capitalised, accepted too.
pub const QAT_TYPES: [&str; 2] = [
    "type.googleapis.com/envoy.extensions.private_key_providers.qat.v3alpha.QatPrivateKeyMethodConfig",
    "type.googleapis.com/envoy.extensions.private_key_providers.qat.v3alpha.QATPrivateKeyMethodConfig",
];

/// `quickshake.batching`'s `poll_delay` when absent: adaptive's and the timer's bound.
pub const DEFAULT_POLL_DELAY: Duration = Duration::from_millis(10);
/// `quickshake.batching`'s latency budget when absent (budget mode): see docs/benchmarks.md,
/// "Partial load", for the curve it was chosen from.
pub const DEFAULT_MAX_BATCH_DELAY: Duration = Duration::from_millis(2);
/// A budget is a handshake's added latency: past a second it is a misconfiguration.
const MAX_MAX_BATCH_DELAY: Duration = Duration::from_secs(1);

/// The engines `engine:` names in every binary, as errors list them.
pub(crate) const BUILT_IN_ENGINES: &str =
    "auto, crypto_mb, ifma, avx2, software (or portable: for tests)";

/// Which engine a `quickshake.batching` provider asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineChoice {
    /// The best accelerated engine, else software.
    Auto,
    /// Exactly this engine (`crypto_mb`, `avx2`, `ifma`, `software`).
    Named(String),
    /// An engine the embedding binary supplies ([`crate::extension`]), with its own settings
    /// block `typed_config.NAME` as given (checked by its factory when the provider is set up).
    Extra {
        name: String,
        settings: Option<serde_json::Value>,
    },
    /// An Intel QAT device (Envoy's `qat` provider).
    Qat,
}

/// A decoded provider config.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    pub provider_name: String,
    pub private_key: DataSource,
    /// When and with whom operations are batched (`poll_delay`, `batching`,
    /// `max_batch_delay`, `queues`).
    pub batching: Batching,
    pub engine: EngineChoice,
    /// Envoy semantics (always the engine) vs quickshake's (scalar path below the crossover).
    pub envoy_semantics: bool,
    /// `quickshake.batching`'s `batch_key_exchange` (default true): TLS 1.3 X25519 key
    /// exchanges of handshakes on this certificate are batched on the engine too, where it
    /// has a batched X25519. Envoy's providers: false (Envoy computes them in BoringSSL).
    pub batch_key_exchange: bool,
}

fn field(cfg: &PrivateKeyProvider, name: &str) -> String {
    format!("{}.typed_config.{name}", cfg.path)
}

fn invalid(path: String, reason: impl Into<String>) -> ProviderError {
    ProviderError::Invalid {
        field: path,
        reason: reason.into(),
    }
}

/// Decode and check a `private_key_provider`.
pub fn decode(cfg: &PrivateKeyProvider) -> Result<ProviderConfig, ProviderError> {
    match cfg.provider_name.as_str() {
        "cryptomb" => decode_cryptomb(cfg),
        "quickshake.batching" => decode_batching(cfg),
        "qat" => decode_qat(cfg),
        other => Err(invalid(
            format!("{}.provider_name", cfg.path),
            format!("unknown provider '{other}' (known: cryptomb, pkcs11, qat, quickshake.batching, sgx)"),
        )),
    }
}

fn check_type(cfg: &PrivateKeyProvider, allowed: &[&str]) -> Result<(), ProviderError> {
    if allowed.contains(&cfg.type_url.as_str()) {
        return Ok(());
    }
    Err(invalid(
        field(cfg, "@type"),
        format!(
            "expected {} for provider '{}', got '{}'",
            allowed[0], cfg.provider_name, cfg.type_url
        ),
    ))
}

fn check_fields(cfg: &PrivateKeyProvider, known: &[&str]) -> Result<(), ProviderError> {
    match cfg
        .typed_config
        .keys()
        .find(|k| !known.contains(&k.as_str()))
    {
        Some(k) => Err(invalid(field(cfg, k), "unknown field")),
        None => Ok(()),
    }
}

fn private_key(cfg: &PrivateKeyProvider) -> Result<DataSource, ProviderError> {
    let path = field(cfg, "private_key");
    let v = cfg
        .typed_config
        .get("private_key")
        .ok_or_else(|| invalid(path.clone(), "required"))?;
    Ok(quickshake_config::data_source_from_json(v, &path)?)
}

fn poll_delay(
    cfg: &PrivateKeyProvider,
    default: Option<Duration>,
) -> Result<Duration, ProviderError> {
    let path = field(cfg, "poll_delay");
    let d = match cfg.typed_config.get("poll_delay") {
        Some(v) => parse_duration(v, &path).map_err(|e| invalid(path.clone(), e.to_string()))?,
        None => default.ok_or_else(|| invalid(path.clone(), "required"))?,
    };
    if d < Duration::from_millis(1) {
        // Envoy validates poll_delay >= 1ms: shorter values were silently 0 before it did.
        return Err(invalid(path, "must be at least 1ms"));
    }
    Ok(d)
}

fn decode_cryptomb(cfg: &PrivateKeyProvider) -> Result<ProviderConfig, ProviderError> {
    check_type(cfg, &CRYPTOMB_TYPES)?;
    check_fields(cfg, &["private_key", "poll_delay"])?;
    Ok(ProviderConfig {
        provider_name: cfg.provider_name.clone(),
        private_key: private_key(cfg)?,
        batching: Batching::per_worker(BatchingMode::Timer, poll_delay(cfg, None)?),
        engine: EngineChoice::Auto,
        envoy_semantics: true,
        batch_key_exchange: false,
    })
}

fn decode_qat(cfg: &PrivateKeyProvider) -> Result<ProviderConfig, ProviderError> {
    check_type(cfg, &QAT_TYPES)?;
    check_fields(cfg, &["private_key", "poll_delay"])?;
    Ok(ProviderConfig {
        provider_name: cfg.provider_name.clone(),
        private_key: private_key(cfg)?,
        batching: Batching::per_worker(BatchingMode::Timer, poll_delay(cfg, None)?),
        engine: EngineChoice::Qat,
        envoy_semantics: true,
        batch_key_exchange: false,
    })
}

fn decode_batching(cfg: &PrivateKeyProvider) -> Result<ProviderConfig, ProviderError> {
    check_type(cfg, &[BATCHING_TYPE])?;
    let engine = match cfg.typed_config.get("engine").map(|v| v.as_str()) {
        None | Some(Some("auto")) => EngineChoice::Auto,
        Some(Some(name @ ("crypto_mb" | "software" | "avx2" | "ifma" | "portable"))) => {
            EngineChoice::Named(name.to_string())
        }
        // Any other name: an engine of the embedding binary, or refused when it has none
        // (`Providers::setup`, with the names it has).
        Some(Some(name)) => EngineChoice::Extra {
            name: name.to_string(),
            settings: cfg.typed_config.get(name).cloned(),
        },
        Some(None) => {
            return Err(invalid(
                field(cfg, "engine"),
                format!("expected {BUILT_IN_ENGINES}"),
            ))
        }
    };
    let mut known = vec![
        "private_key",
        "poll_delay",
        "engine",
        "batching",
        "max_batch_delay",
        "queues",
        "batch_key_exchange",
    ];
    if let EngineChoice::Extra { name, .. } = &engine {
        // The extra engine's own settings block.
        known.push(name);
    }
    check_fields(cfg, &known)?;
    let batch_key_exchange = match cfg.typed_config.get("batch_key_exchange") {
        None => true,
        Some(v) => v
            .as_bool()
            .ok_or_else(|| invalid(field(cfg, "batch_key_exchange"), "expected true or false"))?,
    };
    let mode = match cfg.typed_config.get("batching").map(|v| v.as_str()) {
        None | Some(Some("budget")) => BatchingMode::Budget,
        Some(Some("adaptive")) => BatchingMode::Adaptive,
        Some(Some("timer")) => BatchingMode::Timer,
        _ => {
            return Err(invalid(
                field(cfg, "batching"),
                "expected budget, adaptive or timer",
            ))
        }
    };
    let max_batch_delay = match cfg.typed_config.get("max_batch_delay") {
        None => DEFAULT_MAX_BATCH_DELAY,
        Some(_) if mode != BatchingMode::Budget => {
            return Err(invalid(
                field(cfg, "max_batch_delay"),
                format!(
                    "applies to batching: budget (this provider has batching: {}, bounded by poll_delay)",
                    mode.name()
                ),
            ))
        }
        Some(v) => {
            let path = field(cfg, "max_batch_delay");
            let d = parse_duration(v, &path).map_err(|e| invalid(path.clone(), e.to_string()))?;
            if d > MAX_MAX_BATCH_DELAY {
                return Err(invalid(path, "must be at most 1s"));
            }
            d
        }
    };
    let scope = match cfg.typed_config.get("queues").map(|v| v.as_str()) {
        None | Some(Some("shared")) => QueueScope::Shared,
        Some(Some("per_worker")) => QueueScope::Worker,
        _ => {
            return Err(invalid(
                field(cfg, "queues"),
                "expected shared or per_worker",
            ))
        }
    };
    let poll_delay = poll_delay(cfg, Some(DEFAULT_POLL_DELAY))?;
    Ok(ProviderConfig {
        provider_name: cfg.provider_name.clone(),
        private_key: private_key(cfg)?,
        batching: Batching {
            mode,
            poll_delay,
            max_batch_delay,
            scope,
        },
        engine,
        envoy_semantics: false,
        batch_key_exchange,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batching(fields: serde_json::Value) -> PrivateKeyProvider {
        let mut typed_config = fields.as_object().cloned().unwrap_or_default();
        typed_config.insert(
            "private_key".into(),
            serde_json::json!({"filename": "k.pem"}),
        );
        PrivateKeyProvider {
            path: "p".into(),
            provider_name: "quickshake.batching".into(),
            type_url: BATCHING_TYPE.into(),
            typed_config,
            fallback: false,
        }
    }

    #[test]
    fn batch_key_exchange_defaults_on_and_names_its_path_when_wrong() {
        let on = decode(&batching(serde_json::json!({}))).expect("valid");
        assert!(on.batch_key_exchange);
        let off =
            decode(&batching(serde_json::json!({"batch_key_exchange": false}))).expect("valid");
        assert!(!off.batch_key_exchange);
        let err = decode(&batching(serde_json::json!({"batch_key_exchange": "yes"})))
            .expect_err("not a bool")
            .to_string();
        assert!(
            err.contains("p.typed_config.batch_key_exchange") && err.contains("true or false"),
            "{err}"
        );
    }

    #[test]
    fn budget_is_the_default_and_its_fields_name_their_paths() {
        let d = decode(&batching(serde_json::json!({}))).expect("valid");
        assert_eq!(d.batching.mode, BatchingMode::Budget);
        assert_eq!(d.batching.budget(), DEFAULT_MAX_BATCH_DELAY);
        assert_eq!(d.batching.scope, QueueScope::Shared);
        let d = decode(&batching(
            serde_json::json!({"max_batch_delay": "10ms", "poll_delay": "5ms", "queues": "per_worker"}),
        ))
        .expect("valid");
        assert_eq!(
            d.batching.budget(),
            Duration::from_millis(5),
            "poll_delay caps it"
        );
        assert_eq!(d.batching.scope, QueueScope::Worker);
        for (fields, path, reason) in [
            (
                serde_json::json!({"batching": "adaptive", "max_batch_delay": "1ms"}),
                "p.typed_config.max_batch_delay",
                "applies to batching: budget",
            ),
            (
                serde_json::json!({"max_batch_delay": "2s"}),
                "p.typed_config.max_batch_delay",
                "at most 1s",
            ),
            (
                serde_json::json!({"queues": "global"}),
                "p.typed_config.queues",
                "shared or per_worker",
            ),
            (
                serde_json::json!({"batching": "eager"}),
                "p.typed_config.batching",
                "budget, adaptive or timer",
            ),
        ] {
            let err = decode(&batching(fields)).expect_err(path).to_string();
            assert!(err.contains(path) && err.contains(reason), "{err}");
        }
    }

    #[test]
    fn other_engines_are_left_to_the_binary_with_their_own_block() {
        let d = decode(&batching(
            serde_json::json!({"engine": "fault", "fault": {"error_every": 2}}),
        ))
        .expect("decoded; the binary's factory checks the block");
        assert_eq!(
            d.engine,
            EngineChoice::Extra {
                name: "fault".into(),
                settings: Some(serde_json::json!({"error_every": 2})),
            }
        );
        // A block of another engine than the one selected is an unknown field.
        let err = decode(&batching(
            serde_json::json!({"engine": "software", "fault": {"error_every": 2}}),
        ))
        .expect_err("fault block without engine: fault")
        .to_string();
        assert!(err.contains("p.typed_config.fault: unknown field"), "{err}");
    }
}
