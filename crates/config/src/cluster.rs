//! `static_resources.clusters[]`: discovery type, endpoints, load balancing, circuit breakers,
//! upstream TLS and the upstream HTTP protocol; upstream health settings are `health`'s.

use std::collections::HashMap;
use std::time::Duration;

use crate::config_source::config_source;
use crate::duration::duration;
use crate::endpoint::{endpoint_address, load_assignment, Addresses};
use crate::lb_policy::load_balancing_policy;
use crate::model::{
    CircuitBreakers, Cluster, ClusterDiscovery, ConnectionReuse, DnsLookupFamily, Endpoint,
    Http2Options, LbPolicy, MatchLabels, TransportSocketMatch, UpstreamProtocol, UpstreamTls,
};
use crate::tls::upstream_tls_context;
use crate::walk::{join, Node, Obj, Result};

const HTTP_PROTOCOL_OPTIONS: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";
const HTTP_PROTOCOL_OPTIONS_TYPE: &str =
    "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions";
const TLS_TRANSPORT_SOCKET: &str = "envoy.transport_sockets.tls";
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const DEFAULT_DNS_REFRESH_RATE: Duration = Duration::from_secs(5);

/// `Http2ProtocolOptions` fields (none implemented).
pub(crate) const HTTP2_OPTIONS: &[&str] = &[
    "hpack_table_size",
    "max_concurrent_streams",
    "initial_stream_window_size",
    "initial_connection_window_size",
    "allow_connect",
    "allow_metadata",
    "max_outbound_frames",
    "max_outbound_control_frames",
    "max_consecutive_inbound_frames_with_empty_payload",
    "max_inbound_priority_frames_per_stream",
    "max_inbound_window_update_frames_per_data_frame_sent",
    "stream_error_on_invalid_http_messaging",
    "override_stream_error_on_invalid_http_message",
    "custom_settings_parameters",
    "use_oghttp2_codec",
    "max_metadata_size",
];

/// `Http1ProtocolOptions` fields (none implemented).
const HTTP1_OPTIONS: &[&str] = &[
    "allow_absolute_url",
    "accept_http_10",
    "default_host_for_http_10",
    "header_key_format",
    "enable_trailers",
    "allow_chunked_length",
    "override_stream_error_on_invalid_http_message",
    "send_fully_qualified_url",
    "use_balsa_parser",
    "allow_custom_methods",
    "ignore_http_11_upgrade",
];

/// All clusters, with unique names.
pub(crate) fn clusters(node: &Node<'_>) -> Result<Vec<Cluster>> {
    let mut out: Vec<Cluster> = Vec::new();
    let mut names: HashMap<String, String> = HashMap::new();
    for c in node.items() {
        let cluster = cluster(&c)?;
        if let Some(first) = names.get(&cluster.name) {
            return Err(crate::ConfigError::invalid(
                join(&c.path, "name"),
                format!("duplicate cluster name \"{}\" (also {first})", cluster.name),
            ));
        }
        names.insert(cluster.name.clone(), c.path.clone());
        out.push(cluster);
    }
    Ok(out)
}

