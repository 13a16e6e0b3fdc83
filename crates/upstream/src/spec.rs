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
    pub protocol: Protocol,
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
            protocol: Protocol::Http1,
        }
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
