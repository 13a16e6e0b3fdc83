//! Route configuration (`RouteConfiguration`, inline as an HCM's `route_config` or alone as an
//! RDS resource): virtual hosts, route matching and the route actions (direct response, route to
//! a cluster with timeout / prefix rewrite / retries, redirect).

use std::collections::HashMap;
use std::time::Duration;

use crate::cluster::{cluster_ref, ClusterNames};
use crate::duration::duration;
use crate::filter_config::{cors_policy, per_filter_configs};
use crate::header_mutation::{header_mutations, FIELDS};
use crate::matcher::header_matcher;
use crate::model::{
    HeaderMatcher, Redirect, RequireTls, RetryPolicy, Route, RouteAction, RouteConfig, RouteMatch,
    RouteTarget, VirtualHost, WeightedCluster,
};
use crate::walk::{Node, Result};

/// The `@type` of the `previous_hosts` retry host predicate.
const PREVIOUS_HOSTS: &str = "envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate";
/// Envoy's default `max_direct_response_body_size_bytes`.
const DEFAULT_MAX_DIRECT_RESPONSE_BODY: u64 = 4096;
/// Envoy's default route timeout.
const DEFAULT_ROUTE_TIMEOUT: Duration = Duration::from_secs(15);
/// The `retry_on` conditions for HTTP that Envoy knows.
const RETRY_ON: &[&str] = &[
    "5xx",
    "gateway-error",
    "reset",
    "reset-before-request",
    "connect-failure",
    "envoy-ratelimited",
    "retriable-4xx",
    "refused-stream",
    "retriable-status-codes",
    "retriable-headers",
    "http3-post-connect-failure",
];
/// gRPC `retry_on` conditions: the response's `grpc-status` (in its headers, as a
/// trailers-only response carries it).
const GRPC_RETRY_ON: &[&str] = &[
    "cancelled",
    "deadline-exceeded",
    "internal",
    "resource-exhausted",
    "unavailable",
];

/// A `RouteConfiguration`. `clusters` is checked against the route targets when
/// `validate_clusters` (default `validate_default`: true inline, false for RDS) is set; `None`
/// (no cluster list known) checks nothing.
pub(crate) fn route_config(
    node: &Node<'_>,
    clusters: Option<&ClusterNames>,
    validate_default: bool,
) -> Result<RouteConfig> {
    let o = node.obj_with(
        &[
            "name",
            "virtual_hosts",
            "validate_clusters",
            "ignore_port_in_host_matching",
            "max_direct_response_body_size_bytes",
            "typed_per_filter_config",
            FIELDS[0],
            FIELDS[1],
            FIELDS[2],
            FIELDS[3],
        ],
        &[
            "vhds",
            "internal_only_headers",
            "most_specific_header_mutations_wins",
            "cluster_specifier_plugins",
            "request_mirror_policies",
            "ignore_path_parameters_in_path_matching",
            "metadata",
        ],
    )?;
    let name = o.opt_str("name")?.unwrap_or_default().to_owned();
    let validate_clusters = o.opt_bool("validate_clusters")?.unwrap_or(validate_default);
    let ignore_port_in_host_matching = o.bool_or_false("ignore_port_in_host_matching")?;
    let clusters = clusters.filter(|_| validate_clusters);
    let max_body = match o.get("max_direct_response_body_size_bytes") {
        Some(n) => n.as_u64()?,
        None => DEFAULT_MAX_DIRECT_RESPONSE_BODY,
    };
    let mut hosts = Vec::new();
    // lowercased domain -> path of the virtual host that has it
    let mut domains: HashMap<String, String> = HashMap::new();
    for v in o.items("virtual_hosts") {
        let host = virtual_host(&v, clusters, max_body)?;
        let dn = v.path.clone() + ".domains";
        for (i, d) in host.domains.iter().enumerate() {
            if let Some(first) = domains.insert(d.to_ascii_lowercase(), v.path.clone()) {
                return Err(crate::ConfigError::invalid(
                    format!("{dn}[{i}]"),
                    format!("domain \"{d}\" is also used by {first}"),
                ));
            }
        }
        hosts.push(host);
    }
    Ok(RouteConfig {
        name,
        virtual_hosts: hosts,
        validate_clusters,
        ignore_port_in_host_matching,
        mutations: header_mutations(&o)?,
        per_filter: per_filter_configs(&o)?,
    })
}