pub(crate) fn cluster(node: &Node<'_>) -> Result<Cluster> {
    let o = node.obj_with(
        &[
            "name",
            "type",
            "connect_timeout",
            "dns_refresh_rate",
            "lb_policy",
            "load_assignment",
            "hosts",
            "circuit_breakers",
            "transport_socket",
            "typed_extension_protocol_options",
            "http2_protocol_options",
            "eds_cluster_config",
            "load_balancing_policy",
            "alt_stat_name",
            "max_requests_per_connection",
            "upstream_connection_options",
            "health_checks",
            "outlier_detection",
            "common_lb_config",
            "metadata",
            "dns_lookup_family",
            "per_connection_buffer_limit_bytes",
            "ignore_health_on_host_removal",
            "filters",
            "cluster_type",
            "transport_socket_matches",
            "ring_hash_lb_config",
            "maglev_lb_config",
        ],
        &[
            "upstream_http_protocol_options",
            "common_http_protocol_options",
            "http_protocol_options",
            "dns_failure_refresh_rate",
            "respect_dns_ttl",
            "dns_resolvers",
            "use_tcp_for_dns_lookups",
            "dns_resolution_config",
            "typed_dns_resolver_config",
            "dns_jitter",
            "wait_for_warm_on_init",
            "cleanup_interval",
            "upstream_bind_config",
            "lb_subset_config",
            "original_dst_lb_config",
            "least_request_lb_config",
            "round_robin_lb_config",
            "protocol_selection",
            "close_connections_on_host_health_failure",
            "lrs_server",
            "lrs_report_endpoint_metrics",
            "track_timeout_budgets",
            "upstream_config",
            "track_cluster_stats",
            "preconnect_policy",
            "connection_pool_per_downstream_connection",
        ],
    )?;
    let name = o.req("name")?.non_empty_str()?.to_owned();
    o.opt_str("alt_stat_name")?;
    if let Some(m) = o.get("metadata") {
        crate::no_effect::metadata(&m)?;
    }
    if let Some(f) = o.get("filters") {
        crate::istio::cluster_filters(&f)?;
    }
    let dns_lookup_family = o
        .get("dns_lookup_family")
        .map(|f| {
            f.enum_index(&["AUTO", "V4_ONLY", "V6_ONLY", "V4_PREFERRED", "ALL"])
                .map(|i| match i {
                    0 => DnsLookupFamily::Auto,
                    1 => DnsLookupFamily::V4Only,
                    2 => DnsLookupFamily::V6Only,
                    3 => DnsLookupFamily::V4Preferred,
                    _ => DnsLookupFamily::All,
                })
        })
        .transpose()?;
    let per_connection_buffer_limit_bytes = o
        .get("per_connection_buffer_limit_bytes")
        .map(|n| n.as_u64_in(0, u64::from(u32::MAX)).map(|v| v as u32))
        .transpose()?;
    let ignore_health_on_host_removal = o.bool_or_false("ignore_health_on_host_removal")?;
    let dns_cluster = o.get("cluster_type").map(|c| dns_cluster(&c)).transpose()?;
    if let (Some(_), Some(t)) = (&dns_cluster, o.get("type")) {
        return Err(t.err("only one of type, cluster_type may be set"));
    }
    let dns_lookup_family = match &dns_cluster {
        Some(d) => d.lookup_family.or(dns_lookup_family),
        None => dns_lookup_family,
    };
    let discovery = match o.get("type") {
        None if dns_cluster.as_ref().is_some_and(|d| d.logical) => ClusterDiscovery::LogicalDns,
        None if dns_cluster.is_some() => ClusterDiscovery::StrictDns,
        None => ClusterDiscovery::Static,
        Some(t) => match t.as_str()? {
            "STATIC" => ClusterDiscovery::Static,
            "STRICT_DNS" => ClusterDiscovery::StrictDns,
            "LOGICAL_DNS" => ClusterDiscovery::LogicalDns,
            "EDS" => eds(&o, &name)?,
            "ORIGINAL_DST" => return Err(t.unsupported(None)),
            other => {
                return Err(t.err(format!(
                    "expected STATIC, STRICT_DNS, LOGICAL_DNS or EDS, got \"{other}\""
                )))
            }
        },
    };
    if let Some(ec) = o.get("eds_cluster_config") {
        if !matches!(discovery, ClusterDiscovery::Eds { .. }) {
            return Err(ec.err("only for type EDS"));
        }
    }
    let connect_timeout = match o.get("connect_timeout") {
        Some(d) => {
            let v = duration(&d)?;
            if v.is_zero() {
                return Err(d.err("must be greater than zero"));
            }
            v
        }
        None => DEFAULT_CONNECT_TIMEOUT,
    };
    let dns_refresh_rate = match dns_cluster
        .as_ref()
        .and_then(|d| d.refresh_rate.clone())
        .or_else(|| o.get("dns_refresh_rate"))
    {
        Some(d) => {
            let v = duration(&d)?;
            if v < Duration::from_millis(1) {
                return Err(d.err("must be at least 1ms"));
            }
            v
        }
        None => DEFAULT_DNS_REFRESH_RATE,
    };
    let lb_policy = match o.get("lb_policy") {
        None => LbPolicy::RoundRobin,
        Some(p) => match p.as_str()? {
            "ROUND_ROBIN" => LbPolicy::RoundRobin,
            "LEAST_REQUEST" => LbPolicy::LeastRequest,
            "RING_HASH" | "MAGLEV" => {
                let empty = serde_json::Map::new();
                let (key, fields): (_, &[&str]) = match p.as_str()? {
                    "RING_HASH" => (
                        "ring_hash_lb_config",
                        &["minimum_ring_size", "hash_function", "maximum_ring_size"],
                    ),
                    _ => ("maglev_lb_config", &["table_size"]),
                };
                let c = match o.get(key) {
                    Some(c) => c.obj(fields)?,
                    None => Obj {
                        map: &empty,
                        path: p.path.clone(),
                    },
                };
                match key {
                    "maglev_lb_config" => crate::lb_policy::maglev(&c)?,
                    _ => crate::lb_policy::ring_hash(&c, false)?,
                }
            }
            "RANDOM" | "CLUSTER_PROVIDED" => return Err(p.unsupported(None)),
            "LOAD_BALANCING_POLICY_CONFIG" if o.get("load_balancing_policy").is_some() => {
                LbPolicy::RoundRobin
            }
            "LOAD_BALANCING_POLICY_CONFIG" => {
                return Err(p.err("needs load_balancing_policy"));
            }
            other => {
                return Err(p.err(format!(
                    "expected ROUND_ROBIN or LEAST_REQUEST, got \"{other}\""
                )))
            }
        },
    };

    // `load_balancing_policy` supersedes `lb_policy`, as in Envoy.
    let lb_policy = match o.get("load_balancing_policy") {
        Some(p) => load_balancing_policy(&p)?,
        None => lb_policy,
    };
    let (endpoints, pipe) = endpoints(node, &o, &discovery)?;
    // Istio sets these on its xDS and SDS clusters to pilot-agent, which carry one long-lived
    // gRPC stream each (the xDS client's, not the request path's): accepted there only.
    for key in ["max_requests_per_connection", "upstream_connection_options"] {
        if let Some(n) = o.get(key) {
            if pipe.is_none() {
                return Err(n.unsupported(Some("only on a pipe (unix socket) cluster")));
            }
            if key == "max_requests_per_connection" {
                n.as_u64_in(1, u64::from(u32::MAX))?;
            } else {
                let uo = n.obj_with(
                    &["tcp_keepalive"],
                    &[
                        "set_local_interface_name_on_upstream_connections",
                        "happy_eyeballs_config",
                    ],
                )?;
                if let Some(k) = uo.get("tcp_keepalive") {
                    k.obj(&["keepalive_probes", "keepalive_time", "keepalive_interval"])?;
                }
            }
        }
    }
    let circuit_breakers = match o.get("circuit_breakers") {
        Some(cb) => circuit_breakers(&cb)?,
        None => CircuitBreakers::default(),
    };
    let upstream_tls = o
        .get("transport_socket")
        .map(|t| transport_socket(&t))
        .transpose()?;
    let transport_socket_matches = o
        .items("transport_socket_matches")
        .iter()
        .map(transport_socket_match)
        .collect::<Result<Vec<_>>>()?;
    let mut endpoints = endpoints;
    if transport_socket_matches.is_empty() {
        // Labels select nothing without matches (Istio sets `tlsMode` for its own clusters).
        for e in &mut endpoints {
            e.socket_labels = Default::default();
        }
    }
    let (protocol, http2) = protocol(&o)?;
    let connection_reuse = connection_reuse(&o)?;
    let health_check = match o.get("health_checks") {
        Some(h) => crate::health::health_checks(&h)?,
        None => None,
    };
    let outlier_detection = o
        .get("outlier_detection")
        .map(|n| crate::health::outlier_detection(&n))
        .transpose()?;
    let healthy_panic_threshold = match o.get("common_lb_config") {
        Some(n) => crate::health::common_lb_config(&n)?,
        None => 50.0,
    };
    Ok(Cluster {
        name,
        path: node.path.clone(),
        connect_timeout,
        discovery,
        dns_refresh_rate,
        lb_policy,
        endpoints,
        pipe,
        circuit_breakers,
        upstream_tls,
        transport_socket_matches,
        protocol,
        http2,
        health_check,
        outlier_detection,
        healthy_panic_threshold,
        dns_lookup_family,
        per_connection_buffer_limit_bytes,
        ignore_health_on_host_removal,
        connection_reuse,
    })
}

