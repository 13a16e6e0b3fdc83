//! The listener and route fields every Envoy Gateway listener and HTTPRoute carries, with
//! Envoy's effect, seen by curl and a WebSocket client, against quickshake and against stock
//! Envoy 1.39.3 (the reference), on one configuration:
//! - `default_filter_chain` serves the connections no `filter_chains[].filter_chain_match`
//!   matches (here an SNI the named chain does not list);
//! - `match.path_separated_prefix` (Gateway API PathPrefix): `/app` matches `/app`, `/app/`,
//!   `/app/x` and `/app?q`, not `/apple`;
//! - the route's `upgrade_configs` overrides the connection manager's per upgrade type: a route
//!   enables WebSocket where the connection manager does not, and disables it where it does
//!   (refused with 403, as Envoy's `upgrade_failed`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use boring::ssl::{SslConnector, SslMethod, SslVerifyMode};

use crate::proxy_grpc_ws::KEY;
use crate::support::envoy::Envoy;
use crate::support::upstreams::{cluster, fetch, websocket_accept, Upstream};
use crate::support::{self, free_port, render, Gateway};

/// The SNI the named chain lists; any other (curl's `localhost`) gets the default chain.
const NAMED: &str = "named.test";

const TEMPLATE: &str = r#"
static_resources:
  listeners:
  - name: eg
    address: { socket_address: { address: 127.0.0.1, port_value: {{PORT}} } }
    listener_filters:
    - name: envoy.filters.listener.tls_inspector
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector
    filter_chains:
    - filter_chain_match: { server_names: [named.test] }
@TLS@
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: named
          upgrade_configs:
          - upgrade_type: websocket
          route_config:
            virtual_hosts:
            - name: named
              domains: ["*"]
              routes:
              - match: { path_separated_prefix: /ws-off }
                route:
                  cluster: ws
                  upgrade_configs:
                  - { upgrade_type: websocket, enabled: false }
              - match: { prefix: /ws }
                route: { cluster: ws }
              - match: { prefix: / }
                direct_response: { status: 200, body: { inline_string: "named chain" } }
@ROUTER@
    default_filter_chain:
@TLS@
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: default
          route_config:
            virtual_hosts:
            - name: default
              domains: ["*"]
              routes:
              - match: { path_separated_prefix: /app }
                direct_response: { status: 200, body: { inline_string: "app" } }
              - match: { path_separated_prefix: /ws-on }
                route:
                  cluster: ws
                  upgrade_configs:
                  - upgrade_type: websocket
              - match: { path_separated_prefix: /ws-plain }
                route: { cluster: ws }
              - match: { prefix: / }
                direct_response: { status: 200, body: { inline_string: "fallback" } }
@ROUTER@
  clusters:
@CLUSTERS@
admin:
  address: { socket_address: { address: 127.0.0.1, port_value: {{ADMIN}} } }
"#;

const TLS: &str = r#"      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            alpn_protocols: [h2, http/1.1]
            tls_certificates:
            - certificate_chain: { filename: {{CERTS}}/rsa2048.cert.pem }
              private_key: { filename: {{CERTS}}/rsa2048.key.pem }"#;

const ROUTER: &str = r#"          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"#;

fn config(ws_port: u16) -> String {
    TEMPLATE
        .replace("@TLS@", TLS)
        .replace("@ROUTER@", ROUTER)
        .replace(
            "@CLUSTERS@",
            &cluster("ws", "STATIC", "127.0.0.1", ws_port, ""),
        )
}

