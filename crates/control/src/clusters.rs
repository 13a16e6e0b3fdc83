//! From the configuration's clusters to the upstream crate's cluster manager.

use quickshake_config::{
    load_sds_tls_certificate, load_sds_trusted_ca, read_data_source, Cluster, ClusterDiscovery,
    DnsLookupFamily, Endpoint, HealthCheck, HealthCheckKind, LbPolicy, OutlierDetection,
    UpstreamProtocol, UpstreamTls,
};
use std::net::{IpAddr, SocketAddr};

use quickshake_stats::Store;
use quickshake_upstream::{
    ClusterManager, ClusterSpec, Discovery, DnsFamily, HealthCheckSpec, Limits, OutlierSpec,
    Protocol, UpstreamTlsSpec,
};

use quickshake_listener::ServerError;

/// Build every cluster (upstream TLS material is read here; errors name the field).
pub fn cluster_manager(clusters: &[Cluster], store: &Store) -> Result<ClusterManager, ServerError> {
    let specs = clusters.iter().map(spec).collect::<Result<Vec<_>, _>>()?;
    ClusterManager::new(specs, store).map_err(|e| ServerError::Invalid {
        field: "static_resources.clusters".into(),
        reason: e.to_string(),
    })
}

/// A cluster's client TLS options, its material read now: inline or from files, or from SDS
/// files (`tls_certificate_sds_secret_configs`, `validation_context_sds_secret_config`).
/// Errors name the field.
pub fn tls_spec(c: &Cluster, t: &UpstreamTls) -> Result<UpstreamTlsSpec, ServerError> {
    tls_spec_at(&format!("{}.transport_socket", c.path), t)
}

/// [`tls_spec`] for the `UpstreamTlsContext` at `field`.
fn tls_spec_at(field: &str, t: &UpstreamTls) -> Result<UpstreamTlsSpec, ServerError> {
    let read =
        |ds: &quickshake_config::DataSource, f: &str| read_data_source(ds, &format!("{field}.{f}"));
    let from_sds = match &t.client_certificate_sds {
        Some(r) => Some(load_sds_tls_certificate(r)?),
        None => None,
    };
    let (cert, key) = match t.client_certificate.as_ref().or(from_sds.as_ref()) {
        Some(cc) => (
            Some(read(
                &cc.certificate_chain,
                "tls_certificates[0].certificate_chain",
            )?),
            match &cc.private_key {
                Some(k) => Some(read(k, "tls_certificates[0].private_key")?),
                None => None,
            },
        ),
        None => (None, None),
    };
    // From SDS, the secret's SAN matchers apply (Envoy takes the whole validation context).
    let (ca, san_matchers) = match (&t.trusted_ca, &t.trusted_ca_sds) {
        (Some(ca), _) => (
            Some(read(ca, "validation_context.trusted_ca")?),
            t.san_matchers.clone(),
        ),
        (None, Some(r)) => {
            let v = load_sds_trusted_ca(r)?;
            // A combined validation context's default matchers first (none otherwise).
            let mut sans = t.san_matchers.clone();
            sans.extend(v.san_matchers);
            (
                Some(read(&v.trusted_ca, "validation_context_sds_secret_config")?),
                sans,
            )
        }
        (None, None) => (None, Vec::new()),
    };
    Ok(UpstreamTlsSpec {
        sni: t.sni.clone(),
        trusted_ca_pem: ca,
        san_matchers,
        alpn: t.alpn_protocols.clone(),
        client_cert_pem: cert,
        client_key_pem: key,
    })
}

