//! A field-path-tracking walker over the JSON form of the configuration.
//!
//! `Node` is a value together with its path (`static_resources.listeners[0]`); `Obj` is a mapping
//! whose keys were checked against the allowed set when it was opened, so unknown fields are
//! reported with their full path before anything inside the mapping is interpreted.
//!
//! Field names follow protobuf's JSON rule, as Envoy does: a field may be written in its proto
//! name (`stat_prefix`) or its lowerCamelCase JSON name (`statPrefix`); both mean the same field,
//! and giving both is an error. Keys of free-form maps (`any_obj`) are left alone.

use serde_json::{Map, Value};

use crate::error::ConfigError;

pub(crate) type Result<T> = std::result::Result<T, ConfigError>;

/// A value and where it sits in the configuration.
#[derive(Clone, Debug)]
pub(crate) struct Node<'a> {
    pub v: &'a Value,
    pub path: String,
}

pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

impl<'a> Node<'a> {
    pub fn new(v: &'a Value, path: impl Into<String>) -> Self {
        Node {
            v,
            path: path.into(),
        }
    }

    pub fn err(&self, message: impl Into<String>) -> ConfigError {
        ConfigError::invalid(self.path.clone(), message)
    }

    pub fn unsupported(&self, reason: Option<&str>) -> ConfigError {
        ConfigError::unsupported(self.path.clone(), reason)
    }

    fn expected(&self, what: &str) -> ConfigError {
        self.err(format!("expected {what}, got {}", kind(self.v)))
    }

