//! Decoding the `pkcs11` provider's typed config, and Envoy's `sgx` provider shape mapped onto
//! it. Every error names the field path. PINs are held as [`Pin`], whose `Debug` never prints
//! them and whose memory is zeroed on drop (an inline [`PinSource`] too); an inline PIN is accepted (Envoy's `sgx` takes only inline PINs) and redacted in
//! `/config_dump` by the config crate's dump.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use quickshake_config::{parse_duration, PrivateKeyProvider};
use serde_json::Value;

use crate::engine::wipe_string;
use crate::error::ProviderError;

/// Our own typed config for `provider_name: pkcs11`.
pub const PKCS11_TYPE: &str =
    "type.googleapis.com/quickshake.private_key_providers.v1.Pkcs11Config";
/// Envoy's contrib SGX provider (`provider_name: sgx`).
pub const SGX_TYPE: &str =
    "type.googleapis.com/envoy.extensions.private_key_providers.sgx.v3alpha.SgxPrivateKeyMethodConfig";

/// Default number of threads (and token sessions) per provider.
pub const DEFAULT_POOL_SIZE: usize = 8;
/// Default per-operation deadline, from queueing to result.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(1);
/// Default bound on operations waiting for a pool thread.
pub const DEFAULT_MAX_PENDING: usize = 4096;

/// Where the user PIN comes from. `Debug` names the source, never an inline value.
#[derive(Clone, PartialEq, Eq)]
pub enum PinSource {
    Filename(PathBuf),
    EnvironmentVariable(String),
    Inline(String),
}

impl fmt::Debug for PinSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinSource::Filename(p) => write!(f, "Filename({})", p.display()),
            PinSource::EnvironmentVariable(v) => write!(f, "EnvironmentVariable({v})"),
            PinSource::Inline(_) => f.write_str("Inline(<redacted>)"),
        }
    }
}

impl Drop for PinSource {
    fn drop(&mut self) {
        if let PinSource::Inline(s) = self {
            wipe_string(s);
        }
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        wipe_string(&mut self.0);
    }
}

/// A PIN read from its source. `Debug` and `Display` print `<redacted>`; zeroed on drop.
#[derive(Clone, PartialEq, Eq)]
pub struct Pin(String);

impl Pin {
    /// The PIN itself, for the login call only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Pin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Pin(<redacted>)")
    }
}

impl PinSource {
    /// Read the PIN (a file's trailing newline is dropped). `field` names the config field.
    /// The environment variable is the one the configuration names, read here on purpose.
    pub fn read(&self, field: &str) -> Result<Pin, ProviderError> {
        let bad = |reason: String| ProviderError::Invalid {
            field: field.to_string(),
            reason,
        };
        // Held as a `Pin` from the start, so every copy read is wiped when dropped.
        let pin = Pin(match self {
            PinSource::Filename(p) => {
                let mut s = std::fs::read_to_string(p)
                    .map_err(|e| bad(format!("cannot read PIN file {}: {e}", p.display())))?;
                // In place: no unwiped copy.
                let len = s.trim_end_matches(['\r', '\n']).len();
                s.truncate(len);
                s
            }
            PinSource::EnvironmentVariable(v) => {
                std::env::var(v).map_err(|_| bad(format!("environment variable {v} is not set")))?
            }
            PinSource::Inline(s) => s.clone(),
        });
        if pin.0.is_empty() {
            return Err(bad("the PIN is empty".into()));
        }
        Ok(pin)
    }
}

/// The key type a config asks for (Envoy's `sgx` `key_type`); `None` takes what is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WantedKey {
    Rsa,
    Ecdsa,
}

/// A decoded `pkcs11` (or `sgx`) provider config.
#[derive(Debug, Clone, PartialEq)]
pub struct Pkcs11Config {
    /// The PKCS#11 module (shared library).
    pub module: PathBuf,
    pub token_label: Option<String>,
    pub token_serial: Option<String>,
    pub key_label: Option<String>,
    /// `CKA_ID`, given in hex in the config.
    pub key_id: Option<Vec<u8>>,
    pub key_type: Option<WantedKey>,
    pub pin: PinSource,
    /// The config field of the PIN, for errors.
    pub pin_field: String,
    pub pool_size: usize,
    pub deadline: Duration,
    pub max_pending: usize,
}

impl Pkcs11Config {
    /// How the token is named in messages: `label 'x'` / `serial 'y'`.
    pub fn token_name(&self) -> String {
        match (&self.token_label, &self.token_serial) {
            (Some(l), Some(s)) => format!("label '{l}', serial '{s}'"),
            (Some(l), None) => format!("label '{l}'"),
            (None, Some(s)) => format!("serial '{s}'"),
            (None, None) => "any".into(),
        }
    }

    /// How the key is named in messages.
    pub fn key_name(&self) -> String {
        match (&self.key_label, &self.key_id) {
            (Some(l), Some(id)) => format!("label '{l}', id {}", hex(id)),
            (Some(l), None) => format!("label '{l}'"),
            (None, Some(id)) => format!("id {}", hex(id)),
            (None, None) => "any".into(),
        }
    }
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

struct Fields<'a> {
    cfg: &'a PrivateKeyProvider,
}

