//! The HTTP connection manager: codec, routes, HTTP filters, path normalization, access logs.

use std::time::Duration;

use super::access_log::AccessLog;
use super::filter_config::{FaultConfig, GrpcStatsFilter};
use super::matcher::HeaderMatcher;
use super::route::{RouteSource, VirtualHost};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodecType {
    Auto,
    Http1,
    Http2,
    /// `HTTP3`: only on a QUIC listener, and a QUIC listener's connection managers need it.
    Http3,
}

#[derive(Debug, Clone)]
pub struct HttpConnectionManager {
    pub path: String,
    pub stat_prefix: String,
    pub codec_type: CodecType,
    /// `route_config` or `rds`.
    pub routes: RouteSource,
    /// `http_filters[]` before the router (which is last and not listed), in order.
    pub http_filters: Vec<HttpFilter>,
    /// `normalize_path`, `merge_slashes`, `path_with_escaped_slashes_action`.
    pub path_normalization: PathNormalization,
    /// `common_http_protocol_options.idle_timeout`.
    pub idle_timeout: Option<Duration>,
    /// `max_request_headers_kb` (Envoy default 60).
    pub max_request_headers_kb: u32,
    pub access_logs: Vec<AccessLog>,
    /// `server_name` header value (Envoy default "envoy"; ours "quickshake").
    pub server_name: Option<String>,
    /// `upgrade_configs[].upgrade_type` of the enabled entries, as written (e.g. `websocket`);
    /// Envoy matches them against the `Upgrade` header case-insensitively.
    pub upgrade_types: Vec<String>,
    /// `use_remote_address` (default false).
    pub use_remote_address: bool,
    /// `xff_num_trusted_hops` (default 0).
    pub xff_num_trusted_hops: u32,
    /// `generate_request_id` (default true).
    pub generate_request_id: bool,
    /// The router's `suppress_envoy_headers` (default false): the router adds no `x-envoy-*`
    /// header (`x-envoy-upstream-service-time`, `x-envoy-expected-rq-timeout-ms`,
    /// `x-envoy-overloaded`).
    pub suppress_envoy_headers: bool,
    /// `server_header_transformation` (default OVERWRITE) with `server_name`.
    pub server_header_transformation: ServerHeaderTransformation,
    /// `common_http_protocol_options.headers_with_underscores_action` (default ALLOW).
    pub headers_with_underscores_action: HeadersWithUnderscoresAction,
    /// The listener's `per_connection_buffer_limit_bytes` (set by the listener it is in): a
    /// stream's buffer limit, which bounds the request body buffered for retries.
    pub connection_buffer_limit_bytes: Option<u32>,
    /// `http2_protocol_options`: the HTTP/2 settings sent to clients.
    pub http2: Http2Options,
    /// `proxy_100_continue` (default false): `Expect: 100-continue` goes upstream; otherwise
    /// the gateway answers `100 Continue` itself and removes `Expect`.
    pub proxy_100_continue: bool,
    /// `stream_idle_timeout` (default 5 minutes; `0s`: `None`, disabled): how long a request
    /// may wait for its upstream response with no activity (504, or 408 mid-body).
    pub stream_idle_timeout: Option<Duration>,
    /// `forward_client_cert_details` (default SANITIZE) with `set_current_client_cert_details`.
    pub forward_client_cert: ForwardClientCert,
    /// `http_protocol_options` (HTTP/1).
    pub http1: Http1Options,
}

/// `forward_client_cert_details`: what becomes of the request's `x-forwarded-client-cert`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ForwardClientCert {
    /// `SANITIZE`: removed.
    #[default]
    Sanitize,
    /// `FORWARD_ONLY`: kept on mTLS connections, removed otherwise.
    ForwardOnly,
    /// `APPEND_FORWARD`: on mTLS connections this hop's element is appended; removed otherwise.
    AppendForward(ClientCertDetails),
    /// `SANITIZE_SET`: on mTLS connections replaced by this hop's element; removed otherwise.
    SanitizeSet(ClientCertDetails),
    /// `ALWAYS_FORWARD_ONLY`: always kept as it came.
    AlwaysForwardOnly,
}

/// `set_current_client_cert_details`: the fields of this hop's XFCC element besides `By` and
/// `Hash` (which are always there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientCertDetails {
    pub subject: bool,
    pub cert: bool,
    pub chain: bool,
    pub uri: bool,
    pub dns: bool,
}

/// The connection manager's `http_protocol_options` (`Http1ProtocolOptions`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Http1Options {
    /// `accept_http_10` (default false: Envoy answers HTTP/1.0 requests 426).
    pub accept_http_10: bool,
    /// `default_host_for_http_10`: the `Host` given to an HTTP/1.0 request without one.
    pub default_host_for_http_10: Option<String>,
}

/// The connection manager's `http2_protocol_options` quickshake applies; `None` keeps the
/// HTTP/2 server's own default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Http2Options {
    /// `max_concurrent_streams` (1..=2^31-1).
    pub max_concurrent_streams: Option<u32>,
    /// `initial_stream_window_size` (65535..=2^31-1).
    pub initial_stream_window_size: Option<u32>,
    /// `initial_connection_window_size` (65535..=2^31-1).
    pub initial_connection_window_size: Option<u32>,
}

/// `HttpConnectionManager.ServerHeaderTransformation`: what becomes of the response's
/// `Server` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServerHeaderTransformation {
    /// `OVERWRITE`: `server_name` replaces any upstream `Server`.
    #[default]
    Overwrite,
    /// `APPEND_IF_ABSENT`: the upstream's `Server` is kept; `server_name` when there is none.
    AppendIfAbsent,
    /// `PASS_THROUGH`: the upstream's `Server` is kept, and none is added.
    PassThrough,
}

