//! `HttpConnectionManager`: codec, where the routes come from (`route_config` or `rds`), path
//! normalization, protocol options and access logs. Route configuration lives in `route`, HTTP
//! filters in `http_filter`.

use crate::access_log::access_log;
use crate::cluster::ClusterNames;
use crate::config_source::config_source;
use crate::duration::duration;
use crate::http_filter::http_filters;
use crate::model::{
    ClientCertDetails, CodecType, EscapedSlashesAction, ForwardClientCert,
    HeadersWithUnderscoresAction, Http1Options, Http2Options, HttpConnectionManager,
    PathNormalization, RouteSource, ServerHeaderTransformation,
};
use crate::route::route_config;
use crate::walk::{Node, Obj, Result};

const HCM_TYPE: &str = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
const DEFAULT_MAX_REQUEST_HEADERS_KB: u32 = 60;
/// Envoy's default `stream_idle_timeout`.
const DEFAULT_STREAM_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);
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
            "rds",
            "http_filters",
            "normalize_path",
            "merge_slashes",
            "path_with_escaped_slashes_action",
            "common_http_protocol_options",
            "max_request_headers_kb",
            "access_log",
            "server_name",
            "use_remote_address",
            "generate_request_id",
            "upgrade_configs",
            "xff_num_trusted_hops",
            "http3_protocol_options",
            "tracing",
            "server_header_transformation",
            "http2_protocol_options",
            "proxy_100_continue",
            "stream_idle_timeout",
            "forward_client_cert_details",
            "set_current_client_cert_details",
            "request_id_extension",
            "http_protocol_options",
        ],
        &[
            "scoped_routes",
            "scheme_header_transformation",
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
            "represent_ipv4_remote_address_as_ipv4_mapped_ipv6",
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
                "HTTP3" => CodecType::Http3,
                _ => {
                    return Err(c.err(format!("expected AUTO, HTTP1, HTTP2 or HTTP3, got \"{s}\"")));
                }
            }
        }
    };
    if let Some(h3) = o.get("http3_protocol_options") {
        // Envoy's `Http3ProtocolOptions`: none of its settings changes how quickshake serves.
        let ho = h3.obj_with(
            &["quic_protocol_options"],
            &[
                "override_stream_error_on_invalid_http_message",
                "allow_extended_connect",
                "allow_metadata",
                "disable_qpack",
                "disable_connection_flow_control_for_streams",
            ],
        )?;
        if let Some(q) = ho.get("quic_protocol_options") {
            // Upstream-only settings in Envoy; accepted and ignored downstream, as Envoy does.
            q.obj_with(
                &[
                    "max_concurrent_streams",
                    "initial_stream_window_size",
                    "initial_connection_window_size",
                    "num_timeouts_to_trigger_port_migration",
                    "connection_keepalive",
                    "connection_options",
                    "client_connection_options",
                    "idle_network_timeout",
                    "max_packet_length",
                ],
                &[],
            )?;
        }
    }
    let stat_prefix = o.req("stat_prefix")?.non_empty_str()?.to_owned();
    if let Some(r) = o.get("request_id_extension") {
        request_id_extension(&r)?;
    }
    if let Some(t) = o.get("tracing") {
        crate::no_effect::hcm_tracing(&t)?;
    }
    let (http_filters, router) = http_filters(&o.items("http_filters"))?;
    let http2 = o
        .get("http2_protocol_options")
        .map(|n| http2_options(&n))
        .transpose()?
        .unwrap_or_default();
    let path_normalization = path_normalization(&o)?;
    let mut idle_timeout = None;
    let mut headers_with_underscores_action = HeadersWithUnderscoresAction::Allow;
    if let Some(p) = o.get("common_http_protocol_options") {
        let po = p.obj_with(
            &["idle_timeout", "headers_with_underscores_action"],
            &[
                "max_connection_duration",
                "max_headers_count",
                "max_response_headers_kb",
                "max_stream_duration",
                "max_requests_per_connection",
            ],
        )?;
        idle_timeout = po.get("idle_timeout").map(|d| duration(&d)).transpose()?;
        if let Some(a) = po.get("headers_with_underscores_action") {
            headers_with_underscores_action =
                match a.enum_index(&["ALLOW", "REJECT_REQUEST", "DROP_HEADER"])? {
                    0 => HeadersWithUnderscoresAction::Allow,
                    1 => HeadersWithUnderscoresAction::RejectRequest,
                    _ => HeadersWithUnderscoresAction::DropHeader,
                };
        }
    }
    let server_header_transformation = match o.get("server_header_transformation") {
        None => ServerHeaderTransformation::Overwrite,
        Some(t) => match t.enum_index(&["OVERWRITE", "APPEND_IF_ABSENT", "PASS_THROUGH"])? {
            0 => ServerHeaderTransformation::Overwrite,
            1 => ServerHeaderTransformation::AppendIfAbsent,
            _ => ServerHeaderTransformation::PassThrough,
        },
    };
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
        let ty = crate::route::upgrade_type(
            &uo.req("upgrade_type")?,
            upgrade_types.iter().map(String::as_str),
        )?;
        if uo.opt_bool("enabled")?.unwrap_or(true) {
            upgrade_types.push(ty);
        }
    }
    let routes = match (o.get("route_config"), o.get("rds")) {
        (Some(rc), None) => RouteSource::Static(route_config(&rc, Some(clusters), true)?),
        (None, Some(rds)) => {
            let ro = rds.obj(&["config_source", "route_config_name"])?;
            RouteSource::Rds {
                route_config_name: ro.req("route_config_name")?.non_empty_str()?.to_owned(),
                config_source: config_source(&ro.req("config_source")?)?,
            }
        }
        (Some(_), Some(rds)) => return Err(rds.err("cannot be combined with route_config")),
        (None, None) => return Err(node.err("needs route_config or rds")),
    };
    Ok(HttpConnectionManager {
        path: node.path.clone(),
        stat_prefix,
        codec_type,
        routes,
        http_filters,
        path_normalization,
        idle_timeout,
        max_request_headers_kb,
        access_logs,
        server_name,
        upgrade_types,
        use_remote_address,
        xff_num_trusted_hops,
        generate_request_id,
        suppress_envoy_headers: router.suppress_envoy_headers,
        server_header_transformation,
        headers_with_underscores_action,
        connection_buffer_limit_bytes: None,
        http2,
        proxy_100_continue: o.bool_or_false("proxy_100_continue")?,
        stream_idle_timeout: match o.get("stream_idle_timeout") {
            Some(d) => Some(duration(&d)?).filter(|d| !d.is_zero()),
            None => Some(DEFAULT_STREAM_IDLE_TIMEOUT),
        },
        forward_client_cert: forward_client_cert(&o)?,
        http1: o
            .get("http_protocol_options")
            .map(|n| http1_options(&n))
            .transpose()?
            .unwrap_or_default(),
    })
}

