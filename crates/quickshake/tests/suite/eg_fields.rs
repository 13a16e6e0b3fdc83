//! Fields Envoy Gateway sets on every listener, with Envoy's effect, against quickshake and
//! against stock Envoy 1.39.3 (the reference): the listener's `access_log`, written for a
//! connection that matches no filter chain (response flag `NR`, details
//! `filter_chain_not_found`), with Envoy Gateway's `filter: {response_flag_filter: {flags:
//! [NR]}}`, so a served connection writes nothing; and a downstream
//! `validation_context.match_typed_subject_alt_names` (a client certificate whose SAN
//! matches is served, one whose SANs do not is refused). The upstream side of the SAN
//! matchers is tested in the upstream crate's TLS suite.

use std::time::{Duration, Instant};

use boring::ssl::{SslConnector, SslMethod, SslVerifyMode};

use crate::support::envoy::Envoy;
use crate::support::{self, direct_response_hcm, free_port, plain_cert, render, Gateway};

const TEMPLATE: &str = r#"
static_resources:
  listeners:
  - name: eg
    address: { socket_address: { address: 127.0.0.1, port_value: {{PORT}} } }
    access_log:
    - name: envoy.access_loggers.file
      filter: { response_flag_filter: { flags: [NR] } }
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
        path: {{DIR}}/listener.log
        log_format:
          text_format_source:
            inline_string: "%RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %REQUESTED_SERVER_NAME% %RESPONSE_CODE% %PROTOCOL% %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%\n"
    listener_filters:
    - name: envoy.filters.listener.tls_inspector
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector
    filter_chains:
    - filter_chain_match: { server_names: [a.test] }
@CHAIN@
    - filter_chain_match: { server_names: [b.test] }
@CHAIN@
admin:
  address: { socket_address: { address: 127.0.0.1, port_value: {{ADMIN}} } }
"#;

/// One TLS filter chain (the RSA-2048 test certificate) answering 200 to everything.
fn chain() -> String {
    format!(
        r#"      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates:
{}
      filters:
{}"#,
        plain_cert("rsa2048"),
        direct_response_hcm("eg", "{ status: 200 }", "")
    )
}

fn config() -> String {
    TEMPLATE.replace("@CHAIN@", &chain())
}

/// A TLS handshake with SNI `sni`: whether it completes.
fn handshake(port: u16, sni: &str) -> bool {
    let mut b = SslConnector::builder(SslMethod::tls()).expect("connector");
    b.set_verify(SslVerifyMode::NONE);
    let c = b.build();
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    c.connect(sni, tcp).is_ok()
}

