//! Errors of cluster construction and of upstream requests.

use std::io;
use std::net::SocketAddr;

/// What went wrong building a cluster or talking to an upstream.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The cluster has no endpoint to send to (nothing resolved yet, or DNS
    /// returned no address). Envoy answers `503 no healthy upstream`.
    #[error("no healthy upstream")]
    NoHealthyEndpoint,
    /// TCP connect refused, unreachable, or reset before the connection was usable.
    #[error("upstream connect to {addr} failed: {source}")]
    ConnectFailed {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// TCP connect (plus TLS handshake) exceeded `connect_timeout`.
    #[error("upstream connect to {0} timed out")]
    ConnectTimeout(SocketAddr),
    /// A circuit breaker tripped; which one is in the message.
    #[error("upstream circuit breaker overflow: {0}")]
    Overflow(OverflowKind),
    /// TLS setup or handshake failure (including certificate verification); the cause kept.
    #[error("upstream TLS: {0}")]
    Tls(#[source] quickshake_tls::ClientHandshakeError),
    /// HTTP protocol error on an established connection (malformed response, bad request).
    #[error("upstream protocol error: {0}")]
    Protocol(#[source] hyper::Error),
    /// The connection closed or the stream was reset before a response arrived.
    #[error("upstream reset: {0}")]
    Reset(#[source] hyper::Error),
    /// The request cannot be sent as is (e.g. an HTTP/2 request without a usable authority).
    #[error("invalid upstream request: {0}")]
    InvalidRequest(String),
    /// A cluster specification is unusable (bad endpoint, duplicate name, bad PEM).
    #[error("cluster {cluster}: {reason}")]
    Config { cluster: String, reason: String },
}

/// Which circuit breaker overflowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverflowKind {
    /// `max_connections`: counted in `upstream_cx_overflow`.
    Connections,
    /// `max_pending_requests`: counted in `upstream_rq_pending_overflow`.
    PendingRequests,
    /// `max_requests`: counted in `upstream_rq_pending_overflow`.
    Requests,
    /// `max_retries`: counted in `upstream_rq_retry_overflow`.
    Retries,
}

impl std::fmt::Display for OverflowKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OverflowKind::Connections => "max_connections",
            OverflowKind::PendingRequests => "max_pending_requests",
            OverflowKind::Requests => "max_requests",
            OverflowKind::Retries => "max_retries",
        })
    }
}

impl UpstreamError {
    /// A failure to establish the connection (Envoy's `connect-failure` retry
    /// condition): refused, timed out, or TLS handshake failed. The request never
    /// reached the upstream.
    pub fn is_retriable_connect_failure(&self) -> bool {
        matches!(
            self,
            UpstreamError::ConnectFailed { .. }
                | UpstreamError::ConnectTimeout(_)
                | UpstreamError::Tls(_)
        )
    }

    /// A reset after connecting (Envoy's `reset` retry condition, which also
    /// covers connect failures).
    pub fn is_reset(&self) -> bool {
        matches!(self, UpstreamError::Reset(_)) || self.is_retriable_connect_failure()
    }

    /// A circuit breaker overflow (Envoy answers 503 with `UO` flag and does not retry).
    pub fn is_overflow(&self) -> bool {
        matches!(self, UpstreamError::Overflow(_))
    }

    /// Envoy's response flag for this failure: `UF` connect failure, `UO`
    /// overflow, `UH` no healthy upstream, `UR` reset, `UPE` protocol error.
    pub fn response_flag(&self) -> &'static str {
        match self {
            UpstreamError::NoHealthyEndpoint => "UH",
            UpstreamError::ConnectFailed { .. }
            | UpstreamError::ConnectTimeout(_)
            | UpstreamError::Tls(_) => "UF",
            UpstreamError::Overflow(_) => "UO",
            UpstreamError::Protocol(_) => "UPE",
            UpstreamError::Reset(_) => "UR",
            UpstreamError::InvalidRequest(_) | UpstreamError::Config { .. } => "UPE",
        }
    }

    /// The status Envoy's router answers downstream with: 503 for everything
    /// here (a timeout the router enforces itself is its 504).
    pub fn http_status(&self) -> u16 {
        503
    }

    /// Classifies a hyper client error on an established connection.
    pub(crate) fn from_hyper(e: hyper::Error) -> Self {
        if e.is_parse() || e.is_user() || e.is_parse_status() {
            UpstreamError::Protocol(e)
        } else {
            UpstreamError::Reset(e)
        }
    }
}