/// `HttpProtocolOptions.common_http_protocol_options` (in `typed_extension_protocol_options`,
/// already checked by [`protocol`]): `idle_timeout` (`0s`: none) and
/// `max_requests_per_connection` (at least 1), as Istio's DestinationRule `connectionPool.http`
/// `idleTimeout` and `maxRequestsPerConnection` render.
fn connection_reuse(o: &Obj<'_>) -> Result<ConnectionReuse> {
    let common = o
        .get("typed_extension_protocol_options")
        .and_then(|t| t.any_obj().ok()?.get(HTTP_PROTOCOL_OPTIONS))
        .and_then(|h| h.any_obj().ok()?.get("common_http_protocol_options"));
    let Some(common) = common else {
        return Ok(ConnectionReuse::default());
    };
    let c = common.obj_with(
        &["idle_timeout", "max_requests_per_connection"],
        &[
            "max_connection_duration",
            "max_headers_count",
            "max_response_headers_kb",
            "max_stream_duration",
            "headers_with_underscores_action",
        ],
    )?;
    let idle_timeout = c
        .get("idle_timeout")
        .map(|n| crate::duration::duration(&n))
        .transpose()?
        .filter(|d| !d.is_zero());
    let max_requests = match c.get("max_requests_per_connection") {
        None => None,
        Some(n) => Some(n.unwrapped()?.as_u64_in(1, u64::from(u32::MAX))? as u32),
    };
    Ok(ConnectionReuse {
        idle_timeout,
        max_requests,
    })
}

