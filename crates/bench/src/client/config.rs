//! A whole run's configuration, as the command line (or a test) sets it.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::tls::TlsOptions;
use crate::http::Url;

/// A whole run's configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub url: Url,
    pub addr: SocketAddr,
    /// Local address every connection is made from (`--bind`); the port is left to the kernel.
    pub bind: Option<IpAddr>,
    /// Name for SNI and certificate verification (defaults to the URL host).
    pub server_name: String,
    /// Closed loop: connections in flight. Open loop: cap on outstanding requests.
    pub connections: usize,
    pub rate: Option<f64>,
    /// `None`: until `max_requests` or Ctrl-C.
    pub duration: Option<Duration>,
    pub max_requests: Option<u64>,
    pub warmup: Duration,
    pub keepalive: bool,
    pub allow_resumption: bool,
    /// Offer sessions (needed to see resumption) even without allowing it.
    pub offer_sessions: bool,
    pub timeout: Duration,
    pub threads: usize,
    pub progress: bool,
    pub server_stats: Option<Url>,
    pub server_cpu: Option<usize>,
    pub tls: TlsOptions,
    /// `--h3`: HTTP/3, each request on a new QUIC connection (full TLS 1.3 handshake).
    pub h3: bool,
}

impl Config {
    pub(super) fn offers_sessions(&self) -> bool {
        self.allow_resumption || self.offer_sessions
    }
}
