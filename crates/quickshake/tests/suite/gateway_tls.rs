//! TLS behaviour with real clients: protocol versions through `openssl s_client`, choosing
//! between an RSA and an ECDSA certificate by the client's signature algorithms, SNI choosing
//! the filter chain, and mutual TLS.

use std::process::Output;

use crate::support;
use crate::support::*;

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn connect_arg(gw: &Gateway) -> String {
    format!("127.0.0.1:{}", gw.port)
}

/// `s_client` to the gateway's first listener with `extra` flags; the combined output.
fn handshake(gw: &Gateway, extra: &[&str]) -> String {
    let connect = connect_arg(gw);
    let mut args = vec!["-connect", connect.as_str(), "-servername", "localhost"];
    args.extend_from_slice(extra);
    text(&s_client(&args, ""))
}

fn counter_eventually(gw: &Gateway, name: &str, at_least: u64) {
    eventually(&format!("{name} >= {at_least}"), || {
        gw.counter(name) >= at_least
    });
}

#[test]
fn s_client_tls12_and_tls13() {
    let _lock = support::shared();
    let gw = Gateway::start(
        &direct_response_config(&plain_cert("rsa2048"), "", ""),
        &["--concurrency", "2"],
    );
    let ca = cert("rsa2048.cert.pem");
    let scope = gw.scope("127.0.0.1");

    let out12 = handshake(&gw, &["-tls1_2", "-CAfile", &ca]);
    assert!(out12.contains("Protocol  : TLSv1.2"), "{out12}");
    assert!(
        out12.contains("New, TLSv1.2, Cipher is ECDHE-RSA-"),
        "{out12}"
    );
    assert!(out12.contains("Verify return code: 0 (ok)"), "{out12}");
    counter_eventually(&gw, &format!("{scope}ssl.versions.TLSv1.2"), 1);

    let out13 = handshake(&gw, &["-tls1_3", "-CAfile", &ca]);
    // (s_client prints the SSL-Session block only once it has read a ticket.)
    assert!(out13.contains("New, TLSv1.3, Cipher is TLS_"), "{out13}");
    assert!(out13.contains("Verify return code: 0 (ok)"), "{out13}");
    counter_eventually(&gw, &format!("{scope}ssl.versions.TLSv1.3"), 1);

    // -brief output too.
    let brief = handshake(&gw, &["-tls1_3", "-brief", "-CAfile", &ca]);
    assert!(brief.contains("Protocol version: TLSv1.3"), "{brief}");

    counter_eventually(&gw, &format!("{scope}ssl.handshake"), 3);
    assert_eq!(gw.counter(&format!("{scope}ssl.connection_error")), 0);
    // X25519 is the default group curl and openssl pick; the curve counter records it.
    assert!(
        gw.counter(&format!("{scope}ssl.curves.X25519")) >= 1,
        "{:?}",
        gw.admin_get("/stats?filter=curves")
    );
}

#[test]
fn tls11_is_refused_by_default() {
    let _lock = support::shared();
    let gw = Gateway::start(
        &direct_response_config(&plain_cert("rsa2048"), "", ""),
        &["--concurrency", "1"],
    );
    let scope = gw.scope("127.0.0.1");
    // OpenSSL 3 at security level 0 can still offer TLS 1.1; the gateway's minimum is TLS 1.2.
    let out = handshake(&gw, &["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"]);
    assert!(out.contains("Cipher is (NONE)"), "{out}");
    assert!(out.contains("alert protocol version"), "{out}");
    counter_eventually(&gw, &format!("{scope}ssl.connection_error"), 1);
    assert_eq!(gw.counter(&format!("{scope}ssl.handshake")), 0);
}

fn dual_cert_gateway(first: &str, second: &str) -> Gateway {
    let certs = format!("{}\n{}", plain_cert(first), plain_cert(second));
    Gateway::start(
        &direct_response_config(&certs, "", ""),
        &["--concurrency", "1"],
    )
}

const ECDSA_ONLY: &str = "ecdsa_secp256r1_sha256";
const RSA_ONLY: &str = "rsa_pss_rsae_sha256:rsa_pkcs1_sha256";

fn assert_ecdsa(out: &str) {
    assert!(out.contains("Peer signature type: ECDSA"), "{out}");
    assert!(out.contains("Server public key is 256 bit"), "{out}");
}

