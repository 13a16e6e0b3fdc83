//! `access_log[]` of the HTTP connection manager and of a listener: the logger (file, stdout, stderr) and its
//! `SubstitutionFormatString`, with every format string parsed here, once, into
//! [`FormatPart`]s. Errors follow Envoy's wording (`Not supported field in StreamInfo: X`,
//! `Couldn't find valid command at position N`). A `text_format_source.filename` is read now,
//! as Envoy reads it at load.

use std::path::PathBuf;

use serde_json::Value;

use crate::model::{
    AccessLog, AccessLogSink, FormatCommand, FormatPart, JsonTemplate, LogFormat, Operator,
    DEFAULT_ACCESS_LOG_FORMAT,
};
use crate::source::{data_source, read_data_source};
use crate::walk::{join, Node, Obj, Result};

const FILE_LOG_TYPE: &str =
    "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog";
const STDOUT_LOG_TYPE: &str =
    "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog";
const STDERR_LOG_TYPE: &str =
    "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StderrAccessLog";

pub(crate) fn access_log(node: &Node<'_>) -> Result<AccessLog> {
    let o = node.obj(&["name", "typed_config", "filter"])?;
    let filter = o
        .get("filter")
        .map(|f| crate::access_log_filter::access_log_filter(&f))
        .transpose()?;
    let tc = o.req("typed_config")?;
    let name = match o.get("name") {
        Some(n) => Some((n.as_str()?, n)),
        None => None,
    };
    // Pick the logger by name, or by the type URL when the name is absent.
    let kind = match &name {
        Some((n, _)) => *n,
        None => {
            let t = tc.type_url()?;
            match t.rsplit('/').next().unwrap_or(t) {
                "envoy.extensions.access_loggers.file.v3.FileAccessLog" => {
                    "envoy.access_loggers.file"
                }
                "envoy.extensions.access_loggers.stream.v3.StdoutAccessLog" => {
                    "envoy.access_loggers.stdout"
                }
                "envoy.extensions.access_loggers.stream.v3.StderrAccessLog" => {
                    "envoy.access_loggers.stderr"
                }
                _ => t,
            }
        }
    };
    let (sink, t) = match kind {
        "envoy.access_loggers.file" | "envoy.file_access_log" => {
            let t = tc.typed(
                FILE_LOG_TYPE,
                &[
                    "path",
                    "log_format",
                    "format",
                    "json_format",
                    "typed_json_format",
                ],
                &[],
            )?;
            let path = t.req("path")?.non_empty_str()?;
            (AccessLogSink::File(PathBuf::from(path)), t)
        }
        "envoy.access_loggers.stdout" | "envoy.access_loggers.stderr" => {
            let (ty, sink) = if kind.ends_with("stdout") {
                (STDOUT_LOG_TYPE, AccessLogSink::Stdout)
            } else {
                (STDERR_LOG_TYPE, AccessLogSink::Stderr)
            };
            (sink, tc.typed(ty, &["log_format"], &[])?)
        }
        other => {
            let msg = format!(
                "unknown access logger \"{other}\" (supported: envoy.access_loggers.file, \
                 envoy.access_loggers.stdout, envoy.access_loggers.stderr)"
            );
            return Err(match name {
                Some((_, n)) => n.err(msg),
                None => crate::ConfigError::invalid(tc.path.clone() + ".@type", msg),
            });
        }
    };
    let (format, omit_empty_values) = log_format(&t)?;
    Ok(AccessLog {
        sink,
        format,
        omit_empty_values,
        filter,
    })
}

