//! Launched as Envoy is launched: the command lines Envoy Gateway and Istio's pilot-agent give
//! Envoy start quickshake too, with Envoy's meaning where it applies (`--config-yaml` alone or
//! merged into `-c`'s bootstrap, the `--service-*` node flags), the rest accepted and shown in
//! `/server_info`, and bad values refused at once with a message naming the flag.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support;
use crate::support::*;

mod control_planes;

/// One TLS listener on `{{PORT}}` answering 200, admin on `{{ADMIN}}`.
fn bootstrap() -> String {
    direct_response_config(&plain_cert("rsa2048"), "", "")
}

fn server_info(gw: &Gateway) -> Value {
    let (code, body) = gw.admin_get("/server_info");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).expect("server_info JSON")
}

/// curl's status code and body for `https://localhost:PORT/`.
fn get(port: u16) -> (String, String) {
    let out = curl(&[
        "--cacert",
        &cert("rsa2048.cert.pem"),
        "-w",
        "\n%{http_code}",
        &format!("https://localhost:{port}/"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", text.as_str()));
    (code.to_owned(), body.to_owned())
}

/// Envoy Gateway: `envoy --service-cluster X --service-node Y --config-yaml Z --log-level L
/// --cpuset-threads --concurrency N --drain-time-s S`, the bootstrap only in the string.
#[test]
fn envoy_gateway_launch_line() {
    let _lock = support::shared();
    let yaml = format!(
        "node: {{ id: bootstrap-node, cluster: bootstrap-cluster, locality: {{ zone: bootstrap-zone }} }}\n{}",
        bootstrap()
    );
    let mut gw = Gateway::start_argv(
        &[],
        &[
            "--service-cluster",
            "envoy-gateway-system/eg",
            "--service-node",
            "envoy-default-eg-5f6d8-abcde",
            "--config-yaml",
            &yaml,
            "--log-level",
            "info",
            "--cpuset-threads",
            "--concurrency",
            "1",
            "--drain-time-s",
            "1",
        ],
    );
    curl_ok(&gw);
    let info = server_info(&gw);
    // The flags win over the bootstrap's node; the zone no flag names stays the bootstrap's.
    assert_eq!(info["node"]["id"], "envoy-default-eg-5f6d8-abcde", "{info}");
    assert_eq!(info["node"]["cluster"], "envoy-gateway-system/eg", "{info}");
    assert_eq!(info["node"]["locality"]["zone"], "bootstrap-zone", "{info}");
    let o = &info["command_line_options"];
    assert_eq!(o["service_cluster"], "envoy-gateway-system/eg", "{o}");
    assert_eq!(o["service_node"], "envoy-default-eg-5f6d8-abcde", "{o}");
    assert_eq!(o["service_zone"], "", "{o}");
    assert_eq!(o["config_path"], "", "{o}");
    assert_eq!(
        o["config_yaml"],
        render(&yaml, gw.port, gw.port2, gw.admin, gw.dir.path()),
        "{o}"
    );
    assert_eq!(o["log_level"], "info", "{o}");
    assert_eq!(o["cpuset_threads"], true, "{o}");
    assert_eq!(o["concurrency"], 1, "{o}");
    assert_eq!(o["drain_time"], "1s", "{o}");
    assert_eq!(o["drain_strategy"], "Gradual", "{o}");
    // The string is the bootstrap `/config_dump` shows.
    let (_, dump) = gw.admin_get("/config_dump");
    assert!(dump.contains("bootstrap-node"), "{dump}");
    gw.assert_terminates_cleanly_within(Duration::from_secs(6));
}

/// What pilot-agent adds to Envoy's command line, with the node flags.
fn pilot_agent_flags() -> Vec<&'static str> {
    vec![
        "--service-cluster",
        "productpage.default",
        "--service-node",
        "sidecar~10.1.2.3~productpage-v1-abc.default~default.svc.cluster.local",
        "--service-zone",
        "us-east1-b",
        "--log-level",
        "warning",
        "--concurrency",
        "1",
        "--drain-time-s",
        "1",
        "--drain-strategy",
        "immediate",
        "--local-address-ip-version",
        "v4",
        "--file-flush-interval-msec",
        "1000",
        "--disable-hot-restart",
        "--allow-unknown-static-fields",
        "--log-format",
        "%Y-%m-%dT%T.%fZ\t%l\tenvoy %n %g:%#\t%v\tthread=%t",
        "--component-log-level",
        "misc:error,upstream:info,connection:warning",
    ]
}

#[test]
fn pilot_agent_flags_serve_and_validate() {
    let _lock = support::shared();
    let flags = pilot_agent_flags();
    let mut gw = Gateway::start(&bootstrap(), &flags);
    curl_ok(&gw);
    let info = server_info(&gw);
    assert_eq!(info["node"]["id"], flags[3], "{info}");
    assert_eq!(info["node"]["cluster"], "productpage.default", "{info}");
    assert_eq!(info["node"]["locality"]["zone"], "us-east1-b", "{info}");
    let o = &info["command_line_options"];
    assert_eq!(o["service_zone"], "us-east1-b", "{o}");
    assert_eq!(o["drain_strategy"], "Immediate", "{o}");
    assert_eq!(o["local_address_ip_version"], "v4", "{o}");
    assert_eq!(o["file_flush_interval"], "1s", "{o}");
    assert_eq!(o["disable_hot_restart"], true, "{o}");
    assert_eq!(o["allow_unknown_static_fields"], true, "{o}");
    assert_eq!(o["log_format"], flags[21], "{o}");
    assert_eq!(
        o["component_log_level"], "misc:error,upstream:info,connection:warning",
        "{o}"
    );
    assert_eq!(o["log_level"], "warning", "{o}");
    // Every component names a logger quickshake has (no warning); `/logging` shows the levels.
    let log = gw.log_text();
    assert_eq!(
        log.matches("--component-log-level").count(),
        0,
        "no warning: {log}"
    );
    let (code, logging) = gw.admin_post("/logging");
    assert_eq!(code, 200, "{logging}");
    for line in [
        "misc: error",
        "upstream: info",
        "connection: warning",
        "admin: warning",
    ] {
        assert!(
            logging.contains(&format!("\n  {line}\n")),
            "{line}: {logging}"
        );
    }
    gw.assert_terminates_cleanly_within(Duration::from_secs(6));

    let mut validate = flags.clone();
    validate.extend(["--mode", "validate"]);
    let (code, stderr) = start_expect_failure(&bootstrap(), &validate, &[]);
    assert_eq!(code, 0, "validate with pilot-agent's flags: {stderr}");
}

/// `-c FILE --config-yaml STR`: the string merges into the file's bootstrap as protobuf's
/// MergeFrom does: its listener is appended to the file's, its admin port replaces the file's
/// (the file's admin address stays).
#[test]
fn config_yaml_merges_into_the_file() {
    let _lock = support::shared();
    // The file's admin port is one nothing will listen on: the gateway is only ready (on
    // `{{ADMIN}}`) if the string's port replaced it.
    let file = bootstrap().replace("{{ADMIN}}", &free_port().to_string());
    let overlay = format!(
        r#"
admin:
  address: {{ socket_address: {{ port_value: {{{{ADMIN}}}} }} }}
static_resources:
  listeners:
  - name: second
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {{{{PORT2}}}} }} }}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates:
{cert}
      filters:
{hcm}"#,
        cert = plain_cert("rsa2048"),
        hcm = direct_response_hcm(
            "second_http",
            r#"{ status: 200, body: { inline_string: "from the second listener" } }"#,
            ""
        )
    );
    let gw = Gateway::start_argv(
        &[("config.yaml", &file)],
        &[
            "-c",
            "{{DIR}}/config.yaml",
            "--config-yaml",
            &overlay,
            "--concurrency",
            "1",
        ],
    );
    assert_eq!(
        get(gw.port),
        ("200".to_owned(), "hello from quickshake".to_owned())
    );
    assert_eq!(
        get(gw.port2),
        ("200".to_owned(), "from the second listener".to_owned())
    );
    let (_, dump) = gw.admin_get("/config_dump");
    let dump: Value = serde_json::from_str(&dump).expect("config_dump JSON");
    let b = &dump["configs"][0]["bootstrap"];
    let names: Vec<&str> = b["static_resources"]["listeners"]
        .as_array()
        .expect("listeners")
        .iter()
        .filter_map(|l| l["name"].as_str())
        .collect();
    assert_eq!(names, ["main", "second"], "appended, file's first");
    let admin = &b["admin"]["address"]["socket_address"];
    assert_eq!(admin["port_value"], u64::from(gw.admin), "{admin}");
    assert_eq!(admin["address"], "127.0.0.1", "the file's, kept: {admin}");
    let o = &server_info(&gw)["command_line_options"];
    assert!(
        o["config_path"]
            .as_str()
            .is_some_and(|p| p.ends_with("config.yaml")),
        "{o}"
    );
}