/// `load_assignment.endpoints[].lb_endpoints[].endpoint.address` or legacy `hosts[]`; none for
/// EDS (which must have neither); possibly none for STATIC.
/// A STATIC cluster may instead have one `pipe` endpoint (a unix socket), returned apart.
fn endpoints(
    node: &Node<'_>,
    o: &Obj<'_>,
    discovery: &ClusterDiscovery,
) -> Result<(Vec<Endpoint>, Option<std::path::PathBuf>)> {
    if let (Some(_), Some(h)) = (o.get("load_assignment"), o.get("hosts")) {
        return Err(h.err("cannot be combined with load_assignment"));
    }
    if matches!(discovery, ClusterDiscovery::Eds { .. }) {
        if let Some(la) = o.get("load_assignment").or_else(|| o.get("hosts")) {
            return Err(la.err("an EDS cluster gets its endpoints from EDS; remove this"));
        }
        return Ok((Vec::new(), None));
    }
    let addresses = match discovery {
        ClusterDiscovery::Static => Addresses::IpOnly,
        _ => Addresses::Names,
    };
    let mut pipe = None;
    let (out, total, localities) = if let Some(la) = o.get("load_assignment") {
        let a = load_assignment(&la, addresses)?;
        if !a.pipes.is_empty() {
            if *discovery != ClusterDiscovery::Static || a.total != 1 {
                return Err(la.err(
                    "a pipe (unix socket) endpoint must be the only endpoint of a STATIC cluster",
                ));
            }
            pipe = a.pipes.into_iter().next();
        }
        (a.endpoints, a.total, a.localities)
    } else if let Some(h) = o.get("hosts") {
        let eps = h
            .items()
            .iter()
            .map(|a| endpoint_address(a, addresses))
            .collect::<Result<Vec<_>>>()?;
        let n = eps.len();
        (eps, n, 1)
    } else {
        (Vec::new(), 0, 0)
    };
    // A STATIC cluster may have no endpoints (Istio's `BlackHoleCluster`): Envoy accepts it and
    // answers requests routed there 503 `no healthy upstream` (`UH`).
    if total == 0 && *discovery != ClusterDiscovery::Static {
        return Err(match o.get("load_assignment") {
            Some(la) => la.err("at least one endpoint is required"),
            None => match o.get("hosts") {
                Some(h) => h.err("at least one endpoint is required"),
                None => node.err("needs load_assignment with at least one endpoint"),
            },
        });
    }
    if *discovery == ClusterDiscovery::LogicalDns && (total != 1 || localities != 1) {
        let at = o.get("load_assignment").or_else(|| o.get("hosts"));
        let at = at.map(|n| n.path).unwrap_or_else(|| node.path.clone());
        return Err(crate::ConfigError::invalid(
            at,
            "a LOGICAL_DNS cluster must have exactly one endpoint",
        ));
    }
    Ok((out, pipe))
}