/// `log_format` (a `SubstitutionFormatString`) or one of `FileAccessLog`'s deprecated
/// `format`, `json_format`, `typed_json_format` (at most one of the four, as Envoy's oneof).
fn log_format(t: &Obj<'_>) -> Result<(LogFormat, bool)> {
    const ONEOF: [&str; 4] = ["log_format", "format", "json_format", "typed_json_format"];
    let present = t.present(&ONEOF);
    if present.len() > 1 {
        return Err(t.req(present[1])?.err(format!(
            "only one of format, json_format, typed_json_format, log_format may be set (got {})",
            present.join(", ")
        )));
    }
    match present.first().copied() {
        None => Ok((LogFormat::Text(default_parts()), false)),
        Some("format") => Ok((LogFormat::Text(text(&t.req("format")?)?), false)),
        Some(legacy @ ("json_format" | "typed_json_format")) => {
            Ok((LogFormat::Json(json_object(&t.req(legacy)?)?), false))
        }
        Some(_) => substitution_format_string(&t.req("log_format")?),
    }
}

fn default_parts() -> Vec<FormatPart> {
    // The default format is a constant known to parse.
    parse_format(DEFAULT_ACCESS_LOG_FORMAT).unwrap_or_default()
}

/// Envoy's `SubstitutionFormatString`.
fn substitution_format_string(lf: &Node<'_>) -> Result<(LogFormat, bool)> {
    let lo = lf.obj_with(
        &[
            "text_format_source",
            "text_format",
            "json_format",
            "omit_empty_values",
            "content_type",
            "json_format_options",
        ],
        &["formatters"],
    )?;
    // `content_type` matters to local replies only; an access log accepts and ignores it.
    lo.opt_str("content_type")?;
    if let Some(opts) = lo.get("json_format_options") {
        // Envoy 1.39.3 prints keys sorted whatever `sort_properties` says.
        opts.obj(&["sort_properties"])?
            .opt_bool("sort_properties")?;
    }
    let omit = lo.bool_or_false("omit_empty_values")?;
    const ONEOF: [&str; 3] = ["text_format", "text_format_source", "json_format"];
    let format = match lo.present(&ONEOF).as_slice() {
        [] => return Err(lf.err("needs one of text_format, text_format_source, json_format")),
        ["text_format"] => LogFormat::Text(text(&lo.req("text_format")?)?),
        ["text_format_source"] => {
            let src = lo.req("text_format_source")?;
            let ds = data_source(&src)?;
            let bytes = read_data_source(&ds, &src.path)?;
            let s = String::from_utf8(bytes).map_err(|_| src.err("format is not UTF-8"))?;
            LogFormat::Text(parse_format(&s).map_err(|e| src.err(e.to_string()))?)
        }
        ["json_format"] => LogFormat::Json(json_object(&lo.req("json_format")?)?),
        many => {
            return Err(lf.err(format!(
                "only one of text_format, text_format_source, json_format may be set (got {})",
                many.join(", ")
            )))
        }
    };
    Ok((format, omit))
}

fn text(node: &Node<'_>) -> Result<Vec<FormatPart>> {
    parse_format(node.as_str()?).map_err(|e| node.err(e.to_string()))
}

/// Parse a `json_format` Struct given on its own (a mapping; values nest).
pub fn parse_json_format(v: &Value) -> std::result::Result<JsonTemplate, crate::ConfigError> {
    json_object(&Node::new(v, "json_format"))
}

/// A `json_format` Struct: must be a mapping; values nest.
fn json_object(node: &Node<'_>) -> Result<JsonTemplate> {
    if !node.v.is_object() {
        return Err(node.err("expected a mapping"));
    }
    json_template(node)
}

fn json_template(node: &Node<'_>) -> Result<JsonTemplate> {
    Ok(match node.v {
        Value::Object(map) => JsonTemplate::Object(
            // serde_json's map iterates in key order: Envoy 1.39.3 prints keys sorted.
            map.iter()
                .map(|(k, v)| {
                    Ok((
                        k.clone(),
                        json_template(&Node::new(v, join(&node.path, k)))?,
                    ))
                })
                .collect::<Result<_>>()?,
        ),
        Value::Array(items) => JsonTemplate::List(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| json_template(&Node::new(v, format!("{}[{i}]", node.path))))
                .collect::<Result<_>>()?,
        ),
        Value::String(s) => {
            JsonTemplate::Format(parse_format(s).map_err(|e| node.err(e.to_string()))?)
        }
        other => JsonTemplate::Constant(other.clone()),
    })
}

