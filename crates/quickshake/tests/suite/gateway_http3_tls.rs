//! HTTP/3 with what a QUIC connection's `Ssl` does not inherit from its filter chain's context
//! by itself: client certificates (`require_client_certificate`, `validation_context`) refuse
//! and serve aioquic clients as on TCP, with Envoy's `ssl.fail_verify_*` counters; and the
//! chain's `session_ticket_keys` make the QUIC tickets, so a ticket from one quickshake process
//! resumes on another holding the same keys (and not on one without them).

use crate::gateway_http3::requests_sni;
use crate::support::{self, Gateway};

/// A QUIC listener whose one chain asks for client certificates issued by `client-ca` and
/// makes tickets under the keys `@TICKETS@` names (see [`gateway`]).
const CONFIG: &str = r#"
static_resources:
  listeners:
  - name: quic
    address: { socket_address: { address: 127.0.0.1, port_value: {{PORT}}, protocol: UDP } }
    udp_listener_config:
      quic_options: {}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.quic
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.quic.v3.QuicDownstreamTransport
          downstream_tls_context:
            require_client_certificate: true
@TICKETS@
            common_tls_context:
              tls_certificates:
              - certificate_chain: { filename: {{CERTS}}/rsa2048.cert.pem }
                private_key: { filename: {{CERTS}}/rsa2048.key.pem }
              validation_context:
                trusted_ca: { filename: {{CERTS}}/client-ca.cert.pem }
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
                direct_response: { status: 200, body: { inline_string: "hello mtls over h3" } }
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
admin:
  address: { socket_address: { address: 127.0.0.1, port_value: {{ADMIN}} } }
"#;

/// Where a gateway's ticket keys come from.
enum Keys<'a> {
    None,
    /// `session_ticket_keys` with the key in this file.
    File(&'a std::path::Path),
    /// `session_ticket_keys_sds_secret_config` from this SDS secret file.
    Sds(&'a std::path::Path),
}

/// A gateway on [`CONFIG`] with its ticket keys from `keys`.
fn gateway(keys: Keys<'_>) -> Gateway {
    let entry = match keys {
        Keys::None => String::new(),
        Keys::File(f) => format!(
            "            session_ticket_keys: {{ keys: [ {{ filename: {} }} ] }}\n",
            f.display()
        ),
        Keys::Sds(f) => format!(
            "            session_ticket_keys_sds_secret_config:\n              name: ticket_keys\n              sds_config: {{ path_config_source: {{ path: {} }}, resource_api_version: V3 }}\n",
            f.display()
        ),
    };
    // SDS from a file needs a node, as in Envoy.
    let cfg = format!(
        "node: {{ id: h3, cluster: h3 }}\n{}",
        CONFIG.replace("@TICKETS@\n", &entry)
    );
    Gateway::start(&cfg, &["--concurrency", "1"])
}

fn get(port: u16, extra: &[&str]) -> serde_json::Value {
    requests_sni(
        port,
        "localhost",
        &serde_json::json!([{"path": "/"}]),
        extra,
    )
}

#[test]
fn quic_client_certificates_refused_without_served_with() {
    let _lock = support::shared();
    let gw = gateway(Keys::None);
    let scope = gw.scope("127.0.0.1");
    let (client, key) = (
        support::cert("client.cert.pem"),
        support::cert("client.key.pem"),
    );
    // No certificate: refused (certificate_required), counted as Envoy counts it on TCP.
    let out = get(gw.port, &["--may-fail"]);
    assert!(
        out["failed"].is_string(),
        "served without a certificate: {out}"
    );
    support::eventually("fail_verify_no_cert", || {
        gw.counter(&format!("{scope}ssl.fail_verify_no_cert")) == 1
    });
    // A certificate from another CA: refused, fail_verify_error.
    let (bad, bad_key) = (
        support::cert("untrusted-client.cert.pem"),
        support::cert("untrusted-client.key.pem"),
    );
    let out = get(gw.port, &["--may-fail", "--cert", &bad, "--key", &bad_key]);
    assert!(
        out["failed"].is_string(),
        "served an untrusted certificate: {out}"
    );
    support::eventually("fail_verify_error", || {
        gw.counter(&format!("{scope}ssl.fail_verify_error")) == 1
    });
    // The right certificate: served.
    let out = get(gw.port, &["--cert", &client, "--key", &key]);
    assert_eq!(out["results"][0]["body"], "hello mtls over h3", "{out}");
    assert_eq!(gw.counter(&format!("{scope}ssl.handshake")), 1);
    assert_eq!(gw.counter(&format!("{scope}ssl.connection_error")), 2);
    assert_eq!(gw.counter(&format!("{scope}ssl.fail_verify_no_cert")), 1);
}

#[test]
fn a_quic_ticket_resumes_on_another_process_with_the_same_keys() {
    let _lock = support::shared();
    let dir = tempfile::tempdir().expect("tempdir");
    let (k1, sds) = (dir.path().join("k1.key"), dir.path().join("keys.yaml"));
    std::fs::write(&k1, support::ticket_key(1)).expect("ticket key file");
    let secret = format!(
        "resources:\n- \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret\n  name: ticket_keys\n  session_ticket_keys:\n    keys:\n    - inline_string: {}\n",
        support::ticket_key(1)
    );
    std::fs::write(&sds, secret).expect("SDS secret file");
    // `a` reads K1 from a file, `b` from an SDS secret.
    let (a, b, none) = (
        gateway(Keys::File(&k1)),
        gateway(Keys::Sds(&sds)),
        gateway(Keys::None),
    );
    let ticket = dir.path().join("ticket.bin");
    let ticket = ticket.to_str().expect("utf-8 path");
    let (client, key) = (
        support::cert("client.cert.pem"),
        support::cert("client.key.pem"),
    );
    let with = |port: u16| {
        get(
            port,
            &["--cert", &client, "--key", &key, "--ticket", ticket],
        )
    };
    // A full handshake on `a` leaves a ticket made under K1.
    let out = with(a.port);
    assert_eq!(out["results"][0]["status"], 200, "{out}");
    assert_eq!(out["resumed"], false, "{out}");
    assert!(std::path::Path::new(ticket).exists(), "no ticket from a");
    // `b` holds K1 (by SDS): it resumes a's ticket (and renews it).
    let out = with(b.port);
    assert_eq!(out["results"][0]["status"], 200, "{out}");
    assert_eq!(out["resumed"], true, "a's ticket on b: {out}");
    assert_eq!(
        b.counter(&format!("{}ssl.session_reused", b.scope("127.0.0.1"))),
        1
    );
    // A process without the keys: a full handshake.
    let out = with(none.port);
    assert_eq!(out["results"][0]["status"], 200, "{out}");
    assert_eq!(
        out["resumed"], false,
        "a K1 ticket on a process without K1: {out}"
    );
}
