//! Reading configuration text (YAML or JSON) into JSON form, and Envoy `DataSource`s: parsing them
//! from the configuration and reading their bytes.

use std::path::{Path, PathBuf};

use serde_json::{Map, Number, Value};

use crate::error::ConfigError;
use crate::model::DataSource;
use crate::walk::{join, Node, Result};

/// Parse YAML text (JSON is YAML too) into the JSON form the walker works on.
pub(crate) fn yaml_text_to_json(text: &str, origin: &str) -> Result<Value> {
    let syntax = |message: String| ConfigError::Syntax {
        origin: origin.to_owned(),
        message,
    };
    let mut yaml: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|e| syntax(format!("invalid YAML: {e}")))?;
    yaml.apply_merge()
        .map_err(|e| syntax(format!("invalid YAML merge key: {e}")))?;
    yaml_to_json(yaml, "")
}

pub(crate) fn json_text_to_json(text: &str, origin: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| ConfigError::Syntax {
        origin: origin.to_owned(),
        message: format!("invalid JSON: {e}"),
    })
}

fn yaml_to_json(v: serde_yaml::Value, path: &str) -> Result<Value> {
    use serde_yaml::Value as Y;
    Ok(match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(u) = n.as_u64() {
                Value::Number(u.into())
            } else if let Some(i) = n.as_i64() {
                Value::Number(i.into())
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                Value::Number(Number::from_f64(f).ok_or_else(|| {
                    ConfigError::invalid(path, format!("number {n} cannot be represented"))
                })?)
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(seq) => Value::Array(
            seq.into_iter()
                .enumerate()
                .map(|(i, v)| yaml_to_json(v, &format!("{path}[{i}]")))
                .collect::<Result<_>>()?,
        ),
        Y::Mapping(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let key = match k {
                    Y::String(s) => s,
                    Y::Bool(b) => b.to_string(),
                    Y::Number(n) => n.to_string(),
                    Y::Null => "null".to_owned(),
                    _ => {
                        return Err(ConfigError::invalid(
                            path,
                            "mapping keys must be plain strings",
                        ))
                    }
                };
                let child = join(path, &key);
                if out.contains_key(&key) {
                    return Err(ConfigError::invalid(child, "duplicate key"));
                }
                let value = yaml_to_json(v, &child)?;
                out.insert(key, value);
            }
            Value::Object(out)
        }
        Y::Tagged(t) => {
            return Err(ConfigError::invalid(
                path,
                format!("YAML tags ({}) are not supported", t.tag),
            ))
        }
    })
}

/// Parse a `DataSource` mapping: exactly one of `filename`, `inline_string`, `inline_bytes`
/// (base64), `environment_variable` (read now, kept as `InlineString`).
pub(crate) fn data_source(node: &Node<'_>) -> Result<DataSource> {
    const KINDS: [&str; 4] = [
        "filename",
        "inline_string",
        "inline_bytes",
        "environment_variable",
    ];
    let o = node.obj_with(&KINDS, &["watched_directory"])?;
    let present = o.present(&KINDS);
    let kind = match present.as_slice() {
        [one] => *one,
        [] => {
            return Err(node
                .err("needs one of filename, inline_string, inline_bytes, environment_variable"))
        }
        many => {
            return Err(node.err(format!(
                "only one of filename, inline_string, inline_bytes, environment_variable may be \
                 set (got {})",
                many.join(", ")
            )))
        }
    };
    let field = o.req(kind)?;
    Ok(match kind {
        "filename" => DataSource::Filename(PathBuf::from(field.non_empty_str()?)),
        "inline_string" => DataSource::InlineString(field.as_str()?.to_owned()),
        "inline_bytes" => DataSource::InlineBytes(
            base64_decode(field.as_str()?)
                .ok_or_else(|| field.err("invalid base64 (standard or URL-safe alphabet)"))?,
        ),
        _ => {
            let name = field.non_empty_str()?;
            match std::env::var(name) {
                Ok(value) => DataSource::InlineString(value),
                Err(std::env::VarError::NotPresent) => {
                    return Err(field.err(format!("environment variable {name} is not set")))
                }
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err(field.err(format!("environment variable {name} is not UTF-8")))
                }
            }
        }
    })
}

/// Read a `DataSource`'s bytes. For a file, the error path is `field_path` + `.filename` (unless
/// `field_path` already ends in `.filename`) and the message names the file and the OS error.
pub fn read_data_source(ds: &DataSource, field_path: &str) -> Result<Vec<u8>> {
    match ds {
        DataSource::Filename(file) => std::fs::read(file).map_err(|source| {
            let path = if field_path.ends_with(".filename") || field_path == "filename" {
                field_path.to_owned()
            } else {
                join(field_path, "filename")
            };
            ConfigError::ReadData {
                path,
                file: file.clone(),
                source,
            }
        }),
        DataSource::InlineString(s) => Ok(s.as_bytes().to_vec()),
        DataSource::InlineBytes(b) => Ok(b.clone()),
    }
}

/// Read the configuration file's text.
pub(crate) fn read_config_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::ReadConfig {
        file: path.to_owned(),
        source,
    })
}

/// Decode base64 as protobuf JSON does: standard or URL-safe alphabet, padding optional.
pub(crate) fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let trimmed = text.trim_end_matches('=');
    if text.len() - trimmed.len() > 2 {
        return None;
    }
    let mut out = Vec::with_capacity(trimmed.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    for b in trimmed.bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
        }
    }
    // A lone sixth-bit group (length % 4 == 1) cannot encode a byte.
    if trimmed.len() % 4 == 1 {
        return None;
    }
    Some(out)
}

/// A warning when a private key file is readable by group or others (following symlinks, as
/// Kubernetes mounts Secrets through `..data` links). `None` for inline keys and private files.
pub fn key_file_permission_warning(ds: &DataSource) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let DataSource::Filename(path) = ds else {
        return None;
    };
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| {
        format!(
            "private key file {} is readable by group or others (mode {mode:04o}); use 0400 or 0600",
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64() {
        assert_eq!(base64_decode("").unwrap(), b"");
        assert_eq!(base64_decode("Zg==").unwrap(), b"f");
        assert_eq!(base64_decode("Zm8").unwrap(), b"fo");
        assert_eq!(base64_decode("Zm9v").unwrap(), b"foo");
        assert_eq!(base64_decode("Zm9vYmFy").unwrap(), b"foobar");
        assert_eq!(base64_decode("-_8=").unwrap(), vec![0xfb, 0xff]);
        assert_eq!(base64_decode("+/8=").unwrap(), vec![0xfb, 0xff]);
        assert!(base64_decode("Z").is_none());
        assert!(base64_decode("Zm9v!").is_none());
        assert!(base64_decode("Zg===").is_none());
    }

    #[test]
    fn yaml_keys_and_tags() {
        let v = yaml_text_to_json("a: 1\n2: b\ntrue: c\n", "t").unwrap();
        assert_eq!(v["2"], "b");
        assert_eq!(v["true"], "c");
        let e = yaml_text_to_json("a:\n  b: !foo x\n", "t").unwrap_err();
        assert_eq!(e.path(), Some("a.b"));
        let e = yaml_text_to_json("a: [\n", "t").unwrap_err();
        assert!(e.to_string().starts_with("t: invalid YAML"), "{e}");
    }
}
