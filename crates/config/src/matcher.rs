//! Envoy's matchers: `StringMatcher` (`exact`, `prefix`, `suffix`, `contains`, `safe_regex`,
//! `ignore_case`) and `HeaderMatcher` (`string_match`, `present_match`, `range_match`,
//! `invert_match`, `treat_missing_header_as_empty` and the legacy `*_match` forms).

use crate::model::{HeaderMatcher, HeaderRule, QueryParameterMatcher, StringMatch, StringMatcher};
use crate::walk::{Node, Obj, Result};

const STRING_KINDS: [&str; 5] = ["exact", "prefix", "suffix", "contains", "safe_regex"];

/// A `StringMatcher`.
pub(crate) fn string_matcher(node: &Node<'_>) -> Result<StringMatcher> {
    let mut allowed: Vec<&str> = STRING_KINDS.to_vec();
    allowed.push("ignore_case");
    let o = node.obj_with(&allowed, &["custom"])?;
    let ignore_case = o.bool_or_false("ignore_case")?;
    let kind = match o.present(&STRING_KINDS).as_slice() {
        [k] => string_kind(&o, k)?,
        [] => return Err(node.err(format!("needs one of {}", STRING_KINDS.join(", ")))),
        _ => {
            return Err(node.err(format!(
                "only one of {} may be set",
                STRING_KINDS.join(", ")
            )))
        }
    };
    Ok(StringMatcher { kind, ignore_case })
}

fn string_kind(o: &Obj<'_>, key: &str) -> Result<StringMatch> {
    let n = o.req(key)?;
    Ok(match key {
        "exact" => StringMatch::Exact(n.as_str()?.to_owned()),
        "prefix" => StringMatch::Prefix(n.non_empty_str()?.to_owned()),
        "suffix" => StringMatch::Suffix(n.non_empty_str()?.to_owned()),
        "contains" => StringMatch::Contains(n.non_empty_str()?.to_owned()),
        _ => StringMatch::Regex(regex_matcher(&n)?),
    })
}

/// A `RegexMatcher` (`regex`, optional `google_re2: {}`), compiled anchored (Envoy matches the
/// whole value).
pub(crate) fn regex_matcher(node: &Node<'_>) -> Result<regex::Regex> {
    let o = node.obj(&["regex", "google_re2"])?;
    if let Some(g) = o.get("google_re2") {
        g.obj_with(&[], &["max_program_size"])?;
    }
    let r = o.req("regex")?;
    let text = r.non_empty_str()?;
    regex::Regex::new(&format!("^(?:{text})$")).map_err(|e| r.err(format!("invalid regex: {e}")))
}

const HEADER_KINDS: [&str; 8] = [
    "string_match",
    "present_match",
    "range_match",
    "exact_match",
    "prefix_match",
    "suffix_match",
    "contains_match",
    "safe_regex_match",
];

/// A `HeaderMatcher`.
pub(crate) fn header_matcher(node: &Node<'_>) -> Result<HeaderMatcher> {
    let mut allowed: Vec<&str> = HEADER_KINDS.to_vec();
    allowed.extend(["name", "invert_match", "treat_missing_header_as_empty"]);
    let o = node.obj(&allowed)?;
    let name_node = o.req("name")?;
    let name = name_node.non_empty_str()?;
    if name
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control() || b == b',')
    {
        return Err(name_node.err(format!("invalid header name \"{}\"", name.escape_debug())));
    }
    let present = o.present(&HEADER_KINDS);
    let rule = match present.as_slice() {
        [] => HeaderRule::Present(true),
        [k] => {
            let n = o.req(k)?;
            let legacy = |kind: fn(String) -> StringMatch, non_empty: bool| -> Result<HeaderRule> {
                let s = if non_empty {
                    n.non_empty_str()?
                } else {
                    n.as_str()?
                };
                Ok(HeaderRule::String(StringMatcher {
                    kind: kind(s.to_owned()),
                    ignore_case: false,
                }))
            };
            match *k {
                "string_match" => HeaderRule::String(string_matcher(&n)?),
                "present_match" => HeaderRule::Present(n.as_bool()?),
                "range_match" => {
                    let ro = n.obj(&["start", "end"])?;
                    let int = |key: &str| -> Result<i64> {
                        let v = ro.req(key)?;
                        match &v.v {
                            serde_json::Value::Number(x) => x.as_i64(),
                            serde_json::Value::String(s) => s.trim().parse().ok(),
                            _ => None,
                        }
                        .ok_or_else(|| v.err("expected an integer"))
                    };
                    let (start, end) = (int("start")?, int("end")?);
                    if start >= end {
                        return Err(n.err("start must be less than end"));
                    }
                    HeaderRule::Range { start, end }
                }
                "exact_match" if n.as_str()?.is_empty() => HeaderRule::AnyValue,
                "exact_match" => legacy(StringMatch::Exact, false)?,
                "prefix_match" => legacy(StringMatch::Prefix, true)?,
                "suffix_match" => legacy(StringMatch::Suffix, true)?,
                "contains_match" => legacy(StringMatch::Contains, true)?,
                _ => HeaderRule::String(StringMatcher {
                    kind: StringMatch::Regex(regex_matcher(&n)?),
                    ignore_case: false,
                }),
            }
        }
        many => {
            return Err(node.err(format!(
                "only one of {} may be set (got {})",
                HEADER_KINDS.join(", "),
                many.join(", ")
            )))
        }
    };
    Ok(HeaderMatcher {
        name: name.to_ascii_lowercase(),
        rule,
        invert_match: o.bool_or_false("invert_match")?,
        treat_missing_header_as_empty: o.bool_or_false("treat_missing_header_as_empty")?,
    })
}

/// A route's `match.query_parameters[]` entry: `name` and one of `string_match`,
/// `present_match: true`.
pub(crate) fn query_parameter_matcher(node: &Node<'_>) -> Result<QueryParameterMatcher> {
    let o = node.obj(&["name", "string_match", "present_match"])?;
    let name = o.req("name")?.non_empty_str()?.to_owned();
    let value = match (o.get("string_match"), o.opt_bool("present_match")?) {
        (Some(m), None) => Some(string_matcher(&m)?),
        (None, Some(true)) => None,
        (None, Some(false)) => return Err(node.err("present_match: false matches nothing")),
        (None, None) => return Err(node.err("needs string_match or present_match")),
        (Some(_), Some(_)) => {
            return Err(node.err("only one of string_match, present_match may be set"))
        }
    };
    Ok(QueryParameterMatcher { name, value })
}