/// `type: EDS` with `eds_cluster_config` (`eds_config`, `service_name`, which defaults to the
/// cluster's name).
fn eds(o: &Obj<'_>, name: &str) -> Result<ClusterDiscovery> {
    let ec = o.req("eds_cluster_config")?;
    let eo = ec.obj(&["eds_config", "service_name"])?;
    let service_name = match eo.opt_str("service_name")? {
        Some(s) if !s.is_empty() => s.to_owned(),
        _ => name.to_owned(),
    };
    Ok(ClusterDiscovery::Eds {
        service_name,
        config_source: config_source(&eo.req("eds_config")?)?,
    })
}

fn circuit_breakers(node: &Node<'_>) -> Result<CircuitBreakers> {
    let o = node.obj_with(&["thresholds"], &["per_host_thresholds"])?;
    let mut found: Option<(CircuitBreakers, String)> = None;
    for t in o.items("thresholds") {
        let to = t.obj_with(
            &[
                "priority",
                "max_connections",
                "max_pending_requests",
                "max_requests",
                "max_retries",
            ],
            &["retry_budget", "track_remaining", "max_connection_pools"],
        )?;
        if let Some(p) = to.get("priority") {
            match p.as_str()? {
                "DEFAULT" => {}
                // HIGH-priority thresholds are accepted: quickshake routes at DEFAULT
                // priority only, so they never apply.
                "HIGH" => {
                    for key in [
                        "max_connections",
                        "max_pending_requests",
                        "max_requests",
                        "max_retries",
                    ] {
                        if let Some(n) = to.get(key) {
                            n.as_u64_in(0, u64::from(u32::MAX))?;
                        }
                    }
                    continue;
                }
                other => {
                    return Err(p.err(format!("expected DEFAULT or HIGH, got \"{other}\"")));
                }
            }
        }
        if let Some((_, first)) = &found {
            return Err(t.err(format!(
                "duplicate DEFAULT priority thresholds (also {first})"
            )));
        }
        let d = CircuitBreakers::default();
        let num = |key: &str, default: u32| -> Result<u32> {
            match to.get(key) {
                Some(n) => Ok(n.as_u64_in(0, u64::from(u32::MAX))? as u32),
                None => Ok(default),
            }
        };
        let cb = CircuitBreakers {
            max_connections: num("max_connections", d.max_connections)?,
            max_pending_requests: num("max_pending_requests", d.max_pending_requests)?,
            max_requests: num("max_requests", d.max_requests)?,
            max_retries: num("max_retries", d.max_retries)?,
        };
        found = Some((cb, t.path.clone()));
    }
    Ok(found.map(|(cb, _)| cb).unwrap_or_default())
}

fn transport_socket(node: &Node<'_>) -> Result<UpstreamTls> {
    let o = node.obj(&["name", "typed_config"])?;
    // Envoy picks the factory by the typed_config's type first, the name only without one:
    // Envoy Gateway's `dummy.transport_socket` is TLS.
    let typed_tls = o
        .get("typed_config")
        .is_some_and(|t| t.type_url().ok() == Some(crate::tls::UPSTREAM_TLS_CONTEXT));
    if let Some(n) = o.get("name") {
        let name = n.as_str()?;
        if name != TLS_TRANSPORT_SOCKET && !typed_tls {
            return Err(n.err(format!(
                "unsupported transport socket \"{name}\" (only {TLS_TRANSPORT_SOCKET}; omit \
                 transport_socket for plaintext)"
            )));
        }
    }
    upstream_tls_context(&o.req("typed_config")?)
}

