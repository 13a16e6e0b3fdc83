//! One filter chain's HTTP connection manager as it runs (route table, codec, timeouts, stats,
//! access loggers, HTTP filters, path normalization, the clusters its routes name) and the
//! per-connection facts requests need. A leaf of the HTTP path: the request handler, the
//! forwarder and the connection (TCP's and QUIC's) read it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use http::HeaderValue;
use quickshake_config::{
    CodecType, ForwardClientCert, HeadersWithUnderscoresAction, Http2Options,
    HttpConnectionManager, HttpFilter, PathNormalization, RouteAction, RouteConfig, RouteSource,
    ServerHeaderTransformation,
};
use quickshake_stats::{Counter, Gauge, Histogram, Store};

use crate::access_log::{open_access_logs, AccessLogger};
use crate::cors::CorsStats;
use crate::error::HttpError;
use crate::fault::FaultStats;
use crate::xfcc::TlsPeer;

/// Envoy's `http.<stat_prefix>.*` statistics.
pub struct HttpStats {
    pub downstream_rq_total: Counter,
    pub downstream_rq_completed: Counter,
    pub downstream_rq_xx: [Counter; 5],
    pub downstream_rq_http1_total: Counter,
    pub downstream_rq_http2_total: Counter,
    pub downstream_rq_http3_total: Counter,
    pub downstream_rq_time: Histogram,
    pub downstream_cx_total: Counter,
    pub downstream_cx_ssl_total: Counter,
    pub downstream_cx_http1_total: Counter,
    pub downstream_cx_http2_total: Counter,
    pub downstream_cx_http3_total: Counter,
    pub downstream_cx_active: Gauge,
    pub downstream_cx_destroy: Counter,
    pub downstream_cx_idle_timeout: Counter,
    pub downstream_cx_protocol_error: Counter,
    pub no_route: Counter,
    /// Routes whose cluster does not exist (Envoy's router `no_cluster`; 503 `NC`).
    pub no_cluster: Counter,
    pub rq_redirect: Counter,
    pub rq_direct_response: Counter,
    pub downstream_rq_failed_path_normalization: Counter,
    pub downstream_rq_redirected_with_normalized_path: Counter,
    /// Requests ended by `stream_idle_timeout` (Envoy's `downstream_rq_idle_timeout`).
    pub downstream_rq_idle_timeout: Counter,
}

impl HttpStats {
    pub fn new(store: &Store, prefix: &str) -> Self {
        let c = |n: &str| store.counter(&format!("http.{prefix}.{n}"));
        HttpStats {
            downstream_rq_total: c("downstream_rq_total"),
            downstream_rq_completed: c("downstream_rq_completed"),
            downstream_rq_xx: [
                c("downstream_rq_1xx"),
                c("downstream_rq_2xx"),
                c("downstream_rq_3xx"),
                c("downstream_rq_4xx"),
                c("downstream_rq_5xx"),
            ],
            downstream_rq_http1_total: c("downstream_rq_http1_total"),
            downstream_rq_http2_total: c("downstream_rq_http2_total"),
            downstream_rq_http3_total: c("downstream_rq_http3_total"),
            downstream_rq_time: store.histogram(
                &format!("http.{prefix}.downstream_rq_time"),
                quickshake_stats::DEFAULT_BUCKETS,
            ),
            downstream_cx_total: c("downstream_cx_total"),
            downstream_cx_ssl_total: c("downstream_cx_ssl_total"),
            downstream_cx_http1_total: c("downstream_cx_http1_total"),
            downstream_cx_http2_total: c("downstream_cx_http2_total"),
            downstream_cx_http3_total: c("downstream_cx_http3_total"),
            downstream_cx_active: store.gauge(&format!("http.{prefix}.downstream_cx_active")),
            downstream_cx_destroy: c("downstream_cx_destroy"),
            downstream_cx_idle_timeout: c("downstream_cx_idle_timeout"),
            downstream_cx_protocol_error: c("downstream_cx_protocol_error"),
            no_route: c("no_route"),
            no_cluster: c("no_cluster"),
            rq_redirect: c("rq_redirect"),
            rq_direct_response: c("rq_direct_response"),
            downstream_rq_failed_path_normalization: c("downstream_rq_failed_path_normalization"),
            downstream_rq_redirected_with_normalized_path: c(
                "downstream_rq_redirected_with_normalized_path",
            ),
            downstream_rq_idle_timeout: c("downstream_rq_idle_timeout"),
        }
    }
}

/// A route configuration with the clusters its routes name that exist (a route naming one
/// that does not answers 503 `NC`).
pub struct RouteTable {
    pub config: RouteConfig,
    pub clusters: HashMap<String, quickshake_upstream::Cluster>,
}

