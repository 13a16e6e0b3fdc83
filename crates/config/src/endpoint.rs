//! Endpoints: a cluster's `load_assignment` (or legacy `hosts[]`) and the same
//! `ClusterLoadAssignment` arriving alone by EDS.

use std::net::IpAddr;

use crate::model::{Endpoint, MatchLabels};
use crate::walk::{Node, Obj, Result};

/// How endpoint addresses are read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Addresses {
    /// STATIC and EDS clusters: IP literals only.
    IpOnly,
    /// DNS clusters: host names too.
    Names,
}

/// A parsed `ClusterLoadAssignment`: the endpoints that take traffic (`health_status`
/// UNHEALTHY, DRAINING and TIMEOUT are left out, as Envoy's load balancer leaves them out), and
/// how many there were in all and in how many localities.
pub(crate) struct Assignment {
    pub endpoints: Vec<Endpoint>,
    /// `pipe.path` endpoints (unix sockets: Istio's xDS and SDS clusters to pilot-agent).
    pub pipes: Vec<std::path::PathBuf>,
    pub total: usize,
    pub localities: usize,
}

pub(crate) fn load_assignment(node: &Node<'_>, addresses: Addresses) -> Result<Assignment> {
    let lo = node.obj_with(
        &["cluster_name", "endpoints", "policy"],
        &["named_endpoints"],
    )?;
    lo.opt_str("cluster_name")?;
    if let Some(p) = lo.get("policy") {
        let po = p.obj_with(
            &["overprovisioning_factor", "endpoint_stale_after"],
            &["drop_overloads", "weighted_priority_health"],
        )?;
        if let Some(f) = po.get("overprovisioning_factor") {
            f.as_u64_in(1, u64::from(u32::MAX))?;
        }
        if let Some(d) = po.get("endpoint_stale_after") {
            crate::duration::duration(&d)?;
        }
    }
    let mut out = Assignment {
        endpoints: Vec::new(),
        pipes: Vec::new(),
        total: 0,
        localities: 0,
    };
    for le in lo.items("endpoints") {
        out.localities += 1;
        let leo = le.obj_with(
            &[
                "lb_endpoints",
                "locality",
                "load_balancing_weight",
                "priority",
                "metadata",
            ],
            &["proximity", "leds_cluster_locality_config"],
        )?;
        weight(&leo)?;
        let locality_labels = match leo.get("metadata") {
            Some(m) => socket_labels(&m)?,
            None => MatchLabels::new(),
        };
        if let Some(l) = leo.get("locality") {
            l.obj(&["region", "zone", "sub_zone"])?;
        }
        if let Some(p) = leo.get("priority") {
            if p.as_u64()? != 0 {
                return Err(p.unsupported(Some("only priority 0")));
            }
        }
        for lb in leo.items("lb_endpoints") {
            let lbo = lb.obj_with(
                &[
                    "endpoint",
                    "health_status",
                    "load_balancing_weight",
                    "metadata",
                ],
                &["endpoint_name"],
            )?;
            weight(&lbo)?;
            let labels = match lbo.get("metadata") {
                Some(m) => socket_labels(&m)?,
                None => MatchLabels::new(),
            };
            let ep = lbo.req("endpoint")?;
            let epo = ep.obj_with(
                &["address", "hostname"],
                &["health_check_config", "additional_addresses"],
            )?;
            epo.opt_str("hostname")?;
            let address = epo.req("address")?;
            if let Some(pipe) = address.v.get("pipe").filter(|p| !p.is_null()) {
                address.obj(&["pipe"])?;
                let po =
                    Node::new(pipe, format!("{}.pipe", address.path)).obj(&["path", "mode"])?;
                if let Some(m) = po.get("mode") {
                    m.as_u64_in(0, 0o777)?;
                }
                out.pipes
                    .push(std::path::PathBuf::from(po.req("path")?.non_empty_str()?));
                out.total += 1;
                continue;
            }
            let mut endpoint = endpoint_address(&address, addresses)?;
            endpoint.socket_labels = [labels, locality_labels.clone()];
            out.total += 1;
            if takes_traffic(&lbo)? {
                out.endpoints.push(endpoint);
            }
        }
    }
    Ok(out)
}