/// Start with `args` (after `-c` and a good bootstrap); it must fail at once, saying `needles`.
fn refused(args: &[&str], needles: &[&str]) {
    let started = Instant::now();
    let (code, stderr) = start_expect_failure(&bootstrap(), args, &[]);
    assert_ne!(code, 0, "{args:?} must be refused: {stderr}");
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "{args:?}: {needle:?} not in {stderr}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{args:?} took {:?}",
        started.elapsed()
    );
}

#[test]
fn bad_values_are_refused() {
    let _lock = support::shared();
    refused(
        &["--config-yaml", "static_resources: [unclosed"],
        &["--config-yaml: invalid YAML"],
    );
    refused(
        &[
            "--config-yaml",
            "static_resources: { listeners: [ { name: extra, bogus: 1 } ] }",
        ],
        &["--config-yaml: static_resources.listeners[1].bogus: unknown field"],
    );
    refused(
        &[
            "--config-yaml",
            "admin: { address: { socket_address: { port_value: many } } }",
        ],
        &["--config-yaml: admin.address.socket_address.port_value"],
    );
    refused(
        &["--local-address-ip-version", "v5"],
        &["--local-address-ip-version", "v5", "v4", "v6"],
    );
    refused(
        &["--drain-strategy", "sometimes"],
        &["--drain-strategy", "sometimes", "gradual", "immediate"],
    );
    refused(
        &["--file-flush-interval-msec", "soon"],
        &["--file-flush-interval-msec", "soon"],
    );
    refused(&["--restart-epoch", "soon"], &["--restart-epoch", "soon"]);
    refused(
        &["--file-flush-min-size-kb", "big"],
        &["--file-flush-min-size-kb", "big"],
    );
    refused(
        &["--component-log-level", "upstream:loud"],
        &["--component-log-level", "loud"],
    );
}