impl RouteTable {
    /// The table for `config`: the clusters its routes name, looked up in `clusters`. With
    /// `validate_clusters`, a missing one is an error naming `field`.
    pub fn build(
        config: RouteConfig,
        clusters: &quickshake_upstream::ClusterManager,
        field: &str,
    ) -> Result<Self, HttpError> {
        let mut named = HashMap::new();
        for vh in &config.virtual_hosts {
            for r in &vh.routes {
                let RouteAction::Route(t) = &r.action else {
                    continue;
                };
                // The route's cluster, its weighted clusters and those of its request mirrors.
                let weighted = t.weighted.iter().map(|w| &w.name);
                let mirrors = t.mirrors.iter().map(|m| &m.cluster);
                for name in std::iter::once(&t.cluster).chain(weighted).chain(mirrors) {
                    match clusters.cluster(name) {
                        Some(c) => {
                            named.insert(name.clone(), c);
                        }
                        None if config.validate_clusters => {
                            return Err(HttpError::Invalid {
                                field: field.to_owned(),
                                reason: format!("unknown cluster '{name}'"),
                            })
                        }
                        None => {}
                    }
                }
            }
        }
        Ok(RouteTable {
            config,
            clusters: named,
        })
    }
}

/// One filter chain's HTTP connection manager, shared by all its connections.
pub struct HttpRuntime {
    pub codec: CodecType,
    /// The route table: the inline `route_config`, or (RDS) empty until
    /// [`HttpRuntime::set_routes`] installs what xDS delivered.
    pub routes: ArcSwap<RouteTable>,
    /// `rds.route_config_name` when the routes come by RDS.
    pub rds_route_config_name: Option<String>,
    /// `http_filters[]` before the router.
    pub http_filters: Vec<HttpFilter>,
    pub path_normalization: PathNormalization,
    /// `server.health_check_failed` (admin `/healthcheck/fail`), for the health-check filter.
    pub health_check_failed: Gauge,
    pub idle_timeout: Duration,
    pub max_request_headers_bytes: usize,
    pub server_name: HeaderValue,
    pub stats: HttpStats,
    pub loggers: Vec<AccessLogger>,
    /// `upgrade_configs[].upgrade_type` (e.g. `websocket`).
    pub upgrade_types: Vec<String>,
    pub use_remote_address: bool,
    pub generate_request_id: bool,
    /// The router's `suppress_envoy_headers`.
    pub suppress_envoy_headers: bool,
    pub server_header_transformation: ServerHeaderTransformation,
    pub headers_with_underscores_action: HeadersWithUnderscoresAction,
    /// Largest request body buffered for retries: the listener's
    /// `per_connection_buffer_limit_bytes`, as Envoy's router takes its stream's buffer limit
    /// (quickshake's default 64 KiB when it is not set or 0).
    pub retry_buffer_limit: usize,
    /// `http2_protocol_options` (the settings sent to HTTP/2 clients).
    pub http2: Http2Options,
    /// `proxy_100_continue`.
    pub proxy_100_continue: bool,
    /// `stream_idle_timeout` (Envoy's default 5 minutes; `None`: disabled by `0s`).
    pub stream_idle_timeout: Option<Duration>,
    /// `forward_client_cert_details` with `set_current_client_cert_details`.
    pub forward_client_cert: ForwardClientCert,
    /// `http_protocol_options.default_host_for_http_10`.
    pub default_host_for_http_10: Option<HeaderValue>,
    /// `http.<stat_prefix>.cors.*`, when a CORS filter is configured.
    pub(crate) cors_stats: Option<CorsStats>,
    /// `http.<stat_prefix>.fault.*`, when a fault filter is configured.
    pub(crate) fault_stats: Option<FaultStats>,
    /// Where the local rate limit filters' `<stat_prefix>.http_local_rate_limit.*` go, when
    /// one is configured.
    pub(crate) local_rate_limit_store: Option<Store>,
}

/// Largest request body buffered so a request can be retried when the listener sets no
/// `per_connection_buffer_limit_bytes`; larger ones go once.
const DEFAULT_RETRY_BUFFER_LIMIT: usize = 64 * 1024;

/// Envoy's default `common_http_protocol_options.idle_timeout`: one hour.
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);

