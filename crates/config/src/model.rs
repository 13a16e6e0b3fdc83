//! The resolved configuration model: what the rest of quickshake consumes.
//!
//! Everything here has been validated: paths are checked for presence by the loader only where
//! noted, numbers are in range, enums are known. Secrets (`DataSource` holding key material) print
//! no content in `Debug`.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The whole bootstrap (`static_resources` + `admin` + `overload_manager`).
#[derive(Debug, Clone, Default)]
pub struct Bootstrap {
    pub listeners: Vec<Listener>,
    pub admin: Option<Admin>,
    /// `overload_manager.resource_monitors[]` `envoy.resource_monitors.global_downstream_max_connections`
    /// `max_active_downstream_connections` (also accepted as the runtime key form Envoy documents).
    pub global_downstream_max_connections: Option<u64>,
    /// The configuration as loaded (JSON form), for `config_dump`. Holds secrets; `Debug` hides it.
    pub(crate) raw: RawConfig,
}

impl Bootstrap {
    /// A bootstrap built in code (tests, tools); its `config_dump` shows an empty bootstrap.
    pub fn new(
        listeners: Vec<Listener>,
        admin: Option<Admin>,
        global_downstream_max_connections: Option<u64>,
    ) -> Self {
        Bootstrap {
            listeners,
            admin,
            global_downstream_max_connections,
            raw: RawConfig::default(),
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
    pub http: HttpConnectionManager,
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
    /// `session_ticket_keys.keys[]` (each 80 bytes, as Envoy requires).
    pub session_ticket_keys: Vec<DataSource>,
    pub disable_stateless_session_resumption: bool,
    pub disable_stateful_session_resumption: bool,
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
}

/// A `tls_certificate_sds_secret_configs[]` entry read from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdsSecretRef {
    /// Config path of the entry, for errors.
    pub path: String,
    /// The `Secret` resource's name.
    pub name: String,
    /// `sds_config.path_config_source.path` (or `sds_config.path`).
    pub file: PathBuf,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodecType {
    Auto,
    Http1,
    Http2,
}

#[derive(Debug, Clone)]
pub struct HttpConnectionManager {
    pub path: String,
    pub stat_prefix: String,
    pub codec_type: CodecType,
    pub virtual_hosts: Vec<VirtualHost>,
    /// `common_http_protocol_options.idle_timeout`.
    pub idle_timeout: Option<Duration>,
    /// `max_request_headers_kb` (Envoy default 60).
    pub max_request_headers_kb: u32,
    pub access_logs: Vec<AccessLog>,
    /// `server_name` header value (Envoy default "envoy"; ours "quickshake").
    pub server_name: Option<String>,
}

#[derive(Debug, Clone)]
pub struct VirtualHost {
    pub name: String,
    /// `*`, exact, `*.suffix`, `prefix*`; matched case-insensitively, port-stripped.
    pub domains: Vec<String>,
    pub routes: Vec<Route>,
}

#[derive(Debug, Clone)]
pub struct Route {
    pub matcher: RouteMatch,
    pub action: RouteAction,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteMatch {
    Prefix(String),
    Path(String),
}

#[derive(Debug, Clone)]
pub enum RouteAction {
    DirectResponse { status: u16, body: Option<String> },
}

#[derive(Debug, Clone)]
pub struct AccessLog {
    pub sink: AccessLogSink,
    /// `log_format.text_format_source.inline_string` / `text_format`; `None` = Envoy's default format.
    pub format: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLogSink {
    /// `envoy.access_loggers.file` with `path`.
    File(PathBuf),
    /// `envoy.access_loggers.stdout`.
    Stdout,
    /// `envoy.access_loggers.stderr`.
    Stderr,
}