fn virtual_host(
    node: &Node<'_>,
    clusters: Option<&ClusterNames>,
    max_body: u64,
) -> Result<VirtualHost> {
    let o = node.obj_with(
        &[
            "name",
            "domains",
            "routes",
            "metadata",
            "require_tls",
            "cors",
            "typed_per_filter_config",
            "include_request_attempt_count",
            "include_attempt_count_in_response",
            FIELDS[0],
            FIELDS[1],
            FIELDS[2],
            FIELDS[3],
        ],
        &[
            "matcher",
            "virtual_clusters",
            "rate_limits",
            "retry_policy",
            "retry_policy_typed_config",
            "hedge_policy",
            "include_is_timeout_retry_header",
            "per_request_buffer_limit_bytes",
            "request_mirror_policies",
        ],
    )?;
    let name = o.req("name")?.non_empty_str()?.to_owned();
    if let Some(m) = o.get("metadata") {
        crate::no_effect::metadata(&m)?;
    }
    let domains_node = o.req("domains")?;
    let domains = domains_node.str_list()?;
    if domains.is_empty() {
        return Err(domains_node.err("at least one domain is required"));
    }
    let mut routes = Vec::new();
    for r in o.items("routes") {
        routes.push(route(&r, clusters, max_body)?);
    }
    let require_tls = match o.get("require_tls") {
        None => RequireTls::None,
        Some(t) => match t.enum_index(&["NONE", "EXTERNAL_ONLY", "ALL"])? {
            0 => RequireTls::None,
            1 => RequireTls::ExternalOnly,
            _ => RequireTls::All,
        },
    };
    Ok(VirtualHost {
        name,
        domains,
        routes,
        mutations: header_mutations(&o)?,
        per_filter: per_filter_configs(&o)?,
        cors: o.get("cors").map(|c| cors_policy(&c, false)).transpose()?,
        require_tls,
        include_request_attempt_count: o.bool_or_false("include_request_attempt_count")?,
        include_attempt_count_in_response: o.bool_or_false("include_attempt_count_in_response")?,
    })
}

fn route(node: &Node<'_>, clusters: Option<&ClusterNames>, max_body: u64) -> Result<Route> {
    const ACTIONS: [&str; 3] = ["direct_response", "route", "redirect"];
    let o = node.obj_with(
        &[
            "name",
            "match",
            "direct_response",
            "route",
            "redirect",
            "metadata",
            "decorator",
            "typed_per_filter_config",
            FIELDS[0],
            FIELDS[1],
            FIELDS[2],
            FIELDS[3],
        ],
        &[
            "filter_action",
            "non_forwarding_action",
            "tracing",
            "per_request_buffer_limit_bytes",
            "stat_prefix",
        ],
    )?;
    let name = o.opt_str("name")?.unwrap_or_default().to_owned();
    if let Some(m) = o.get("metadata") {
        crate::no_effect::metadata(&m)?;
    }
    if let Some(d) = o.get("decorator") {
        crate::no_effect::decorator(&d)?;
    }
    let m = o.req("match")?;
    let (matcher, case_sensitive, headers) = route_match(&m)?;
    let query_parameters = m
        .any_obj()?
        .items("query_parameters")
        .iter()
        .map(crate::matcher::query_parameter_matcher)
        .collect::<Result<Vec<_>>>()?;
    let action = match o.present(&ACTIONS).as_slice() {
        ["direct_response"] => direct_response(&o.req("direct_response")?, max_body)?,
        ["route"] => RouteAction::Route(Box::new(route_target(&o.req("route")?, clusters)?)),
        ["redirect"] => RouteAction::Redirect(redirect(&o.req("redirect")?)?),
        [] => return Err(node.err("needs one of direct_response, route, redirect")),
        many => {
            return Err(node.err(format!(
                "only one of direct_response, route, redirect may be set (got {})",
                many.join(", ")
            )))
        }
    };
    let cors = o
        .get("route")
        .and_then(|r| {
            r.v.get("cors")
                .map(|c| Node::new(c, r.path.clone() + ".cors"))
        })
        .filter(|c| !c.v.is_null())
        .map(|c| cors_policy(&c, false))
        .transpose()?;
    Ok(Route {
        name,
        matcher,
        case_sensitive,
        headers,
        query_parameters,
        action,
        mutations: header_mutations(&o)?,
        per_filter: per_filter_configs(&o)?,
        cors,
    })
}

