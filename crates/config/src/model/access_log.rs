//! Access logs: where a log goes and its format, parsed once at load into literal and command
//! parts (Envoy's `SubstitutionFormatString`); the server renders them per request.

use std::path::PathBuf;

/// Envoy's default access log format.
pub const DEFAULT_ACCESS_LOG_FORMAT: &str =
    "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" \
%RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% \
%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" \"%REQ(USER-AGENT)%\" \
\"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\"\n";

#[derive(Debug, Clone)]
pub struct AccessLog {
    pub sink: AccessLogSink,
    pub format: LogFormat,
    /// `log_format.omit_empty_values`: in a text format an absent value prints nothing instead
    /// of `-`. Envoy 1.39.3's JSON formatter ignores it (absent values stay `null`), and so does
    /// quickshake.
    pub omit_empty_values: bool,
    /// `filter`: only what passes is logged.
    pub filter: Option<AccessLogFilter>,
}

/// An access log's `filter` (Envoy's `AccessLogFilter`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLogFilter {
    /// `response_flag_filter.flags`: a line with any of these response flags passes; with none
    /// listed, a line with any response flag.
    ResponseFlag(Vec<String>),
}

impl AccessLogFilter {
    /// Whether a line whose response flags are `flags` (Envoy's short names, comma-separated;
    /// `None`: no flag) is logged.
    pub fn passes(&self, flags: Option<&str>) -> bool {
        match self {
            AccessLogFilter::ResponseFlag(wanted) => {
                let mut set = flags.into_iter().flat_map(|f| f.split(','));
                if wanted.is_empty() {
                    set.any(|f| !f.is_empty())
                } else {
                    set.any(|f| wanted.iter().any(|w| w == f))
                }
            }
        }
    }
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

/// A log line's format.
#[derive(Debug, Clone, PartialEq)]
pub enum LogFormat {
    /// `text_format_source` (inline or from a file), `text_format`, the legacy `format`, or
    /// Envoy's default: one line per request. quickshake ends a line without `\n` with one.
    Text(Vec<FormatPart>),
    /// `json_format` (or the legacy `json_format` / `typed_json_format` of `FileAccessLog`): one
    /// JSON object per line, keys sorted as Envoy 1.39.3 prints them.
    Json(JsonTemplate),
}

/// A `json_format` value: nested objects and lists are kept, strings are format strings, other
/// values are printed as configured.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonTemplate {
    /// Keys in sorted order.
    Object(Vec<(String, JsonTemplate)>),
    List(Vec<JsonTemplate>),
    /// A number, boolean or null, printed as it is.
    Constant(serde_json::Value),
    /// A string: one command alone keeps its value's type (`%RESPONSE_CODE%` is a number, an
    /// absent value is `null`); anything else is a string.
    Format(Vec<FormatPart>),
}

/// One piece of a format string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatPart {
    Literal(String),
    Command(FormatCommand),
}

/// `%COMMAND(args):max_length%`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatCommand {
    pub operator: Operator,
    /// `:N`: strings are cut to N bytes (at a character boundary).
    pub max_length: Option<usize>,
}

/// The commands quickshake fills. Envoy's other commands parse to [`Operator::Unfilled`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operator {
    /// `START_TIME`, or `START_TIME(format)` (strftime with Envoy's `%s`, `%f`, `%Nf`).
    StartTime(Option<String>),
    Protocol,
    ResponseCode,
    ResponseCodeDetails,
    ResponseFlags,
    ResponseFlagsLong,
    BytesReceived,
    BytesSent,
    Duration,
    UpstreamHost,
    UpstreamRemoteAddress,
    UpstreamRemoteAddressWithoutPort,
    UpstreamRemotePort,
    UpstreamLocalAddress,
    UpstreamLocalAddressWithoutPort,
    UpstreamLocalPort,
    UpstreamCluster,
    RouteName,
    DownstreamRemoteAddress,
    DownstreamRemoteAddressWithoutPort,
    DownstreamRemotePort,
    DownstreamLocalAddress,
    DownstreamLocalAddressWithoutPort,
    DownstreamLocalPort,
    RequestedServerName,
    DownstreamTlsVersion,
    /// `REQ(A?B)`: lowercased header names, the second tried when the first is absent.
    RequestHeader(Vec<String>),
    /// `RESP(A?B)`.
    ResponseHeader(Vec<String>),
    /// A command Envoy knows that quickshake does not fill: always absent (`-`, JSON `null`).
    Unfilled(String),
}
