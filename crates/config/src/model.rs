//! The resolved configuration model: what the rest of quickshake consumes.
//!
//! Everything here has been validated: paths are checked for presence by the loader only where
//! noted, numbers are in range, enums are known. Secrets (`DataSource` holding key material) print
//! no content in `Debug`.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

mod access_log;
mod filter_config;
mod header_mutation;
mod health;
mod http;
mod limits;
mod matcher;
mod route;
mod san;
mod xds;
pub use access_log::*;
pub use filter_config::*;
pub use header_mutation::*;
pub use health::*;
pub use http::*;
pub use limits::*;
pub use matcher::*;
pub use route::*;
pub use san::*;
pub use xds::*;

/// The whole bootstrap (`static_resources` + `admin` + `overload_manager`).
#[derive(Debug, Clone, Default)]
pub struct Bootstrap {
    pub listeners: Vec<Listener>,
    pub admin: Option<Admin>,
    /// `overload_manager.resource_monitors[]` `envoy.resource_monitors.global_downstream_max_connections`
    /// `max_active_downstream_connections` (also accepted as the runtime key form Envoy documents).
    pub global_downstream_max_connections: Option<u64>,
    /// `static_resources.clusters[]`, names unique. Every route / tcp_proxy `cluster` names one.
    pub clusters: Vec<Cluster>,
    /// `node`: who this gateway is. Identification only (`/server_info`); the `--service-*`
    /// flags override it ([`Node::override_with`]).
    pub node: Node,
    /// `dynamic_resources`: where listeners and clusters come from besides `static_resources`.
    pub dynamic: Option<DynamicResources>,
    /// Fields accepted that have no effect in quickshake (telemetry it does not export, runtime
    /// keys it does not read), by field path; the binary logs them once at start.
    pub ignored: Vec<String>,
    /// `layered_runtime.layers[]` in order, each with the keys quickshake reads (`/runtime`).
    pub runtime: Vec<RuntimeLayer>,
    /// The configuration as loaded (JSON form), for `config_dump`. Holds secrets; `Debug` hides it.
    pub(crate) raw: RawConfig,
}

impl Bootstrap {
    /// A bootstrap built in code (tests, tools); its `config_dump` shows an empty bootstrap.
    /// `clusters` starts empty (the field is public: set it after `new`).
    pub fn new(
        listeners: Vec<Listener>,
        admin: Option<Admin>,
        global_downstream_max_connections: Option<u64>,
    ) -> Self {
        Bootstrap {
            listeners,
            admin,
            global_downstream_max_connections,
            clusters: Vec::new(),
            node: Node::default(),
            dynamic: None,
            ignored: Vec::new(),
            runtime: Vec::new(),
            raw: RawConfig::default(),
        }
    }
}

/// One `layered_runtime.layers[]` entry: its `name`, whether it is an `admin_layer`, and the
/// keys quickshake reads that it sets (flattened `a.b.c` key, Envoy's raw string value).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeLayer {
    pub name: String,
    pub admin: bool,
    pub values: Vec<(String, String)>,
}

/// Envoy's `Node` as far as quickshake keeps it: `id`, `cluster`, `locality` and `metadata`
/// (empty when not set, as in protobuf). Sent to the control plane on xDS streams.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    pub cluster: String,
    pub zone: String,
    pub region: String,
    pub sub_zone: String,
    /// `metadata`, a protobuf `Struct` in its JSON form (an object, or null when not set).
    pub metadata: serde_json::Value,
}

impl Node {
    /// Envoy's `--service-node`, `--service-cluster` and `--service-zone` (given in `flags`'s
    /// `id`, `cluster` and `zone`): each one that is not empty replaces the bootstrap's value.
    pub fn override_with(&mut self, flags: &Node) {
        for (mine, theirs) in [
            (&mut self.id, &flags.id),
            (&mut self.cluster, &flags.cluster),
            (&mut self.zone, &flags.zone),
        ] {
            if !theirs.is_empty() {
                mine.clone_from(theirs);
            }
        }
    }
}

/// The original configuration document; may contain inline private keys.
#[derive(Clone, Default)]
pub(crate) struct RawConfig(pub(crate) serde_json::Value);

impl fmt::Debug for RawConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RawConfig(<hidden>)")
    }
}