impl HttpRuntime {
    pub fn build(
        cfg: &HttpConnectionManager,
        store: &Store,
        clusters: &quickshake_upstream::ClusterManager,
    ) -> Result<Self, HttpError> {
        let (table, rds_route_config_name) = match &cfg.routes {
            RouteSource::Static(rc) => (
                RouteTable::build(rc.clone(), clusters, &format!("{}.route_config", cfg.path))?,
                None,
            ),
            RouteSource::Rds {
                route_config_name, ..
            } => (
                RouteTable {
                    config: RouteConfig::default(),
                    clusters: HashMap::new(),
                },
                Some(route_config_name.clone()),
            ),
        };
        let loggers = open_access_logs(&cfg.access_logs, &cfg.path)?;
        let server_name = cfg.server_name.as_deref().unwrap_or("quickshake");
        let has = |p: &dyn Fn(&HttpFilter) -> bool| cfg.http_filters.iter().any(p);
        // As in Envoy, a local rate limit filter's counters exist once it is configured.
        for f in &cfg.http_filters {
            if let HttpFilter::LocalRateLimit { config, .. } = f {
                crate::local_ratelimit::limiter(config, store);
            }
        }
        Ok(HttpRuntime {
            codec: cfg.codec_type,
            routes: ArcSwap::from_pointee(table),
            rds_route_config_name,
            http_filters: cfg.http_filters.clone(),
            path_normalization: cfg.path_normalization,
            health_check_failed: store.gauge("server.health_check_failed"),
            idle_timeout: cfg.idle_timeout.unwrap_or(DEFAULT_IDLE_TIMEOUT),
            max_request_headers_bytes: cfg.max_request_headers_kb as usize * 1024,
            server_name: HeaderValue::from_str(server_name).map_err(|_| HttpError::Invalid {
                field: format!("{}.server_name", cfg.path),
                reason: "not a valid header value".into(),
            })?,
            stats: HttpStats::new(store, &cfg.stat_prefix),
            loggers,
            upgrade_types: cfg.upgrade_types.clone(),
            use_remote_address: cfg.use_remote_address,
            generate_request_id: cfg.generate_request_id,
            suppress_envoy_headers: cfg.suppress_envoy_headers,
            server_header_transformation: cfg.server_header_transformation,
            headers_with_underscores_action: cfg.headers_with_underscores_action,
            retry_buffer_limit: cfg
                .connection_buffer_limit_bytes
                .filter(|b| *b > 0)
                .map_or(DEFAULT_RETRY_BUFFER_LIMIT, |b| b as usize),
            http2: cfg.http2,
            proxy_100_continue: cfg.proxy_100_continue,
            stream_idle_timeout: cfg.stream_idle_timeout,
            forward_client_cert: cfg.forward_client_cert,
            default_host_for_http_10: cfg
                .http1
                .default_host_for_http_10
                .as_deref()
                .and_then(|h| HeaderValue::from_str(h).ok()),
            cors_stats: has(&|f| matches!(f, HttpFilter::Cors { .. }))
                .then(|| CorsStats::new(store, &cfg.stat_prefix)),
            fault_stats: has(&|f| matches!(f, HttpFilter::Fault { .. }))
                .then(|| FaultStats::new(store, &cfg.stat_prefix)),
            local_rate_limit_store: has(&|f| matches!(f, HttpFilter::LocalRateLimit { .. }))
                .then(|| store.clone()),
        })
    }
}

impl HttpRuntime {
    /// Installs a new route table (an RDS update); requests already routed keep the old one.
    pub fn set_routes(&self, table: RouteTable) {
        self.routes.store(Arc::new(table));
    }
}

/// Per-connection facts the request handler needs, and the activity the idle timer watches.
pub struct ConnInfo {
    pub started: Instant,
    /// The client: the socket's peer, or the source a PROXY protocol header gave.
    pub peer: String,
    pub local: String,
    pub sni: Option<String>,
    pub tls_version: Option<String>,
    /// The certificates of an mTLS connection (for `x-forwarded-client-cert`).
    pub tls_peer: Option<TlsPeer>,
    pub active_requests: AtomicUsize,
    /// Milliseconds since `started` of the last request start or end.
    pub last_activity_ms: AtomicU64,
}

impl ConnInfo {
    /// A connection's facts as it starts serving (no request yet).
    pub fn new(
        peer: std::net::SocketAddr,
        local: String,
        sni: Option<String>,
        tls_version: Option<String>,
    ) -> Arc<Self> {
        Self::with_tls_peer(peer, local, sni, tls_version, None)
    }

    /// [`ConnInfo::new`] for a TLS connection whose client presented a certificate.
    pub fn with_tls_peer(
        peer: std::net::SocketAddr,
        local: String,
        sni: Option<String>,
        tls_version: Option<String>,
        tls_peer: Option<TlsPeer>,
    ) -> Arc<Self> {
        Arc::new(ConnInfo {
            started: Instant::now(),
            peer: peer.to_string(),
            local,
            sni,
            tls_version,
            tls_peer,
            active_requests: Default::default(),
            last_activity_ms: Default::default(),
        })
    }

    /// The client's IP address (without port), for `x-forwarded-for`.
    pub fn client_ip(&self) -> String {
        self.peer
            .parse::<std::net::SocketAddr>()
            .map(|a| a.ip().to_string())
            .unwrap_or_else(|_| self.peer.clone())
    }

    pub fn touch(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_activity_ms.store(ms, Ordering::Relaxed);
    }
    pub fn idle_for(&self) -> Option<Duration> {
        if self.active_requests.load(Ordering::Relaxed) > 0 {
            return None;
        }
        let last = Duration::from_millis(self.last_activity_ms.load(Ordering::Relaxed));
        Some(self.started.elapsed().saturating_sub(last))
    }
}
