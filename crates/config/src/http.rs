//! `HttpConnectionManager`: codec, route configuration with direct responses, the router filter,
//! protocol options and access logs.

use std::collections::HashMap;
use std::path::PathBuf;

use std::time::Duration;

use crate::cluster::{cluster_ref, ClusterNames};
use crate::duration::duration;
use crate::model::{
    AccessLog, AccessLogSink, CodecType, HttpConnectionManager, Redirect, RetryPolicy, Route,
    RouteAction, RouteMatch, RouteTarget, VirtualHost,
};
use crate::walk::{Node, Obj, Result};

const HCM_TYPE: &str = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
const ROUTER_TYPE: &str = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";
const FILE_LOG_TYPE: &str =
    "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog";
const STDOUT_LOG_TYPE: &str =
    "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog";
const STDERR_LOG_TYPE: &str =
    "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StderrAccessLog";
const DEFAULT_MAX_REQUEST_HEADERS_KB: u32 = 60;
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
/// gRPC `retry_on` conditions (not implemented).
const GRPC_RETRY_ON: &[&str] = &[
    "cancelled",
    "deadline-exceeded",
    "internal",
    "resource-exhausted",
    "unavailable",
];

pub(crate) fn http_connection_manager(
    node: &Node<'_>,
    clusters: &ClusterNames,
) -> Result<HttpConnectionManager> {
    let o = node.typed(
        HCM_TYPE,
        &[
            "codec_type",
            "stat_prefix",
            "route_config",
            "http_filters",
            "common_http_protocol_options",
            "max_request_headers_kb",
            "access_log",
            "server_name",
            "use_remote_address",
            "generate_request_id",
            "upgrade_configs",
            "xff_num_trusted_hops",
        ],
        &[
            "rds",
            "scoped_routes",
            "tracing",
            "http_protocol_options",
            "http2_protocol_options",
            "http3_protocol_options",
            "server_header_transformation",
            "scheme_header_transformation",
            "stream_idle_timeout",
            "request_timeout",
            "request_headers_timeout",
            "drain_timeout",
            "delayed_close_timeout",
            "access_log_options",
            "original_ip_detection_extensions",
            "early_header_mutation_extensions",
            "internal_address_config",
            "skip_xff_append",
            "via",
            "preserve_external_request_id",
            "always_set_request_id_in_response",
            "forward_client_cert_details",
            "set_current_client_cert_details",
            "proxy_100_continue",
            "represent_ipv4_remote_address_as_ipv4_mapped_ipv6",
            "normalize_path",
            "merge_slashes",
            "path_with_escaped_slashes_action",
            "request_id_extension",
            "local_reply_config",
            "strip_matching_host_port",
            "strip_any_host_port",
            "stream_error_on_invalid_http_message",
            "strip_trailing_host_dot",
            "proxy_status_config",
            "typed_header_validation_config",
            "append_x_forwarded_port",
            "append_local_overload",
            "add_proxy_protocol_connection_state",
        ],
    )?;
    let codec_type = match o.get("codec_type") {
        None => CodecType::Auto,
        Some(c) => {
            let s = c.as_str()?;
            match s.to_ascii_uppercase().as_str() {
                "AUTO" => CodecType::Auto,
                "HTTP1" => CodecType::Http1,
                "HTTP2" => CodecType::Http2,
                "HTTP3" => return Err(c.unsupported(Some("HTTP/3"))),
                _ => {
                    return Err(c.err(format!("expected AUTO, HTTP1 or HTTP2, got \"{s}\"")));
                }
            }
        }
    };
    let stat_prefix = o.req("stat_prefix")?.non_empty_str()?.to_owned();
    for f in o.items("http_filters") {
        http_filter(&f)?;
    }
    let mut idle_timeout = None;
    if let Some(p) = o.get("common_http_protocol_options") {
        let po = p.obj_with(
            &["idle_timeout"],
            &[
                "max_connection_duration",
                "max_headers_count",
                "max_response_headers_kb",
                "max_stream_duration",
                "headers_with_underscores_action",
                "max_requests_per_connection",
            ],
        )?;
        idle_timeout = po.get("idle_timeout").map(|d| duration(&d)).transpose()?;
    }
    let max_request_headers_kb = match o.get("max_request_headers_kb") {
        Some(n) => u32::try_from(n.as_u64_in(1, 8192)?).map_err(|_| n.err("out of range"))?,
        None => DEFAULT_MAX_REQUEST_HEADERS_KB,
    };
    let mut access_logs = Vec::new();
    for a in o.items("access_log") {
        access_logs.push(access_log(&a)?);
    }
    let server_name = o.opt_str("server_name")?.map(str::to_owned);
    let use_remote_address = o.bool_or_false("use_remote_address")?;
    let generate_request_id = o.opt_bool("generate_request_id")?.unwrap_or(true);
    let xff_num_trusted_hops = match o.get("xff_num_trusted_hops") {
        Some(n) => n.as_u64_in(0, u64::from(u32::MAX))? as u32,
        None => 0,
    };
    let mut upgrade_types: Vec<String> = Vec::new();
    for u in o.items("upgrade_configs") {
        let uo = u.obj_with(&["upgrade_type", "enabled"], &["filters"])?;
        let t = uo.req("upgrade_type")?;
        let ty = t.non_empty_str()?;
        if ty
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(t.err(format!("invalid upgrade type \"{ty}\"")));
        }
        if upgrade_types.iter().any(|x| x.eq_ignore_ascii_case(ty)) {
            return Err(t.err(format!("duplicate upgrade type \"{ty}\"")));
        }
        if uo.opt_bool("enabled")?.unwrap_or(true) {
            upgrade_types.push(ty.to_owned());
        }
    }
    let virtual_hosts = route_config(&o.req("route_config")?, clusters)?;
    Ok(HttpConnectionManager {
        path: node.path.clone(),
        stat_prefix,
        codec_type,
        virtual_hosts,
        idle_timeout,
        max_request_headers_kb,
        access_logs,
        server_name,
        upgrade_types,
        use_remote_address,
        xff_num_trusted_hops,
        generate_request_id,
    })
}