#[derive(Debug, Clone)]
pub struct Admin {
    pub address: SocketAddr,
}

#[derive(Debug, Clone)]
pub struct Listener {
    /// `name`, or `listener_<index>` when absent.
    pub name: String,
    pub address: SocketAddr,
    /// The config path of this listener, e.g. `static_resources.listeners[0]`, for error messages.
    pub path: String,
    pub filter_chains: Vec<FilterChain>,
    /// `per_connection_buffer_limit_bytes` if given.
    pub per_connection_buffer_limit_bytes: Option<u32>,
    /// `listener_filters[]` has `envoy.filters.listener.proxy_protocol`: every connection starts
    /// with a PROXY protocol (v1 or v2) header, which gives the client address.
    pub proxy_protocol: bool,
    /// `ignore_global_conn_limit` or `bypass_overload_manager` (quickshake's only overload
    /// action is the global connection limit): this listener's connections are not limited by,
    /// and do not count toward, `max_active_downstream_connections`, as Istio's and Envoy
    /// Gateway's admin-side listeners (stats, readiness) need.
    pub ignore_global_conn_limit: bool,
    /// `listener_filters[]` `envoy.filters.listener.local_ratelimit` and
    /// `quickshake.filters.listener.handshake_limit`, in their order.
    pub limits: Vec<ListenerLimit>,
    /// A QUIC (HTTP/3) listener: UDP `socket_address` with `udp_listener_config.quic_options`.
    pub quic: Option<QuicOptions>,
    /// `traffic_direction: INBOUND`: admin `/drain_listeners?inboundonly` stops this listener.
    pub inbound: bool,
    /// `max_connections_to_accept_per_socket_event` (>= 1): at most this many connections are
    /// accepted per wakeup before the listener yields; `None` accepts all that are pending.
    pub max_connections_to_accept_per_socket_event: Option<u32>,
    /// `access_log[]`: written for a connection that matches no filter chain (response flag
    /// `NR`, details `filter_chain_not_found`) or whose listener filters time out.
    pub access_logs: Vec<AccessLog>,
}

/// `udp_listener_config.quic_options` (`QuicProtocolOptions`) of a QUIC listener, Envoy's
/// defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuicOptions {
    /// `quic_protocol_options.max_concurrent_streams` (Envoy's default 100): bidirectional
    /// streams a client may open at once.
    pub max_concurrent_streams: u64,
    /// `quic_protocol_options.initial_stream_window_size` (default 16 MiB).
    pub initial_stream_window_size: u64,
    /// `quic_protocol_options.initial_connection_window_size` (default 24 MiB).
    pub initial_connection_window_size: u64,
    /// `idle_timeout` (default 300 s): a connection with no packet for this long is closed.
    pub idle_timeout: Duration,
    /// `crypto_handshake_timeout` (default 20 s): a handshake not done by then is abandoned.
    pub crypto_handshake_timeout: Duration,
    /// `udp_listener_config.downstream_socket_config.prefer_gro` (Envoy's default true).
    pub prefer_gro: bool,
    /// `enabled.default_value` (default true): a disabled QUIC listener keeps its port and
    /// its open connections, and accepts no new ones (Envoy's runtime-disabled listener).
    pub enabled: bool,
}

impl Default for QuicOptions {
    fn default() -> Self {
        QuicOptions {
            max_concurrent_streams: 100,
            initial_stream_window_size: 16 * 1024 * 1024,
            initial_connection_window_size: 24 * 1024 * 1024,
            idle_timeout: Duration::from_secs(300),
            crypto_handshake_timeout: Duration::from_secs(20),
            prefer_gro: true,
            enabled: true,
        }
    }
}

#[derive(Debug, Clone)]
pub struct FilterChain {
    /// `static_resources.listeners[0].filter_chains[1]`
    pub path: String,
    /// `filter_chain_match.server_names` (empty = matches any SNI / no SNI).
    pub server_names: Vec<String>,
    /// `transport_socket` with `DownstreamTlsContext`; `None` = plaintext chain.
    pub tls: Option<DownstreamTls>,
    /// `transport_socket_connect_timeout` (handshake timeout). Default applied by the server.
    pub transport_socket_connect_timeout: Option<Duration>,
    /// `envoy.filters.network.local_ratelimit` filters, in order, before the terminal one.
    pub rate_limits: Vec<LocalRateLimit>,
    /// The chain's terminal network filter (the last of `filters`).
    pub network: NetworkFilter,
    /// The listener's `default_filter_chain` (last of `Listener::filter_chains`, no server
    /// names): it serves only the connections that no other chain matches.
    pub default: bool,
}