/// `match`: the path matcher, `case_sensitive` and `headers`.
fn route_match(node: &Node<'_>) -> Result<(RouteMatch, bool, Vec<HeaderMatcher>)> {
    const KINDS: [&str; 3] = ["prefix", "path", "path_separated_prefix"];
    let o = node.obj_with(
        &[
            "prefix",
            "path",
            "path_separated_prefix",
            "case_sensitive",
            "headers",
            "query_parameters",
        ],
        &[
            "safe_regex",
            "connect_matcher",
            "path_match_policy",
            "runtime_fraction",
            "grpc",
            "tls_context",
            "dynamic_metadata",
            "filter_state",
            "cookies",
        ],
    )?;
    let matcher = match o.present(&KINDS).as_slice() {
        ["prefix"] => RouteMatch::Prefix(o.req("prefix")?.as_str()?.to_owned()),
        ["path"] => {
            let p = o.req("path")?;
            RouteMatch::Path(p.non_empty_str()?.to_owned())
        }
        ["path_separated_prefix"] => RouteMatch::PathSeparatedPrefix(path_separated_prefix(
            &o.req("path_separated_prefix")?,
        )?),
        [] => return Err(node.err("needs prefix, path or path_separated_prefix")),
        _ => return Err(node.err("only one of prefix, path, path_separated_prefix may be set")),
    };
    let case_sensitive = o.opt_bool("case_sensitive")?.unwrap_or(true);
    let headers = o
        .items("headers")
        .iter()
        .map(header_matcher)
        .collect::<Result<Vec<_>>>()?;
    Ok((matcher, case_sensitive, headers))
}

/// `match.path_separated_prefix`, as Envoy validates it (`^[^?#]+[^?#/]$`): no `?` or `#`, not
/// ending in `/`. Envoy does not ask for a leading `/` (such a value matches no request).
fn path_separated_prefix(node: &Node<'_>) -> Result<String> {
    let p = node.non_empty_str()?;
    if p.contains(['?', '#']) {
        return Err(node.err(format!("must not contain '?' or '#', got \"{p}\"")));
    }
    if p.ends_with('/') {
        return Err(node.err(format!(
            "must not end with '/' (use prefix: \"/\" to match every path), got \"{p}\""
        )));
    }
    if p.chars().count() < 2 {
        return Err(node.err(format!(
            "must be at least 2 characters (Envoy's ^[^?#]+[^?#/]$), got \"{p}\""
        )));
    }
    Ok(p.to_owned())
}