/// `HttpProtocolOptions.HeadersWithUnderscoresAction`: request headers whose name has `_`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HeadersWithUnderscoresAction {
    /// `ALLOW`: forwarded as they are.
    #[default]
    Allow,
    /// `REJECT_REQUEST`: HTTP/1 gets 400 and the connection closes; an HTTP/2 or HTTP/3
    /// stream is reset.
    RejectRequest,
    /// `DROP_HEADER`: the header is removed before filters and routing see it.
    DropHeader,
}

impl HttpConnectionManager {
    /// The inline route configuration's virtual hosts (none with RDS).
    pub fn virtual_hosts(&self) -> &[VirtualHost] {
        self.routes
            .static_config()
            .map_or(&[], |rc| rc.virtual_hosts.as_slice())
    }
}

/// How the request path is transformed before routing (and forwarded so), as Envoy does it:
/// escaped slashes first, then RFC 3986 normalization, then slash merging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PathNormalization {
    /// `normalize_path` (default false): RFC 3986 normalization (dot segments removed,
    /// percent-encoded unreserved characters decoded, `\` as `/`).
    pub normalize_path: bool,
    /// `merge_slashes` (default false): runs of `/` become one.
    pub merge_slashes: bool,
    pub escaped_slashes: EscapedSlashesAction,
}

/// `path_with_escaped_slashes_action` (`%2F`, `%2f`, `%5C`, `%5c` in the path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EscapedSlashesAction {
    /// `KEEP_UNCHANGED` and `IMPLEMENTATION_SPECIFIC_DEFAULT` (Envoy's default keeps them).
    #[default]
    KeepUnchanged,
    /// `REJECT_REQUEST`: answer 400.
    RejectRequest,
    /// `UNESCAPE_AND_REDIRECT`: answer a redirect to the unescaped (and normalized) path.
    UnescapeAndRedirect,
    /// `UNESCAPE_AND_FORWARD`: unescape and carry on.
    UnescapeAndForward,
}

/// An HTTP filter other than the router.
#[derive(Debug, Clone)]
pub enum HttpFilter {
    /// `envoy.filters.http.health_check`.
    HealthCheck(HealthCheckFilter),
    /// `envoy.filters.http.compressor`.
    Compressor(CompressorFilter),
    /// `envoy.filters.http.cors`: its policies are per route (`typed_per_filter_config` under
    /// `name`, or the route's and virtual host's `cors`). `disabled`: runs only where a route's
    /// `typed_per_filter_config` enables it (as for the two below).
    Cors { name: String, disabled: bool },
    /// `envoy.filters.http.fault`: `config`, or a route's override under `name`.
    Fault {
        name: String,
        disabled: bool,
        config: FaultConfig,
    },
    /// `envoy.filters.http.local_ratelimit`: `config`, or a route's own (and its own bucket)
    /// under `name`.
    LocalRateLimit {
        name: String,
        disabled: bool,
        config: std::sync::Arc<super::HttpLocalRateLimit>,
    },
    /// `envoy.filters.http.grpc_stats`.
    GrpcStats(GrpcStatsFilter),
    /// `envoy.filters.http.grpc_web`: gRPC-Web requests (`application/grpc-web*`) go upstream
    /// as gRPC, and their answers come back as gRPC-Web (trailers in the body).
    GrpcWeb,
}

/// `envoy.extensions.filters.http.health_check.v3.HealthCheck`.
#[derive(Debug, Clone)]
pub struct HealthCheckFilter {
    /// `pass_through_mode` (required by Envoy): true forwards health checks to the routes.
    /// quickshake has no upstream health to cache, so pass-through requests are simply routed.
    pub pass_through_mode: bool,
    /// `headers`: a request is a health check when every one matches.
    pub headers: Vec<HeaderMatcher>,
    /// `cache_time` (accepted; only meaningful with pass-through).
    pub cache_time: Option<Duration>,
}

/// `envoy.extensions.filters.http.compressor.v3.Compressor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressorFilter {
    /// The filter's `name` (its key in a route's `typed_per_filter_config`).
    pub name: String,
    /// `disabled`: compresses only on routes whose `typed_per_filter_config` enables it.
    pub disabled: bool,
    pub library: CompressionLibrary,
    /// `response_direction_config.common_config.min_content_length` (default 30 bytes).
    pub min_content_length: u64,
    /// `response_direction_config.common_config.content_type`: media types (parameters
    /// dropped, lowercased) that are compressed; Envoy's default list when empty.
    pub content_types: Vec<String>,
    /// `response_direction_config.disable_on_etag_header` (default false).
    pub disable_on_etag_header: bool,
    /// `response_direction_config.remove_accept_encoding_header` (default false): drop the
    /// request's `Accept-Encoding` before it goes upstream.
    pub remove_accept_encoding_header: bool,
}

/// `compressor_library.typed_config`: the encoding and its level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressionLibrary {
    /// `envoy.compression.gzip.compressor` (`compression_level`, default best speed... as Envoy:
    /// DEFAULT_COMPRESSION = zlib level 6).
    Gzip { level: u32 },
    /// `envoy.compression.brotli.compressor` (`quality`, default 3).
    Brotli { quality: u32 },
    /// `envoy.compression.zstd.compressor` (`compression_level`, default 3).
    Zstd { level: i32 },
}

impl CompressionLibrary {
    /// The `Content-Encoding` token.
    pub fn encoding(&self) -> &'static str {
        match self {
            CompressionLibrary::Gzip { .. } => "gzip",
            CompressionLibrary::Brotli { .. } => "br",
            CompressionLibrary::Zstd { .. } => "zstd",
        }
    }
}