impl FilterChain {
    /// The HTTP connection manager, when this chain terminates HTTP.
    pub fn http(&self) -> Option<&HttpConnectionManager> {
        self.network.http()
    }
}

/// The one network filter of a filter chain.
#[derive(Debug, Clone)]
pub enum NetworkFilter {
    /// `envoy.filters.network.http_connection_manager`.
    Http(Box<HttpConnectionManager>),
    /// `envoy.filters.network.tcp_proxy`.
    TcpProxy(TcpProxy),
}

impl NetworkFilter {
    pub fn http(&self) -> Option<&HttpConnectionManager> {
        match self {
            NetworkFilter::Http(h) => Some(h),
            NetworkFilter::TcpProxy(_) => None,
        }
    }

    pub fn tcp_proxy(&self) -> Option<&TcpProxy> {
        match self {
            NetworkFilter::TcpProxy(t) => Some(t),
            NetworkFilter::Http(_) => None,
        }
    }
}

/// `envoy.filters.network.tcp_proxy` (`...tcp_proxy.v3.TcpProxy`).
#[derive(Debug, Clone)]
pub struct TcpProxy {
    /// `...filters[0].typed_config`
    pub path: String,
    pub stat_prefix: String,
    /// Names a cluster of `Bootstrap::clusters` (checked).
    pub cluster: String,
    /// `idle_timeout`: Envoy's default 1h when absent; `"0s"` = no idle timeout (`None`).
    pub idle_timeout: Option<Duration>,
    /// `access_log[]`: one line a connection, when it closes (as Envoy's `tcp_proxy` writes).
    pub access_logs: Vec<AccessLog>,
}

#[derive(Debug, Clone)]
pub struct DownstreamTls {
    pub path: String,
    pub certificates: Vec<TlsCertificate>,
    /// `common_tls_context.tls_certificate_sds_secret_configs[]`, resolved from their files each
    /// time the context is built (`load_sds_tls_certificate`).
    pub sds_certificates: Vec<SdsSecretRef>,
    pub params: TlsParams,
    pub alpn_protocols: Vec<String>,
    pub require_client_certificate: bool,
    /// `common_tls_context.validation_context.trusted_ca`.
    pub trusted_ca: Option<DataSource>,
    /// `common_tls_context.validation_context.match_typed_subject_alt_names[]` (only with
    /// `trusted_ca`): a client certificate must have a SAN one of them matches.
    pub san_matchers: Vec<SanMatcher>,
    /// `session_ticket_keys.keys[]` (each 80 bytes, as Envoy requires). The first encrypts new
    /// tickets; every one decrypts.
    pub session_ticket_keys: Vec<DataSource>,
    /// `session_ticket_keys_sds_secret_config`: the keys from a `Secret`'s
    /// `session_ticket_keys`, read from its file each time the context is built
    /// (`load_sds_session_ticket_keys`), or resolved by the xDS client into
    /// `session_ticket_keys`.
    pub session_ticket_keys_sds: Option<SdsSecretRef>,
    /// `prefer_client_ciphers`: off (Envoy's default), the server's cipher order wins.
    pub prefer_client_ciphers: bool,
    /// `session_timeout`: how long a session (cache entry or ticket) resumes; BoringSSL's
    /// default (2 hours for TLS 1.2 sessions and tickets) when absent.
    pub session_timeout: Option<Duration>,
    pub disable_stateless_session_resumption: bool,
    pub disable_stateful_session_resumption: bool,
    /// `ocsp_staple_policy` (Envoy's default `LENIENT_STAPLING`).
    pub ocsp_staple_policy: OcspStaplePolicy,
    /// The context came from a QUIC transport socket
    /// (`QuicDownstreamTransport.downstream_tls_context`): TLS 1.3 only, ALPN `h3`.
    pub quic: bool,
}

