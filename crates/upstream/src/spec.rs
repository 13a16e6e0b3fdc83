//! The input types: what a cluster is, already parsed and validated by the caller.

use std::time::Duration;

/// One upstream cluster (Envoy's `Cluster`), as the config layer hands it over.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    pub name: String,
    /// Bounds the TCP connect and, for TLS clusters, the handshake.
    pub connect_timeout: Duration,
    pub discovery: Discovery,
    /// How often DNS clusters re-resolve (Envoy's `dns_refresh_rate`, default 5 s).
    pub dns_refresh_rate: Duration,
    pub lb: LbPolicy,
    /// `(host, port)`: an IP literal for [`Discovery::Static`], a DNS name otherwise.
    pub endpoints: Vec<(String, u16)>,
    pub limits: Limits,
    pub tls: Option<UpstreamTlsSpec>,
    /// Envoy's `transport_socket_matches`, resolved: the transport sockets (TLS, or `None`
    /// for plaintext) some hosts use instead of `tls`.
    pub socket_matches: Vec<Option<UpstreamTlsSpec>>,
    /// The hosts (by address) that use `socket_matches[i]` rather than `tls`; EDS updates
    /// say it again with [`crate::Cluster::set_endpoints_with_sockets`].
    pub host_sockets: Vec<(std::net::SocketAddr, usize)>,
    pub protocol: Protocol,
    /// HTTP/2 flow control the connections advertise: (`initial_stream_window_size`,
    /// `initial_connection_window_size`); `None` keeps hyper's defaults.
    pub http2_windows: (Option<u32>, Option<u32>),
    /// Active health checking (Envoy's `health_checks[0]`); `None`: every host is healthy.
    pub health_check: Option<HealthCheckSpec>,
    /// Passive health checking (Envoy's `outlier_detection`).
    pub outlier: Option<OutlierSpec>,
    /// `common_lb_config.healthy_panic_threshold` in percent (default 50): below this share of
    /// healthy hosts the load balancer uses every host (Envoy's panic mode); 0 disables it.
    pub healthy_panic_threshold: f64,
    /// Which addresses of a DNS name are hosts (Envoy's `dns_lookup_family`).
    pub dns_family: DnsFamily,
    /// Envoy's `ignore_health_on_host_removal`: with active health checks, a host service
    /// discovery (DNS, EDS) removes is dropped at once; otherwise (the default) it stays while
    /// its checks pass.
    pub ignore_health_on_host_removal: bool,
    /// Envoy's upstream `common_http_protocol_options.idle_timeout`: an HTTP/1.1 connection
    /// idle in the pool this long is closed. `None`: never.
    pub idle_timeout: Option<Duration>,
    /// `common_http_protocol_options.max_requests_per_connection`: a connection that has
    /// carried this many requests takes no more (HTTP/1.1: it is closed when its last response
    /// ends; HTTP/2: the next request opens a new one). `None`: no limit.
    pub max_requests_per_connection: Option<u32>,
}

impl ClusterSpec {
    /// A cluster with Envoy's defaults (5 s connect timeout, 5 s DNS refresh,
    /// round robin, default circuit breakers, cleartext HTTP/1.1).
    pub fn new(
        name: impl Into<String>,
        discovery: Discovery,
        endpoints: Vec<(String, u16)>,
    ) -> Self {
        ClusterSpec {
            name: name.into(),
            connect_timeout: Duration::from_secs(5),
            discovery,
            dns_refresh_rate: Duration::from_secs(5),
            lb: LbPolicy::RoundRobin,
            endpoints,
            limits: Limits::default(),
            tls: None,
            socket_matches: Vec::new(),
            host_sockets: Vec::new(),
            protocol: Protocol::Http1,
            http2_windows: (None, None),
            health_check: None,
            outlier: None,
            healthy_panic_threshold: 50.0,
            dns_family: DnsFamily::All,
            ignore_health_on_host_removal: false,
            idle_timeout: None,
            max_requests_per_connection: None,
        }
    }
}

/// Which of a name's resolved addresses a DNS cluster uses (Envoy's `dns_lookup_family`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DnsFamily {
    /// `AUTO`: the IPv6 addresses when there are any, else the IPv4 ones.
    Auto,
    V4Only,
    V6Only,
    /// `V4_PREFERRED`: the IPv4 addresses when there are any, else the IPv6 ones.
    V4Preferred,
    /// `ALL`: every address, in the resolver's order.
    All,
}

impl DnsFamily {
    /// The addresses of `addrs` this family keeps, in their order.
    pub fn select(self, addrs: Vec<std::net::SocketAddr>) -> Vec<std::net::SocketAddr> {
        let has_v4 = addrs.iter().any(|a| a.is_ipv4());
        let has_v6 = addrs.iter().any(|a| a.is_ipv6());
        let want_v4 = match self {
            DnsFamily::All => return addrs,
            DnsFamily::V4Only => true,
            DnsFamily::V6Only => false,
            DnsFamily::Auto => !has_v6,
            DnsFamily::V4Preferred => has_v4,
        };
        addrs
            .into_iter()
            .filter(|a| a.is_ipv4() == want_v4)
            .collect()
    }
}

/// Endpoint discovery (Envoy's cluster `type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discovery {
    /// `STATIC`: endpoints are IP literals, never resolved.
    Static,
    /// `STRICT_DNS`: every address of every endpoint name is a host.
    StrictDns,
    /// `LOGICAL_DNS`: only the first address of each endpoint name is a host.
    LogicalDns,
    /// `EDS`: no hosts until [`crate::Cluster::set_endpoints`] gives them (requests meanwhile
    /// fail with [`crate::UpstreamError::NoHealthyEndpoint`], Envoy's 503 `UH`); `endpoints`
    /// of the spec must be empty.
    Eds,
}

