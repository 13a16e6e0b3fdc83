//! Listeners, listener filters and filter chains.

use std::collections::HashMap;

use std::time::Duration;

use crate::address::{socket_address, Transport};
use crate::cluster::{cluster_ref, ClusterNames};
use crate::duration::duration;
use crate::http::http_connection_manager;
use crate::limits::{handshake_limit, local_rate_limit, RateLimitFilter};
use crate::model::{
    DownstreamTls, FilterChain, Listener, ListenerLimit, LocalRateLimit, NetworkFilter,
    SocketLimit, TcpProxy,
};
use crate::tls::downstream_tls_context;
use crate::walk::{join, Node, Result};

const TLS_INSPECTOR_TYPE: &str =
    "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector";
const PROXY_PROTOCOL_TYPE: &str =
    "type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol";
const TCP_PROXY_TYPE: &str =
    "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy";
/// Envoy's default `TcpProxy.idle_timeout`.
const DEFAULT_TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);
const TLS_TRANSPORT_SOCKET: &str = "envoy.transport_sockets.tls";

pub(crate) fn listener(node: &Node<'_>, index: usize, clusters: &ClusterNames) -> Result<Listener> {
    let o = node.obj_with(
        &[
            "name",
            "address",
            "listener_filters",
            "filter_chains",
            "per_connection_buffer_limit_bytes",
            "traffic_direction",
            "stat_prefix",
            "ignore_global_conn_limit",
            "bypass_overload_manager",
            "udp_listener_config",
            "metadata",
            "max_connections_to_accept_per_socket_event",
            "default_filter_chain",
            "access_log",
        ],
        &[
            "additional_addresses",
            "deprecated_v1",
            "drain_type",
            "filter_chain_matcher",
            "use_original_dst",
            "listener_filters_timeout",
            "continue_on_listener_filters_timeout",
            "transparent",
            "freebind",
            "socket_options",
            "tcp_fast_open_queue_length",
            "api_listener",
            "connection_balance_config",
            "reuse_port",
            "enable_reuse_port",
            "tcp_backlog_size",
            "bind_to_port",
            "internal_listener",
            "enable_mptcp",
        ],
    )?;
    let name = match o.get("name") {
        Some(n) => n.non_empty_str()?.to_owned(),
        None => format!("listener_{index}"),
    };
    let addr_node = o.req("address")?;
    let (addr, transport) = socket_address(&addr_node)?;
    let quic = match o.get("udp_listener_config") {
        Some(u) => {
            if transport != Transport::Udp {
                return Err(u.err("needs a UDP address (socket_address.protocol: UDP)"));
            }
            crate::quic::udp_listener_config(&u)?
        }
        None => None,
    };
    if transport == Transport::Udp && quic.is_none() {
        return Err(crate::ConfigError::unsupported(
            format!("{}.socket_address.protocol", addr_node.path),
            Some("UDP listeners other than QUIC (udp_listener_config.quic_options)"),
        ));
    }
    if quic.is_some() {
        if let Some(f) = o.items("listener_filters").first() {
            return Err(f.err("a QUIC listener takes no listener filters"));
        }
    }
    let mut proxy_protocol = false;
    let mut limits = Vec::new();
    for f in o.items("listener_filters") {
        match listener_filter(&f)? {
            ListenerFilter::ProxyProtocol if proxy_protocol => {
                return Err(f.err("duplicate proxy_protocol listener filter"));
            }
            ListenerFilter::ProxyProtocol => proxy_protocol = true,
            ListenerFilter::TlsInspector => {}
            ListenerFilter::Limit(SocketLimit::HandshakeLimit(_))
                if limits
                    .iter()
                    .any(|l: &ListenerLimit| matches!(l.limit, SocketLimit::HandshakeLimit(_))) =>
            {
                return Err(f.err("duplicate handshake_limit listener filter"));
            }
            ListenerFilter::Limit(limit) => limits.push(ListenerLimit {
                limit,
                after_proxy_protocol: proxy_protocol,
            }),
        }
    }
    // The handshake limit counts the client's address: the one a PROXY header carries.
    for l in &mut limits {
        if matches!(l.limit, SocketLimit::HandshakeLimit(_)) {
            l.after_proxy_protocol = proxy_protocol;
        }
    }
    let per_connection_buffer_limit_bytes = o
        .get("per_connection_buffer_limit_bytes")
        .map(|n| n.as_u64_in(0, u64::from(u32::MAX)).map(|v| v as u32))
        .transpose()?;
    let max_connections_to_accept_per_socket_event = o
        .get("max_connections_to_accept_per_socket_event")
        .map(|n| n.as_u64_in(1, u64::from(u32::MAX)).map(|v| v as u32))
        .transpose()?;
    let mut inbound = false;
    if let Some(t) = o.get("traffic_direction") {
        let dir = t.as_str()?;
        if !["UNSPECIFIED", "INBOUND", "OUTBOUND"].contains(&dir) {
            return Err(t.err(format!(
                "expected UNSPECIFIED, INBOUND or OUTBOUND, got \"{dir}\""
            )));
        }
        inbound = dir == "INBOUND";
    }
    o.opt_str("stat_prefix")?;
    if let Some(m) = o.get("metadata") {
        crate::no_effect::metadata(&m)?;
    }
    // The HTTP connection manager's logger and format (`access_log`), one parser for both.
    let mut access_logs = Vec::new();
    for a in o.items("access_log") {
        access_logs.push(crate::access_log::access_log(&a)?);
    }
    let mut chains = Vec::new();
    // (server name lowercased or "" for any, transport_protocol) -> chain path
    let mut matches: HashMap<(String, String), String> = HashMap::new();
    for c in o.items("filter_chains") {
        let (chain, transport_protocol) = filter_chain(&c, clusters)?;
        let keys: Vec<(String, usize)> = if chain.server_names.is_empty() {
            vec![(String::new(), usize::MAX)]
        } else {
            chain
                .server_names
                .iter()
                .enumerate()
                .map(|(i, s)| (s.to_ascii_lowercase(), i))
                .collect()
        };
        for (sni, i) in keys {
            let key = (sni, transport_protocol.clone());
            if let Some(first) = matches.get(&key) {
                let m = join(&chain.path, "filter_chain_match");
                return Err(if i == usize::MAX {
                    crate::ConfigError::invalid(
                        m,
                        format!("matches the same connections as {first}"),
                    )
                } else {
                    crate::ConfigError::invalid(
                        format!("{m}.server_names[{i}]"),
                        format!("server name \"{}\" is also used by {first}", key.0),
                    )
                });
            }
            matches.insert(key, chain.path.clone());
        }
        chains.push(chain);
    }
    // `default_filter_chain`: serves the connections no chain matches (Envoy ignores its
    // `filter_chain_match`); it is last, marked, so that selection tries it only then.
    if let Some(d) = o.get("default_filter_chain") {
        let (mut chain, _) = filter_chain(&d, clusters)?;
        chain.server_names.clear();
        chain.default = true;
        chains.push(chain);
    }
    if chains.is_empty() {
        return Err(crate::ConfigError::invalid(
            join(&node.path, "filter_chains"),
            "at least one filter chain (or a default_filter_chain) is required",
        ));
    }
    // A stream's buffer limit is its connection's, as in Envoy.
    for c in &mut chains {
        if let NetworkFilter::Http(hcm) = &mut c.network {
            hcm.connection_buffer_limit_bytes = per_connection_buffer_limit_bytes;
        }
    }
    crate::quic::check_chains(&chains, quic.is_some())?;
    Ok(Listener {
        name,
        address: addr,
        path: node.path.clone(),
        filter_chains: chains,
        per_connection_buffer_limit_bytes,
        proxy_protocol,
        ignore_global_conn_limit: o.bool_or_false("ignore_global_conn_limit")?
            || o.bool_or_false("bypass_overload_manager")?,
        limits,
        quic,
        inbound,
        max_connections_to_accept_per_socket_event,
        access_logs,
    })
}