/// `DownstreamTlsContext.ocsp_staple_policy`: what a handshake does with a certificate's
/// `ocsp_staple` when the client asks for one (status_request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OcspStaplePolicy {
    /// Staple a valid response; omit an expired or missing one.
    #[default]
    LenientStapling,
    /// Staple a valid response; fail the handshake with an expired one; omit a missing one.
    StrictStapling,
    /// Every certificate needs a staple (checked at load); fail the handshake unless it is valid.
    MustStaple,
}

#[derive(Debug, Clone, Default)]
pub struct TlsParams {
    pub min_version: Option<TlsVersion>,
    pub max_version: Option<TlsVersion>,
    /// `cipher_suites` as written (OpenSSL/BoringSSL names, `[A|B]` groups allowed).
    pub cipher_suites: Vec<String>,
    /// `ecdh_curves` as written (`X25519`, `P-256`, `X25519MLKEM768`, ...).
    pub ecdh_curves: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    /// `TLS_AUTO` maps to `None` at the use site; kept out of this enum.
    Tls1_0,
    Tls1_1,
    Tls1_2,
    Tls1_3,
}

#[derive(Debug, Clone)]
pub struct TlsCertificate {
    /// `...tls_certificates[0]`
    pub path: String,
    pub certificate_chain: DataSource,
    /// Plain `private_key`; may be absent when a provider holds the key.
    pub private_key: Option<DataSource>,
    pub private_key_provider: Option<PrivateKeyProvider>,
    /// Envoy's `watched_directory.path`: reload when this directory changes (the atomic
    /// `..data` symlink swap of Kubernetes Secret volumes).
    pub watched_directory: Option<PathBuf>,
    /// `ocsp_staple`: a DER OCSP response for this certificate (read and checked when a server
    /// context is built; unused for an upstream client certificate, as in Envoy).
    pub ocsp_staple: Option<DataSource>,
}

/// A `tls_certificate_sds_secret_configs[]` entry: a `Secret` named `name`, from a file or
/// from a control plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdsSecretRef {
    /// Config path of the entry, for errors.
    pub path: String,
    /// The `Secret` resource's name.
    pub name: String,
    /// `sds_config`.
    pub source: ConfigSource,
}

impl SdsSecretRef {
    /// The secret file, when `sds_config` names one (`path_config_source.path` or `path`).
    pub fn file(&self) -> Option<&std::path::Path> {
        match &self.source.kind {
            ConfigSourceKind::Path(p) => Some(p),
            _ => None,
        }
    }
}

/// `private_key_provider`: the provider's typed config is kept as JSON and decoded by the
/// provider registry (which owns the `@type` URLs of providers).
#[derive(Clone)]
pub struct PrivateKeyProvider {
    /// `...tls_certificates[0].private_key_provider`
    pub path: String,
    pub provider_name: String,
    /// `typed_config["@type"]`.
    pub type_url: String,
    /// `typed_config` without `@type`.
    pub typed_config: serde_json::Map<String, serde_json::Value>,
    pub fallback: bool,
}

impl fmt::Debug for PrivateKeyProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrivateKeyProvider")
            .field("path", &self.path)
            .field("provider_name", &self.provider_name)
            .field("type_url", &self.type_url)
            .field("typed_config", &"<redacted>")
            .field("fallback", &self.fallback)
            .finish()
    }
}

/// Envoy's `DataSource`: `filename`, `inline_string` or `inline_bytes` (base64).
#[derive(Clone, PartialEq, Eq)]
pub enum DataSource {
    Filename(PathBuf),
    InlineString(String),
    InlineBytes(Vec<u8>),
}

impl fmt::Debug for DataSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataSource::Filename(p) => f.debug_tuple("Filename").field(p).finish(),
            DataSource::InlineString(_) => f.write_str("InlineString(<redacted>)"),
            DataSource::InlineBytes(_) => f.write_str("InlineBytes(<redacted>)"),
        }
    }
}