/// A `transport_socket_matches[]` entry: `name` (required), `match` (a `Struct`; absent or
/// empty matches every endpoint) and a TLS `transport_socket` (absent: plaintext).
fn transport_socket_match(node: &Node<'_>) -> Result<TransportSocketMatch> {
    let o = node.obj(&["name", "match", "transport_socket"])?;
    let name = o.req("name")?.non_empty_str()?.to_owned();
    let labels = match o.get("match") {
        Some(m) => crate::endpoint::match_labels(m.any_obj()?.map),
        None => MatchLabels::new(),
    };
    let tls = o
        .get("transport_socket")
        .map(|t| transport_socket(&t))
        .transpose()?;
    Ok(TransportSocketMatch { name, labels, tls })
}

/// `typed_extension_protocol_options` (`HttpProtocolOptions.explicit_http_config`) or the legacy
/// cluster field `http2_protocol_options`.
fn protocol(o: &Obj<'_>) -> Result<(UpstreamProtocol, Http2Options)> {
    let legacy = match o.get("http2_protocol_options") {
        Some(h2) => Some((UpstreamProtocol::Http2, http2_options(&h2)?)),
        None => None,
    };
    let Some(teo) = o.get("typed_extension_protocol_options") else {
        return Ok(legacy.unwrap_or_default());
    };
    let map = teo.obj_with(
        &[HTTP_PROTOCOL_OPTIONS],
        &[
            "envoy.extensions.upstreams.tcp.v3.TcpProtocolOptions",
            "envoy.filters.network.http_connection_manager",
        ],
    )?;
    let Some(hpo) = map.get(HTTP_PROTOCOL_OPTIONS) else {
        return Ok(legacy.unwrap_or_default());
    };
    if legacy.is_some() {
        return Err(teo.err("cannot be combined with the legacy http2_protocol_options"));
    }
    let t = hpo.typed(
        HTTP_PROTOCOL_OPTIONS_TYPE,
        &["explicit_http_config", "common_http_protocol_options"],
        &[
            "upstream_http_protocol_options",
            "use_downstream_protocol_config",
            "auto_config",
            "http_filters",
            "header_validation_config",
            "outlier_detection",
        ],
    )?;
    let ehc = t.req("explicit_http_config")?;
    const KINDS: [&str; 3] = [
        "http_protocol_options",
        "http2_protocol_options",
        "http3_protocol_options",
    ];
    let eo = ehc.obj(&KINDS)?;
    match eo.present(&KINDS).as_slice() {
        ["http_protocol_options"] => {
            eo.req("http_protocol_options")?
                .obj_with(&[], HTTP1_OPTIONS)?;
            Ok((UpstreamProtocol::Http1, Http2Options::default()))
        }
        ["http2_protocol_options"] => Ok((
            UpstreamProtocol::Http2,
            http2_options(&eo.req("http2_protocol_options")?)?,
        )),
        ["http3_protocol_options"] => Err(eo
            .req("http3_protocol_options")?
            .unsupported(Some("HTTP/3"))),
        [] => Err(ehc.err(
            "needs one of http_protocol_options, http2_protocol_options, http3_protocol_options",
        )),
        _ => Err(ehc.err(
            "only one of http_protocol_options, http2_protocol_options, http3_protocol_options \
             may be set",
        )),
    }
}