/// A WebSocket upgrade for `path` over TLS with SNI `sni` (HTTP/1.1): the response head, and,
/// when it is `101`, whether a `ping` comes back from the echoing upstream.
fn upgrade(port: u16, sni: &str, path: &str) -> (String, bool) {
    let mut b = SslConnector::builder(SslMethod::tls()).expect("connector");
    b.set_verify(SslVerifyMode::NONE);
    b.set_alpn_protos(b"\x08http/1.1").expect("ALPN");
    let tcp = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    let mut tls = b
        .build()
        .configure()
        .expect("configure")
        .verify_hostname(false)
        .connect(sni, tcp)
        .expect("TLS handshake");
    tls.write_all(
        format!(
            "GET {path} HTTP/1.1\r\nHost: {sni}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        .as_bytes(),
    )
    .expect("write the upgrade");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match tls.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    let head = String::from_utf8_lossy(&head).to_string();
    if !head.starts_with("HTTP/1.1 101") {
        return (head, false);
    }
    assert!(
        head.contains(&websocket_accept(KEY)),
        "the upstream's accept key: {head}"
    );
    tls.write_all(b"ping").expect("write");
    let mut back = [0u8; 4];
    let echoed = tls.read_exact(&mut back).is_ok() && &back == b"ping";
    (head, echoed)
}

/// Every check against the proxy (`who`) on `port`.
fn check(who: &str, port: u16, log: &dyn Fn() -> String) {
    let url = |host: &str, path: &str| format!("https://{host}:{port}{path}");
    let resolve = format!("{NAMED}:{port}:127.0.0.1");
    let get = |host: &str, path: &str| {
        fetch(
            &["-k", "--http1.1", "--resolve", &resolve],
            &url(host, path),
        )
    };
    // default_filter_chain: an SNI no chain lists; the named chain keeps its own.
    let r = get("localhost", "/");
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, "fallback"),
        "{who}: {r:?}\n{}",
        log()
    );
    let r = get(NAMED, "/");
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, "named chain"),
        "{who}: {r:?}"
    );
    // path_separated_prefix, over HTTP/1.1 and HTTP/2.
    for flag in ["--http1.1", "--http2"] {
        for (path, body) in [
            ("/app", "app"),
            ("/app/", "app"),
            ("/app/x", "app"),
            ("/app/x/y.html", "app"),
            ("/app?q", "app"),
            ("/app?q=/x", "app"),
            ("/apple", "fallback"),
            ("/ap", "fallback"),
            ("/app.html", "fallback"),
            ("/x/app", "fallback"),
        ] {
            let r = fetch(&["-k", flag], &url("localhost", path));
            assert_eq!(
                (r.status, r.body.as_str()),
                (200, body),
                "{who} {flag} {path}: {r:?}"
            );
        }
    }
    // upgrade_configs: the route's entry for websocket wins over the connection manager's.
    for (sni, path, allowed) in [
        // The connection manager has none: the route enables, or nothing does.
        ("localhost", "/ws-on/chat", true),
        ("localhost", "/ws-plain/chat", false),
        // The connection manager enables: the route disables, or it applies.
        (NAMED, "/ws-off/chat", false),
        (NAMED, "/ws/chat", true),
    ] {
        let (head, echoed) = upgrade(port, sni, path);
        if allowed {
            assert!(
                head.starts_with("HTTP/1.1 101") && echoed,
                "{who} {sni}{path}: {head}\n{}",
                log()
            );
        } else {
            assert!(
                head.starts_with("HTTP/1.1 403"),
                "{who} {sni}{path}: {head}\n{}",
                log()
            );
        }
    }
}

#[test]
fn quickshake_serves_default_chain_separated_prefix_and_route_upgrades() {
    let _lock = support::shared();
    let ws = Upstream::websocket();
    let gw = Gateway::start(&config(ws.port), &["--concurrency", "1"]);
    check("quickshake", gw.port, &|| gw.log_text());
    // Only the two allowed upgrades reached the upstream.
    assert_eq!(ws.state.seen().len(), 2, "{:?}", ws.state.seen());
}

#[test]
fn envoy_serves_the_same() {
    let _lock = support::shared();
    let ws = Upstream::websocket();
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, admin) = (free_port(), free_port());
    let yaml = render(&config(ws.port), port, free_port(), admin, dir.path());
    let envoy = Envoy::start(&yaml, admin);
    check("envoy", port, &|| envoy.log_text());
    assert_eq!(ws.state.seen().len(), 2, "{:?}", ws.state.seen());
}
