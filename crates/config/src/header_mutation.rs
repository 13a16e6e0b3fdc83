//! `request_headers_to_add` / `_to_remove` and `response_headers_to_add` / `_to_remove`, at
//! route, virtual host and route configuration level (Envoy's `HeaderValueOption`). Values are
//! literal: Envoy's `%...%` substitutions are not supported yet (a value with one is refused
//! with its path; `%%` is a literal `%`).

use crate::model::{AppendAction, HeaderAdd, HeaderMutations};
use crate::walk::{Node, Obj, Result};

/// The four fields of one level.
pub(crate) fn header_mutations(o: &Obj<'_>) -> Result<HeaderMutations> {
    Ok(HeaderMutations {
        request_add: header_value_options(o, "request_headers_to_add")?,
        request_remove: removes(o, "request_headers_to_remove")?,
        response_add: header_value_options(o, "response_headers_to_add")?,
        response_remove: removes(o, "response_headers_to_remove")?,
    })
}

/// The field names, for the levels' allowed lists.
pub(crate) const FIELDS: [&str; 4] = [
    "request_headers_to_add",
    "request_headers_to_remove",
    "response_headers_to_add",
    "response_headers_to_remove",
];

/// A `HeaderValueOption` list (also the HTTP local rate limit's `response_headers_to_add`).
pub(crate) fn header_value_options(o: &Obj<'_>, key: &str) -> Result<Vec<HeaderAdd>> {
    o.items(key).iter().map(header_value_option).collect()
}

fn removes(o: &Obj<'_>, key: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for n in o.items(key) {
        let name = n.non_empty_str()?;
        if name.starts_with(':') || name.eq_ignore_ascii_case("host") {
            return Err(n.err("pseudo-headers and Host cannot be removed"));
        }
        out.push(name.to_ascii_lowercase());
    }
    Ok(out)
}

fn header_value_option(node: &Node<'_>) -> Result<HeaderAdd> {
    let o = node.obj(&["header", "append", "append_action", "keep_empty_value"])?;
    let h = o.req("header")?;
    let ho = h.obj_with(&["key", "value"], &["raw_value"])?;
    let key = ho.req("key")?;
    let name = key.non_empty_str()?;
    if name.starts_with(':') || name.eq_ignore_ascii_case("host") {
        return Err(key.err("pseudo-headers and Host cannot be modified"));
    }
    if http_name_invalid(name) {
        return Err(key.err(format!("\"{name}\" is not a valid header name")));
    }
    let value_node = ho.get("value");
    let raw = value_node
        .as_ref()
        .map(|v| v.as_str())
        .transpose()?
        .unwrap_or("");
    let value = literal(raw).ok_or_else(|| {
        value_node
            .as_ref()
            .map(|v| v.unsupported(Some("%...% substitutions in header values")))
            .unwrap_or_else(|| h.err("bad value"))
    })?;
    if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(h.err("a header value cannot hold CR, LF or NUL"));
    }
    let action = match (o.get("append"), o.get("append_action")) {
        (Some(a), Some(_)) => return Err(a.err("cannot be combined with append_action")),
        (Some(a), None) => {
            if a.as_bool()? {
                AppendAction::AppendIfExistsOrAdd
            } else {
                AppendAction::OverwriteIfExistsOrAdd
            }
        }
        (None, Some(a)) => match a.as_str()? {
            "APPEND_IF_EXISTS_OR_ADD" => AppendAction::AppendIfExistsOrAdd,
            "ADD_IF_ABSENT" => AppendAction::AddIfAbsent,
            "OVERWRITE_IF_EXISTS_OR_ADD" => AppendAction::OverwriteIfExistsOrAdd,
            "OVERWRITE_IF_EXISTS" => AppendAction::OverwriteIfExists,
            other => return Err(a.err(format!("unknown append_action {other}"))),
        },
        (None, None) => AppendAction::AppendIfExistsOrAdd,
    };
    Ok(HeaderAdd {
        name: name.to_ascii_lowercase(),
        value,
        action,
        keep_empty_value: o.bool_or_false("keep_empty_value")?,
    })
}

/// A value without substitutions (`%%` is a literal `%`); `None` when it has one.
fn literal(v: &str) -> Option<String> {
    let mut out = String::with_capacity(v.len());
    let mut rest = v;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        if rest[i..].starts_with("%%") {
            out.push('%');
            rest = &rest[i + 2..];
        } else {
            return None;
        }
    }
    out.push_str(rest);
    Some(out)
}

/// Whether `name` is not an HTTP field name (RFC 9110 `token`).
pub(crate) fn http_name_invalid(name: &str) -> bool {
    !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"!#$&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    #[test]
    fn literal_values() {
        assert_eq!(super::literal("a%%b").as_deref(), Some("a%b"));
        assert_eq!(super::literal("%DOWNSTREAM_REMOTE_ADDRESS%"), None);
        assert_eq!(super::literal("plain").as_deref(), Some("plain"));
    }
}