/// `Http2ProtocolOptions`: the flow-control windows the upstream connection advertises
/// (`initial_stream_window_size`, `initial_connection_window_size`, as Envoy Gateway sets for
/// gRPC backends); `connection_keepalive` (PING `interval` / `timeout`, as Envoy Gateway renders
/// for its xDS cluster) is accepted and has no effect yet; the rest are not supported.
fn http2_options(node: &Node<'_>) -> Result<Http2Options> {
    const WINDOWS: [&str; 2] = [
        "initial_stream_window_size",
        "initial_connection_window_size",
    ];
    let o = node.obj_with(
        &["connection_keepalive", WINDOWS[0], WINDOWS[1]],
        &HTTP2_OPTIONS
            .iter()
            .copied()
            .filter(|k| !WINDOWS.contains(k))
            .collect::<Vec<_>>(),
    )?;
    let window = |key: &str| {
        o.get(key)
            .map(|n| n.as_u64_in(65_535, 2_147_483_647).map(|v| v as u32))
            .transpose()
    };
    let windows = Http2Options {
        max_concurrent_streams: None,
        initial_stream_window_size: window(WINDOWS[0])?,
        initial_connection_window_size: window(WINDOWS[1])?,
    };
    if let Some(k) = o.get("connection_keepalive") {
        let ko = k.obj(&[
            "interval",
            "timeout",
            "interval_jitter",
            "connection_idle_interval",
        ])?;
        for key in ["interval", "timeout", "connection_idle_interval"] {
            if let Some(d) = ko.get(key) {
                duration(&d)?;
            }
        }
        if let Some(j) = ko.get("interval_jitter") {
            j.obj(&["value"])?;
        }
    }
    Ok(windows)
}

/// The names of the configured clusters, for checking references.
pub(crate) type ClusterNames = std::collections::HashSet<String>;

/// A `cluster` field that must name a configured cluster.
pub(crate) fn cluster_ref(node: &Node<'_>, names: &ClusterNames) -> Result<String> {
    let name = node.non_empty_str()?;
    if !names.contains(name) {
        return Err(node.err(format!("unknown cluster '{name}'")));
    }
    Ok(name.to_owned())
}

/// The `cluster_type` extension `envoy.cluster.dns` (`DnsCluster`), Envoy's newer form of
/// STRICT_DNS / LOGICAL_DNS (Envoy Gateway renders FQDN backends with it).
struct DnsClusterType<'a> {
    /// `all_addresses_in_single_endpoint`: LOGICAL_DNS.
    logical: bool,
    refresh_rate: Option<Node<'a>>,
    lookup_family: Option<DnsLookupFamily>,
}

fn dns_cluster<'a>(node: &Node<'a>) -> Result<DnsClusterType<'a>> {
    const DNS_CLUSTER: &str = "envoy.extensions.clusters.dns.v3.DnsCluster";
    let o = node.obj(&["name", "typed_config"])?;
    let tc = o.req("typed_config")?;
    let name = o.opt_str("name")?.unwrap_or("envoy.cluster.dns");
    if name != "envoy.cluster.dns" && tc.type_url()?.rsplit('/').next() != Some(DNS_CLUSTER) {
        return Err(node.unsupported(Some(&format!(
            "cluster type {name} (supported: envoy.cluster.dns)"
        ))));
    }
    let d = tc.typed(
        &format!("type.googleapis.com/{DNS_CLUSTER}"),
        &[
            "dns_refresh_rate",
            "dns_lookup_family",
            "respect_dns_ttl",
            "all_addresses_in_single_endpoint",
        ],
        &[
            "dns_failure_refresh_rate",
            "dns_jitter",
            "typed_dns_resolver_config",
            "dns_min_refresh_rate",
        ],
    )?;
    // The system resolver quickshake uses gives no TTL: refreshes stay at dns_refresh_rate.
    d.opt_bool("respect_dns_ttl")?;
    let lookup_family = d
        .get("dns_lookup_family")
        .map(|f| {
            f.enum_index(&[
                "UNSPECIFIED",
                "AUTO",
                "V4_ONLY",
                "V6_ONLY",
                "V4_PREFERRED",
                "ALL",
            ])
            .map(|i| match i {
                0 | 1 => DnsLookupFamily::Auto,
                2 => DnsLookupFamily::V4Only,
                3 => DnsLookupFamily::V6Only,
                4 => DnsLookupFamily::V4Preferred,
                _ => DnsLookupFamily::All,
            })
        })
        .transpose()?;
    Ok(DnsClusterType {
        logical: d.bool_or_false("all_addresses_in_single_endpoint")?,
        refresh_rate: d.get("dns_refresh_rate"),
        lookup_family,
    })
}