fn http_filter(node: &Node<'_>) -> Result<()> {
    let o = node.obj_with(
        &["name", "typed_config"],
        &["config_discovery", "is_optional", "disabled"],
    )?;
    let name_node = o.req("name")?;
    match name_node.as_str()? {
        "envoy.filters.http.router" | "envoy.router" => {}
        other => {
            return Err(name_node.err(format!(
                "unknown HTTP filter \"{other}\" (supported: envoy.filters.http.router)"
            )))
        }
    }
    if let Some(tc) = o.get("typed_config") {
        // `typed_config: {}` is accepted, as Envoy's older examples write it.
        if !tc.v.as_object().is_some_and(|m| m.is_empty()) {
            tc.typed(
                ROUTER_TYPE,
                &[],
                &[
                    "dynamic_stats",
                    "start_child_span",
                    "upstream_log",
                    "upstream_log_options",
                    "suppress_envoy_headers",
                    "strict_check_headers",
                    "respect_expected_rq_timeout",
                    "suppress_grpc_request_failure_code_stats",
                    "upstream_http_filters",
                ],
            )?;
        }
    }
    Ok(())
}

fn route_config(node: &Node<'_>, clusters: &ClusterNames) -> Result<Vec<VirtualHost>> {
    let o = node.obj_with(
        &["name", "virtual_hosts"],
        &[
            "vhds",
            "internal_only_headers",
            "response_headers_to_add",
            "response_headers_to_remove",
            "request_headers_to_add",
            "request_headers_to_remove",
            "most_specific_header_mutations_wins",
            "validate_clusters",
            "max_direct_response_body_size_bytes",
            "cluster_specifier_plugins",
            "request_mirror_policies",
            "ignore_port_in_host_matching",
            "ignore_path_parameters_in_path_matching",
            "typed_per_filter_config",
            "metadata",
        ],
    )?;
    o.opt_str("name")?;
    let mut hosts = Vec::new();
    // lowercased domain -> path of the virtual host that has it
    let mut domains: HashMap<String, String> = HashMap::new();
    for v in o.items("virtual_hosts") {
        let host = virtual_host(&v, clusters)?;
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
    Ok(hosts)
}

fn virtual_host(node: &Node<'_>, clusters: &ClusterNames) -> Result<VirtualHost> {
    let o = node.obj_with(
        &["name", "domains", "routes"],
        &[
            "matcher",
            "require_tls",
            "virtual_clusters",
            "rate_limits",
            "request_headers_to_add",
            "request_headers_to_remove",
            "response_headers_to_add",
            "response_headers_to_remove",
            "cors",
            "typed_per_filter_config",
            "include_request_attempt_count",
            "include_attempt_count_in_response",
            "retry_policy",
            "retry_policy_typed_config",
            "hedge_policy",
            "include_is_timeout_retry_header",
            "per_request_buffer_limit_bytes",
            "request_mirror_policies",
            "metadata",
        ],
    )?;
    let name = o.req("name")?.non_empty_str()?.to_owned();
    let domains_node = o.req("domains")?;
    let domains = domains_node.str_list()?;
    if domains.is_empty() {
        return Err(domains_node.err("at least one domain is required"));
    }
    let mut routes = Vec::new();
    for r in o.items("routes") {
        routes.push(route(&r, clusters)?);
    }
    Ok(VirtualHost {
        name,
        domains,
        routes,
    })
}

fn route(node: &Node<'_>, clusters: &ClusterNames) -> Result<Route> {
    const ACTIONS: [&str; 3] = ["direct_response", "route", "redirect"];
    let o = node.obj_with(
        &["name", "match", "direct_response", "route", "redirect"],
        &[
            "filter_action",
            "non_forwarding_action",
            "metadata",
            "decorator",
            "typed_per_filter_config",
            "request_headers_to_add",
            "request_headers_to_remove",
            "response_headers_to_add",
            "response_headers_to_remove",
            "tracing",
            "per_request_buffer_limit_bytes",
            "stat_prefix",
        ],
    )?;
    o.opt_str("name")?;
    let matcher = route_match(&o.req("match")?)?;
    let action = match o.present(&ACTIONS).as_slice() {
        ["direct_response"] => direct_response(&o.req("direct_response")?)?,
        ["route"] => RouteAction::Route(route_target(&o.req("route")?, clusters)?),
        ["redirect"] => RouteAction::Redirect(redirect(&o.req("redirect")?)?),
        [] => return Err(node.err("needs one of direct_response, route, redirect")),
        many => {
            return Err(node.err(format!(
                "only one of direct_response, route, redirect may be set (got {})",
                many.join(", ")
            )))
        }
    };
    Ok(Route { matcher, action })
}

fn route_match(node: &Node<'_>) -> Result<RouteMatch> {
    const KINDS: [&str; 2] = ["prefix", "path"];
    let o = node.obj_with(
        &KINDS,
        &[
            "safe_regex",
            "connect_matcher",
            "path_separated_prefix",
            "path_match_policy",
            "case_sensitive",
            "runtime_fraction",
            "headers",
            "query_parameters",
            "grpc",
            "tls_context",
            "dynamic_metadata",
            "filter_state",
            "cookies",
        ],
    )?;
    match o.present(&KINDS).as_slice() {
        ["prefix"] => Ok(RouteMatch::Prefix(o.req("prefix")?.as_str()?.to_owned())),
        ["path"] => {
            let p = o.req("path")?;
            Ok(RouteMatch::Path(p.non_empty_str()?.to_owned()))
        }
        [] => Err(node.err("needs prefix or path")),
        _ => Err(node.err("only one of prefix, path may be set")),
    }
}

fn direct_response(node: &Node<'_>) -> Result<RouteAction> {
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
            Some(bo.req("inline_string")?.as_str()?.to_owned())
        }
    };
    Ok(RouteAction::DirectResponse { status, body })
}