    /// Open a mapping whose keys must all be in `allowed`.
    pub fn obj(&self, allowed: &[&str]) -> Result<Obj<'a>> {
        self.obj_with(allowed, &[])
    }

    /// Open a mapping: keys in `allowed` are fine, keys in `unsupported` (fields Envoy knows that
    /// quickshake does not implement) are "not supported yet", anything else is "unknown field".
    pub fn obj_with(&self, allowed: &[&str], unsupported: &[&str]) -> Result<Obj<'a>> {
        let map = self
            .v
            .as_object()
            .ok_or_else(|| self.expected("a mapping"))?;
        for (key, value) in map {
            let snake = snake_name(key);
            let name = snake.as_deref().unwrap_or(key);
            if snake.is_some() && map.contains_key(name) {
                return Err(ConfigError::invalid(
                    join(&self.path, key),
                    format!("the same field as '{name}', which is also given"),
                ));
            }
            if allowed.contains(&name) {
                continue;
            }
            let path = join(&self.path, key);
            if unsupported.contains(&name) {
                if value.is_null() {
                    continue;
                }
                return Err(ConfigError::unsupported(path, None));
            }
            return Err(ConfigError::UnknownField { path });
        }
        Ok(Obj {
            map,
            path: self.path.clone(),
        })
    }

    /// Open a mapping without checking its keys (free-form maps such as runtime layers).
    pub fn any_obj(&self) -> Result<Obj<'a>> {
        let map = self
            .v
            .as_object()
            .ok_or_else(|| self.expected("a mapping"))?;
        Ok(Obj {
            map,
            path: self.path.clone(),
        })
    }

    pub fn as_str(&self) -> Result<&'a str> {
        self.v.as_str().ok_or_else(|| self.expected("a string"))
    }

    /// A string that must not be empty.
    pub fn non_empty_str(&self) -> Result<&'a str> {
        let s = self.as_str()?;
        if s.is_empty() {
            return Err(self.err("must not be empty"));
        }
        Ok(s)
    }

    pub fn as_bool(&self) -> Result<bool> {
        self.v
            .as_bool()
            .ok_or_else(|| self.expected("true or false"))
    }

    /// An unsigned integer, given as a number or (protobuf JSON style) as a decimal string.
    pub fn as_u64(&self) -> Result<u64> {
        match self.v {
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    return Ok(u);
                }
                if n.as_i64().is_some() {
                    return Err(self.err(format!("must not be negative, got {n}")));
                }
                Err(self.err(format!("expected an integer, got {n}")))
            }
            Value::String(s) => {
                let t = s.trim();
                if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
                    t.parse::<u64>()
                        .map_err(|_| self.err(format!("integer out of range: {s}")))
                } else {
                    Err(self.err(format!("expected an integer, got \"{s}\"")))
                }
            }
            _ => Err(self.expected("an integer")),
        }
    }

    /// An unsigned integer within `lo..=hi`.
    pub fn as_u64_in(&self, lo: u64, hi: u64) -> Result<u64> {
        let n = self.as_u64()?;
        if n < lo || n > hi {
            return Err(self.err(format!("must be in {lo}..={hi}, got {n}")));
        }
        Ok(n)
    }

    /// A protobuf enum field, given by name or (protobuf JSON style) by number: the index of
    /// its value in `names` (the enum's values in number order, from 0). Anything else is an
    /// error naming the field and the values it takes.
    pub fn enum_index(&self, names: &[&str]) -> Result<usize> {
        let expected = || match names {
            [] => String::new(),
            [one] => (*one).to_owned(),
            [init @ .., last] => format!("{} or {last}", init.join(", ")),
        };
        match self.v {
            Value::String(s) => names
                .iter()
                .position(|n| n == s)
                .ok_or_else(|| self.err(format!("expected {}, got \"{s}\"", expected()))),
            Value::Number(n) => n
                .as_u64()
                .and_then(|i| usize::try_from(i).ok())
                .filter(|i| *i < names.len())
                .ok_or_else(|| {
                    self.err(format!(
                        "expected {} (0..={}), got {n}",
                        expected(),
                        names.len().saturating_sub(1)
                    ))
                }),
            _ => Err(self.expected("an enum name")),
        }
    }

    /// The elements of a list; a single mapping (or scalar) stands for a one-element list, as Envoy
    /// accepts. Each element's path gets its `[i]`.
    pub fn items(&self) -> Vec<Node<'a>> {
        match self.v {
            Value::Null => Vec::new(),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, v)| Node::new(v, format!("{}[{i}]", self.path)))
                .collect(),
            other => vec![Node::new(other, format!("{}[0]", self.path))],
        }
    }

    /// A list of non-empty strings (a single string counts as a one-element list).
    pub fn str_list(&self) -> Result<Vec<String>> {
        self.items()
            .iter()
            .map(|n| n.non_empty_str().map(str::to_owned))
            .collect()
    }

    /// Check that this is a `typed_config` mapping whose `@type` names `expected` (a full type URL
    /// `type.googleapis.com/<message>`; only the part after the last `/` is compared, as Envoy
    /// does), then open it with `allowed` (plus `@type`) and `unsupported` keys.
    pub fn typed(&self, expected: &str, allowed: &[&str], unsupported: &[&str]) -> Result<Obj<'a>> {
        self.check_type_url(expected)?;
        let mut keys: Vec<&str> = Vec::with_capacity(allowed.len() + 1);
        keys.push("@type");
        keys.extend_from_slice(allowed);
        self.obj_with(&keys, unsupported)
    }

    /// The `@type` of a `typed_config` mapping, which must be present.
    pub fn type_url(&self) -> Result<&'a str> {
        let map = self
            .v
            .as_object()
            .ok_or_else(|| self.expected("a mapping"))?;
        let at = Node::new(
            map.get("@type").unwrap_or(&Value::Null),
            join(&self.path, "@type"),
        );
        if at.v.is_null() {
            return Err(at.err("required"));
        }
        at.non_empty_str()
    }

    /// The message type a `typed_config` configures (the part of its type URL after the last
    /// `/`): its `@type`, or for a `TypedStruct` (`udpa.type.v1`, `xds.type.v3`) the `type_url`
    /// inside, whose `value` must be a mapping.
    pub fn config_type(&self) -> Result<&'a str> {
        let t = self.type_url()?;
        let t = t.rsplit('/').next().unwrap_or(t);
        if t != "udpa.type.v1.TypedStruct" && t != "xds.type.v3.TypedStruct" {
            return Ok(t);
        }
        let o = self.obj(&["@type", "type_url", "value"])?;
        if let Some(v) = o.get("value") {
            v.any_obj()?;
        }
        let inner = o.req("type_url")?.non_empty_str()?;
        Ok(inner.rsplit('/').next().unwrap_or(inner))
    }

    /// A wrapper message (`google.protobuf.UInt32Value` and the like) in either JSON form:
    /// `{value: X}` or X itself.
    pub fn unwrapped(&self) -> Result<Node<'a>> {
        match self.v {
            Value::Object(_) => self.obj(&["value"])?.req("value"),
            _ => Ok(Node::new(self.v, self.path.clone())),
        }
    }

    pub fn check_type_url(&self, expected: &str) -> Result<()> {
        let map = self
            .v
            .as_object()
            .ok_or_else(|| self.expected("a mapping"))?;
        let path = join(&self.path, "@type");
        let got = match map.get("@type") {
            None | Some(Value::Null) => {
                return Err(ConfigError::invalid(
                    path,
                    format!("required (expected {expected})"),
                ))
            }
            Some(v) => Node::new(v, path.clone()).as_str()?,
        };
        if type_name(got) != type_name(expected) {
            return Err(ConfigError::invalid(
                path,
                format!("expected {expected}, got {got}"),
            ));
        }
        Ok(())
    }
}

