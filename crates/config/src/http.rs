//! `HttpConnectionManager`: codec, route configuration with direct responses, the router filter,
//! protocol options and access logs.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::duration::duration;
use crate::model::{
    AccessLog, AccessLogSink, CodecType, HttpConnectionManager, Route, RouteAction, RouteMatch,
    VirtualHost,
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

const NOT_PROXYING: &str = "routes to clusters come with proxying";

pub(crate) fn http_connection_manager(node: &Node<'_>) -> Result<HttpConnectionManager> {
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
            "xff_num_trusted_hops",
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
            "upgrade_configs",
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
    o.opt_bool("use_remote_address")?;
    o.opt_bool("generate_request_id")?;
    let virtual_hosts = route_config(&o.req("route_config")?)?;
    Ok(HttpConnectionManager {
        path: node.path.clone(),
        stat_prefix,
        codec_type,
        virtual_hosts,
        idle_timeout,
        max_request_headers_kb,
        access_logs,
        server_name,
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

fn route_config(node: &Node<'_>) -> Result<Vec<VirtualHost>> {
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
        let host = virtual_host(&v)?;
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

fn virtual_host(node: &Node<'_>) -> Result<VirtualHost> {
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
        routes.push(route(&r)?);
    }
    Ok(VirtualHost {
        name,
        domains,
        routes,
    })
}

fn route(node: &Node<'_>) -> Result<Route> {
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
        [other] => return Err(o.req(other)?.unsupported(Some(NOT_PROXYING))),
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