/// Why a format string does not parse; displayed as Envoy's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error(
        "Incorrect configuration: {format}. Couldn't find valid command at position {position}"
    )]
    NoValidCommand { format: String, position: usize },
    #[error("{0} requires parameters")]
    MissingParameters(&'static str),
    #[error("More than 1 alternative header specified in token")]
    TooManyAlternatives,
    #[error("Not supported field in StreamInfo: {0}")]
    Unsupported(String),
}

/// Parse an Envoy format string into literal and command parts: `%COMMAND%`,
/// `%COMMAND(args)%`, `%COMMAND(args):N%`; `%%` is a literal `%`. The error is Envoy's message.
pub fn parse_format(s: &str) -> std::result::Result<Vec<FormatPart>, FormatError> {
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut rest = s;
    while let Some(at) = rest.find('%') {
        literal.push_str(&rest[..at]);
        let pos = s.len() - rest.len() + at;
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('%') {
            literal.push('%');
            rest = tail;
            continue;
        }
        let bad = || FormatError::NoValidCommand {
            format: s.to_owned(),
            position: pos,
        };
        let name_len = after
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(after.len());
        let name = &after[..name_len];
        if !name.starts_with(|c: char| c.is_ascii_uppercase()) {
            return Err(bad());
        }
        let mut tail = &after[name_len..];
        let mut args = None;
        if let Some(t) = tail.strip_prefix('(') {
            let close = t.find(')').ok_or_else(bad)?;
            args = Some(&t[..close]);
            tail = &t[close + 1..];
        }
        let mut max_length = None;
        if let Some(t) = tail.strip_prefix(':') {
            let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
            if digits == 0 {
                return Err(bad());
            }
            max_length = Some(t[..digits].parse::<usize>().map_err(|_| bad())?);
            tail = &t[digits..];
        }
        let Some(t) = tail.strip_prefix('%') else {
            return Err(bad());
        };
        if !literal.is_empty() {
            parts.push(FormatPart::Literal(std::mem::take(&mut literal)));
        }
        parts.push(FormatPart::Command(FormatCommand {
            operator: operator(name, args)?,
            max_length,
        }));
        rest = t;
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        parts.push(FormatPart::Literal(literal));
    }
    Ok(parts)
}