/// `forward_client_cert_details` and `set_current_client_cert_details`.
fn forward_client_cert(o: &Obj<'_>) -> Result<ForwardClientCert> {
    let mut details = ClientCertDetails::default();
    if let Some(d) = o.get("set_current_client_cert_details") {
        let d = d.obj(&["subject", "cert", "chain", "dns", "uri"])?;
        details = ClientCertDetails {
            subject: d.bool_or_false("subject")?,
            cert: d.bool_or_false("cert")?,
            chain: d.bool_or_false("chain")?,
            uri: d.bool_or_false("uri")?,
            dns: d.bool_or_false("dns")?,
        };
    }
    Ok(match o.get("forward_client_cert_details") {
        None => ForwardClientCert::Sanitize,
        Some(m) => match m.enum_index(&[
            "SANITIZE",
            "FORWARD_ONLY",
            "APPEND_FORWARD",
            "SANITIZE_SET",
            "ALWAYS_FORWARD_ONLY",
        ])? {
            0 => ForwardClientCert::Sanitize,
            1 => ForwardClientCert::ForwardOnly,
            2 => ForwardClientCert::AppendForward(details),
            3 => ForwardClientCert::SanitizeSet(details),
            _ => ForwardClientCert::AlwaysForwardOnly,
        },
    })
}

/// `request_id_extension`: Envoy's UUID extension, the only one there is. Its two settings
/// concern tracing, which quickshake does not do.
fn request_id_extension(node: &Node<'_>) -> Result<()> {
    const UUID: &str =
        "type.googleapis.com/envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig";
    let o = node.obj(&["typed_config"])?;
    let tc = o.req("typed_config")?;
    let u = tc.typed(
        UUID,
        &["pack_trace_reason", "use_request_id_for_trace_sampling"],
        &[],
    )?;
    u.opt_bool("pack_trace_reason")?;
    u.opt_bool("use_request_id_for_trace_sampling")?;
    Ok(())
}

