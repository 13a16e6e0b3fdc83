//! `quickshake-upstream` owns upstream clusters: endpoint discovery (static,
//! STRICT_DNS, LOGICAL_DNS; EDS clusters take their hosts from
//! [`Cluster::set_endpoints`], which the caller feeds), load balancing (round robin, least request),
//! per-worker connection pools (HTTP/1.1 keep-alive, one shared HTTP/2
//! connection per endpoint), circuit breakers, the TCP connect and its timeout,
//! and cluster stats under Envoy's names (`cluster.<name>.upstream_rq_200`, ...).
//! It must not parse config (the caller maps config into [`ClusterSpec`]),
//! route requests (retries and timeouts are the router's; it charges
//! `upstream_rq_retry`/`upstream_rq_timeout` on [`Cluster::stats`]), or touch
//! downstream connections.
//!
//! Upstream TLS has no BoringSSL glue here: the client context and handshake
//! are `quickshake-tls`'s `ClientTls` (built from [`UpstreamTlsSpec`], which is
//! `quickshake_tls::ClientTlsOptions`); this crate holds the resulting
//! `tokio_boring` stream in [`UpstreamStream`].
//!
//! Threading: a [`ClusterManager`] is shared by all workers. Connections are
//! pooled per worker thread (keyed by `ThreadId`, see the `pool` module), so
//! each is driven by the runtime of the worker that opened it. Circuit-breaker
//! counts are cluster-wide, like Envoy's. DNS clusters resolve on first use and
//! then refresh on a small dedicated thread per cluster.
//!
//! Health: active health checks (`health_check`, one background task per cluster) and outlier
//! detection (`outlier`) set per-host flags (`health`) that balancing honours, with Envoy's
//! panic threshold; they run on the runtime given to [`ClusterManager::start_background`]
//! (without it, hosts of health-checked clusters stay unhealthy and panic mode uses them all).
//! [`Cluster::host_statuses`] feeds `/clusters`.
//!
//! Modules: `cluster` ([`ClusterManager`], [`Cluster`]), `shared` (the state
//! a cluster's handles share), `request` (the request path and
//! [`UpstreamBody`]), `form` (the request target each upstream protocol needs: HTTP/1.1
//! origin-form with `Host` from the authority, [`to_h1_form`]; HTTP/2 `:scheme`/`:authority`), `pool` (per-worker connection pools), `connect`
//! ([`UpstreamStream`]), `hosts` (discovery and load balancing), `health`, `health_check`,
//! `outlier`, `breaker`, `stats`, `spec` and `error`.
#![forbid(unsafe_code)]

mod breaker;
mod cluster;
mod connect;
mod error;
mod form;
mod hash_lb;
mod health;
mod health_check;
mod hosts;
mod outlier;
mod pool;
mod request;
mod shared;
mod spec;
mod stats;

pub use breaker::Permit;
pub use cluster::{Cluster, ClusterManager};
pub use connect::UpstreamStream;
pub use error::{OverflowKind, UpstreamError};
pub use form::to_h1_form;
pub use hash_lb::xxhash64;
pub use health::HostStatus;
pub use pool::RequestBody;
pub use request::{PreviousHosts, RequestHash, UpstreamBody, UpstreamHost, UpstreamLocalAddress};
pub use spec::{
    ClusterSpec, Discovery, DnsFamily, HealthCheckKind, HealthCheckSpec, LbPolicy, Limits,
    OutlierSpec, Protocol, UpstreamTlsSpec,
};
pub use stats::ClusterStats;