/// An endpoint's (or locality's) `metadata`: checked as the no-effect metadata is, and its
/// `filter_metadata["envoy.transport_socket_match"]` fields, the one part that has an effect.
fn socket_labels(node: &Node<'_>) -> Result<MatchLabels> {
    crate::no_effect::metadata(node)?;
    let labels = node
        .v
        .get("filter_metadata")
        .or_else(|| node.v.get("filterMetadata"))
        .and_then(|f| f.get(SOCKET_MATCH_KEY))
        .and_then(|m| m.as_object());
    Ok(labels.map(match_labels).unwrap_or_default())
}

/// The metadata key `transport_socket_matches` look at.
const SOCKET_MATCH_KEY: &str = "envoy.transport_socket_match";

/// A `Struct`'s fields as [`MatchLabels`].
pub(crate) fn match_labels(m: &serde_json::Map<String, serde_json::Value>) -> MatchLabels {
    m.iter().map(|(k, v)| (k.clone(), v.to_string())).collect()
}

/// `load_balancing_weight` (accepted: 1..; quickshake balances unweighted).
fn weight(o: &Obj<'_>) -> Result<()> {
    if let Some(w) = o.get("load_balancing_weight") {
        w.as_u64_in(1, u64::from(u32::MAX))?;
    }
    Ok(())
}

/// `health_status`: UNKNOWN, HEALTHY and DEGRADED take traffic; UNHEALTHY, DRAINING, TIMEOUT do
/// not.
fn takes_traffic(o: &Obj<'_>) -> Result<bool> {
    let Some(h) = o.get("health_status") else {
        return Ok(true);
    };
    let name = match &h.v {
        serde_json::Value::Number(n) => match n.as_u64() {
            Some(0) => "UNKNOWN",
            Some(1) => "HEALTHY",
            Some(2) => "UNHEALTHY",
            Some(3) => "DRAINING",
            Some(4) => "TIMEOUT",
            Some(5) => "DEGRADED",
            _ => return Err(h.err("expected 0..=5")),
        },
        _ => h.as_str()?,
    };
    match name {
        "UNKNOWN" | "HEALTHY" | "DEGRADED" => Ok(true),
        "UNHEALTHY" | "DRAINING" | "TIMEOUT" => Ok(false),
        other => Err(h.err(format!(
            "expected UNKNOWN, HEALTHY, UNHEALTHY, DRAINING, TIMEOUT or DEGRADED, got \"{other}\""
        ))),
    }
}

/// A `socket_address` endpoint address.
pub(crate) fn endpoint_address(node: &Node<'_>, addresses: Addresses) -> Result<Endpoint> {
    let o = node.obj_with(&["socket_address"], &["pipe", "envoy_internal_address"])?;
    let sa = o.req("socket_address")?;
    let s = sa.obj_with(
        &["address", "port_value", "protocol"],
        &[
            "named_port",
            "resolver_name",
            "ipv4_compat",
            "network_namespace_filepath",
        ],
    )?;
    let host_node = s.req("address")?;
    let host = host_node.non_empty_str()?;
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let host = match bare.parse::<IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => {
            if addresses == Addresses::IpOnly {
                return Err(host_node.err(format!(
                    "\"{host}\" is not an IP address (a STATIC or EDS cluster needs IP addresses; \
                     use STRICT_DNS or LOGICAL_DNS for host names)"
                )));
            }
            if !valid_dns_name(host) {
                return Err(host_node.err(format!("\"{host}\" is not a valid host name")));
            }
            host.to_owned()
        }
    };
    let p = s.req("port_value")?;
    let port = u16::try_from(p.as_u64_in(1, 65535)?).map_err(|_| p.err("port out of range"))?;
    if let Some(pr) = s.get("protocol") {
        let proto = pr.as_str()?;
        if proto.eq_ignore_ascii_case("udp") {
            return Err(pr.unsupported(Some("UDP upstreams")));
        }
        if !proto.eq_ignore_ascii_case("tcp") {
            return Err(pr.err(format!("expected TCP, got \"{proto}\"")));
        }
    }
    Ok(Endpoint {
        host,
        port,
        socket_labels: Default::default(),
    })
}

fn valid_dns_name(host: &str) -> bool {
    let h = host.strip_suffix('.').unwrap_or(host);
    !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}