/// A route's `direct_response`: the body may be at most the route configuration's
/// `max_direct_response_body_size_bytes` (Envoy's default 4096).
fn direct_response(node: &Node<'_>, max_body: u64) -> Result<RouteAction> {
    let o = node.obj(&["status", "body"])?;
    let status_node = o.req("status")?;
    let status = u16::try_from(status_node.as_u64_in(100, 599)?)
        .map_err(|_| status_node.err("out of range"))?;
    let body = match o.get("body") {
        None => None,
        Some(b) => {
            let bo = b.obj_with(
                &["inline_string"],
                &["filename", "inline_bytes", "environment_variable"],
            )?;
            let s = bo.req("inline_string")?;
            let text = s.as_str()?;
            if text.len() as u64 > max_body {
                return Err(s.err(format!(
                    "response body size is {} bytes; maximum is {max_body} \
                     (max_direct_response_body_size_bytes)",
                    text.len()
                )));
            }
            Some(text.to_owned())
        }
    };
    Ok(RouteAction::DirectResponse { status, body })
}

/// A route's `route` action.
fn route_target(node: &Node<'_>, clusters: Option<&ClusterNames>) -> Result<RouteTarget> {
    let o = node.obj_with(
        &[
            "cluster",
            "timeout",
            "prefix_rewrite",
            "retry_policy",
            "upgrade_configs",
            "cors",
            "max_grpc_timeout",
            "grpc_timeout_offset",
            "regex_rewrite",
            "host_rewrite_literal",
            "append_x_forwarded_host",
            "idle_timeout",
            "request_mirror_policies",
            "cluster_not_found_response_code",
            "weighted_clusters",
            "hash_policy",
        ],
        &[
            "cluster_header",
            "cluster_specifier_plugin",
            "inline_cluster_specifier_plugin",
            "metadata_match",
            "path_rewrite_policy",
            "host_rewrite_header",
            "auto_host_rewrite",
            "host_rewrite_path_regex",
            "early_data_policy",
            "retry_policy_typed_config",
            "priority",
            "rate_limits",
            "include_vh_rate_limits",
            "internal_redirect_policy",
            "internal_redirect_action",
            "max_internal_redirects",
            "hedge_policy",
            "max_stream_duration",
        ],
    )?;
    let (weighted, weighted_use_hash_policy) = match (o.get("cluster"), o.get("weighted_clusters"))
    {
        (Some(_), Some(w)) => {
            return Err(w.err("only one of cluster, weighted_clusters may be set"))
        }
        (None, None) => return Err(o.missing("cluster")),
        (_, w) => w
            .map(|w| weighted_clusters(&w, clusters))
            .transpose()?
            .unwrap_or_default(),
    };
    let cluster = match (o.get("cluster"), weighted.first()) {
        (Some(c), _) => match clusters {
            Some(names) => cluster_ref(&c, names)?,
            None => c.non_empty_str()?.to_owned(),
        },
        (None, Some(w)) => w.name.clone(),
        (None, None) => return Err(o.missing("cluster")),
    };
    let timeout = match o.get("timeout") {
        Some(t) => Some(duration(&t)?).filter(|d| !d.is_zero()),
        None => Some(DEFAULT_ROUTE_TIMEOUT),
    };
    let prefix_rewrite = o.opt_str("prefix_rewrite")?.map(str::to_owned);
    let regex_rewrite = o
        .get("regex_rewrite")
        .map(|r| crate::rewrite::regex_rewrite(&r).map(Box::new))
        .transpose()?;
    if prefix_rewrite.is_some() && regex_rewrite.is_some() {
        return Err(node.err("only one of prefix_rewrite, regex_rewrite may be set"));
    }
    let retry_policy = o
        .get("retry_policy")
        .map(|r| retry_policy(&r))
        .transpose()?;
    let upgrades = o
        .items("upgrade_configs")
        .iter()
        .try_fold(Vec::new(), |mut seen, u| {
            let entry = route_upgrade(u, &seen)?;
            seen.push(entry);
            Ok(seen)
        })?;
    Ok(RouteTarget {
        cluster,
        timeout,
        prefix_rewrite,
        retry_policy,
        upgrades,
        max_grpc_timeout: o
            .get("max_grpc_timeout")
            .map(|d| duration(&d))
            .transpose()?,
        grpc_timeout_offset: o
            .get("grpc_timeout_offset")
            .map(|d| duration(&d))
            .transpose()?,
        regex_rewrite,
        host_rewrite_literal: o.opt_str("host_rewrite_literal")?.map(str::to_owned),
        append_x_forwarded_host: o.bool_or_false("append_x_forwarded_host")?,
        idle_timeout: o.get("idle_timeout").map(|d| duration(&d)).transpose()?,
        mirrors: crate::rewrite::mirror_policies(&o, clusters)?,
        weighted,
        weighted_use_hash_policy,
        hash_policy: match o.get("hash_policy") {
            Some(h) => crate::hash_policy::hash_policies(&h)?,
            None => Vec::new(),
        },
        cluster_not_found_status: match o.get("cluster_not_found_response_code") {
            Some(c) => [503, 404, 500]
                [c.enum_index(&["SERVICE_UNAVAILABLE", "NOT_FOUND", "INTERNAL_SERVER_ERROR"])?],
            None => 503,
        },
    })
}

