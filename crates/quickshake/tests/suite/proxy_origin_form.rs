//! HTTP/1.1 upstream requests in origin-form with `Host` from the authority, whatever the
//! downstream protocol: HTTP/1.1 (origin-form and absolute-form targets), HTTP/2 (curl), HTTP/3
//! (aioquic) and WebSocket upgrades, to an origin that takes nothing else (Python's
//! `http.server`, which answers 404 to `GET https://host/index.html HTTP/1.1`) and records the
//! request line and `Host` it was sent. The same checks run against Envoy 1.39.3, the
//! reference.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::gateway_http3::requests;
use crate::proxy_grpc_ws::{head_header, read_head, tls_connect, KEY};
use crate::support::envoy::Envoy;
use crate::support::upstreams::{cluster, fetch, proxy_config, route, websocket_accept};
use crate::support::{self, free_port, render, Gateway};

/// The file the origin serves, and its body.
const FILE: &str = "index.html";
const BODY: &str = "<h1>served in origin-form</h1>\n";

/// A QUIC listener on `{{PORT}}` (UDP) whose HTTP/3 connection manager routes everything to
/// the `origin` cluster (at [`proxy_config`]'s listener indentation).
const QUIC_LISTENER: &str = r#"  - name: quic
    address: { socket_address: { address: 127.0.0.1, port_value: {{PORT}}, protocol: UDP } }
    udp_listener_config:
      quic_options: {}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.quic
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.quic.v3.QuicDownstreamTransport
          downstream_tls_context:
            common_tls_context:
              tls_certificates:
              - certificate_chain: { filename: {{CERTS}}/rsa2048.cert.pem }
                private_key: { filename: {{CERTS}}/rsa2048.key.pem }
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          codec_type: HTTP3
          stat_prefix: ingress_h3
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: / }
                route: { cluster: origin }
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"#;

/// TLS (h2, http/1.1) and QUIC listeners on one port, WebSocket upgrades on, every path to the
/// STATIC cluster `origin` (an HTTP/1.1 upstream).
fn config(origin_port: u16) -> String {
    proxy_config(
        "",
        "          upgrade_configs:\n          - upgrade_type: websocket",
        &route("/", "origin", ""),
        QUIC_LISTENER,
        &cluster("origin", "STATIC", "127.0.0.1", origin_port, ""),
    )
}

