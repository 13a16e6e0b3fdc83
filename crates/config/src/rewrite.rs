//! A route's path rewrites and request mirrors: `regex_rewrite` (route and redirect actions)
//! and `request_mirror_policies`.

use crate::cluster::{cluster_ref, ClusterNames};
use crate::fraction::runtime_fraction;
use crate::model::{Fraction, RegexRewrite, RequestMirror};
use crate::walk::{Node, Obj, Result};

/// `regex_rewrite`: a `RegexMatchAndSubstitute` (`pattern` a `RegexMatcher`, `substitution`).
pub(crate) fn regex_rewrite(node: &Node<'_>) -> Result<RegexRewrite> {
    let o = node.obj(&["pattern", "substitution"])?;
    let p = o.req("pattern")?;
    let po = p.obj(&["regex", "google_re2"])?;
    if let Some(g) = po.get("google_re2") {
        g.obj_with(&[], &["max_program_size"])?;
    }
    let r = po.req("regex")?;
    let pattern =
        regex::Regex::new(r.non_empty_str()?).map_err(|e| r.err(format!("invalid regex: {e}")))?;
    let s = o.req("substitution")?;
    let substitution = s.as_str()?.to_owned();
    let replacement =
        re2_replacement(&substitution, pattern.captures_len()).map_err(|reason| s.err(reason))?;
    Ok(RegexRewrite {
        pattern,
        substitution,
        replacement,
    })
}

/// RE2's rewrite string (`\0`..`\9` groups, `\\` a backslash) in the `regex` crate's syntax
/// (`${N}`, `$$` a dollar); a group the pattern lacks is refused, as RE2 refuses it.
fn re2_replacement(sub: &str, groups: usize) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(sub.len());
    let mut chars = sub.chars();
    while let Some(c) = chars.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match chars.next() {
                Some('\\') => out.push('\\'),
                Some(d) if d.is_ascii_digit() => {
                    let n = d as usize - '0' as usize;
                    if n >= groups {
                        return Err(format!(
                            "substitution names group \\{n}, pattern has {}",
                            groups - 1
                        ));
                    }
                    out.push_str(&format!("${{{n}}}"));
                }
                _ => return Err("invalid escape in substitution (\\0-\\9 or \\\\)".to_owned()),
            },
            c => out.push(c),
        }
    }
    Ok(out)
}

/// `request_mirror_policies[]`.
pub(crate) fn mirror_policies(
    o: &Obj<'_>,
    clusters: Option<&ClusterNames>,
) -> Result<Vec<RequestMirror>> {
    o.items("request_mirror_policies")
        .iter()
        .map(|m| {
            let mo = m.obj_with(
                &[
                    "cluster",
                    "runtime_fraction",
                    "trace_sampled",
                    "disable_shadow_host_suffix_append",
                ],
                &[
                    "cluster_header",
                    "request_headers_mutations",
                    "host_rewrite_literal",
                ],
            )?;
            let c = mo.req("cluster")?;
            let cluster = match clusters {
                Some(names) => cluster_ref(&c, names)?,
                None => c.non_empty_str()?.to_owned(),
            };
            mo.opt_bool("trace_sampled")?; // tracing only: quickshake exports no traces
            Ok(RequestMirror {
                cluster,
                fraction: mo
                    .get("runtime_fraction")
                    .map(|f| runtime_fraction(&f))
                    .transpose()?
                    .unwrap_or(Fraction::ALL),
                disable_shadow_host_suffix_append: mo
                    .bool_or_false("disable_shadow_host_suffix_append")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::re2_replacement;

    #[test]
    fn re2_substitution_becomes_regex_replacement() {
        assert_eq!(re2_replacement("/full", 1).unwrap(), "/full");
        assert_eq!(
            re2_replacement(r"/v2/\1/$x\\", 2).unwrap(),
            "/v2/${1}/$$x\\"
        );
        assert!(re2_replacement(r"\2", 2).is_err());
        assert!(re2_replacement(r"\q", 1).is_err());
    }
}
