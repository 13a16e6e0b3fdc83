//! Envoy-style access logs: the default format and the common `%COMMAND%` operators, written
//! to a file, stdout or stderr. Formatting is pure and unit-tested; sinks are line-buffered.

use std::fs::OpenOptions;
use std::io::{LineWriter, Write};
use std::sync::{Arc, Mutex};

use quickshake_config::{AccessLog, AccessLogSink};

/// Envoy's default access log format.
pub const DEFAULT_FORMAT: &str =
    "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" \
%RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% \
%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" \"%REQ(USER-AGENT)%\" \
\"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\"\n";

/// What one finished request contributes to a log line.
#[derive(Debug, Clone, Default)]
pub struct LogRecord {
    /// RFC 3339 with milliseconds, UTC (Envoy's `%START_TIME%` default).
    pub start_time: String,
    pub method: String,
    pub path: String,
    pub authority: String,
    pub protocol: String,
    pub response_code: u16,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    pub duration_ms: u64,
    pub user_agent: Option<String>,
    pub x_forwarded_for: Option<String>,
    pub request_id: Option<String>,
    pub downstream_remote_address: String,
    pub downstream_local_address: String,
    pub requested_server_name: Option<String>,
    pub tls_version: Option<String>,
    /// The upstream host a forwarded request went to.
    pub upstream_host: Option<String>,
    /// Envoy's response flags (`NR`, `NC`), `-` when none.
    pub response_flags: Option<&'static str>,
    /// Envoy's response code details where quickshake sets them (`cluster_not_found`, ...).
    pub response_code_details: Option<&'static str>,
}

/// Expand a format string for one record. Unknown operators print `-`, as Envoy prints
/// missing values.
pub fn format_line(fmt: &str, r: &LogRecord) -> String {
    let mut out = String::with_capacity(fmt.len() + 64);
    let mut rest = fmt;
    while let Some(start) = rest.find('%') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let Some(end) = after.find('%') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let op = &after[..end];
        if op.is_empty() {
            out.push('%');
        } else {
            out.push_str(&operator(op, r));
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

fn dash(v: Option<&str>) -> String {
    match v {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => "-".to_string(),
    }
}

fn operator(op: &str, r: &LogRecord) -> String {
    match op {
        "START_TIME" => r.start_time.clone(),
        "PROTOCOL" => r.protocol.clone(),
        "RESPONSE_CODE" => r.response_code.to_string(),
        "RESPONSE_FLAGS" => dash(r.response_flags),
        "RESPONSE_CODE_DETAILS" => dash(r.response_code_details),
        "BYTES_RECEIVED" => r.bytes_received.to_string(),
        "BYTES_SENT" => r.bytes_sent.to_string(),
        "DURATION" => r.duration_ms.to_string(),
        "UPSTREAM_HOST" => dash(r.upstream_host.as_deref()),
        "DOWNSTREAM_REMOTE_ADDRESS" => r.downstream_remote_address.clone(),
        "DOWNSTREAM_LOCAL_ADDRESS" => r.downstream_local_address.clone(),
        "REQUESTED_SERVER_NAME" => dash(r.requested_server_name.as_deref()),
        "DOWNSTREAM_TLS_VERSION" => dash(r.tls_version.as_deref()),
        _ => match op.strip_prefix("REQ(").and_then(|s| s.strip_suffix(')')) {
            Some(h) => header(h, r),
            None => "-".into(),
        },
    }
}

fn header(spec: &str, r: &LogRecord) -> String {
    // `A?B` means header A, else header B (`:PATH` style pseudo-headers included).
    for name in spec.split('?') {
        let name = name.trim_start_matches(':').to_ascii_lowercase();
        let value = match name.as_str() {
            "method" => Some(r.method.as_str()),
            "path" => Some(r.path.as_str()),
            "authority" | "host" => Some(r.authority.as_str()),
            "user-agent" => r.user_agent.as_deref(),
            "x-forwarded-for" => r.x_forwarded_for.as_deref(),
            "x-request-id" => r.request_id.as_deref(),
            _ => None,
        };
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            return v.to_string();
        }
    }
    "-".into()
}

/// One configured access log: a format and a sink shared by all workers.
#[derive(Clone)]
pub struct AccessLogger {
    format: Arc<str>,
    sink: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl AccessLogger {
    pub fn open(cfg: &AccessLog) -> std::io::Result<Self> {
        let sink: Box<dyn Write + Send> = match &cfg.sink {
            AccessLogSink::File(path) => Box::new(LineWriter::new(
                OpenOptions::new().create(true).append(true).open(path)?,
            )),
            AccessLogSink::Stdout => Box::new(LineWriter::new(std::io::stdout())),
            AccessLogSink::Stderr => Box::new(std::io::stderr()),
        };
        let mut format = cfg
            .format
            .clone()
            .unwrap_or_else(|| DEFAULT_FORMAT.to_string());
        if !format.ends_with('\n') {
            format.push('\n');
        }
        Ok(AccessLogger {
            format: format.into(),
            sink: Arc::new(Mutex::new(sink)),
        })
    }

    pub fn log(&self, r: &LogRecord) {
        let line = format_line(&self.format, r);
        if let Ok(mut sink) = self.sink.lock() {
            // A full disk must not take the data path down; the line is dropped.
            let _ = sink.write_all(line.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_format_line() {
        let r = LogRecord {
            start_time: "2026-11-22T20:00:00.000Z".into(),
            method: "GET".into(),
            path: "/x".into(),
            authority: "localhost:9000".into(),
            protocol: "HTTP/2".into(),
            response_code: 200,
            bytes_sent: 2,
            duration_ms: 1,
            user_agent: Some("curl/7.88.1".into()),
            ..Default::default()
        };
        assert_eq!(
            format_line(DEFAULT_FORMAT, &r),
            "[2026-11-22T20:00:00.000Z] \"GET /x HTTP/2\" 200 - 0 2 1 - \"-\" \"curl/7.88.1\" \"-\" \"localhost:9000\" \"-\"\n"
        );
    }

    #[test]
    fn odd_formats() {
        let r = LogRecord::default();
        assert_eq!(format_line("100%% %NOPE% %", &r), "100% - %");
        assert_eq!(format_line("%RESPONSE_CODE%", &r), "0");
    }
}