/// A `static_resources.clusters[]` entry.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub name: String,
    /// `static_resources.clusters[0]`
    pub path: String,
    /// `connect_timeout` (default 5s).
    pub connect_timeout: Duration,
    /// `type` (default STATIC).
    pub discovery: ClusterDiscovery,
    /// `dns_refresh_rate` (default 5s; meaningful for the DNS types).
    pub dns_refresh_rate: Duration,
    /// `lb_policy` (default ROUND_ROBIN), or the first supported policy of
    /// `load_balancing_policy.policies[]`.
    pub lb_policy: LbPolicy,
    /// At least one; exactly one for LOGICAL_DNS (as Envoy requires); none for EDS (the
    /// endpoints arrive by xDS) and for a `pipe` cluster.
    pub endpoints: Vec<Endpoint>,
    /// The one `pipe.path` endpoint of a STATIC cluster (a unix socket, as Istio renders its
    /// xDS and SDS clusters to pilot-agent). Used by the xDS client; requests routed to such a
    /// cluster get 503 (no upstream).
    pub pipe: Option<PathBuf>,
    pub circuit_breakers: CircuitBreakers,
    /// `transport_socket` `envoy.transport_sockets.tls` with an `UpstreamTlsContext`.
    pub upstream_tls: Option<UpstreamTls>,
    /// `transport_socket_matches`, in order (see [`Cluster::socket_match`]).
    pub transport_socket_matches: Vec<TransportSocketMatch>,
    pub protocol: UpstreamProtocol,
    /// HTTP/2's `initial_stream_window_size` and `initial_connection_window_size` (the rest
    /// of `Http2Options` is not taken for clusters).
    pub http2: Http2Options,
    /// `health_checks[0]` (one at most).
    pub health_check: Option<HealthCheck>,
    pub outlier_detection: Option<OutlierDetection>,
    /// `common_lb_config.healthy_panic_threshold.value` in percent (default 50).
    pub healthy_panic_threshold: f64,
    /// `dns_lookup_family` for STRICT_DNS and LOGICAL_DNS; `None` (not given) keeps every
    /// resolved address in the resolver's order.
    pub dns_lookup_family: Option<DnsLookupFamily>,
    /// `per_connection_buffer_limit_bytes` (Envoy's default 1 MiB when `None`).
    pub per_connection_buffer_limit_bytes: Option<u32>,
    /// `ignore_health_on_host_removal` (default false).
    pub ignore_health_on_host_removal: bool,
    /// `HttpProtocolOptions.common_http_protocol_options` `idle_timeout` and
    /// `max_requests_per_connection`.
    pub connection_reuse: ConnectionReuse,
}

/// How long and how often an upstream connection is reused (Envoy's upstream
/// `common_http_protocol_options`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectionReuse {
    /// `idle_timeout`: a connection idle this long is closed (`None`: not set, or `0s`).
    pub idle_timeout: Option<Duration>,
    /// `max_requests_per_connection`: a connection takes at most this many requests.
    pub max_requests: Option<u32>,
}