enum ListenerFilter {
    TlsInspector,
    ProxyProtocol,
    Limit(SocketLimit),
}

/// `typed_config: {}` is accepted as "no settings", as Envoy's older examples write it.
fn empty_typed_config(tc: &Node<'_>) -> bool {
    tc.v.as_object().is_some_and(|m| m.is_empty())
}

fn listener_filter(node: &Node<'_>) -> Result<ListenerFilter> {
    let o = node.obj_with(
        &["name", "typed_config"],
        &["config_discovery", "filter_disabled"],
    )?;
    let name_node = o.req("name")?;
    match name_node.as_str()? {
        "envoy.filters.listener.tls_inspector" | "envoy.listener.tls_inspector" => {
            if let Some(tc) = o.get("typed_config") {
                if !empty_typed_config(&tc) {
                    let t = tc.typed(
                        TLS_INSPECTOR_TYPE,
                        &["initial_read_buffer_size"],
                        &["enable_ja3_fingerprinting", "enable_ja4_fingerprinting"],
                    )?;
                    // Only the size of the inspector's first read (Istio sets 512): quickshake
                    // reads until the ClientHello record is whole, whatever it is. Checked
                    // against Envoy's bounds (256 to 65536), then not needed.
                    if let Some(n) = t.get("initial_read_buffer_size") {
                        n.unwrapped()?.as_u64_in(256, 65536)?;
                    }
                }
            }
            Ok(ListenerFilter::TlsInspector)
        }
        "envoy.filters.listener.proxy_protocol" | "envoy.listener.proxy_protocol" => {
            if let Some(tc) = o.get("typed_config") {
                if !empty_typed_config(&tc) {
                    tc.typed(
                        PROXY_PROTOCOL_TYPE,
                        &[],
                        &[
                            "rules",
                            "allow_requests_without_proxy_protocol",
                            "pass_through_tlvs",
                            "disallowed_versions",
                            "stat_prefix",
                        ],
                    )?;
                }
            }
            Ok(ListenerFilter::ProxyProtocol)
        }
        "envoy.filters.listener.local_ratelimit" => Ok(ListenerFilter::Limit(
            SocketLimit::LocalRateLimit(local_rate_limit(
                &o.req("typed_config")?,
                RateLimitFilter::Listener,
                &node.path,
            )?),
        )),
        "quickshake.filters.listener.handshake_limit" => Ok(ListenerFilter::Limit(
            SocketLimit::HandshakeLimit(handshake_limit(&o.req("typed_config")?)?),
        )),
        other => Err(name_node.err(format!(
            "unknown listener filter \"{other}\" (supported: \
             envoy.filters.listener.tls_inspector, envoy.filters.listener.proxy_protocol, \
             envoy.filters.listener.local_ratelimit, quickshake.filters.listener.handshake_limit)"
        ))),
    }
}