/// A route's `route` action.
fn route_target(node: &Node<'_>, clusters: &ClusterNames) -> Result<RouteTarget> {
    let o = node.obj_with(
        &["cluster", "timeout", "prefix_rewrite", "retry_policy"],
        &[
            "cluster_header",
            "weighted_clusters",
            "cluster_specifier_plugin",
            "inline_cluster_specifier_plugin",
            "cluster_not_found_response_code",
            "metadata_match",
            "regex_rewrite",
            "path_rewrite_policy",
            "host_rewrite_literal",
            "host_rewrite_header",
            "auto_host_rewrite",
            "host_rewrite_path_regex",
            "append_x_forwarded_host",
            "idle_timeout",
            "early_data_policy",
            "retry_policy_typed_config",
            "request_mirror_policies",
            "priority",
            "rate_limits",
            "include_vh_rate_limits",
            "hash_policy",
            "cors",
            "max_grpc_timeout",
            "grpc_timeout_offset",
            "upgrade_configs",
            "internal_redirect_policy",
            "internal_redirect_action",
            "max_internal_redirects",
            "hedge_policy",
            "max_stream_duration",
        ],
    )?;
    let cluster = cluster_ref(&o.req("cluster")?, clusters)?;
    let timeout = match o.get("timeout") {
        Some(t) => Some(duration(&t)?).filter(|d| !d.is_zero()),
        None => Some(DEFAULT_ROUTE_TIMEOUT),
    };
    let prefix_rewrite = o.opt_str("prefix_rewrite")?.map(str::to_owned);
    let retry_policy = o
        .get("retry_policy")
        .map(|r| retry_policy(&r))
        .transpose()?;
    Ok(RouteTarget {
        cluster,
        timeout,
        prefix_rewrite,
        retry_policy,
    })
}