/// One of a route's `upgrade_configs` (`RouteAction.UpgradeConfig`): its type and whether it is
/// `enabled` (default true). Envoy refuses a type twice and `connect_config` on a type other
/// than `CONNECT`; quickshake does not proxy CONNECT, so `connect_config` is refused always.
fn route_upgrade(node: &Node<'_>, seen: &[(String, bool)]) -> Result<(String, bool)> {
    let o = node.obj(&["upgrade_type", "enabled", "connect_config"])?;
    let ty = upgrade_type(
        &o.req("upgrade_type")?,
        seen.iter().map(|(t, _)| t.as_str()),
    )?;
    if let Some(c) = o.get("connect_config") {
        if !ty.eq_ignore_ascii_case("CONNECT") {
            return Err(c.err(format!(
                "non-CONNECT upgrade type \"{ty}\" has connect_config"
            )));
        }
        return Err(c.unsupported(Some("CONNECT proxying (connect_config)")));
    }
    Ok((ty, o.opt_bool("enabled")?.unwrap_or(true)))
}

/// An `upgrade_type` (of the connection manager's or a route's `upgrade_configs`): a token, not
/// one of `seen` (types compare case-insensitively, as Envoy's do).
pub(crate) fn upgrade_type<'s>(
    t: &Node<'_>,
    mut seen: impl Iterator<Item = &'s str>,
) -> Result<String> {
    let ty = t.non_empty_str()?;
    if ty
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(t.err(format!("invalid upgrade type \"{ty}\"")));
    }
    if seen.any(|x| x.eq_ignore_ascii_case(ty)) {
        return Err(t.err(format!("duplicate upgrade type \"{ty}\"")));
    }
    Ok(ty.to_owned())
}