/// A filter chain and its `transport_protocol` match ("" when absent).
fn filter_chain(node: &Node<'_>, clusters: &ClusterNames) -> Result<(FilterChain, String)> {
    let o = node.obj_with(
        &[
            "name",
            "filter_chain_match",
            "transport_socket",
            "transport_socket_connect_timeout",
            "filters",
        ],
        &[
            "metadata",
            "use_proxy_proto",
            "tls_context",
            "on_demand_configuration",
        ],
    )?;
    o.opt_str("name")?;
    let mut server_names = Vec::new();
    let mut transport_protocol = String::new();
    if let Some(m) = o.get("filter_chain_match") {
        let mo = m.obj_with(
            &["server_names", "transport_protocol"],
            &[
                "destination_port",
                "prefix_ranges",
                "address_suffix",
                "suffix_len",
                "direct_source_prefix_ranges",
                "source_type",
                "source_prefix_ranges",
                "source_ports",
                "application_protocols",
            ],
        )?;
        for s in mo
            .get("server_names")
            .map(|n| n.items())
            .unwrap_or_default()
        {
            let name = s.non_empty_str()?;
            if name.chars().any(|c| c.is_whitespace()) {
                return Err(s.err(format!("invalid server name \"{name}\"")));
            }
            server_names.push(name.to_owned());
        }
        if let Some(tp) = mo.get("transport_protocol") {
            let p = tp.as_str()?;
            if p != "tls" && p != "raw_buffer" {
                return Err(tp.err(format!("expected \"tls\" or \"raw_buffer\", got \"{p}\"")));
            }
            transport_protocol = p.to_owned();
        }
    }
    let tls = o
        .get("transport_socket")
        .map(|t| transport_socket(&t))
        .transpose()?;
    let transport_socket_connect_timeout = o
        .get("transport_socket_connect_timeout")
        .map(|d| duration(&d))
        .transpose()?;
    let (rate_limits, network) = network_filters(&o.req("filters")?, clusters)?;
    Ok((
        FilterChain {
            path: node.path.clone(),
            server_names,
            tls,
            transport_socket_connect_timeout,
            rate_limits,
            network,
            default: false,
        },
        transport_protocol,
    ))
}