fn assert_rsa(out: &str) {
    assert!(
        out.contains("Peer signature type: RSA-PSS") || out.contains("Peer signature type: RSA"),
        "{out}"
    );
    assert!(out.contains("Server public key is 2048 bit"), "{out}");
}

#[test]
fn rsa_and_ecdsa_on_one_listener_rsa_first() {
    let _lock = support::shared();
    let gw = dual_cert_gateway("rsa2048", "ecdsa-p256");
    for version in ["-tls1_2", "-tls1_3"] {
        let out = handshake(&gw, &[version, "-sigalgs", ECDSA_ONLY]);
        assert_ecdsa(&out);
        let out = handshake(&gw, &[version, "-sigalgs", RSA_ONLY]);
        assert_rsa(&out);
    }
    // ECDSA-verified with the ECDSA certificate as the trust anchor, RSA with the RSA one.
    let ca_ec = cert("ecdsa-p256.cert.pem");
    let out = handshake(&gw, &["-sigalgs", ECDSA_ONLY, "-CAfile", &ca_ec]);
    assert!(out.contains("Verify return code: 0 (ok)"), "{out}");
    let scope = gw.scope("127.0.0.1");
    counter_eventually(&gw, &format!("{scope}ssl.handshake"), 5);
    assert_eq!(gw.counter(&format!("{scope}ssl.connection_error")), 0);
}

#[test]
fn rsa_and_ecdsa_on_one_listener_ecdsa_first() {
    let _lock = support::shared();
    let gw = dual_cert_gateway("ecdsa-p256", "rsa2048");
    for version in ["-tls1_2", "-tls1_3"] {
        let out = handshake(&gw, &[version, "-sigalgs", RSA_ONLY]);
        assert_rsa(&out);
        let out = handshake(&gw, &[version, "-sigalgs", ECDSA_ONLY]);
        assert_ecdsa(&out);
    }
    // curl with either trust anchor succeeds: it offers both algorithms, so either certificate
    // is acceptable; the one it gets must verify against the matching anchor.
    let out = support::curl_status(&gw.url("/"), "ecdsa-p256.cert.pem");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "200",
        "{}",
        text(&out)
    );
}

const SNI_TEMPLATE: &str = r#"
static_resources:
  listeners:
  - name: sni
    address: { socket_address: { address: 127.0.0.1, port_value: {{PORT}} } }
    listener_filters:
    - name: envoy.filters.listener.tls_inspector
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector
    filter_chains:
    - filter_chain_match: { server_names: [other.test, "*.other.test"] }
      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates:
            - certificate_chain: { filename: {{CERTS}}/other.cert.pem }
              private_key: { filename: {{CERTS}}/other.key.pem }
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: other_http
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: / }
                direct_response: { status: 200, body: { inline_string: "other chain" } }
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
          stat_prefix: default_http
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: / }
                direct_response: { status: 200, body: { inline_string: "default chain" } }
admin:
  address: { socket_address: { address: 127.0.0.1, port_value: {{ADMIN}} } }
"#;

#[test]
fn sni_selects_filter_chain() {
    let _lock = support::shared();
    let gw = Gateway::start(SNI_TEMPLATE, &["--concurrency", "2"]);
    let port = gw.port;
    let other_ca = cert("other.cert.pem");
    let default_ca = cert("rsa2048.cert.pem");

    for host in ["other.test", "www.other.test"] {
        let resolve = format!("{host}:{port}:127.0.0.1");
        let out = curl(&[
            "--resolve",
            &resolve,
            "--cacert",
            &other_ca,
            &format!("https://{host}:{port}/"),
        ]);
        assert!(out.status.success(), "{host}: {}", text(&out));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "other chain",
            "{host}"
        );
    }

    let out = curl(&["--cacert", &default_ca, &gw.url("/")]);
    assert!(out.status.success(), "localhost: {}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "default chain");

    // The wrong trust anchor fails: localhost does not get the other.test certificate.
    let out = curl(&["--cacert", &other_ca, &gw.url("/")]);
    assert!(
        !out.status.success(),
        "localhost must not get other.test's certificate"
    );

    // No SNI at all goes to the default chain.
    let connect = format!("127.0.0.1:{port}");
    let out = text(&s_client(&["-connect", &connect, "-noservername"], ""));
    assert!(out.contains("CN = localhost"), "{out}");
    let out = text(&s_client(
        &["-connect", &connect, "-servername", "other.test"],
        "",
    ));
    assert!(out.contains("CN = other.test"), "{out}");

    assert!(gw.counter("http.other_http.downstream_rq_2xx") >= 2);
    assert!(gw.counter("http.default_http.downstream_rq_2xx") >= 1);
}

