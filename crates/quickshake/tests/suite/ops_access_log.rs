//! Structured access logs side by side with Envoy 1.39.3: the same bootstrap (a listener with
//! a direct response, one proxying to an upstream; a `json_format` log with nested fields and
//! typed values, a `text_format_source.filename` log, an `omit_empty_values` text log and an
//! `omit_empty_values` JSON log) run on quickshake and on Envoy, the same requests sent to both,
//! and the lines compared: JSON keys, value types and the deterministic values; text lines up to
//! the time-dependent fields.

use std::path::Path;

use serde_json::Value;

use crate::support::envoy::Envoy;
use crate::support::upstreams::{cluster, HttpOpts, Upstream};
use crate::support::{self, curl, eventually, free_port, Gateway};

/// The text format read from a file: everything before ` | ` is deterministic.
const TEXT_FORMAT: &str = "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL% \
%RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %ROUTE_NAME% %UPSTREAM_CLUSTER% \
%UPSTREAM_HOST% \"%REQ(:AUTHORITY)%\" \"%REQ(X-CUSTOM)%\" %RESPONSE_CODE_DETAILS% \
%REQ(USER-AGENT):4% 100%% %START_TIME(%Y %Z %Ef)% | [%START_TIME%] %DURATION% %DOWNSTREAM_REMOTE_ADDRESS%\n";

fn access_logs(dir: &Path) -> String {
    let d = dir.display();
    format!(
        r#"          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: {d}/json.log
              log_format:
                json_format:
                  start_time: "%START_TIME%"
                  method: "%REQ(:METHOD)%"
                  path: "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%"
                  protocol: "%PROTOCOL%"
                  response_code: "%RESPONSE_CODE%"
                  response_flags: "%RESPONSE_FLAGS%"
                  response_code_details: "%RESPONSE_CODE_DETAILS%"
                  bytes_received: "%BYTES_RECEIVED%"
                  bytes_sent: "%BYTES_SENT%"
                  duration: "%DURATION%"
                  authority: "%REQ(:AUTHORITY)%"
                  user_agent: "%REQ(USER-AGENT)%"
                  x_custom: "%REQ(X-CUSTOM)%"
                  route_name: "%ROUTE_NAME%"
                  requested_server_name: "%REQUESTED_SERVER_NAME%"
                  connection_termination_details: "%CONNECTION_TERMINATION_DETAILS%"
                  upstream:
                    cluster: "%UPSTREAM_CLUSTER%"
                    host: "%UPSTREAM_HOST%"
                    local_address: "%UPSTREAM_LOCAL_ADDRESS%"
                    local_ip: "%UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT%"
                    remote_ip: "%UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%"
                    remote_port: "%UPSTREAM_REMOTE_PORT%"
                    transport_failure_reason: "%UPSTREAM_TRANSPORT_FAILURE_REASON%"
                  downstream:
                    remote_address: "%DOWNSTREAM_REMOTE_ADDRESS%"
                    local_address: "%DOWNSTREAM_LOCAL_ADDRESS%"
                    remote_port: "%DOWNSTREAM_REMOTE_PORT%"
                  summary: "%REQ(:METHOD)% %RESPONSE_CODE% %REQ(X-CUSTOM)%"
                  constant: 7
                  flag: true
                  tags: ["edge", "%PROTOCOL%", "%RESPONSE_CODE%"]
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: {d}/text.log
              log_format:
                text_format_source: {{ filename: {d}/format.txt }}
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: {d}/omit.log
              log_format:
                omit_empty_values: true
                text_format_source:
                  inline_string: "[%UPSTREAM_HOST%] [%REQ(X-CUSTOM)%] [%ROUTE_NAME%] %RESPONSE_CODE% %RESPONSE_FLAGS%\n"
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: {d}/omit.json.log
              log_format:
                omit_empty_values: true
                content_type: application/json
                json_format: {{ code: "%RESPONSE_CODE%", host: "%UPSTREAM_HOST%", custom: "%REQ(X-CUSTOM)%", empty: "" }}
"#
    )
}

fn listener(name: &str, port: u16, logs: &str, route: &str) -> String {
    format!(
        r#"  - name: {name}
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {port} }} }}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: {name}
{logs}          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
{route}          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
"#
    )
}

/// Two listeners (`direct`: `/direct` answers 200 "hello", other paths 404; `proxy`: `/` to
/// cluster `backend`), logging into `dir`.
fn bootstrap(ports: (u16, u16), admin: &str, dir: &Path, upstream: u16) -> String {
    let logs = access_logs(dir);
    let direct = "              - name: direct_route\n                match: { prefix: \"/direct\" }\n                direct_response: { status: 200, body: { inline_string: \"hello\" } }\n";
    let proxied = "              - name: proxied_route\n                match: { prefix: \"/\" }\n                route: { cluster: backend }\n";
    format!(
        "static_resources:\n  listeners:\n{}{}  clusters:\n{}\nadmin:\n  address: {{ socket_address: {{ address: 127.0.0.1, port_value: {admin} }} }}\n",
        listener("direct", ports.0, &logs, direct),
        listener("proxy", ports.1, &logs, proxied),
        cluster("backend", "STATIC", "127.0.0.1", upstream, ""),
    )
}

/// The same three requests: a direct response, a proxied POST with a body and a custom
/// header, a path no route matches.
fn send(ports: (u16, u16)) {
    let host = ["-H", "host: example.com"];
    let ok = |args: &[&str]| {
        let out = curl(args);
        assert!(out.status.success(), "{out:?}");
    };
    ok(&[
        host[0],
        host[1],
        &format!("http://127.0.0.1:{}/direct?x=1", ports.0),
    ]);
    ok(&[
        host[0],
        host[1],
        "-H",
        "x-custom: abc",
        "--data-binary",
        "hello world",
        &format!("http://127.0.0.1:{}/up/echo", ports.1),
    ]);
    ok(&[
        host[0],
        host[1],
        &format!("http://127.0.0.1:{}/nowhere", ports.0),
    ]);
}