fn retry_policy(node: &Node<'_>) -> Result<RetryPolicy> {
    let o = node.obj_with(
        &[
            "retry_on",
            "num_retries",
            "per_try_timeout",
            "retriable_status_codes",
            "retry_host_predicate",
            "host_selection_retry_max_attempts",
            "retry_back_off",
        ],
        &[
            "per_try_idle_timeout",
            "retry_priority",
            "retry_options_predicates",
            "rate_limited_retry_back_off",
            "retriable_headers",
            "retriable_request_headers",
        ],
    )?;
    let mut retry_on = Vec::new();
    if let Some(r) = o.get("retry_on") {
        for cond in r.as_str()?.split(',').map(str::trim) {
            if cond.is_empty() {
                continue;
            }
            if !RETRY_ON.contains(&cond) && !GRPC_RETRY_ON.contains(&cond) {
                return Err(r.err(format!(
                    "unknown retry condition \"{cond}\" (known: {}, {})",
                    RETRY_ON.join(", "),
                    GRPC_RETRY_ON.join(", ")
                )));
            }
            if !retry_on.iter().any(|c| c == cond) {
                retry_on.push(cond.to_owned());
            }
        }
    }
    let num_retries = match o.get("num_retries") {
        Some(n) => n.as_u64_in(0, u64::from(u32::MAX))? as u32,
        None => 1,
    };
    let per_try_timeout = o
        .get("per_try_timeout")
        .map(|d| duration(&d))
        .transpose()?
        .filter(|d| !d.is_zero());
    let mut retriable_status_codes = Vec::new();
    for c in o.items("retriable_status_codes") {
        retriable_status_codes.push(c.as_u64_in(100, 599)? as u16);
    }
    let mut previous_hosts = false;
    for p in o.items("retry_host_predicate") {
        let po = p.obj(&["name", "typed_config"])?;
        let name = po.opt_str("name")?.unwrap_or_default();
        let kind = match po.get("typed_config") {
            Some(tc) => {
                let t = tc.type_url()?;
                tc.obj(&["@type"])?;
                t.rsplit('/').next().unwrap_or(t).to_owned()
            }
            None => name.to_owned(),
        };
        match kind.as_str() {
            PREVIOUS_HOSTS | "envoy.retry_host_predicates.previous_hosts" => previous_hosts = true,
            other => {
                return Err(p.unsupported(Some(&format!(
                    "retry host predicate {other} (supported: envoy.retry_host_predicates.previous_hosts)"
                ))))
            }
        }
    }
    let host_selection_retry_max_attempts = match o.get("host_selection_retry_max_attempts") {
        Some(n) => u32::try_from(n.as_u64()?).map_err(|_| n.err("out of range"))?,
        None => 1,
    };
    let back_off = o
        .get("retry_back_off")
        .map(|b| retry_back_off(&b))
        .transpose()?;
    Ok(RetryPolicy {
        retry_on,
        num_retries,
        per_try_timeout,
        retriable_status_codes,
        previous_hosts,
        host_selection_retry_max_attempts,
        back_off,
    })
}

/// `weighted_clusters` `{clusters[] {name, weight, request_headers_to_add/_to_remove,
/// metadata}, total_weight}`: at least one cluster with a weight; `total_weight`, when given,
/// the sum (as Envoy checks); and `use_hash_policy`.
fn weighted_clusters(
    node: &Node<'_>,
    names: Option<&ClusterNames>,
) -> Result<(Vec<WeightedCluster>, bool)> {
    let o = node.obj_with(
        &["clusters", "total_weight", "use_hash_policy"],
        &[
            "runtime_key_prefix",
            "header_name",
            "random_value_specifier",
        ],
    )?;
    let mut out = Vec::new();
    for c in o.items("clusters") {
        let co = c.obj_with(
            &[
                "name",
                "weight",
                "request_headers_to_add",
                "request_headers_to_remove",
                "metadata",
            ],
            &[
                "cluster_header",
                "typed_per_filter_config",
                "host_rewrite_literal",
                "response_headers_to_add",
                "response_headers_to_remove",
            ],
        )?;
        if let Some(m) = co.get("metadata") {
            crate::no_effect::metadata(&m)?;
        }
        let n = co.req("name")?;
        let name = match names {
            Some(names) => cluster_ref(&n, names)?,
            None => n.non_empty_str()?.to_owned(),
        };
        let weight = match co.get("weight") {
            Some(w) => u32::try_from(w.as_u64()?).map_err(|_| w.err("out of range"))?,
            None => 0,
        };
        out.push(WeightedCluster {
            name,
            weight,
            mutations: header_mutations(&co)?,
        });
    }
    if out.is_empty() {
        return Err(node.err("needs at least one cluster"));
    }
    let sum: u64 = out.iter().map(|c| u64::from(c.weight)).sum();
    if sum == 0 {
        return Err(node.err("the clusters' weights add up to 0"));
    }
    if let Some(t) = o.get("total_weight") {
        if t.as_u64()? != sum {
            return Err(t.err(format!("must equal the sum of the weights, {sum}")));
        }
    }
    Ok((out, o.bool_or_false("use_hash_policy")?))
}