fn mtls_template() -> String {
    let extra = "            validation_context:\n              trusted_ca: { filename: {{CERTS}}/client-ca.cert.pem }\n          require_client_certificate: true";
    direct_response_config(&plain_cert("rsa2048"), extra, "")
}

#[test]
fn mtls_requires_a_trusted_client_certificate() {
    let _lock = support::shared();
    let gw = Gateway::start(&mtls_template(), &["--concurrency", "2"]);
    let scope = gw.scope("127.0.0.1");
    let ca = cert("rsa2048.cert.pem");
    let url = gw.url("/");
    let code = |extra: &[&str]| {
        let mut args = vec!["-o", "/dev/null", "-w", "%{http_code}", "--cacert", &ca];
        args.extend_from_slice(extra);
        args.push(&url);
        let out = curl(&args);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            text(&out),
        )
    };

    let (client_cert, client_key) = (cert("client.cert.pem"), cert("client.key.pem"));
    for http in ["--http1.1", "--http2"] {
        let (ok, status, all) = code(&[http, "--cert", &client_cert, "--key", &client_key]);
        assert!(ok && status == "200", "trusted client {http}: {all}");
    }
    counter_eventually(&gw, &format!("{scope}ssl.handshake"), 2);
    assert_eq!(gw.counter(&format!("{scope}ssl.connection_error")), 0);
    assert_eq!(gw.counter(&format!("{scope}ssl.no_certificate")), 0);

    let (ok, status, all) = code(&[]);
    assert!(!ok && status != "200", "no client certificate: {all}");
    counter_eventually(&gw, &format!("{scope}ssl.connection_error"), 1);

    let (bad_cert, bad_key) = (
        cert("untrusted-client.cert.pem"),
        cert("untrusted-client.key.pem"),
    );
    let (ok, status, all) = code(&["--cert", &bad_cert, "--key", &bad_key]);
    assert!(!ok && status != "200", "untrusted client: {all}");
    counter_eventually(&gw, &format!("{scope}ssl.connection_error"), 2);

    // TLS 1.2 as well, through s_client: with the trusted certificate the handshake completes.
    let connect = connect_arg(&gw);
    let out = text(&s_client(
        &[
            "-connect",
            &connect,
            "-tls1_2",
            "-cert",
            &client_cert,
            "-key",
            &client_key,
        ],
        "",
    ));
    assert!(out.contains("Protocol  : TLSv1.2"), "{out}");
    assert!(!out.contains("alert"), "{out}");
    counter_eventually(&gw, &format!("{scope}ssl.handshake"), 3);
    let errors = gw.counter(&format!("{scope}ssl.connection_error"));
    assert_eq!(errors, 2, "only the two refused clients are errors");
    // The server still serves afterwards.
    let (ok, status, all) = code(&["--cert", &client_cert, "--key", &client_key]);
    assert!(ok && status == "200", "{all}");
}

#[test]
fn mtls_failure_reasons_are_counted() {
    let _lock = support::shared();
    let gw = Gateway::start(&mtls_template(), &["--concurrency", "1"]);
    let scope = gw.scope("127.0.0.1");
    let ca = cert("rsa2048.cert.pem");
    let url = gw.url("/");
    let out = curl(&["--cacert", &ca, &url]);
    assert!(!out.status.success());
    eventually("missing certificate counted", || {
        gw.counter(&format!("{scope}ssl.fail_verify_no_cert")) == 1
    });
    let (bad_cert, bad_key) = (
        cert("untrusted-client.cert.pem"),
        cert("untrusted-client.key.pem"),
    );
    let out = curl(&[
        "--cacert", &ca, "--cert", &bad_cert, "--key", &bad_key, &url,
    ]);
    assert!(!out.status.success());
    eventually("untrusted certificate counted", || {
        gw.counter(&format!("{scope}ssl.fail_verify_error")) == 1
    });
    assert_eq!(gw.counter(&format!("{scope}ssl.connection_error")), 2);
}