/// Envoy commands quickshake accepts but has no value for: they print as absent.
const UNFILLED: &[&str] = &[
    "UPSTREAM_TRANSPORT_FAILURE_REASON",
    "UPSTREAM_REQUEST_ATTEMPT_COUNT",
    "UPSTREAM_CONNECTION_ID",
    "UPSTREAM_CONNECTION_POOL_READY_DURATION",
    "UPSTREAM_WIRE_BYTES_SENT",
    "UPSTREAM_WIRE_BYTES_RECEIVED",
    "UPSTREAM_HEADER_BYTES_SENT",
    "UPSTREAM_HEADER_BYTES_RECEIVED",
    "UPSTREAM_PROTOCOL",
    "UPSTREAM_FILTER_STATE",
    "UPSTREAM_METADATA",
    "UPSTREAM_TLS_VERSION",
    "UPSTREAM_TLS_CIPHER",
    "UPSTREAM_TLS_SESSION_ID",
    "UPSTREAM_PEER_SUBJECT",
    "UPSTREAM_PEER_ISSUER",
    "UPSTREAM_PEER_CERT",
    "UPSTREAM_PEER_URI_SAN",
    "UPSTREAM_PEER_DNS_SAN",
    "UPSTREAM_LOCAL_URI_SAN",
    "UPSTREAM_LOCAL_DNS_SAN",
    "UPSTREAM_LOCAL_SUBJECT",
    "CONNECTION_TERMINATION_DETAILS",
    "CONNECTION_ID",
    "STREAM_ID",
    "REQUEST_DURATION",
    "REQUEST_TX_DURATION",
    "RESPONSE_DURATION",
    "RESPONSE_TX_DURATION",
    "DOWNSTREAM_HANDSHAKE_DURATION",
    "ROUNDTRIP_DURATION",
    "COMMON_DURATION",
    "DOWNSTREAM_WIRE_BYTES_SENT",
    "DOWNSTREAM_WIRE_BYTES_RECEIVED",
    "DOWNSTREAM_HEADER_BYTES_SENT",
    "DOWNSTREAM_HEADER_BYTES_RECEIVED",
    "REQUEST_HEADERS_BYTES",
    "RESPONSE_HEADERS_BYTES",
    "RESPONSE_TRAILERS_BYTES",
    "DOWNSTREAM_DIRECT_REMOTE_ADDRESS",
    "DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT",
    "DOWNSTREAM_DIRECT_REMOTE_PORT",
    "DOWNSTREAM_DIRECT_LOCAL_ADDRESS",
    "DOWNSTREAM_DIRECT_LOCAL_ADDRESS_WITHOUT_PORT",
    "DOWNSTREAM_DIRECT_LOCAL_PORT",
    "DOWNSTREAM_LOCAL_ADDRESS_ENDPOINT_ID",
    "DOWNSTREAM_TRANSPORT_FAILURE_REASON",
    "DOWNSTREAM_TLS_CIPHER",
    "DOWNSTREAM_TLS_SESSION_ID",
    "DOWNSTREAM_PEER_SUBJECT",
    "DOWNSTREAM_PEER_ISSUER",
    "DOWNSTREAM_PEER_SERIAL",
    "DOWNSTREAM_PEER_CERT",
    "DOWNSTREAM_PEER_CERT_V_START",
    "DOWNSTREAM_PEER_CERT_V_END",
    "DOWNSTREAM_PEER_FINGERPRINT_256",
    "DOWNSTREAM_PEER_FINGERPRINT_1",
    "DOWNSTREAM_PEER_URI_SAN",
    "DOWNSTREAM_PEER_DNS_SAN",
    "DOWNSTREAM_PEER_IP_SAN",
    "DOWNSTREAM_PEER_EMAIL_SAN",
    "DOWNSTREAM_PEER_OTHERNAME_SAN",
    "DOWNSTREAM_LOCAL_URI_SAN",
    "DOWNSTREAM_LOCAL_DNS_SAN",
    "DOWNSTREAM_LOCAL_IP_SAN",
    "DOWNSTREAM_LOCAL_SUBJECT",
    "DOWNSTREAM_LOCAL_EMAIL_SAN",
    "DOWNSTREAM_LOCAL_OTHERNAME_SAN",
    "VIRTUAL_CLUSTER_NAME",
    "LOCAL_REPLY_BODY",
    "HOSTNAME",
    "FILTER_CHAIN_NAME",
    "UNIQUE_ID",
    "TRACE_ID",
    "ACCESS_LOG_TYPE",
    "DYNAMIC_METADATA",
    "CLUSTER_METADATA",
    "FILTER_STATE",
    "TRAILER",
    "ENVIRONMENT",
    "UPSTREAM_PEER_CERT_V_START",
    "UPSTREAM_PEER_CERT_V_END",
];