/// `retry_back_off`: `base_interval` (required, at least 1 ms) and `max_interval` (default ten
/// times the base, not below it), as Envoy validates them.
fn retry_back_off(node: &Node<'_>) -> Result<(Duration, Duration)> {
    let o = node.obj(&["base_interval", "max_interval"])?;
    let b = o.req("base_interval")?;
    let base = duration(&b)?;
    if base < Duration::from_millis(1) {
        return Err(b.err("must be at least 1ms"));
    }
    let max = match o.get("max_interval") {
        Some(m) => {
            let max = duration(&m)?;
            if max < base {
                return Err(m.err("must not be less than base_interval"));
            }
            max
        }
        None => base * 10,
    };
    Ok((base, max))
}

fn redirect(node: &Node<'_>) -> Result<Redirect> {
    let o = node.obj_with(
        &[
            "https_redirect",
            "scheme_redirect",
            "host_redirect",
            "port_redirect",
            "path_redirect",
            "prefix_rewrite",
            "regex_rewrite",
            "strip_query",
            "response_code",
        ],
        &[],
    )?;
    if o.present(&["https_redirect", "scheme_redirect"]).len() > 1 {
        return Err(node.err("only one of https_redirect, scheme_redirect may be set"));
    }
    let paths = ["path_redirect", "prefix_rewrite", "regex_rewrite"];
    if o.present(&paths).len() > 1 {
        return Err(node.err(format!("only one of {} may be set", paths.join(", "))));
    }
    let header_value = |key: &str| -> Result<Option<String>> {
        let Some(n) = o.get(key) else { return Ok(None) };
        let s = n.non_empty_str()?;
        if s.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(n.err(format!("invalid value \"{}\"", s.escape_debug())));
        }
        Ok(Some(s.to_owned()))
    };
    let host_redirect = header_value("host_redirect")?;
    let path_redirect = header_value("path_redirect")?;
    let response_code = match o.get("response_code") {
        None => 301,
        Some(c) => {
            let code = match &c.v {
                serde_json::Value::String(s) => match s.as_str() {
                    "MOVED_PERMANENTLY" => Some(301),
                    "FOUND" => Some(302),
                    "SEE_OTHER" => Some(303),
                    "TEMPORARY_REDIRECT" => Some(307),
                    "PERMANENT_REDIRECT" => Some(308),
                    _ => None,
                },
                // Protobuf JSON also writes enums as their numbers.
                serde_json::Value::Number(n) => match n.as_u64() {
                    Some(0) => Some(301),
                    Some(1) => Some(302),
                    Some(2) => Some(303),
                    Some(3) => Some(307),
                    Some(4) => Some(308),
                    _ => None,
                },
                _ => None,
            };
            code.ok_or_else(|| {
                c.err(
                    "expected MOVED_PERMANENTLY, FOUND, SEE_OTHER, TEMPORARY_REDIRECT or \
                     PERMANENT_REDIRECT",
                )
            })?
        }
    };
    let port_redirect = match o.get("port_redirect") {
        Some(p) => Some(p.as_u64_in(0, 65535)?).filter(|p| *p != 0),
        None => None,
    };
    Ok(Redirect {
        https_redirect: o.bool_or_false("https_redirect")?,
        scheme_redirect: header_value("scheme_redirect")?.map(|s| s.to_ascii_lowercase()),
        host_redirect,
        port_redirect: port_redirect.map(|p| p as u32),
        path_redirect,
        prefix_rewrite: o.opt_str("prefix_rewrite")?.map(str::to_owned),
        regex_rewrite: o
            .get("regex_rewrite")
            .map(|r| crate::rewrite::regex_rewrite(&r))
            .transpose()?,
        strip_query: o.bool_or_false("strip_query")?,
        response_code,
    })
}