impl<'a> Fields<'a> {
    fn path(&self, name: &str) -> String {
        format!("{}.typed_config.{name}", self.cfg.path)
    }

    fn invalid(&self, name: &str, reason: impl Into<String>) -> ProviderError {
        ProviderError::Invalid {
            field: self.path(name),
            reason: reason.into(),
        }
    }

    fn get(&self, name: &str) -> Option<&'a Value> {
        self.cfg.typed_config.get(name)
    }

    fn check_known(&self, known: &[&str]) -> Result<(), ProviderError> {
        match self
            .cfg
            .typed_config
            .keys()
            .find(|k| !known.contains(&k.as_str()))
        {
            Some(k) => Err(self.invalid(k, "unknown field")),
            None => Ok(()),
        }
    }

    /// A string field; empty strings count as absent (proto3 defaults).
    fn string(&self, name: &str) -> Result<Option<String>, ProviderError> {
        match self.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.invalid(name, "expected a string")),
        }
    }

    fn count(&self, name: &str, default: usize, max: usize) -> Result<usize, ProviderError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => {
                let n = v
                    .as_u64()
                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                    .ok_or_else(|| self.invalid(name, "expected a positive integer"))?;
                if n == 0 || n > max as u64 {
                    return Err(self.invalid(name, format!("must be between 1 and {max}")));
                }
                Ok(n as usize)
            }
        }
    }
}

/// Decode `provider_name: pkcs11` or `provider_name: sgx`.
pub fn decode(cfg: &PrivateKeyProvider) -> Result<Pkcs11Config, ProviderError> {
    let f = Fields { cfg };
    let (wanted, name) = match cfg.provider_name.as_str() {
        "sgx" => (SGX_TYPE, "sgx"),
        _ => (PKCS11_TYPE, "pkcs11"),
    };
    if cfg.type_url != wanted {
        return Err(f.invalid(
            "@type",
            format!(
                "expected {wanted} for provider '{name}', got '{}'",
                cfg.type_url
            ),
        ));
    }
    if name == "sgx" {
        decode_sgx(&f)
    } else {
        decode_pkcs11(&f)
    }
}

fn decode_pkcs11(f: &Fields<'_>) -> Result<Pkcs11Config, ProviderError> {
    f.check_known(&[
        "module",
        "token_label",
        "token_serial",
        "key_label",
        "key_id",
        "user_pin",
        "pool_size",
        "deadline",
        "max_pending",
    ])?;
    let module = f
        .string("module")?
        .ok_or_else(|| f.invalid("module", "required: the PKCS#11 module's path"))?;
    let token_label = f.string("token_label")?;
    let token_serial = f.string("token_serial")?;
    if token_label.is_none() && token_serial.is_none() {
        return Err(f.invalid("token_label", "required: token_label or token_serial"));
    }
    let key_label = f.string("key_label")?;
    let key_id = match f.string("key_id")? {
        None => None,
        Some(h) => Some(unhex(&h).ok_or_else(|| f.invalid("key_id", "expected hex digits"))?),
    };
    if key_label.is_none() && key_id.is_none() {
        return Err(f.invalid("key_label", "required: key_label or key_id"));
    }
    let pin = pin_source(f)?;
    let deadline = match f.get("deadline") {
        None => DEFAULT_DEADLINE,
        Some(v) => {
            let p = f.path("deadline");
            let d = parse_duration(v, &p).map_err(|e| f.invalid("deadline", e.to_string()))?;
            if d < Duration::from_millis(1) {
                return Err(f.invalid("deadline", "must be at least 1ms"));
            }
            d
        }
    };
    Ok(Pkcs11Config {
        module: PathBuf::from(module),
        token_label,
        token_serial,
        key_label,
        key_id,
        key_type: None,
        pin,
        pin_field: f.path("user_pin"),
        pool_size: f.count("pool_size", DEFAULT_POOL_SIZE, 256)?,
        deadline,
        max_pending: f.count("max_pending", DEFAULT_MAX_PENDING, 1 << 20)?,
    })
}

/// `user_pin`: an Envoy DataSource (`filename`, `environment_variable`, `inline_string`).
fn pin_source(f: &Fields<'_>) -> Result<PinSource, ProviderError> {
    let Some(v) = f.get("user_pin") else {
        return Err(f.invalid(
            "user_pin",
            "required: {filename: ...} or {environment_variable: ...} (or inline_string)",
        ));
    };
    let obj = v
        .as_object()
        .ok_or_else(|| f.invalid("user_pin", "expected a DataSource mapping"))?;
    if obj.len() != 1 {
        return Err(f.invalid(
            "user_pin",
            "exactly one of filename, environment_variable, inline_string",
        ));
    }
    let (k, v) = obj
        .iter()
        .next()
        .ok_or_else(|| f.invalid("user_pin", "empty"))?;
    let s = v
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| f.invalid(&format!("user_pin.{k}"), "expected a non-empty string"))?;
    match k.as_str() {
        "filename" => Ok(PinSource::Filename(PathBuf::from(s))),
        "environment_variable" => Ok(PinSource::EnvironmentVariable(s.to_string())),
        "inline_string" => Ok(PinSource::Inline(s.to_string())),
        _ => Err(f.invalid(
            &format!("user_pin.{k}"),
            "unknown field (filename, environment_variable, inline_string)",
        )),
    }
}