/// `origin_form_origin.py`: Python's `http.server` serving [`FILE`], recording each request's
/// line and `Host`; killed on drop.
struct Origin {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Origin {
    fn start() -> Origin {
        let dir = tempfile::tempdir().expect("tempdir");
        let www = dir.path().join("www");
        std::fs::create_dir(&www).expect("www");
        std::fs::write(www.join(FILE), BODY).expect("write the served file");
        let log = dir.path().join("requests.jsonl");
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/suite/origin_form_origin.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(&www)
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("run python3 origin_form_origin.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the origin's port");
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("port line {line:?}: {e}"));
        Origin {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    /// The requests received so far: (request line, `Host`).
    fn requests(&self) -> Vec<(String, Option<String>)> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: serde_json::Value =
                    serde_json::from_str(l).unwrap_or_else(|e| panic!("record {l:?}: {e}"));
                let line = v["line"].as_str().unwrap_or_default().to_string();
                (line, v["host"].as_str().map(str::to_string))
            })
            .collect()
    }

    /// The status line the origin answers to a raw HTTP/1.1 request for `target`.
    fn status_line_for(&self, target: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to the origin");
        s.write_all(
            format!("GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .expect("write");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.lines().next().unwrap_or_default().to_string()
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every client against the proxy (`who`) on `port` in front of `origin`: each request reaches
/// the origin once, as `GET <path?query> HTTP/1.1` with `Host: localhost:<port>` (the authority
/// the client used), and the file comes back.
fn check_clients(who: &str, port: u16, origin: &Origin, log: &dyn Fn() -> String) {
    let authority = format!("localhost:{port}");
    let mut expected = Vec::new();
    let mut expect = |what: &str, target: &str| {
        expected.push((format!("GET {target} HTTP/1.1"), Some(authority.clone())));
        let got = origin.requests();
        assert_eq!(
            got,
            expected,
            "{who}, {what}: what the origin received\n{}",
            log()
        );
    };
    let url = |target: &str| format!("https://{authority}{target}");
    // HTTP/1.1 and HTTP/2 over TLS (curl).
    for (what, flag, target) in [
        ("HTTP/1.1", "--http1.1", "/index.html?via=h1"),
        ("HTTP/2", "--http2", "/index.html?via=h2&x=1"),
    ] {
        let r = fetch(&[flag], &url(target));
        assert_eq!(r.status, 200, "{who}, {what}: {r:?}\n{}", log());
        assert_eq!(r.body, BODY, "{who}, {what}");
        let version = if flag == "--http2" {
            "HTTP/2"
        } else {
            "HTTP/1.1"
        };
        assert!(r.status_line.starts_with(version), "{who}, {what}: {r:?}");
        expect(what, target);
    }
    // An HTTP/1.1 absolute-form target: its authority wins over the Host header.
    let target = "/index.html?via=absolute";
    let r = fetch(
        &[
            "--http1.1",
            "--request-target",
            &url(target),
            "-H",
            "Host: other.example",
        ],
        &url(target),
    );
    assert_eq!(r.status, 200, "{who}, absolute-form: {r:?}\n{}", log());
    assert_eq!(r.body, BODY, "{who}, absolute-form");
    expect("HTTP/1.1 absolute-form", target);
    // HTTP/3 (aioquic, `:authority` localhost:<port>).
    let target = "/index.html?via=h3";
    let out = requests(port, &serde_json::json!([{"path": target}]), &[]);
    assert_eq!(out["alpn"], "h3", "{who}: {out}");
    assert_eq!(
        out["results"][0]["status"],
        200,
        "{who}, HTTP/3: {out}\n{}",
        log()
    );
    assert_eq!(out["results"][0]["body"], BODY, "{who}, HTTP/3");
    expect("HTTP/3", target);
    // A WebSocket upgrade over HTTP/1.1, in origin-form then in absolute-form.
    for (what, target, request_target) in [
        ("WebSocket", "/chat?room=1", "/chat?room=1".to_string()),
        (
            "WebSocket absolute-form",
            "/chat?room=2",
            url("/chat?room=2"),
        ),
    ] {
        let mut tls = tls_connect(port);
        tls.write_all(
            format!(
                "GET {request_target} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\n\
                 Connection: Upgrade\r\nSec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            )
            .as_bytes(),
        )
        .expect("write the upgrade");
        let (head, rest) = read_head(&mut tls);
        assert!(
            head.starts_with("HTTP/1.1 101"),
            "{who}, {what}: {head}\n{}",
            log()
        );
        assert_eq!(
            head_header(&head, "sec-websocket-accept"),
            Some(websocket_accept(KEY).as_str()),
            "{who}, {what}: {head}"
        );
        assert!(rest.is_empty(), "{who}, {what}: {rest:?}");
        tls.write_all(b"ping").expect("write");
        let mut back = [0u8; 4];
        tls.read_exact(&mut back).expect("the echo");
        assert_eq!(&back, b"ping", "{who}, {what}");
        expect(what, target);
    }
}

/// The origin takes only origin-form: the check is worth something.
fn assert_origin_form_only(origin: &Origin) {
    assert!(
        origin
            .status_line_for("https://127.0.0.1:9443/index.html")
            .contains(" 404 "),
        "http.server answers an absolute-form target with 404"
    );
    assert!(origin.status_line_for("/index.html").contains(" 200 "));
    assert_eq!(origin.requests().len(), 2);
    std::fs::remove_file(&origin.log).expect("reset the origin's record");
}

#[test]
fn every_downstream_protocol_reaches_an_origin_form_only_http1_upstream() {
    let _lock = support::shared();
    let origin = Origin::start();
    assert_origin_form_only(&origin);
    let gw = Gateway::start(&config(origin.port), &["--concurrency", "1"]);
    check_clients("quickshake", gw.port, &origin, &|| gw.log_text());
    assert_eq!(gw.counter("cluster.origin.upstream_rq_200"), 4);
}

#[test]
fn envoy_sends_the_same_origin_form() {
    let _lock = support::shared();
    let origin = Origin::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, admin) = (free_port(), free_port());
    let yaml = render(&config(origin.port), port, free_port(), admin, dir.path());
    let envoy = Envoy::start(&yaml, admin);
    check_clients("envoy", port, &origin, &|| envoy.log_text());
}