fn transport_socket(node: &Node<'_>) -> Result<DownstreamTls> {
    let o = node.obj(&["name", "typed_config"])?;
    let tc = o.req("typed_config")?;
    if let Some(n) = o.get("name") {
        let name = n.as_str()?;
        if name == crate::quic::QUIC_TRANSPORT_SOCKET {
            return crate::quic::quic_transport(&tc);
        }
        if name != TLS_TRANSPORT_SOCKET {
            return Err(n.err(format!(
                "unsupported transport socket \"{name}\" (only {TLS_TRANSPORT_SOCKET} and \
                 {}; omit transport_socket for plaintext)",
                crate::quic::QUIC_TRANSPORT_SOCKET
            )));
        }
    } else if tc.type_url().ok() == Some(crate::quic::QUIC_DOWNSTREAM_TRANSPORT) {
        return crate::quic::quic_transport(&tc);
    }
    downstream_tls_context(&tc)
}

/// A chain's `filters`: `envoy.filters.network.local_ratelimit` filters, then the one terminal
/// filter (HTTP connection manager or `tcp_proxy`), which must be last, as Envoy requires.
fn network_filters(
    node: &Node<'_>,
    clusters: &ClusterNames,
) -> Result<(Vec<LocalRateLimit>, NetworkFilter)> {
    let mut rate_limits = Vec::new();
    let mut terminal: Option<(NetworkFilter, String)> = None;
    for f in node.items() {
        let o = f.obj_with(&["name", "typed_config"], &["config_discovery"])?;
        let name_node = o.req("name")?;
        let name = name_node.as_str()?;
        if let Some((_, last)) = &terminal {
            return Err(f.err(format!(
                "comes after the terminal filter {last}, which must be the last filter in a \
                 network filter chain"
            )));
        }
        match name {
            "envoy.filters.network.http_connection_manager" | "envoy.http_connection_manager" => {
                let hcm = http_connection_manager(&o.req("typed_config")?, clusters)?;
                terminal = Some((NetworkFilter::Http(Box::new(hcm)), name.to_owned()));
            }
            "envoy.filters.network.tcp_proxy" | "envoy.tcp_proxy" => {
                let tp = tcp_proxy(&o.req("typed_config")?, clusters)?;
                terminal = Some((NetworkFilter::TcpProxy(tp), name.to_owned()));
            }
            "envoy.filters.network.local_ratelimit" => rate_limits.push(local_rate_limit(
                &o.req("typed_config")?,
                RateLimitFilter::Network,
                &f.path,
            )?),
            other => {
                return Err(name_node.err(format!(
                    "unknown network filter \"{other}\" (supported: \
                     envoy.filters.network.http_connection_manager, \
                     envoy.filters.network.tcp_proxy, envoy.filters.network.local_ratelimit)"
                )))
            }
        }
    }
    match terminal {
        Some((network, _)) => Ok((rate_limits, network)),
        None => Err(node.err(
            "a terminal network filter (envoy.filters.network.http_connection_manager or \
             envoy.filters.network.tcp_proxy) is required, last",
        )),
    }
}

fn tcp_proxy(node: &Node<'_>, clusters: &ClusterNames) -> Result<TcpProxy> {
    let o = node.typed(
        TCP_PROXY_TYPE,
        &["stat_prefix", "cluster", "idle_timeout", "access_log"],
        &[
            "weighted_clusters",
            "on_demand",
            "metadata_match",
            "downstream_idle_timeout",
            "upstream_idle_timeout",
            "max_connect_attempts",
            "backoff_options",
            "hash_policy",
            "tunneling_config",
            "max_downstream_connection_duration",
            "max_downstream_connection_duration_jitter_percentage",
            "access_log_flush_interval",
            "flush_access_log_on_connected",
            "access_log_options",
            "proxy_protocol_tlvs",
            "max_early_data_bytes",
            "upstream_connect_mode",
            "network_filters",
        ],
    )?;
    let stat_prefix = o.req("stat_prefix")?.non_empty_str()?.to_owned();
    let cluster = cluster_ref(&o.req("cluster")?, clusters)?;
    let idle_timeout = match o.get("idle_timeout") {
        Some(d) => Some(duration(&d)?).filter(|d| !d.is_zero()),
        None => Some(DEFAULT_TCP_IDLE_TIMEOUT),
    };
    let mut access_logs = Vec::new();
    for a in o.items("access_log") {
        access_logs.push(crate::access_log::access_log(&a)?);
    }
    Ok(TcpProxy {
        path: node.path.clone(),
        stat_prefix,
        cluster,
        idle_timeout,
        access_logs,
    })
}