/// Envoy's `sgx` shape: `sgx_library`, `key_label`, `usr_pin`, `so_pin`, `token_label`,
/// `key_type` (`rsa` or `ecdsa`). The SO PIN is accepted and never used.
fn decode_sgx(f: &Fields<'_>) -> Result<Pkcs11Config, ProviderError> {
    f.check_known(&[
        "sgx_library",
        "key_label",
        "usr_pin",
        "so_pin",
        "token_label",
        "key_type",
    ])?;
    let module = f
        .string("sgx_library")?
        .ok_or_else(|| f.invalid("sgx_library", "required"))?;
    let token_label = f
        .string("token_label")?
        .ok_or_else(|| f.invalid("token_label", "required"))?;
    let key_label = f
        .string("key_label")?
        .ok_or_else(|| f.invalid("key_label", "required"))?;
    let pin = f
        .string("usr_pin")?
        .ok_or_else(|| f.invalid("usr_pin", "required"))?;
    let _ = f.string("so_pin")?;
    let key_type = match f.string("key_type")?.as_deref() {
        None | Some("rsa") => WantedKey::Rsa,
        Some("ecdsa") => WantedKey::Ecdsa,
        Some(_) => return Err(f.invalid("key_type", "expected rsa or ecdsa")),
    };
    Ok(Pkcs11Config {
        module: PathBuf::from(module),
        token_label: Some(token_label),
        token_serial: None,
        key_label: Some(key_label),
        key_id: None,
        key_type: Some(key_type),
        pin: PinSource::Inline(pin),
        pin_field: f.path("usr_pin"),
        pool_size: DEFAULT_POOL_SIZE,
        deadline: DEFAULT_DEADLINE,
        max_pending: DEFAULT_MAX_PENDING,
    })
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.is_empty() || !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn provider(name: &str, ty: &str, tc: Value) -> PrivateKeyProvider {
        PrivateKeyProvider {
            path: "tls_certificates[0].private_key_provider".into(),
            provider_name: name.into(),
            type_url: ty.into(),
            typed_config: tc.as_object().cloned().unwrap_or_default(),
            fallback: false,
        }
    }

    #[test]
    fn pkcs11_fields() {
        let c = decode(&provider(
            "pkcs11",
            PKCS11_TYPE,
            json!({"module": "/m.so", "token_label": "t", "key_id": "0a1B",
                   "user_pin": {"environment_variable": "PIN"}, "pool_size": 4, "deadline": "0.25s"}),
        ))
        .expect("decodes");
        assert_eq!(c.key_id, Some(vec![0x0a, 0x1b]));
        assert_eq!(c.pool_size, 4);
        assert_eq!(c.deadline, Duration::from_millis(250));
        assert_eq!(c.pin, PinSource::EnvironmentVariable("PIN".into()));
    }

    #[test]
    fn errors_name_the_field() {
        let e = decode(&provider(
            "pkcs11",
            PKCS11_TYPE,
            json!({"module": "/m.so", "token_label": "t", "key_label": "k"}),
        ))
        .expect_err("no pin");
        assert!(
            e.to_string().contains("typed_config.user_pin: required"),
            "{e}"
        );
        let e = decode(&provider(
            "pkcs11",
            PKCS11_TYPE,
            json!({"module": "/m.so", "token_label": "t", "key_label": "k",
                   "user_pin": {"inline_string": "1234"}, "pool_size": 0}),
        ))
        .expect_err("pool 0");
        assert!(e.to_string().contains("typed_config.pool_size"), "{e}");
        let e = decode(&provider("pkcs11", SGX_TYPE, json!({}))).expect_err("type");
        assert!(e.to_string().contains("@type"), "{e}");
    }

    #[test]
    fn sgx_shape_maps_and_redacts() {
        let c = decode(&provider(
            "sgx",
            SGX_TYPE,
            json!({"sgx_library": "/sgx.so", "key_label": "k", "usr_pin": "SECRETPIN",
                   "so_pin": "SECRETSO", "token_label": "t", "key_type": "ecdsa"}),
        ))
        .expect("decodes");
        assert_eq!(c.key_type, Some(WantedKey::Ecdsa));
        let dbg = format!("{c:?}");
        assert!(
            !dbg.contains("SECRETPIN") && !dbg.contains("SECRETSO"),
            "{dbg}"
        );
        let pin = c.pin.read("x").expect("inline");
        assert!(!format!("{pin:?}").contains("SECRETPIN"));
    }
}
