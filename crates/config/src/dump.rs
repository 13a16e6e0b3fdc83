//! The admin `/config_dump` view of the bootstrap, with every secret redacted.

use serde_json::{json, Value};

use crate::model::Bootstrap;

const REDACTED: &str = "[redacted]";
const BOOTSTRAP_DUMP_TYPE: &str = "type.googleapis.com/envoy.admin.v3.BootstrapConfigDump";

impl Bootstrap {
    /// Envoy's `/config_dump` shape:
    /// `{"configs":[{"@type":"...BootstrapConfigDump","bootstrap":<the config as loaded>}]}`.
    /// Inline key material is replaced by `"[redacted]"`: `inline_string` / `inline_bytes` /
    /// `environment_variable` of every `private_key` (also inside a provider's typed config) and
    /// of every session ticket key. File names stay.
    pub fn config_dump(&self) -> Value {
        let mut bootstrap = self.raw.0.clone();
        if bootstrap.is_null() {
            bootstrap = json!({});
        }
        redact(&mut bootstrap, false);
        json!({
            "configs": [{
                "@type": BOOTSTRAP_DUMP_TYPE,
                "bootstrap": bootstrap,
            }]
        })
    }
}

/// A copy of a configuration document with its key material redacted, as in `config_dump`.
pub(crate) fn redacted(v: &Value) -> Value {
    let mut copy = v.clone();
    redact(&mut copy, false);
    copy
}

/// Walk the tree; `secret` is true below a `private_key`, `session_ticket_keys`, `password`
/// or PIN (`user_pin`, `usr_pin`, `so_pin`) field.
fn redact(v: &mut Value, secret: bool) {
    match v {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                let below_secret = secret
                    || matches!(
                        key.as_str(),
                        "private_key"
                            | "session_ticket_keys"
                            | "password"
                            // PKCS#11 PINs: ours, and Envoy's `sgx` provider's inline ones.
                            | "user_pin"
                            | "usr_pin"
                            | "so_pin"
                    );
                if below_secret
                    && matches!(
                        key.as_str(),
                        "inline_string" | "inline_bytes" | "environment_variable"
                    )
                {
                    *child = Value::String(REDACTED.to_owned());
                } else if below_secret && child.is_string() && key != "filename" {
                    // A secret written as a bare string (e.g. a provider's own key field).
                    *child = Value::String(REDACTED.to_owned());
                } else {
                    redact(child, below_secret);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                if secret && item.is_string() {
                    *item = Value::String(REDACTED.to_owned());
                } else {
                    redact(item, secret);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_nested_and_keeps_filenames() {
        let mut v = json!({
            "a": {"private_key": {"inline_string": "SECRET1"}},
            "b": {"private_key": {"filename": "/k.pem"}},
            "c": {"session_ticket_keys": {"keys": [{"inline_bytes": "U0VDUkVUMg=="}, {"filename": "/t"}]}},
            "d": {"private_key_provider": {"typed_config": {"private_key": {"inline_bytes": "U0VDUkVUMw=="}, "poll_delay": "0.01s"}}},
            "e": {"certificate_chain": {"inline_string": "PUBLIC"}},
            "f": {"private_key": "SECRET4"},
            "g": {"typed_config": {"usr_pin": "SECRET5", "so_pin": "SECRET6", "key_label": "k"}},
            "h": {"typed_config": {"user_pin": {"inline_string": "SECRET7"}}},
        });
        redact(&mut v, false);
        let s = v.to_string();
        for secret in [
            "SECRET1",
            "U0VDUkVUMg==",
            "U0VDUkVUMw==",
            "SECRET4",
            "SECRET5",
            "SECRET6",
            "SECRET7",
        ] {
            assert!(!s.contains(secret), "{secret} in {s}");
        }
        assert!(s.contains("/k.pem") && s.contains("\"/t\"") && s.contains("PUBLIC"));
        assert!(s.contains("0.01s") && s.contains("\"k\""));
    }
}
