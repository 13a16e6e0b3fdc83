//! What one finished request contributes to a log line ([`LogRecord`]), and the pure rendering
//! of a parsed format (`quickshake_config::LogFormat`) for it: text lines, or JSON lines where a
//! value that is one command alone keeps its type (numbers stay numbers, absent is `null`), as
//! Envoy 1.39.3 prints them. Absent values print `-` in text (nothing with
//! `omit_empty_values`) and inside longer JSON strings.

use std::borrow::Cow;
use std::time::Duration;

use http::HeaderMap;
use quickshake_config::{FormatCommand, FormatPart, JsonTemplate, LogFormat, Operator};
use serde_json::Value;

use crate::time::{rfc3339, strftime};

/// What one finished request contributes to a log line.
#[derive(Debug, Clone, Default)]
pub struct LogRecord {
    /// When the request started, since the Unix epoch.
    pub start: Duration,
    pub method: String,
    /// The path (and query) as received.
    pub path: String,
    pub authority: String,
    pub protocol: String,
    pub response_code: u16,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    pub duration_ms: u64,
    /// The request's headers (with `x-forwarded-for` and `x-request-id` as sent upstream when
    /// the request was forwarded).
    pub request_headers: HeaderMap,
    pub response_headers: HeaderMap,
    pub downstream_remote_address: String,
    pub downstream_local_address: String,
    pub requested_server_name: Option<String>,
    pub tls_version: Option<String>,
    /// The upstream host a forwarded request went to.
    pub upstream_host: Option<String>,
    /// The local address of the upstream connection.
    pub upstream_local_address: Option<String>,
    /// The cluster the route sent the request to.
    pub upstream_cluster: Option<String>,
    /// The matched route's `name`, when it has one.
    pub route_name: Option<String>,
    /// Envoy's response flags (`NR`, `NC`); none prints `-`.
    pub response_flags: Option<&'static str>,
    /// Envoy's response code details where quickshake sets them (`direct_response`,
    /// `via_upstream`, `route_not_found`, ...).
    pub response_code_details: Option<&'static str>,
}

/// One command's value.
#[derive(Debug, PartialEq)]
enum Val<'a> {
    Str(Cow<'a, str>),
    Num(u64),
    Absent,
}

/// Render one line (ending in `\n`) for `r`.
pub(crate) fn render(format: &LogFormat, omit_empty_values: bool, r: &LogRecord) -> String {
    match format {
        LogFormat::Text(parts) => {
            let mut out = String::with_capacity(128);
            text(parts, omit_empty_values, r, &mut out);
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out
        }
        LogFormat::Json(t) => {
            let mut out = json(t, r).to_string();
            out.push('\n');
            out
        }
    }
}

fn text(parts: &[FormatPart], omit_empty_values: bool, r: &LogRecord, out: &mut String) {
    for p in parts {
        match p {
            FormatPart::Literal(s) => out.push_str(s),
            FormatPart::Command(c) => match value(c, r) {
                Val::Str(s) => out.push_str(&s),
                Val::Num(n) => out.push_str(&n.to_string()),
                Val::Absent if omit_empty_values => {}
                Val::Absent => out.push('-'),
            },
        }
    }
}

fn json(t: &JsonTemplate, r: &LogRecord) -> Value {
    match t {
        JsonTemplate::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), json(v, r)))
                .collect(),
        ),
        JsonTemplate::List(items) => Value::Array(items.iter().map(|v| json(v, r)).collect()),
        JsonTemplate::Constant(v) => v.clone(),
        JsonTemplate::Format(parts) => match parts.as_slice() {
            [FormatPart::Command(c)] => match value(c, r) {
                Val::Str(s) => Value::String(s.into_owned()),
                Val::Num(n) => Value::from(n),
                Val::Absent => Value::Null,
            },
            _ => {
                let mut s = String::new();
                text(parts, false, r, &mut s);
                Value::String(s)
            }
        },
    }
}

fn opt(v: Option<&str>) -> Val<'_> {
    match v {
        Some(s) if !s.is_empty() => Val::Str(Cow::Borrowed(s)),
        _ => Val::Absent,
    }
}

/// `host:port` → (`host`, `port`); IPv6 in brackets is unbracketed as Envoy prints it.
fn split_address(a: &str) -> Option<(&str, u64)> {
    let (host, port) = a.rsplit_once(':')?;
    let port = port.parse().ok()?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    Some((host, port))
}

