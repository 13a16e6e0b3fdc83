//! `quickshake-bench --h3` against a QUIC stack we did not write: Envoy 1.39.3's HTTP/3
//! listener (UDP `socket_address`, `udp_listener_config.quic_options`, the
//! `envoy.transport_sockets.quic` transport socket, HCM `codec_type: HTTP3`, a direct
//! response). Every request is a new QUIC connection with a full TLS 1.3 handshake, verified
//! against the test CA; none resumed, no errors. Envoy's `ssl.handshake` does not move for
//! QUIC, so handshakes are counted on the client and cross-checked with Envoy's own
//! `downstream_cx_http3_total`.

use std::process::Command;

use crate::support::envoy::Envoy;
use crate::support::{self, cert, free_port};

/// Envoy's HTTP/3 listener on UDP `port`, answering 200 "ok" to everything, with the RSA-2048
/// test certificate and no session resumption; admin on `admin`.
fn envoy_h3_bootstrap(port: u16, admin: u16) -> String {
    format!(
        r#"
static_resources:
  listeners:
  - name: h3
    address: {{ socket_address: {{ protocol: UDP, address: 127.0.0.1, port_value: {port} }} }}
    udp_listener_config:
      quic_options: {{}}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.quic
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.quic.v3.QuicDownstreamTransport
          downstream_tls_context:
            disable_stateless_session_resumption: true
            disable_stateful_session_resumption: true
            common_tls_context:
              tls_certificates:
              - certificate_chain: {{ filename: {cert} }}
                private_key: {{ filename: {key} }}
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          codec_type: HTTP3
          stat_prefix: bench_h3
          http3_protocol_options: {{}}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: / }}
                direct_response: {{ status: 200, body: {{ inline_string: "ok" }} }}
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {{ "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }}
admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: {admin} }} }}
"#,
        cert = cert("rsa2048.cert.pem"),
        key = cert("rsa2048.key.pem"),
    )
}

#[test]
fn h3_full_handshakes_against_envoy() {
    let _lock = support::shared();
    let (port, admin) = (free_port(), free_port());
    let envoy = Envoy::start(&envoy_h3_bootstrap(port, admin), admin);
    let out = Command::new("timeout")
        .arg("30")
        .arg(support::bench_binary())
        .args(["--h3", "-c", "4", "-d", "2s", "--json", "--cacert"])
        .arg(cert("rsa2048.cert.pem"))
        .arg("--server-stats")
        .arg(format!("http://127.0.0.1:{admin}"))
        // An IP target: no SNI (Envoy refuses an IP in SNI), the IP SAN verified.
        .arg(format!("https://127.0.0.1:{port}/"))
        .output()
        .expect("run quickshake-bench --h3");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "bench failed ({}): {stdout}\n{}\nenvoy log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        envoy.log_text()
    );
    let v: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("bench JSON: {e}: {stdout}"));
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["transport"], "quic", "{v}");
    assert_eq!(v["resumed"], 0, "{v}");
    assert_eq!(v["errors"]["total"], 0, "{v}");
    assert_eq!(v["negotiated"]["version"], "TLSv1.3", "{v}");
    assert_eq!(v["negotiated"]["alpn"], "h3", "{v}");
    let handshakes = v["handshakes"].as_u64().unwrap_or(0);
    assert!(handshakes > 20, "too few handshakes: {v}");
    // A connection whose handshake ended just before the run's end may not have its request
    // answered: at most one per client connection (-c 4).
    let requests = v["requests"].as_u64().unwrap_or(0);
    assert!(
        requests <= handshakes && requests + 4 >= handshakes,
        "requests {requests} vs handshakes {handshakes}: {v}"
    );
    // Envoy does not count QUIC handshakes in ssl.handshake (nor resumptions).
    assert_eq!(v["server"]["handshakes"], 0, "{v}");
    assert_eq!(v["server"]["session_reused"], 0, "{v}");
    // ... but it counts HTTP/3 connections: at least one per client handshake.
    let stats = envoy.stats();
    let h3_cx: u64 = stats
        .get("http.bench_h3.downstream_cx_http3_total")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        h3_cx >= handshakes,
        "Envoy counted {h3_cx} HTTP/3 connections, the client {handshakes} handshakes"
    );
}