/// One cluster's upstream spec (also for clusters a control plane sends).
pub(crate) fn spec(c: &Cluster) -> Result<ClusterSpec, ServerError> {
    let mut tls = c
        .upstream_tls
        .as_ref()
        .map(|t| tls_spec(c, t))
        .transpose()?;
    let socket_matches = c
        .transport_socket_matches
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let field = format!("{}.transport_socket_matches[{i}].transport_socket", c.path);
            m.tls.as_ref().map(|t| tls_spec_at(&field, t)).transpose()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (host_sockets, folded) = host_sockets(c)?;
    if let Some(i) = folded {
        tls = socket_matches[i].clone();
    }
    Ok(ClusterSpec {
        name: c.name.clone(),
        connect_timeout: c.connect_timeout,
        discovery: match c.discovery {
            ClusterDiscovery::Static => Discovery::Static,
            ClusterDiscovery::StrictDns => Discovery::StrictDns,
            ClusterDiscovery::LogicalDns => Discovery::LogicalDns,
            ClusterDiscovery::Eds { .. } => Discovery::Eds,
        },
        dns_refresh_rate: c.dns_refresh_rate,
        lb: match c.lb_policy {
            LbPolicy::RoundRobin => quickshake_upstream::LbPolicy::RoundRobin,
            LbPolicy::LeastRequest => quickshake_upstream::LbPolicy::LeastRequest,
            LbPolicy::RingHash {
                min_ring_size,
                max_ring_size,
            } => quickshake_upstream::LbPolicy::RingHash {
                min_ring_size,
                max_ring_size,
            },
            LbPolicy::Maglev { table_size } => quickshake_upstream::LbPolicy::Maglev { table_size },
        },
        endpoints: c
            .endpoints
            .iter()
            .map(|e| (e.host.clone(), e.port))
            .collect(),
        limits: Limits {
            max_connections: c.circuit_breakers.max_connections,
            max_pending_requests: c.circuit_breakers.max_pending_requests,
            max_requests: c.circuit_breakers.max_requests,
            max_retries: c.circuit_breakers.max_retries,
        },
        tls,
        socket_matches,
        host_sockets,
        protocol: match c.protocol {
            UpstreamProtocol::Http1 => Protocol::Http1,
            UpstreamProtocol::Http2 => Protocol::Http2,
        },
        http2_windows: (
            c.http2.initial_stream_window_size,
            c.http2.initial_connection_window_size,
        ),
        health_check: c.health_check.as_ref().map(health_check_spec),
        outlier: c.outlier_detection.as_ref().map(outlier_spec),
        healthy_panic_threshold: c.healthy_panic_threshold,
        dns_family: match c.dns_lookup_family {
            None | Some(DnsLookupFamily::All) => DnsFamily::All,
            Some(DnsLookupFamily::Auto) => DnsFamily::Auto,
            Some(DnsLookupFamily::V4Only) => DnsFamily::V4Only,
            Some(DnsLookupFamily::V6Only) => DnsFamily::V6Only,
            Some(DnsLookupFamily::V4Preferred) => DnsFamily::V4Preferred,
        },
        ignore_health_on_host_removal: c.ignore_health_on_host_removal,
        idle_timeout: c.connection_reuse.idle_timeout,
        max_requests_per_connection: c.connection_reuse.max_requests,
    })
}

/// Hosts with their `transport_socket_matches` entry, or the one entry all hosts use.
type HostSockets = (Vec<(SocketAddr, usize)>, Option<usize>);

/// The `transport_socket_matches` entry each endpoint of `c` uses (`None`: the cluster's
/// `transport_socket`), as host addresses with their entry. When every endpoint uses the same
/// entry, that entry instead (the second value), so DNS clusters need no addresses; a DNS
/// cluster whose endpoints use different entries is refused.
fn host_sockets(c: &Cluster) -> Result<HostSockets, ServerError> {
    let picks: Vec<Option<usize>> = c.endpoints.iter().map(|e| c.socket_match(e)).collect();
    match picks.first() {
        Some(&first) if picks.iter().all(|p| *p == first) => return Ok((Vec::new(), first)),
        None => return Ok((Vec::new(), None)),
        Some(_) => {}
    }
    let mut out = Vec::new();
    for (e, pick) in c.endpoints.iter().zip(picks) {
        let Some(i) = pick else { continue };
        let ip: IpAddr = e.host.parse().map_err(|_| ServerError::Invalid {
            field: format!("{}.transport_socket_matches", c.path),
            reason: "endpoints of a DNS cluster that use different transport sockets are not \
                     supported yet"
                .into(),
        })?;
        out.push((SocketAddr::new(ip, e.port), i));
    }
    Ok((out, None))
}

/// EDS endpoints of `c` as host addresses, each with the `transport_socket_matches` entry it
/// uses (none without the cluster's configuration).
pub(crate) fn eds_hosts(
    c: Option<&Cluster>,
    endpoints: &[Endpoint],
) -> Vec<(SocketAddr, Option<usize>)> {
    endpoints
        .iter()
        .filter_map(|e| {
            let ip: IpAddr = e.host.trim_matches(['[', ']']).parse().ok()?;
            Some((
                SocketAddr::new(ip, e.port),
                c.and_then(|c| c.socket_match(e)),
            ))
        })
        .collect()
}

fn health_check_spec(h: &HealthCheck) -> HealthCheckSpec {
    HealthCheckSpec {
        interval: h.interval,
        timeout: h.timeout,
        no_traffic_interval: h.no_traffic_interval,
        unhealthy_threshold: h.unhealthy_threshold,
        healthy_threshold: h.healthy_threshold,
        interval_jitter: h.interval_jitter,
        initial_jitter: h.initial_jitter,
        kind: match &h.kind {
            HealthCheckKind::Http {
                path,
                host,
                expected_statuses,
            } => quickshake_upstream::HealthCheckKind::Http {
                path: path.clone(),
                host: host.clone(),
                expected: expected_statuses.clone(),
            },
            HealthCheckKind::Tcp { send, receive } => quickshake_upstream::HealthCheckKind::Tcp {
                send: send.clone(),
                receive: receive.clone(),
            },
        },
    }
}

fn outlier_spec(o: &OutlierDetection) -> OutlierSpec {
    OutlierSpec {
        consecutive_5xx: o.consecutive_5xx,
        consecutive_gateway_failure: o.consecutive_gateway_failure,
        enforcing_consecutive_5xx: o.enforcing_consecutive_5xx,
        enforcing_consecutive_gateway_failure: o.enforcing_consecutive_gateway_failure,
        interval: o.interval,
        base_ejection_time: o.base_ejection_time,
        max_ejection_time: o.max_ejection_time,
        max_ejection_percent: o.max_ejection_percent,
    }
}