fn retry_policy(node: &Node<'_>) -> Result<RetryPolicy> {
    let o = node.obj_with(
        &[
            "retry_on",
            "num_retries",
            "per_try_timeout",
            "retriable_status_codes",
        ],
        &[
            "per_try_idle_timeout",
            "retry_priority",
            "retry_host_predicate",
            "retry_options_predicates",
            "host_selection_retry_max_attempts",
            "retry_back_off",
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
            if GRPC_RETRY_ON.contains(&cond) {
                return Err(r.unsupported(Some("gRPC retry conditions")));
            }
            if !RETRY_ON.contains(&cond) {
                return Err(r.err(format!(
                    "unknown retry condition \"{cond}\" (known: {})",
                    RETRY_ON.join(", ")
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
    Ok(RetryPolicy {
        retry_on,
        num_retries,
        per_try_timeout,
        retriable_status_codes,
    })
}

fn redirect(node: &Node<'_>) -> Result<Redirect> {
    let o = node.obj_with(
        &[
            "https_redirect",
            "host_redirect",
            "path_redirect",
            "response_code",
        ],
        &[
            "scheme_redirect",
            "port_redirect",
            "prefix_rewrite",
            "regex_rewrite",
            "strip_query",
        ],
    )?;
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
    Ok(Redirect {
        https_redirect: o.bool_or_false("https_redirect")?,
        host_redirect,
        path_redirect,
        response_code,
    })
}

fn access_log(node: &Node<'_>) -> Result<AccessLog> {
    let o = node.obj_with(&["name", "typed_config"], &["filter"])?;
    let tc = o.req("typed_config")?;
    let name = match o.get("name") {
        Some(n) => Some((n.as_str()?, n)),
        None => None,
    };
    // Pick the logger by name, or by the type URL when the name is absent.
    let kind = match &name {
        Some((n, _)) => *n,
        None => {
            let t = tc.type_url()?;
            match t.rsplit('/').next().unwrap_or(t) {
                "envoy.extensions.access_loggers.file.v3.FileAccessLog" => {
                    "envoy.access_loggers.file"
                }
                "envoy.extensions.access_loggers.stream.v3.StdoutAccessLog" => {
                    "envoy.access_loggers.stdout"
                }
                "envoy.extensions.access_loggers.stream.v3.StderrAccessLog" => {
                    "envoy.access_loggers.stderr"
                }
                _ => t,
            }
        }
    };
    match kind {
        "envoy.access_loggers.file" | "envoy.file_access_log" => {
            let t = tc.typed(
                FILE_LOG_TYPE,
                &["path", "log_format", "format"],
                &["json_format", "typed_json_format"],
            )?;
            let path = t.req("path")?.non_empty_str()?;
            Ok(AccessLog {
                sink: AccessLogSink::File(PathBuf::from(path)),
                format: log_format(&t)?,
            })
        }
        "envoy.access_loggers.stdout" | "envoy.access_loggers.stderr" => {
            let (ty, sink) = if kind.ends_with("stdout") {
                (STDOUT_LOG_TYPE, AccessLogSink::Stdout)
            } else {
                (STDERR_LOG_TYPE, AccessLogSink::Stderr)
            };
            let t = tc.typed(ty, &["log_format"], &[])?;
            Ok(AccessLog {
                sink,
                format: log_format(&t)?,
            })
        }
        other => {
            let msg = format!(
                "unknown access logger \"{other}\" (supported: envoy.access_loggers.file, \
                 envoy.access_loggers.stdout, envoy.access_loggers.stderr)"
            );
            Err(match name {
                Some((_, n)) => n.err(msg),
                None => crate::ConfigError::invalid(tc.path.clone() + ".@type", msg),
            })
        }
    }
}

/// `log_format` (a `SubstitutionFormatString`) or the legacy `format` string.
fn log_format(t: &Obj<'_>) -> Result<Option<String>> {
    let legacy = t
        .get("format")
        .map(|f| f.as_str().map(str::to_owned))
        .transpose()?;
    let Some(lf) = t.get("log_format") else {
        return Ok(legacy);
    };
    if legacy.is_some() {
        return Err(lf.err("cannot be combined with format"));
    }
    let lo = lf.obj_with(
        &["text_format_source", "text_format"],
        &[
            "json_format",
            "omit_empty_values",
            "content_type",
            "formatters",
            "json_format_options",
        ],
    )?;
    match (lo.get("text_format_source"), lo.get("text_format")) {
        (Some(_), Some(_)) => Err(lf.err("only one of text_format_source, text_format may be set")),
        (Some(src), None) => {
            let so = src.obj_with(
                &["inline_string"],
                &["filename", "inline_bytes", "environment_variable"],
            )?;
            Ok(Some(so.req("inline_string")?.as_str()?.to_owned()))
        }
        (None, Some(text)) => Ok(Some(text.as_str()?.to_owned())),
        (None, None) => Ok(None),
    }
}
