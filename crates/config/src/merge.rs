//! Envoy's `--config-yaml` merged into the file's bootstrap as protobuf's `MergeFrom` merges one
//! message into another, done on the JSON form before the walker reads it (so every error keeps
//! its field path), and which of the two documents a field path of the merged one came from (so
//! an error in the string can say so).

use serde_json::Value;

/// Merge `overlay` into `base` as protobuf `MergeFrom` merges a message into another:
/// * mappings (nested messages) are merged field by field;
/// * lists (repeated fields) are appended: the overlay's items after the base's;
/// * a mapping with `@type` (a `google.protobuf.Any`, e.g. `typed_config`) replaces the base's
///   whole, as `MergeFrom` replaces an `Any`'s type and bytes rather than merging its fields;
/// * `null` in the overlay is an unset field (protobuf JSON): the base's value stays;
/// * anything else (scalars, and a value of another kind than the base's) replaces the base's.
///
/// Not modelled (the JSON form does not say which fields form a `oneof` or a map): setting one
/// member of a `oneof` does not clear another member set in the base, and the entries of map
/// fields (`google.protobuf.Struct` such as `metadata`) merge like nested messages instead of
/// replacing one another.
pub fn merge_json(base: &mut Value, overlay: &Value) {
    match (base, overlay) {
        (_, Value::Null) => {}
        (Value::Object(b), Value::Object(o)) if !is_any(overlay) => {
            for (key, value) in o {
                match b.get_mut(key) {
                    Some(slot) => merge_json(slot, value),
                    None if value.is_null() => {}
                    None => {
                        b.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (Value::Array(b), Value::Array(o)) => b.extend(o.iter().cloned()),
        (b, o) => *b = o.clone(),
    }
}

/// A mapping holding `@type`: a `google.protobuf.Any` in protobuf JSON.
fn is_any(v: &Value) -> bool {
    v.as_object().is_some_and(|m| m.contains_key("@type"))
}

/// Whether `overlay` set the value at `path` (a walker path such as `a.b[2].c`) of the document
/// [`merge_json`] made from `base` and `overlay`: a value the overlay alone brought, a value it
/// replaced, or a mapping it merged into. A path that goes past the values that exist (a missing
/// required field) belongs to the overlay when the deepest value it reaches came from the
/// overlay alone.
pub(crate) fn from_overlay(base: &Value, overlay: &Value, path: &str) -> bool {
    let mut b = Some(base);
    let mut o = Some(overlay);
    let mut rest = path;
    loop {
        // What the overlay did here: nothing (absent or null), merged, or replaced the base.
        o = o.filter(|v| !v.is_null());
        if let (Some(bv), Some(ov)) = (b, o) {
            let merged = (bv.is_object() && ov.is_object() && !is_any(ov))
                || (bv.is_array() && ov.is_array());
            if !merged {
                b = None;
            }
        }
        if rest.is_empty() {
            return o.is_some();
        }
        if let Some(after) = rest.strip_prefix('[') {
            let Some((index, tail)) = after.split_once(']') else {
                return b.is_none() && o.is_some();
            };
            let Ok(i) = index.parse::<usize>() else {
                return b.is_none() && o.is_some();
            };
            let base_len = b.and_then(Value::as_array).map_or(0, Vec::len);
            let (nb, no) = if i < base_len {
                (b.and_then(|v| v.get(i)), None)
            } else {
                (None, o.and_then(|v| v.get(i - base_len)))
            };
            if nb.is_none() && no.is_none() {
                return b.is_none() && o.is_some();
            }
            (b, o) = (nb, no);
            rest = tail.strip_prefix('.').unwrap_or(tail);
            continue;
        }
        // A key: the longest key of either mapping that the path continues with (keys may hold
        // dots, as flat runtime keys do).
        let keys = [b, o]
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
            .flat_map(|m| m.keys());
        let Some(key) = keys
            .filter(|k| {
                rest.strip_prefix(k.as_str())
                    .is_some_and(|t| t.is_empty() || t.starts_with('.') || t.starts_with('['))
            })
            .max_by_key(|k| k.len())
            .cloned()
        else {
            return b.is_none() && o.is_some();
        };
        let tail = &rest[key.len()..];
        rest = tail.strip_prefix('.').unwrap_or(tail);
        b = b.and_then(|v| v.get(&key));
        o = o.and_then(|v| v.get(&key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merged(base: Value, overlay: Value) -> Value {
        let mut b = base;
        merge_json(&mut b, &overlay);
        b
    }

    #[test]
    fn objects_merge_field_by_field() {
        let v = merged(
            json!({"admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 1}}}, "node": {"id": "a"}}),
            json!({"admin": {"address": {"socket_address": {"port_value": 2}}}, "node": {"cluster": "c"}}),
        );
        assert_eq!(
            v,
            json!({"admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 2}}}, "node": {"id": "a", "cluster": "c"}})
        );
    }

    #[test]
    fn arrays_are_appended() {
        let v = merged(
            json!({"static_resources": {"listeners": [{"name": "a"}], "clusters": [{"name": "x"}]}}),
            json!({"static_resources": {"listeners": [{"name": "b"}, {"name": "c"}]}}),
        );
        assert_eq!(
            v,
            json!({"static_resources": {"listeners": [{"name": "a"}, {"name": "b"}, {"name": "c"}], "clusters": [{"name": "x"}]}})
        );
    }

    #[test]
    fn scalars_and_kinds_are_replaced() {
        let v = merged(
            json!({"a": 1, "b": "x", "c": true, "d": [1], "e": {"f": 1}}),
            json!({"a": 2, "b": "y", "c": false, "d": "now a string", "e": 3}),
        );
        assert_eq!(
            v,
            json!({"a": 2, "b": "y", "c": false, "d": "now a string", "e": 3})
        );
    }

    #[test]
    fn null_is_unset() {
        // A null in the overlay keeps the base's value; a null base takes the overlay's.
        let v = merged(
            json!({"a": 1, "b": {"c": 2}, "d": null}),
            json!({"a": null, "b": null, "d": {"e": 1}, "f": null}),
        );
        assert_eq!(v, json!({"a": 1, "b": {"c": 2}, "d": {"e": 1}}));
        assert_eq!(merged(json!({"a": 1}), Value::Null), json!({"a": 1}));
        assert_eq!(merged(Value::Null, json!({"a": 1})), json!({"a": 1}));
    }

    #[test]
    fn any_is_replaced_whole() {
        let v = merged(
            json!({"typed_config": {"@type": "t/A", "x": 1, "y": 2}}),
            json!({"typed_config": {"@type": "t/B", "z": 3}}),
        );
        assert_eq!(v, json!({"typed_config": {"@type": "t/B", "z": 3}}));
    }

    #[test]
    fn paths_are_attributed() {
        let base = json!({
            "static_resources": {"listeners": [{"name": "a", "address": 1}]},
            "admin": {"address": {"port_value": 1, "address": "x"}},
            "layered_runtime": {"layers": [{"static_layer": {"a.b": 1}}]},
        });
        let overlay = json!({
            "static_resources": {"listeners": [{"name": "b", "bogus": 1}]},
            "admin": {"address": {"port_value": 2}},
            "layered_runtime": {"layers": [{"static_layer": {"c.d": 1}}]},
        });
        let from = |p: &str| from_overlay(&base, &overlay, p);
        assert!(!from("static_resources.listeners[0].name"));
        assert!(!from("static_resources.listeners[0].address"));
        assert!(from("static_resources.listeners[1].name"));
        assert!(from("static_resources.listeners[1].bogus"));
        // A missing field of a listener the overlay brought.
        assert!(from("static_resources.listeners[1].address"));
        assert!(from("admin.address.port_value"));
        assert!(!from("admin.address.address"));
        assert!(from("admin.address"), "a mapping the overlay merged into");
        assert!(!from("layered_runtime.layers[0].static_layer.a.b"));
        assert!(from("layered_runtime.layers[1].static_layer.c.d"));
        assert!(!from("overload_manager"));
    }
}
