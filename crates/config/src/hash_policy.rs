//! A route's `hash_policy[]`: what the request hash of a ring hash / Maglev cluster is made of.

use crate::duration::duration;
use crate::model::{CookieHash, HashPolicy, HashSource};
use crate::walk::{Node, Result};

/// `hash_policy[]`: `header` (no `regex_rewrite`), `cookie` (`ttl`: generated when absent),
/// `connection_properties.source_ip`, `query_parameter`; each with `terminal`. `filter_state`
/// is not supported yet.
pub(crate) fn hash_policies(node: &Node<'_>) -> Result<Vec<HashPolicy>> {
    node.items().iter().map(hash_policy).collect()
}

fn hash_policy(node: &Node<'_>) -> Result<HashPolicy> {
    let o = node.obj_with(
        &[
            "header",
            "cookie",
            "connection_properties",
            "query_parameter",
            "terminal",
        ],
        &["filter_state"],
    )?;
    let mut sources = Vec::new();
    if let Some(h) = o.get("header") {
        let ho = h.obj_with(&["header_name"], &["regex_rewrite"])?;
        let name = ho.req("header_name")?.non_empty_str()?.to_ascii_lowercase();
        sources.push(HashSource::Header(name));
    }
    if let Some(c) = o.get("cookie") {
        let co = c.obj(&["name", "ttl", "path", "attributes"])?;
        let mut attributes = Vec::new();
        for a in co.items("attributes") {
            let ao = a.obj(&["name", "value"])?;
            attributes.push((
                ao.req("name")?.non_empty_str()?.to_owned(),
                ao.opt_str("value")?.unwrap_or_default().to_owned(),
            ));
        }
        sources.push(HashSource::Cookie(CookieHash {
            name: co.req("name")?.non_empty_str()?.to_owned(),
            ttl: co.get("ttl").map(|t| duration(&t)).transpose()?,
            path: co
                .opt_str("path")?
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
            attributes,
        }));
    }
    if let Some(c) = o.get("connection_properties") {
        let co = c.obj(&["source_ip"])?;
        if co.bool_or_false("source_ip")? {
            sources.push(HashSource::SourceIp);
        } else {
            return Err(c.err("source_ip must be true"));
        }
    }
    if let Some(q) = o.get("query_parameter") {
        let qo = q.obj(&["name"])?;
        sources.push(HashSource::QueryParameter(
            qo.req("name")?.non_empty_str()?.to_owned(),
        ));
    }
    let mut sources = sources.into_iter();
    match (sources.next(), sources.next()) {
        (Some(source), None) => Ok(HashPolicy {
            source,
            terminal: o.bool_or_false("terminal")?,
        }),
        (None, _) => {
            Err(node.err("needs one of header, cookie, connection_properties, query_parameter"))
        }
        (Some(_), Some(_)) => Err(node
            .err("only one of header, cookie, connection_properties, query_parameter may be set")),
    }
}