fn value<'a>(c: &FormatCommand, r: &'a LogRecord) -> Val<'a> {
    use Operator as O;
    let v = match &c.operator {
        O::StartTime(None) => Val::Str(Cow::Owned(rfc3339(
            i64::try_from(r.start.as_secs()).unwrap_or(i64::MAX),
            r.start.subsec_millis(),
        ))),
        O::StartTime(Some(f)) => Val::Str(Cow::Owned(strftime(f, r.start))),
        O::Protocol => opt(Some(r.protocol.as_str())),
        O::ResponseCode => Val::Num(r.response_code.into()),
        O::ResponseCodeDetails => opt(r.response_code_details),
        // Envoy prints `-` for no flags, also in JSON.
        O::ResponseFlags => Val::Str(Cow::Borrowed(r.response_flags.unwrap_or("-"))),
        O::ResponseFlagsLong => Val::Str(Cow::Borrowed(match r.response_flags {
            Some("NR") => "NoRouteFound",
            Some("NC") => "NoClusterFound",
            Some("UH") => "NoHealthyUpstream",
            Some("UT") => "UpstreamRequestTimeout",
            Some("UR") => "UpstreamRemoteReset",
            Some("UF") => "UpstreamConnectionFailure",
            Some("UO") => "UpstreamOverflow",
            Some("UPE") => "UpstreamProtocolError",
            Some("SI") => "StreamIdleTimeout",
            Some("DI") => "DelayInjected",
            Some("FI") => "FaultInjected",
            Some("DI,FI") => "DelayInjected,FaultInjected",
            Some(other) => other,
            None => "-",
        })),
        O::BytesReceived => Val::Num(r.bytes_received),
        O::BytesSent => Val::Num(r.bytes_sent),
        O::Duration => Val::Num(r.duration_ms),
        O::UpstreamHost | O::UpstreamRemoteAddress => opt(r.upstream_host.as_deref()),
        O::UpstreamRemoteAddressWithoutPort => opt(r
            .upstream_host
            .as_deref()
            .and_then(split_address)
            .map(|(h, _)| h)),
        O::UpstreamRemotePort => r
            .upstream_host
            .as_deref()
            .and_then(split_address)
            .map_or(Val::Absent, |(_, p)| Val::Num(p)),
        O::UpstreamLocalAddress => opt(r.upstream_local_address.as_deref()),
        O::UpstreamLocalAddressWithoutPort => opt(r
            .upstream_local_address
            .as_deref()
            .and_then(split_address)
            .map(|(h, _)| h)),
        O::UpstreamLocalPort => r
            .upstream_local_address
            .as_deref()
            .and_then(split_address)
            .map_or(Val::Absent, |(_, p)| Val::Num(p)),
        O::UpstreamCluster => opt(r.upstream_cluster.as_deref()),
        O::RouteName => opt(r.route_name.as_deref()),
        O::DownstreamRemoteAddress => opt(Some(r.downstream_remote_address.as_str())),
        O::DownstreamLocalAddress => opt(Some(r.downstream_local_address.as_str())),
        O::DownstreamRemoteAddressWithoutPort => {
            opt(split_address(&r.downstream_remote_address).map(|(h, _)| h))
        }
        O::DownstreamLocalAddressWithoutPort => {
            opt(split_address(&r.downstream_local_address).map(|(h, _)| h))
        }
        O::DownstreamRemotePort => {
            split_address(&r.downstream_remote_address).map_or(Val::Absent, |(_, p)| Val::Num(p))
        }
        O::DownstreamLocalPort => {
            split_address(&r.downstream_local_address).map_or(Val::Absent, |(_, p)| Val::Num(p))
        }
        O::RequestedServerName => opt(r.requested_server_name.as_deref()),
        O::DownstreamTlsVersion => opt(r.tls_version.as_deref()),
        O::RequestHeader(names) => request_header(names, r),
        O::ResponseHeader(names) => names
            .iter()
            .find_map(|n| header(&r.response_headers, n))
            .map_or(Val::Absent, Val::Str),
        O::Unfilled(_) => Val::Absent,
    };
    match (v, c.max_length) {
        (Val::Str(s), Some(max)) if s.len() > max => {
            let mut end = max;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            Val::Str(Cow::Owned(s[..end].to_owned()))
        }
        (v, _) => v,
    }
}

/// A header's values, several joined with `,` as Envoy joins them; absent when missing or empty.
fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<Cow<'a, str>> {
    let mut values = h.get_all(name).iter();
    let first = values.next()?;
    let mut out = String::from_utf8_lossy(first.as_bytes());
    for v in values {
        let o = out.to_mut();
        o.push(',');
        o.push_str(&String::from_utf8_lossy(v.as_bytes()));
    }
    (!out.is_empty()).then_some(out)
}

