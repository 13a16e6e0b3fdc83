//! QUIC listeners (HTTP/3): `udp_listener_config.quic_options` and the
//! `envoy.transport_sockets.quic` transport socket (`QuicDownstreamTransport`), and the rules
//! that tie a QUIC listener's parts together (UDP address, QUIC transport socket, HTTP/3 codec).

use crate::duration::duration;
use crate::model::{CodecType, DownstreamTls, FilterChain, NetworkFilter, QuicOptions};
use crate::tls::embedded_downstream_tls_context;
use crate::walk::{Node, Result};
use crate::ConfigError;

pub(crate) const QUIC_TRANSPORT_SOCKET: &str = "envoy.transport_sockets.quic";
pub(crate) const QUIC_DOWNSTREAM_TRANSPORT: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.quic.v3.QuicDownstreamTransport";
/// Envoy's lower bound for the flow-control windows (`QuicProtocolOptions`).
const MIN_WINDOW: u64 = 1;
const MAX_STREAM_WINDOW: u64 = 16 * 1024 * 1024;
const MAX_CONNECTION_WINDOW: u64 = 25 * 1024 * 1024;

/// `udp_listener_config`: `Some` with `quic_options` (a QUIC listener); a UDP listener without
/// it would be a raw UDP listener (`udp_proxy`), which is not supported.
pub(crate) fn udp_listener_config(node: &Node<'_>) -> Result<Option<QuicOptions>> {
    let o = node.obj_with(
        &["quic_options", "downstream_socket_config"],
        &["udp_packet_packet_writer_config", "listener_config"],
    )?;
    let mut prefer_gro = true;
    if let Some(s) = o.get("downstream_socket_config") {
        let so = s.obj(&["max_rx_datagram_size", "prefer_gro"])?;
        if let Some(m) = so.get("max_rx_datagram_size") {
            m.as_u64_in(1200, 65535)?;
        }
        prefer_gro = so.opt_bool("prefer_gro")?.unwrap_or(true);
    }
    let Some(q) = o.get("quic_options") else {
        return Ok(None);
    };
    let qo = q.obj_with(
        &[
            "quic_protocol_options",
            "idle_timeout",
            "crypto_handshake_timeout",
            "enabled",
        ],
        &[
            "packets_to_read_to_connection_count_ratio",
            "crypto_stream_config",
            "proof_source_config",
            "connection_id_generator_config",
            "server_preferred_address_config",
            "send_disable_active_migration",
            "connection_debug_visitor_config",
            "save_cmsg_config",
            "reject_new_connections",
            "max_sessions_per_event_loop",
        ],
    )?;
    let mut opts = QuicOptions {
        prefer_gro,
        ..QuicOptions::default()
    };
    if let Some(p) = qo.get("quic_protocol_options") {
        let po = p.obj_with(
            &[
                "max_concurrent_streams",
                "initial_stream_window_size",
                "initial_connection_window_size",
            ],
            &[
                "num_timeouts_to_trigger_port_migration",
                "connection_keepalive",
                "connection_options",
                "client_connection_options",
                "idle_network_timeout",
                "max_packet_length",
            ],
        )?;
        if let Some(n) = po.get("max_concurrent_streams") {
            opts.max_concurrent_streams = n.as_u64_in(1, u64::from(u32::MAX))?;
        }
        if let Some(n) = po.get("initial_stream_window_size") {
            opts.initial_stream_window_size = n.as_u64_in(MIN_WINDOW, MAX_STREAM_WINDOW)?;
        }
        if let Some(n) = po.get("initial_connection_window_size") {
            opts.initial_connection_window_size = n.as_u64_in(MIN_WINDOW, MAX_CONNECTION_WINDOW)?;
        }
    }
    if let Some(d) = qo.get("idle_timeout") {
        opts.idle_timeout = duration(&d)?;
        if opts.idle_timeout.is_zero() {
            return Err(d.err("must be greater than zero"));
        }
    }
    if let Some(d) = qo.get("crypto_handshake_timeout") {
        opts.crypto_handshake_timeout = duration(&d)?;
        if opts.crypto_handshake_timeout.is_zero() {
            return Err(d.err("must be greater than zero"));
        }
    }
    if let Some(e) = qo.get("enabled") {
        // A RuntimeFeatureFlag: quickshake has no runtime, so its default decides.
        let eo = e.obj(&["default_value", "runtime_key"])?;
        eo.opt_str("runtime_key")?;
        opts.enabled = eo.opt_bool("default_value")?.unwrap_or(true);
    }
    Ok(Some(opts))
}

/// `QuicDownstreamTransport`: its `downstream_tls_context`, marked for QUIC. 0-RTT is off
/// (`enable_early_data: true`, Envoy's default, is not supported yet: see docs/configuration.md).
pub(crate) fn quic_transport(node: &Node<'_>) -> Result<DownstreamTls> {
    let o = node.typed(
        QUIC_DOWNSTREAM_TRANSPORT,
        &["downstream_tls_context", "enable_early_data"],
        &[],
    )?;
    if let Some(e) = o.get("enable_early_data") {
        // A BoolValue: `true` or `{value: true}`.
        let on = match e.v.as_object() {
            Some(_) => e.obj(&["value"])?.opt_bool("value")?.unwrap_or(false),
            None => e.as_bool()?,
        };
        if on {
            return Err(e.unsupported(Some("0-RTT (early data) on QUIC listeners")));
        }
    }
    let mut tls = embedded_downstream_tls_context(&o.req("downstream_tls_context")?)?;
    tls.quic = true;
    Ok(tls)
}

/// A QUIC listener's chains must use the QUIC transport socket and an HTTP/3 connection
/// manager; a TCP listener's must use neither.
pub(crate) fn check_chains(chains: &[FilterChain], quic: bool) -> Result<()> {
    for c in chains {
        let chain_quic = c.tls.as_ref().is_some_and(|t| t.quic);
        if quic && !chain_quic {
            return Err(ConfigError::invalid(
                format!("{}.transport_socket", c.path),
                format!("a QUIC listener's filter chains need the {QUIC_TRANSPORT_SOCKET} transport socket"),
            ));
        }
        if !quic && chain_quic {
            return Err(ConfigError::invalid(
                format!("{}.transport_socket", c.path),
                format!(
                    "{QUIC_TRANSPORT_SOCKET} needs a UDP listener (socket_address.protocol: UDP \
                     with udp_listener_config.quic_options)"
                ),
            ));
        }
        match &c.network {
            NetworkFilter::Http(h) if quic && h.codec_type != CodecType::Http3 => {
                return Err(ConfigError::invalid(
                    format!("{}.codec_type", h.path),
                    "a QUIC listener's connection manager needs codec_type: HTTP3",
                ));
            }
            NetworkFilter::Http(h) if !quic && h.codec_type == CodecType::Http3 => {
                return Err(ConfigError::invalid(
                    format!("{}.codec_type", h.path),
                    "HTTP3 needs a QUIC listener (socket_address.protocol: UDP with \
                     udp_listener_config.quic_options)",
                ));
            }
            NetworkFilter::TcpProxy(t) if quic => {
                return Err(ConfigError::invalid(
                    t.path.clone(),
                    "a QUIC listener serves HTTP/3 only (no tcp_proxy)",
                ));
            }
            _ => {}
        }
    }
    Ok(())
}
