//! Admission limits: Envoy's local rate limit filters (listener and network) and quickshake's
//! per-source handshake limit. What they do with sockets is the server's business; here they are
//! only the validated settings.

use std::time::Duration;

/// `envoy.type.v3.TokenBucket`: `max_tokens` to start with and at most, refilled continuously at
/// `tokens_per_fill` per `fill_interval` (Envoy 1.39's atomic bucket, not a periodic timer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenBucket {
    /// `max_tokens` (0: every socket is refused, as in Envoy).
    pub max_tokens: u32,
    /// `tokens_per_fill`, default 1, at least 1.
    pub tokens_per_fill: u32,
    /// `fill_interval`: at least 50 ms unless `max_tokens` is 0 (Envoy's check).
    pub fill_interval: Duration,
}

/// `envoy.filters.listener.local_ratelimit` or `envoy.filters.network.local_ratelimit`
/// (`...local_ratelimit.v3.LocalRateLimit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalRateLimit {
    /// The filter's path (`...listener_filters[0]`, `...filters[0]`): within its listener, it
    /// names the filter's own token bucket.
    pub path: String,
    /// `stat_prefix`: `listener_local_ratelimit.<stat_prefix>.rate_limited` (listener filter),
    /// `local_rate_limit.<stat_prefix>.rate_limited` (network filter), Envoy's names.
    pub stat_prefix: String,
    pub token_bucket: TokenBucket,
    /// `runtime_enabled.default_value` (true when `runtime_enabled` is absent). quickshake has no
    /// runtime: `runtime_enabled.runtime_key` is not read.
    pub enabled: bool,
    /// `share_key` (network filter; empty: a bucket of its own): filters with the same key and
    /// the same `token_bucket` share one bucket, across filter chains and listeners.
    pub share_key: String,
}

/// `quickshake.filters.listener.handshake_limit`
/// (`quickshake.filters.listener.v1.HandshakeLimit`): at most `max_handshakes_per_source` TLS
/// handshakes in progress per client address (an IPv6 client's /64); a socket over it is closed
/// before any TLS work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandshakeLimit {
    /// At least 1.
    pub max_handshakes_per_source: u32,
}

/// A listener filter that admits or refuses sockets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketLimit {
    LocalRateLimit(LocalRateLimit),
    HandshakeLimit(HandshakeLimit),
}

/// One of a listener's [`SocketLimit`]s and when it acts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerLimit {
    pub limit: SocketLimit,
    /// Acts once the PROXY protocol header is read: a `local_ratelimit` listed after
    /// `envoy.filters.listener.proxy_protocol`, and `handshake_limit` whenever the listener has
    /// that filter (it limits the address the header carries). Otherwise it acts as the socket
    /// is accepted, before any byte is read.
    pub after_proxy_protocol: bool,
}