fn operator(name: &str, args: Option<&str>) -> std::result::Result<Operator, FormatError> {
    use Operator as O;
    let headers = |kind: &'static str| -> std::result::Result<Vec<String>, FormatError> {
        let spec = args.filter(|a| !a.is_empty());
        let Some(spec) = spec else {
            return Err(FormatError::MissingParameters(kind));
        };
        let names: Vec<String> = spec.split('?').map(str::to_ascii_lowercase).collect();
        if names.len() > 2 {
            return Err(FormatError::TooManyAlternatives);
        }
        Ok(names)
    };
    Ok(match name {
        "START_TIME" => O::StartTime(args.filter(|a| !a.is_empty()).map(str::to_owned)),
        "PROTOCOL" => O::Protocol,
        "RESPONSE_CODE" => O::ResponseCode,
        "RESPONSE_CODE_DETAILS" => O::ResponseCodeDetails,
        "RESPONSE_FLAGS" => O::ResponseFlags,
        "RESPONSE_FLAGS_LONG" => O::ResponseFlagsLong,
        "BYTES_RECEIVED" => O::BytesReceived,
        "BYTES_SENT" => O::BytesSent,
        "DURATION" => O::Duration,
        "UPSTREAM_HOST" => O::UpstreamHost,
        "UPSTREAM_REMOTE_ADDRESS" => O::UpstreamRemoteAddress,
        "UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT" => O::UpstreamRemoteAddressWithoutPort,
        "UPSTREAM_REMOTE_PORT" => O::UpstreamRemotePort,
        "UPSTREAM_LOCAL_ADDRESS" => O::UpstreamLocalAddress,
        "UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT" => O::UpstreamLocalAddressWithoutPort,
        "UPSTREAM_LOCAL_PORT" => O::UpstreamLocalPort,
        // quickshake shows the cluster's name for both (it does not apply `alt_stat_name`).
        "UPSTREAM_CLUSTER" | "UPSTREAM_CLUSTER_RAW" => O::UpstreamCluster,
        "ROUTE_NAME" => O::RouteName,
        "DOWNSTREAM_REMOTE_ADDRESS" => O::DownstreamRemoteAddress,
        "DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT" => O::DownstreamRemoteAddressWithoutPort,
        "DOWNSTREAM_REMOTE_PORT" => O::DownstreamRemotePort,
        "DOWNSTREAM_LOCAL_ADDRESS" => O::DownstreamLocalAddress,
        "DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT" => O::DownstreamLocalAddressWithoutPort,
        "DOWNSTREAM_LOCAL_PORT" => O::DownstreamLocalPort,
        "REQUESTED_SERVER_NAME" => O::RequestedServerName,
        "DOWNSTREAM_TLS_VERSION" => O::DownstreamTlsVersion,
        "REQ" => O::RequestHeader(headers("REQ")?),
        "RESP" => O::ResponseHeader(headers("RESP")?),
        other if UNFILLED.contains(&other) => O::Unfilled(other.to_owned()),
        other => return Err(FormatError::Unsupported(other.to_owned())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(operator: Operator) -> FormatPart {
        FormatPart::Command(FormatCommand {
            operator,
            max_length: None,
        })
    }

    #[test]
    fn parses_literals_commands_and_arguments() {
        let parts =
            parse_format("a %RESPONSE_CODE% 100%% %REQ(USER-AGENT?:AUTHORITY):3%\n").unwrap();
        assert_eq!(
            parts,
            vec![
                FormatPart::Literal("a ".into()),
                cmd(Operator::ResponseCode),
                FormatPart::Literal(" 100% ".into()),
                FormatPart::Command(FormatCommand {
                    operator: Operator::RequestHeader(vec![
                        "user-agent".into(),
                        ":authority".into()
                    ]),
                    max_length: Some(3),
                }),
                FormatPart::Literal("\n".into()),
            ]
        );
        assert_eq!(parse_format("").unwrap(), vec![]);
        assert_eq!(
            parse_format("%FILTER_STATE(x:PLAIN)%").unwrap(),
            vec![cmd(Operator::Unfilled("FILTER_STATE".into()))]
        );
        assert!(!default_parts().is_empty());
    }

    #[test]
    fn rejects_what_envoy_rejects() {
        assert_eq!(
            parse_format("%NOPE%").unwrap_err().to_string(),
            "Not supported field in StreamInfo: NOPE"
        );
        assert_eq!(
            parse_format("a % b").unwrap_err().to_string(),
            "Incorrect configuration: a % b. Couldn't find valid command at position 2"
        );
        assert_eq!(
            parse_format("%REQ(%").unwrap_err().to_string(),
            "Incorrect configuration: %REQ(%. Couldn't find valid command at position 0"
        );
        assert_eq!(
            parse_format("%REQ()%").unwrap_err().to_string(),
            "REQ requires parameters"
        );
        assert!(parse_format("%RESPONSE_CODE").is_err());
        assert_eq!(
            parse_format("%START_TIME(%s.%3f)%").unwrap(),
            vec![cmd(Operator::StartTime(Some("%s.%3f".into())))]
        );
    }
}
