//! An Envoy `Address` (`socket_address` only), as listeners and the admin endpoint give it; a
//! listener's may be UDP (a QUIC listener).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::walk::{Node, Result};
use crate::ConfigError;

/// The transport a `socket_address` names (`protocol`, TCP when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    Tcp,
    Udp,
}

/// An Envoy `Address`: only `socket_address` is supported, and only TCP (what everything but a
/// listener takes).
pub(crate) fn address(node: &Node<'_>) -> Result<SocketAddr> {
    match socket_address(node)? {
        (addr, Transport::Tcp) => Ok(addr),
        (_, Transport::Udp) => Err(ConfigError::unsupported(
            format!("{}.socket_address.protocol", node.path),
            Some("UDP here (only a listener's address can be UDP)"),
        )),
    }
}

/// An Envoy `Address` and the transport its `protocol` names (a listener's: UDP for QUIC).
pub(crate) fn socket_address(node: &Node<'_>) -> Result<(SocketAddr, Transport)> {
    let o = node.obj_with(&["socket_address"], &["pipe", "envoy_internal_address"])?;
    let sa = o.req("socket_address")?;
    let s = sa.obj_with(
        &["address", "port_value", "protocol", "ipv4_compat"],
        &["named_port", "resolver_name", "network_namespace_filepath"],
    )?;
    let host_node = s.req("address")?;
    let host = host_node.non_empty_str()?;
    let ip: IpAddr = if host.eq_ignore_ascii_case("localhost") {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        bare.parse().map_err(|_| {
            host_node.err(format!(
                "\"{host}\" is not an IP address (host names other than localhost are not resolved)"
            ))
        })?
    };
    let port = match s.get("port_value") {
        Some(p) => u16::try_from(p.as_u64_in(0, 65535)?).map_err(|_| p.err("port out of range"))?,
        None => 0,
    };
    let mut transport = Transport::Tcp;
    if let Some(p) = s.get("protocol") {
        let proto = p.as_str()?;
        if proto.eq_ignore_ascii_case("udp") {
            transport = Transport::Udp;
        } else if !proto.eq_ignore_ascii_case("tcp") {
            return Err(p.err(format!("expected TCP or UDP, got \"{proto}\"")));
        }
    }
    s.opt_bool("ipv4_compat")?;
    Ok((SocketAddr::new(ip, port), transport))
}