/// The log file's lines once it has `n` of them (within 5 s; Envoy flushes each second).
fn lines(path: &std::path::Path, n: usize) -> Vec<String> {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let got: Vec<String> = text.lines().map(str::to_owned).collect();
        if got.len() >= n || Instant::now() > end {
            return got;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn check(who: &str, port: u16, dir: &std::path::Path, log: &dyn Fn() -> String) {
    let file = dir.join("listener.log");
    // A served connection: nothing passes the NR filter.
    assert!(
        handshake(port, "a.test"),
        "{who}: a.test is served\n{}",
        log()
    );
    // No chain for c.test: closed, and logged.
    assert!(!handshake(port, "c.test"), "{who}: c.test matches no chain");
    let got = lines(&file, 1);
    assert_eq!(
        got,
        ["NR filter_chain_not_found c.test 0 - 127.0.0.1"],
        "{who}\n{}",
        log()
    );
    // Nothing more comes: the served connection stays unlogged.
    assert!(handshake(port, "b.test"), "{who}: b.test is served");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(lines(&file, 2).len(), 1, "{who}: {:?}", lines(&file, 2));
}

#[test]
fn listener_access_log_as_quickshake() {
    let _lock = support::shared();
    let gw = Gateway::start(&config(), &["--concurrency", "1"]);
    check("quickshake", gw.port, gw.dir.path(), &|| gw.log_text());
}

#[test]
fn listener_access_log_as_envoy() {
    let _lock = support::shared();
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, admin) = (free_port(), free_port());
    let yaml = render(&config(), port, free_port(), admin, dir.path());
    let envoy = Envoy::start(&yaml, admin);
    check("envoy", port, dir.path(), &|| envoy.log_text());
}

/// Two mTLS listeners trusting rsa2048 (self-signed, `DNS:localhost`, `IP:127.0.0.1`): `{{PORT}}`
/// wants a DNS SAN `LOCALHOST` (DNS names compare case-insensitively) or a URI; `{{PORT2}}` wants
/// `envoy-gateway`.
const MTLS: &str = r#"
static_resources:
  listeners:
  - name: match
    address: { socket_address: { address: 127.0.0.1, port_value: {{PORT}} } }
    filter_chains:
    - @SANS_MATCH@
  - name: nomatch
    address: { socket_address: { address: 127.0.0.1, port_value: {{PORT2}} } }
    filter_chains:
    - @SANS_NOMATCH@
admin:
  address: { socket_address: { address: 127.0.0.1, port_value: {{ADMIN}} } }
"#;

fn mtls_config() -> String {
    let chain = |sans: &str| {
        chain()
            .replace(
                "          common_tls_context:\n",
                &format!(
                    "          require_client_certificate: true\n          common_tls_context:\n            validation_context:\n              trusted_ca: {{ filename: {{{{CERTS}}}}/rsa2048.cert.pem }}\n              match_typed_subject_alt_names: {sans}\n"
                ),
            )
            .trim_start()
            .to_owned()
    };
    MTLS.replace(
        "@SANS_MATCH@",
        &chain("[{ san_type: URI, matcher: { exact: spiffe://x } }, { san_type: DNS, matcher: { exact: LOCALHOST } }]"),
    )
    .replace(
        "@SANS_NOMATCH@",
        &chain("[{ san_type: DNS, matcher: { exact: envoy-gateway } }, { san_type: URI, matcher: { exact: localhost } }]"),
    )
}

/// A request over TLS presenting rsa2048 as the client certificate: whether it is answered.
fn served_with_client_cert(port: u16) -> bool {
    use std::io::{Read, Write};
    let certs = quickshake_test_support::paths::certs_dir();
    let mut b = SslConnector::builder(SslMethod::tls()).expect("connector");
    b.set_verify(SslVerifyMode::NONE);
    b.set_certificate_chain_file(certs.join("rsa2048.cert.pem"))
        .expect("client cert");
    b.set_private_key_file(certs.join("rsa2048.key.pem"), boring::ssl::SslFiletype::PEM)
        .expect("client key");
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let Ok(mut s) = b.build().connect("localhost", tcp) else {
        return false;
    };
    if s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out.starts_with(b"HTTP/1.1 200")
}

fn check_mtls(who: &str, port: u16, port2: u16, log: &dyn Fn() -> String) {
    assert!(
        served_with_client_cert(port),
        "{who}: matching SAN\n{}",
        log()
    );
    assert!(
        !served_with_client_cert(port2),
        "{who}: no matching SAN\n{}",
        log()
    );
}

#[test]
fn downstream_san_matchers_as_quickshake() {
    let _lock = support::shared();
    let gw = Gateway::start(&mtls_config(), &["--concurrency", "1"]);
    check_mtls("quickshake", gw.port, gw.port2, &|| gw.log_text());
}

#[test]
fn downstream_san_matchers_as_envoy() {
    let _lock = support::shared();
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, port2, admin) = (free_port(), free_port(), free_port());
    let yaml = render(&mtls_config(), port, port2, admin, dir.path());
    let envoy = Envoy::start(&yaml, admin);
    check_mtls("envoy", port, port2, &|| envoy.log_text());
}