/// `Cluster.DnsLookupFamily`: which of a name's addresses a DNS cluster uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DnsLookupFamily {
    /// `AUTO`: the IPv6 addresses if there are any, else the IPv4 ones.
    Auto,
    /// `V4_ONLY`.
    V4Only,
    /// `V6_ONLY`.
    V6Only,
    /// `V4_PREFERRED`: the IPv4 addresses if there are any, else the IPv6 ones.
    V4Preferred,
    /// `ALL`: both families.
    All,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterDiscovery {
    Static,
    StrictDns,
    LogicalDns,
    /// `EDS`: endpoints come from the `ClusterLoadAssignment` named `service_name`
    /// (`eds_cluster_config.service_name`, the cluster's name when empty), delivered from
    /// `config_source` (`eds_cluster_config.eds_config`).
    Eds {
        service_name: String,
        config_source: ConfigSource,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbPolicy {
    RoundRobin,
    LeastRequest,
    /// `RING_HASH` / `envoy.load_balancing_policies.ring_hash` (xxHash64): the ring has at
    /// least `min_ring_size` (default 1024) and at most `max_ring_size` (default 8M) points.
    RingHash {
        min_ring_size: u64,
        max_ring_size: u64,
    },
    /// `MAGLEV` / `envoy.load_balancing_policies.maglev`: `table_size` (default 65537) is a prime.
    Maglev {
        table_size: u64,
    },
}

/// An upstream endpoint: `socket_address` `address` + `port_value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// STATIC: an IP literal (normalized, no brackets); DNS types: a host name or IP literal.
    pub host: String,
    /// 1..=65535.
    pub port: u16,
    /// `metadata.filter_metadata["envoy.transport_socket_match"]` of the endpoint, then of its
    /// locality (empty when absent): what the cluster's `transport_socket_matches` match.
    pub socket_labels: [MatchLabels; 2],
}

/// The fields of an `envoy.transport_socket_match` metadata struct (or of a
/// `transport_socket_matches[].match`): each key with its value as compact JSON.
pub type MatchLabels = std::collections::BTreeMap<String, String>;

/// One `transport_socket_matches[]` entry of a cluster.
#[derive(Debug, Clone)]
pub struct TransportSocketMatch {
    pub name: String,
    /// `match`: a subset of an endpoint's labels selects this entry; empty matches every one.
    pub labels: MatchLabels,
    /// `transport_socket` (TLS); `None`: plaintext (no transport socket given).
    pub tls: Option<UpstreamTls>,
}

impl Cluster {
    /// Envoy's transport socket for `endpoint`: the index of the first
    /// `transport_socket_matches` entry whose `match` is a subset of the endpoint's labels,
    /// else of its locality's; `None`: the cluster's `transport_socket`.
    pub fn socket_match(&self, endpoint: &Endpoint) -> Option<usize> {
        endpoint.socket_labels.iter().find_map(|labels| {
            self.transport_socket_matches
                .iter()
                .position(|m| m.labels.iter().all(|(k, v)| labels.get(k) == Some(v)))
        })
    }
}

/// `circuit_breakers.thresholds[]` with priority DEFAULT; Envoy's defaults otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitBreakers {
    pub max_connections: u32,
    pub max_pending_requests: u32,
    pub max_requests: u32,
    pub max_retries: u32,
}

impl Default for CircuitBreakers {
    fn default() -> Self {
        CircuitBreakers {
            max_connections: 1024,
            max_pending_requests: 1024,
            max_requests: 1024,
            max_retries: 3,
        }
    }
}

/// A `CertificateValidationContext` as quickshake implements it: the peer's chain must lead
/// to `trusted_ca`, and when `san_matchers` is not empty, its certificate must have a SAN one
/// of them matches (Envoy's `DefaultCertValidator`).
#[derive(Debug, Clone)]
pub struct ValidationContext {
    /// `trusted_ca` (Envoy refuses SAN matchers without it, as quickshake does).
    pub trusted_ca: DataSource,
    /// `match_typed_subject_alt_names[]`.
    pub san_matchers: Vec<SanMatcher>,
}

/// An `UpstreamTlsContext`.
#[derive(Debug, Clone)]
pub struct UpstreamTls {
    /// `sni`.
    pub sni: Option<String>,
    /// `common_tls_context.validation_context.trusted_ca`.
    pub trusted_ca: Option<DataSource>,
    /// `common_tls_context.validation_context.match_typed_subject_alt_names[]` (only with
    /// `trusted_ca`): the server's certificate must have a SAN one of them matches. (With
    /// `trusted_ca_sds`, the secret's own matchers apply instead, as in Envoy.)
    pub san_matchers: Vec<SanMatcher>,
    /// `common_tls_context.alpn_protocols`.
    pub alpn_protocols: Vec<String>,
    /// `common_tls_context.tls_certificates[0]` (at most one): the client certificate.
    pub client_certificate: Option<TlsCertificate>,
    /// `common_tls_context.tls_certificate_sds_secret_configs[0]` from a file (instead of
    /// `tls_certificates`), as Envoy Gateway renders its xDS cluster; read when the cluster is
    /// built ([`crate::load_sds_tls_certificate`]).
    pub client_certificate_sds: Option<SdsSecretRef>,
    /// `common_tls_context.validation_context_sds_secret_config` (or
    /// `combined_validation_context`'s) from a file ([`crate::load_sds_trusted_ca`]: the
    /// secret's `trusted_ca` and SAN matchers, after `san_matchers` of a combined context's
    /// `default_validation_context`).
    pub trusted_ca_sds: Option<SdsSecretRef>,
}

/// The protocol spoken to a cluster's endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpstreamProtocol {
    #[default]
    Http1,
    Http2,
}