/// The proto (snake_case) name of a lowerCamelCase JSON field name; `None` when `key` has no
/// upper-case letter or is not an identifier (it is already a proto name, or a map key such as
/// `@type` or `envoy.extensions.upstreams.http.v3.HttpProtocolOptions`).
pub(crate) fn snake_name(key: &str) -> Option<String> {
    let identifier = key.starts_with(|c: char| c.is_ascii_lowercase())
        && key.bytes().all(|b| b.is_ascii_alphanumeric());
    if !identifier || !key.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// The lowerCamelCase JSON name of a proto field name (`stat_prefix` -> `statPrefix`).
fn camel_name(key: &str) -> Option<String> {
    if !key.contains('_') {
        return None;
    }
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    Some(out)
}

fn type_name(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}

/// A mapping whose keys have been checked.
pub(crate) struct Obj<'a> {
    pub map: &'a Map<String, Value>,
    pub path: String,
}

impl<'a> Obj<'a> {
    /// The field, if present and not null (protobuf JSON treats null as absent).
    /// A field written in its JSON (lowerCamelCase) name is found too, and its path shows the
    /// name as written.
    pub fn get(&self, key: &str) -> Option<Node<'a>> {
        match self.map.get(key) {
            Some(Value::Null) => None,
            Some(v) => Some(Node::new(v, join(&self.path, key))),
            None => {
                let camel = camel_name(key)?;
                match self.map.get(&camel) {
                    None | Some(Value::Null) => None,
                    Some(v) => Some(Node::new(v, join(&self.path, &camel))),
                }
            }
        }
    }

    /// The field, which must be present.
    pub fn req(&self, key: &str) -> Result<Node<'a>> {
        self.get(key).ok_or_else(|| self.missing(key))
    }

    pub fn missing(&self, key: &str) -> ConfigError {
        ConfigError::invalid(join(&self.path, key), "required field is missing")
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&'a str>> {
        self.get(key).map(|n| n.as_str()).transpose()
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        self.get(key).map(|n| n.as_bool()).transpose()
    }

    pub fn bool_or_false(&self, key: &str) -> Result<bool> {
        Ok(self.opt_bool(key)?.unwrap_or(false))
    }

    pub fn str_list(&self, key: &str) -> Result<Vec<String>> {
        match self.get(key) {
            Some(n) => n.str_list(),
            None => Ok(Vec::new()),
        }
    }

    pub fn items(&self, key: &str) -> Vec<Node<'a>> {
        self.get(key).map(|n| n.items()).unwrap_or_default()
    }

    /// The fields present (non-null) among `keys`.
    pub fn present(&self, keys: &[&'static str]) -> Vec<&'static str> {
        keys.iter()
            .copied()
            .filter(|k| self.get(k).is_some())
            .collect()
    }

    /// The fields of `typed_config` other than `@type`.
    pub fn without_type(&self) -> Map<String, Value> {
        self.map
            .iter()
            .filter(|(k, _)| k.as_str() != "@type")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_names_equal_proto_names() {
        assert_eq!(
            snake_name("deferredStatOptions").as_deref(),
            Some("deferred_stat_options")
        );
        assert_eq!(snake_name("stat_prefix"), None);
        assert_eq!(snake_name("@type"), None);
        assert_eq!(
            snake_name("envoy.extensions.upstreams.http.v3.HttpProtocolOptions"),
            None
        );
        assert_eq!(camel_name("stat_prefix").as_deref(), Some("statPrefix"));
        let v = serde_json::json!({"statPrefix": "x", "codec_type": "AUTO"});
        let o = Node::new(&v, "hcm")
            .obj(&["stat_prefix", "codec_type"])
            .unwrap();
        let n = o.get("stat_prefix").unwrap();
        assert_eq!(
            (n.v.as_str(), n.path.as_str()),
            (Some("x"), "hcm.statPrefix")
        );
        let both = serde_json::json!({"statPrefix": "x", "stat_prefix": "y"});
        let e = Node::new(&both, "hcm").obj(&["stat_prefix"]).err().unwrap();
        assert!(e.to_string().contains("hcm.statPrefix"), "{e}");
        let unknown = serde_json::json!({"statPrefixx": "x"});
        assert!(Node::new(&unknown, "hcm").obj(&["stat_prefix"]).is_err());
    }
}