/// The connection manager's `http_protocol_options` (`Http1ProtocolOptions`).
fn http1_options(node: &Node<'_>) -> Result<Http1Options> {
    let o = node.obj_with(
        &[
            "accept_http_10",
            "default_host_for_http_10",
            "allow_absolute_url",
            "use_balsa_parser",
        ],
        &[
            "header_key_format",
            "enable_trailers",
            "allow_chunked_length",
            "override_stream_error_on_invalid_http_message",
            "send_fully_qualified_url",
            "allow_custom_methods",
            "ignore_http_11_upgrade",
        ],
    )?;
    if let Some(a) = o.get("allow_absolute_url") {
        if !a.as_bool()? {
            return Err(a.unsupported(Some("allow_absolute_url: false")));
        }
    }
    o.opt_bool("use_balsa_parser")?;
    let default_host_for_http_10 = match o.get("default_host_for_http_10") {
        None => None,
        Some(h) => {
            let v = h.as_str()?;
            if v.bytes().any(|b| b.is_ascii_control() || b == b' ') {
                return Err(h.err(format!("invalid host \"{}\"", v.escape_debug())));
            }
            Some(v.to_owned()).filter(|v| !v.is_empty())
        }
    };
    Ok(Http1Options {
        accept_http_10: o.bool_or_false("accept_http_10")?,
        default_host_for_http_10,
    })
}

/// The connection manager's `http2_protocol_options`: the three settings it sends its HTTP/2
/// clients, in Envoy's ranges; the other `Http2ProtocolOptions` fields are not supported yet.
fn http2_options(node: &Node<'_>) -> Result<Http2Options> {
    const WINDOW: (u64, u64) = (65_535, 2_147_483_647);
    let o = node.obj_with(
        &[
            "max_concurrent_streams",
            "initial_stream_window_size",
            "initial_connection_window_size",
        ],
        &crate::cluster::HTTP2_OPTIONS
            .iter()
            .copied()
            .chain(["connection_keepalive"])
            .collect::<Vec<_>>(),
    )?;
    let get = |key: &str, (lo, hi): (u64, u64)| {
        o.get(key)
            .map(|n| n.as_u64_in(lo, hi).map(|v| v as u32))
            .transpose()
    };
    Ok(Http2Options {
        max_concurrent_streams: get("max_concurrent_streams", (1, 2_147_483_647))?,
        initial_stream_window_size: get("initial_stream_window_size", WINDOW)?,
        initial_connection_window_size: get("initial_connection_window_size", WINDOW)?,
    })
}

/// `normalize_path`, `merge_slashes`, `path_with_escaped_slashes_action`.
fn path_normalization(o: &Obj<'_>) -> Result<PathNormalization> {
    let escaped_slashes = match o.get("path_with_escaped_slashes_action") {
        None => EscapedSlashesAction::KeepUnchanged,
        Some(a) => match &a.v {
            serde_json::Value::String(s) => match s.as_str() {
                "IMPLEMENTATION_SPECIFIC_DEFAULT" | "KEEP_UNCHANGED" => {
                    EscapedSlashesAction::KeepUnchanged
                }
                "REJECT_REQUEST" => EscapedSlashesAction::RejectRequest,
                "UNESCAPE_AND_REDIRECT" => EscapedSlashesAction::UnescapeAndRedirect,
                "UNESCAPE_AND_FORWARD" => EscapedSlashesAction::UnescapeAndForward,
                other => {
                    return Err(a.err(format!(
                        "expected KEEP_UNCHANGED, REJECT_REQUEST, UNESCAPE_AND_REDIRECT or \
                         UNESCAPE_AND_FORWARD, got \"{other}\""
                    )))
                }
            },
            serde_json::Value::Number(n) => match n.as_u64() {
                Some(0 | 1) => EscapedSlashesAction::KeepUnchanged,
                Some(2) => EscapedSlashesAction::RejectRequest,
                Some(3) => EscapedSlashesAction::UnescapeAndRedirect,
                Some(4) => EscapedSlashesAction::UnescapeAndForward,
                _ => return Err(a.err("expected 0..=4")),
            },
            _ => return Err(a.err("expected an enum name")),
        },
    };
    Ok(PathNormalization {
        normalize_path: o.bool_or_false("normalize_path")?,
        merge_slashes: o.bool_or_false("merge_slashes")?,
        escaped_slashes,
    })
}