fn request_header<'a>(names: &[String], r: &'a LogRecord) -> Val<'a> {
    for name in names {
        let v = match name.as_str() {
            ":method" => opt(Some(r.method.as_str())),
            ":path" => opt(Some(r.path.as_str())),
            ":authority" | "host" => opt(Some(r.authority.as_str())),
            ":scheme" => Val::Str(Cow::Borrowed(if r.tls_version.is_some() {
                "https"
            } else {
                "http"
            })),
            n if n.starts_with(':') => Val::Absent,
            n => header(&r.request_headers, n).map_or(Val::Absent, Val::Str),
        };
        if v != Val::Absent {
            return v;
        }
    }
    Val::Absent
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickshake_config::{parse_format, parse_json_format, DEFAULT_ACCESS_LOG_FORMAT};

    fn record() -> LogRecord {
        let mut request_headers = HeaderMap::new();
        request_headers.insert("user-agent", "curl/7.88.1".parse().unwrap());
        request_headers.append("x-multi", "a".parse().unwrap());
        request_headers.append("x-multi", "b".parse().unwrap());
        LogRecord {
            start: Duration::from_millis(1_795_377_600_005),
            method: "GET".into(),
            path: "/x".into(),
            authority: "localhost:9000".into(),
            protocol: "HTTP/2".into(),
            response_code: 200,
            bytes_sent: 2,
            duration_ms: 1,
            request_headers,
            downstream_remote_address: "[::1]:5555".into(),
            downstream_local_address: "127.0.0.1:9000".into(),
            route_name: Some("r1".into()),
            ..Default::default()
        }
    }

    fn text_line(fmt: &str, omit: bool) -> String {
        render(
            &LogFormat::Text(parse_format(fmt).unwrap()),
            omit,
            &record(),
        )
    }

    #[test]
    fn default_format_line() {
        assert_eq!(
            text_line(DEFAULT_ACCESS_LOG_FORMAT, false),
            "[2026-11-22T20:00:00.005Z] \"GET /x HTTP/2\" 200 - 0 2 1 - \"-\" \"curl/7.88.1\" \"-\" \"localhost:9000\" \"-\"\n"
        );
    }

    #[test]
    fn text_operators() {
        assert_eq!(text_line("100%% %RESPONSE_CODE%", false), "100% 200\n");
        assert_eq!(
            text_line(
                "%REQ(X-MULTI)% %REQ(USER-AGENT):4% %REQ(X-NOPE?:METHOD)% %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% %DOWNSTREAM_REMOTE_PORT% %ROUTE_NAME%",
                false
            ),
            "a,b curl GET ::1 5555 r1\n"
        );
        assert_eq!(
            text_line("[%UPSTREAM_HOST%] [%REQ(X-NOPE)%] %RESPONSE_FLAGS% %CONNECTION_TERMINATION_DETAILS%", false),
            "[-] [-] - -\n"
        );
        assert_eq!(text_line("%START_TIME(%s.%3f)%", false), "1795377600.005\n");
        // omit_empty_values: absent prints nothing; the `-` of "no response flags" stays.
        assert_eq!(
            text_line("[%UPSTREAM_HOST%] [%REQ(X-NOPE)%] %RESPONSE_FLAGS%", true),
            "[] [] -\n"
        );
    }

    #[test]
    fn json_keeps_types_and_order() {
        let cfg: Value = serde_json::json!({
            "zeta": "%RESPONSE_CODE%",
            "alpha": "%REQ(:METHOD)%",
            "mid": {"d": "%DURATION%", "lit": "x", "mixed": "c=%RESPONSE_CODE%", "num": 5, "b": true},
            "missing": "%UPSTREAM_HOST%",
            "two": "%REQ(X-NOPE)%%PROTOCOL%",
            "empty": "",
            "arr": [1, "%BYTES_SENT%"],
            "flags": "%RESPONSE_FLAGS%",
        });
        let t = parse_json_format(&cfg).unwrap();
        let line = render(&LogFormat::Json(t), false, &record());
        assert_eq!(
            line,
            "{\"alpha\":\"GET\",\"arr\":[1,2],\"empty\":\"\",\"flags\":\"-\",\"mid\":{\"b\":true,\"d\":1,\"lit\":\"x\",\"mixed\":\"c=200\",\"num\":5},\"missing\":null,\"two\":\"-HTTP/2\",\"zeta\":200}\n"
        );
    }
}
