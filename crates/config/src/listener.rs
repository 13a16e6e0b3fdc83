//! Listeners, listener filters and filter chains.

use std::collections::HashMap;

use crate::bootstrap::address;
use crate::duration::duration;
use crate::http::http_connection_manager;
use crate::model::{DownstreamTls, FilterChain, HttpConnectionManager, Listener};
use crate::tls::downstream_tls_context;
use crate::walk::{join, Node, Result};

const TLS_INSPECTOR_TYPE: &str =
    "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector";
const TLS_TRANSPORT_SOCKET: &str = "envoy.transport_sockets.tls";

pub(crate) fn listener(node: &Node<'_>, index: usize) -> Result<Listener> {
    let o = node.obj_with(
        &[
            "name",
            "address",
            "listener_filters",
            "filter_chains",
            "per_connection_buffer_limit_bytes",
            "traffic_direction",
            "stat_prefix",
        ],
        &[
            "additional_addresses",
            "metadata",
            "deprecated_v1",
            "drain_type",
            "default_filter_chain",
            "filter_chain_matcher",
            "use_original_dst",
            "listener_filters_timeout",
            "continue_on_listener_filters_timeout",
            "transparent",
            "freebind",
            "socket_options",
            "tcp_fast_open_queue_length",
            "udp_listener_config",
            "api_listener",
            "connection_balance_config",
            "reuse_port",
            "enable_reuse_port",
            "access_log",
            "tcp_backlog_size",
            "max_connections_to_accept_per_socket_event",
            "bind_to_port",
            "internal_listener",
            "enable_mptcp",
            "ignore_global_conn_limit",
            "bypass_overload_manager",
        ],
    )?;
    let name = match o.get("name") {
        Some(n) => n.non_empty_str()?.to_owned(),
        None => format!("listener_{index}"),
    };
    let addr = address(&o.req("address")?)?;
    for f in o.items("listener_filters") {
        listener_filter(&f)?;
    }
    let per_connection_buffer_limit_bytes = o
        .get("per_connection_buffer_limit_bytes")
        .map(|n| n.as_u64_in(0, u64::from(u32::MAX)).map(|v| v as u32))
        .transpose()?;
    if let Some(t) = o.get("traffic_direction") {
        let dir = t.as_str()?;
        if !["UNSPECIFIED", "INBOUND", "OUTBOUND"].contains(&dir) {
            return Err(t.err(format!(
                "expected UNSPECIFIED, INBOUND or OUTBOUND, got \"{dir}\""
            )));
        }
    }
    o.opt_str("stat_prefix")?;
    let chains_node = o.req("filter_chains")?;
    let mut chains = Vec::new();
    // (server name lowercased or "" for any, transport_protocol) -> chain path
    let mut matches: HashMap<(String, String), String> = HashMap::new();
    for c in chains_node.items() {
        let (chain, transport_protocol) = filter_chain(&c)?;
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
    if chains.is_empty() {
        return Err(chains_node.err("at least one filter chain is required"));
    }
    Ok(Listener {
        name,
        address: addr,
        path: node.path.clone(),
        filter_chains: chains,
        per_connection_buffer_limit_bytes,
    })
}

fn listener_filter(node: &Node<'_>) -> Result<()> {
    let o = node.obj_with(
        &["name", "typed_config"],
        &["config_discovery", "filter_disabled"],
    )?;
    let name_node = o.req("name")?;
    match name_node.as_str()? {
        "envoy.filters.listener.tls_inspector" | "envoy.listener.tls_inspector" => {
            if let Some(tc) = o.get("typed_config") {
                let empty = tc.v.as_object().is_some_and(|m| m.is_empty());
                if !empty {
                    tc.typed(
                        TLS_INSPECTOR_TYPE,
                        &[],
                        &[
                            "enable_ja3_fingerprinting",
                            "enable_ja4_fingerprinting",
                            "initial_read_buffer_size",
                        ],
                    )?;
                }
            }
            Ok(())
        }
        "envoy.filters.listener.proxy_protocol" | "envoy.listener.proxy_protocol" => {
            Err(name_node.unsupported(None))
        }
        other => Err(name_node.err(format!(
            "unknown listener filter \"{other}\" (supported: envoy.filters.listener.tls_inspector)"
        ))),
    }
}

/// A filter chain and its `transport_protocol` match ("" when absent).
fn filter_chain(node: &Node<'_>) -> Result<(FilterChain, String)> {
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
    let http = network_filters(&o.req("filters")?)?;
    Ok((
        FilterChain {
            path: node.path.clone(),
            server_names,
            tls,
            transport_socket_connect_timeout,
            http,
        },
        transport_protocol,
    ))
}

fn transport_socket(node: &Node<'_>) -> Result<DownstreamTls> {
    let o = node.obj(&["name", "typed_config"])?;
    if let Some(n) = o.get("name") {
        let name = n.as_str()?;
        if name != TLS_TRANSPORT_SOCKET {
            return Err(n.err(format!(
                "unsupported transport socket \"{name}\" (only {TLS_TRANSPORT_SOCKET}; omit \
                 transport_socket for plaintext)"
            )));
        }
    }
    downstream_tls_context(&o.req("typed_config")?)
}

fn network_filters(node: &Node<'_>) -> Result<HttpConnectionManager> {
    let mut found = Vec::new();
    for f in node.items() {
        let o = f.obj_with(&["name", "typed_config"], &["config_discovery"])?;
        let name_node = o.req("name")?;
        match name_node.as_str()? {
            "envoy.filters.network.http_connection_manager" | "envoy.http_connection_manager" => {
                found.push(http_connection_manager(&o.req("typed_config")?)?);
            }
            "envoy.filters.network.tcp_proxy" | "envoy.tcp_proxy" => {
                return Err(name_node.unsupported(Some("tcp_proxy comes with proxying")));
            }
            other => {
                return Err(name_node.err(format!(
                    "unknown network filter \"{other}\" (supported: \
                     envoy.filters.network.http_connection_manager)"
                )))
            }
        }
    }
    if found.len() != 1 {
        return Err(node.err(format!(
            "exactly one network filter (envoy.filters.network.http_connection_manager) is \
             required, got {}",
            found.len()
        )));
    }
    found
        .pop()
        .ok_or_else(|| node.err("a network filter is required"))
}