/// Load balancing policy (Envoy's `lb_policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LbPolicy {
    RoundRobin,
    /// Power of two random choices, picking the host with fewer active requests.
    LeastRequest,
    /// Envoy's ring hash over the request's [`crate::RequestHash`] (a random host without one).
    RingHash {
        min_ring_size: u64,
        max_ring_size: u64,
    },
    /// Envoy's Maglev over the request's [`crate::RequestHash`] (a random host without one);
    /// `table_size` is a prime.
    Maglev {
        table_size: u64,
    },
}

/// Envoy's default-priority `circuit_breakers.thresholds[]` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_connections: u32,
    pub max_pending_requests: u32,
    pub max_requests: u32,
    pub max_retries: u32,
}

impl Default for Limits {
    /// Envoy's defaults: 1024 connections, pending and requests, 3 retries.
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            max_pending_requests: 1024,
            max_requests: 1024,
            max_retries: 3,
        }
    }
}

/// Upstream protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    /// HTTP/2: over TLS (ALPN `h2` is offered) or cleartext with prior knowledge (h2c).
    Http2,
}

/// Envoy's `UpstreamTlsContext`, reduced to what the gateway supports: `quickshake-tls`'s
/// client options, under the name clusters have always used. For an HTTP/2 cluster an empty
/// `alpn` offers `h2`.
pub use quickshake_tls::ClientTlsOptions as UpstreamTlsSpec;

/// One active health check (Envoy's `HealthCheck`), already validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthCheckSpec {
    /// Time between checks of one host once the cluster has had traffic.
    pub interval: Duration,
    /// Bounds one check (connect, request and answer); a timeout is a network failure.
    pub timeout: Duration,
    /// Time between checks while the cluster never had traffic (Envoy's default 60 s).
    pub no_traffic_interval: Duration,
    /// Consecutive network failures (connect, timeout) that make a healthy host unhealthy; a
    /// failing answer (unexpected HTTP status, TCP payload mismatch) does at once, as in Envoy.
    pub unhealthy_threshold: u32,
    /// Consecutive successes that make an unhealthy host healthy (the first check ever of a
    /// host makes it healthy at once).
    pub healthy_threshold: u32,
    /// Random extra delay added to each interval, up to this much.
    pub interval_jitter: Duration,
    /// Random delay before the first check, up to this much.
    pub initial_jitter: Duration,
    pub kind: HealthCheckKind,
}

/// What a health check sends and expects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthCheckKind {
    /// `GET path` over HTTP/1.1; passes when the status is in one of `expected` (`[start, end)`
    /// ranges, as Envoy's `Int64Range`).
    Http {
        path: String,
        /// `Host` header; the cluster's name when `None` (Envoy's default).
        host: Option<String>,
        expected: Vec<(u16, u16)>,
    },
    /// Connect, write `send` (if any), and pass once every `receive` payload has arrived, each
    /// after the previous one (as Envoy matches them); both empty: connect only.
    Tcp {
        send: Vec<u8>,
        receive: Vec<Vec<u8>>,
    },
}

/// Envoy's `OutlierDetection`: consecutive 5xx and gateway-failure ejection.
#[derive(Clone, Debug, PartialEq)]
pub struct OutlierSpec {
    pub consecutive_5xx: u32,
    pub consecutive_gateway_failure: u32,
    /// Percent chance that a detected ejection is enforced (Envoy: 100 for 5xx, 0 for gateway
    /// failures).
    pub enforcing_consecutive_5xx: u32,
    pub enforcing_consecutive_gateway_failure: u32,
    /// How often ejected hosts are checked for their return.
    pub interval: Duration,
    /// An ejected host stays out `base_ejection_time × ejections` (capped by `max_ejection_time`).
    pub base_ejection_time: Duration,
    pub max_ejection_time: Duration,
    /// At most this percent of the hosts ejected at once (checked as Envoy does: ejecting one
    /// more must keep `100 × (ejected + 1) / hosts` at or under it).
    pub max_ejection_percent: u32,
}

impl Default for OutlierSpec {
    /// Envoy's defaults.
    fn default() -> Self {
        OutlierSpec {
            consecutive_5xx: 5,
            consecutive_gateway_failure: 5,
            enforcing_consecutive_5xx: 100,
            enforcing_consecutive_gateway_failure: 0,
            interval: Duration::from_secs(10),
            base_ejection_time: Duration::from_secs(30),
            max_ejection_time: Duration::from_secs(300),
            max_ejection_percent: 10,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DnsFamily;
    use std::net::SocketAddr;

    #[test]
    fn dns_families_pick_as_envoy() {
        let v4: SocketAddr = "192.0.2.1:80".parse().unwrap();
        let v6: SocketAddr = "[2001:db8::1]:80".parse().unwrap();
        let both = vec![v4, v6];
        let cases = [
            (DnsFamily::All, &both, vec![v4, v6]),
            (DnsFamily::Auto, &both, vec![v6]),
            (DnsFamily::V4Preferred, &both, vec![v4]),
            (DnsFamily::V4Only, &both, vec![v4]),
            (DnsFamily::V6Only, &both, vec![v6]),
        ];
        for (family, addrs, want) in cases {
            assert_eq!(family.select(addrs.clone()), want, "{family:?}");
        }
        assert_eq!(
            DnsFamily::Auto.select(vec![v4]),
            vec![v4],
            "AUTO falls back to IPv4"
        );
        assert_eq!(
            DnsFamily::V4Preferred.select(vec![v6]),
            vec![v6],
            "and V4_PREFERRED to IPv6"
        );
        assert!(DnsFamily::V6Only.select(vec![v4]).is_empty());
    }
}