fn lines(dir: &Path, file: &str, n: usize) -> Vec<String> {
    let path = dir.join(file);
    let read = || {
        std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    eventually(&format!("{n} lines in {}", path.display()), || {
        read().len() >= n
    });
    read()
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// Values that depend on time or ports.
const VOLATILE: &[&str] = &[
    "start_time",
    "duration",
    "downstream.remote_address",
    "downstream.local_address",
    "downstream.remote_port",
    "upstream.local_address",
];

/// Compare one JSON line of each: same keys (in the same order), same value types, same values
/// except the volatile ones; `bytes_sent` too unless the request was proxied (the echo body
/// shows Envoy's own request headers).
fn compare(qs: &Value, envoy: &Value, at: &str, proxied: bool, diffs: &mut Vec<String>) {
    match (qs, envoy) {
        (Value::Object(a), Value::Object(b)) => {
            let ka: Vec<&String> = a.keys().collect();
            let kb: Vec<&String> = b.keys().collect();
            if ka != kb {
                diffs.push(format!("{at}: keys {ka:?} vs Envoy's {kb:?}"));
                return;
            }
            for (k, v) in a {
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                compare(v, &b[k], &path, proxied, diffs);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                compare(x, y, &format!("{at}[{i}]"), proxied, diffs);
            }
        }
        (a, b) => {
            if kind(a) != kind(b) {
                diffs.push(format!(
                    "{at}: {a} ({}) vs Envoy's {b} ({})",
                    kind(a),
                    kind(b)
                ));
            } else {
                let volatile = VOLATILE.contains(&at) || (proxied && at == "bytes_sent");
                if !volatile && a != b {
                    diffs.push(format!("{at}: {a} vs Envoy's {b}"));
                }
            }
        }
    }
}

#[test]
fn json_and_text_logs_match_envoy() {
    let _lock = support::shared();
    let work = tempfile::tempdir().expect("tempdir");
    let (qs_dir, envoy_dir) = (work.path().join("qs"), work.path().join("envoy"));
    for d in [&qs_dir, &envoy_dir] {
        std::fs::create_dir_all(d).expect("mkdir");
        std::fs::write(d.join("format.txt"), TEXT_FORMAT).expect("write format");
    }
    let upstream = Upstream::http(HttpOpts::default());
    let qs_ports = (free_port(), free_port());
    let envoy_ports = (free_port(), free_port());
    let _gw = Gateway::start(
        &bootstrap(qs_ports, "{{ADMIN}}", &qs_dir, upstream.port),
        &["--concurrency", "1"],
    );
    let envoy_admin = free_port();
    let _envoy = Envoy::start_with_args(
        &bootstrap(
            envoy_ports,
            &envoy_admin.to_string(),
            &envoy_dir,
            upstream.port,
        ),
        envoy_admin,
        &["--file-flush-interval-msec", "50"],
    );
    send(qs_ports);
    send(envoy_ports);

    let proxied = [false, true, false];
    let (qs_json, envoy_json) = (
        lines(&qs_dir, "json.log", 3),
        lines(&envoy_dir, "json.log", 3),
    );
    let mut diffs = Vec::new();
    for (i, (q, e)) in qs_json.iter().zip(&envoy_json).enumerate() {
        let q: Value = serde_json::from_str(q).unwrap_or_else(|err| panic!("{err}: {q}"));
        let e: Value = serde_json::from_str(e).unwrap_or_else(|err| panic!("{err}: {e}"));
        // Keys sorted at every level, as Envoy prints them (serde_json's map is sorted).
        assert_eq!(
            qs_json[i],
            q.to_string(),
            "quickshake's keys are not sorted"
        );
        assert_eq!(envoy_json[i], e.to_string(), "Envoy's keys are not sorted");
        compare(&q, &e, "", proxied[i], &mut diffs);
    }
    assert!(
        diffs.is_empty(),
        "JSON lines differ:\n{}\nquickshake:\n{}\nEnvoy:\n{}",
        diffs.join("\n"),
        qs_json.join("\n"),
        envoy_json.join("\n")
    );
    // Spot checks of what both print.
    let first: Value = serde_json::from_str(&qs_json[0]).expect("json");
    assert_eq!(first["response_code"], 200);
    assert_eq!(first["path"], "/direct?x=1");
    assert_eq!(first["upstream"]["host"], Value::Null);
    let second: Value = serde_json::from_str(&qs_json[1]).expect("json");
    assert_eq!(second["bytes_received"], 11);
    assert_eq!(second["upstream"]["cluster"], "backend");
    let local = second["upstream"]["local_address"]
        .as_str()
        .expect("upstream local address");
    assert!(local.starts_with("127.0.0.1:"), "{local}");

    let deterministic = |l: &String| l.split(" | ").next().unwrap_or_default().to_owned();
    let qs_text: Vec<String> = lines(&qs_dir, "text.log", 3)
        .iter()
        .map(deterministic)
        .collect();
    let envoy_text: Vec<String> = lines(&envoy_dir, "text.log", 3)
        .iter()
        .map(deterministic)
        .collect();
    assert_eq!(qs_text, envoy_text);
    assert_eq!(
        lines(&qs_dir, "omit.log", 3),
        lines(&envoy_dir, "omit.log", 3)
    );
    assert_eq!(
        lines(&qs_dir, "omit.json.log", 3),
        lines(&envoy_dir, "omit.json.log", 3)
    );
}
