//! Misbehaving clients hurt only themselves: garbage bytes, a truncated ClientHello, a client
//! that never finishes its handshake, and the global connection limit. Each moves the expected
//! counter by the expected amount while curl keeps getting 200.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support;
use crate::support::*;

fn with_handshake_timeout(template: &str, timeout: &str) -> String {
    let t = template.replace(
        "\n      filters:\n",
        &format!("\n      transport_socket_connect_timeout: {timeout}\n      filters:\n"),
    );
    assert!(t.contains("transport_socket_connect_timeout"), "{t}");
    t
}

fn base() -> String {
    direct_response_config(&plain_cert("rsa2048"), "", "")
}

fn connect(gw: &Gateway) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", gw.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s
}

/// Read until the peer closes (or resets); how long that took. Panics after the read timeout.
fn wait_closed(s: &mut TcpStream) -> Duration {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return started.elapsed(),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return started.elapsed(),
            Err(e) => panic!("the server did not close the connection: {e}"),
        }
    }
}

#[test]
fn garbage_bytes_end_only_that_connection() {
    let _lock = support::shared();
    let gw = Gateway::start(&base(), &["--concurrency", "2"]);
    let scope = gw.scope("127.0.0.1");
    support::curl_ok(&gw);
    let errors = |gw: &Gateway| gw.counter(&format!("{scope}ssl.connection_error"));
    assert_eq!(errors(&gw), 0);

    let mut s = connect(&gw);
    s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("write");
    wait_closed(&mut s);
    eventually("one connection error", || errors(&gw) == 1);

    let mut s = connect(&gw);
    let junk: Vec<u8> = (0..2048u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let _ = s.write_all(&junk);
    wait_closed(&mut s);
    eventually("two connection errors", || errors(&gw) == 2);

    // A record header that announces a handshake record far too long.
    let mut s = connect(&gw);
    s.write_all(&[0x16, 0x03, 0x01, 0xff, 0xff, 0x01, 0x00])
        .expect("write");
    drop(s);
    eventually("three connection errors", || errors(&gw) == 3);

    support::curl_ok(&gw);
    assert_eq!(errors(&gw), 3, "curl's connection is no error");
    assert_eq!(gw.counter(&format!("{scope}ssl.handshake")), 2);
    eventually("all connections closed", || {
        gw.counter(&format!("{scope}downstream_cx_active")) == 0
    });
    assert_eq!(gw.counter(&format!("{scope}downstream_cx_destroy")), 5);
}

#[test]
fn truncated_client_hello_then_close() {
    let _lock = support::shared();
    let hello = support::capture_client_hello();
    let gw = Gateway::start(&base(), &["--concurrency", "2"]);
    let scope = gw.scope("127.0.0.1");
    let errors = |gw: &Gateway| gw.counter(&format!("{scope}ssl.connection_error"));

    // The whole ClientHello is a real one: the gateway answers it.
    let mut s = connect(&gw);
    s.write_all(&hello).expect("write");
    let mut buf = [0u8; 5];
    s.read_exact(&mut buf).expect("ServerHello");
    assert_eq!(buf[0], 0x16, "the server answers with a handshake record");
    drop(s);
    // That abandoned handshake is itself an error; let it settle before counting.
    eventually("the abandoned handshake is closed", || {
        gw.counter(&format!("{scope}downstream_cx_active")) == 0
    });
    let before = errors(&gw);
    assert_eq!(before, 1, "the abandoned handshake");
    for _ in 0..3 {
        let mut s = connect(&gw);
        s.write_all(&hello[..50]).expect("write");
        s.shutdown(std::net::Shutdown::Write).expect("half-close");
        wait_closed(&mut s);
    }
    eventually("three more connection errors", || errors(&gw) == before + 3);
    support::curl_ok(&gw);
    assert_eq!(
        gw.counter(&format!(
            "{scope}downstream_cx_transport_socket_connect_timeout"
        )),
        0
    );
}

#[test]
fn truncated_client_hello_that_stalls_times_out() {
    let _lock = support::exclusive();
    let hello = support::capture_client_hello();
    let gw = Gateway::start(
        &with_handshake_timeout(&base(), "1s"),
        &["--concurrency", "1"],
    );
    let scope = gw.scope("127.0.0.1");
    let mut s = connect(&gw);
    s.write_all(&hello[..50]).expect("write");
    // Meanwhile others are served at once.
    let started = Instant::now();
    support::curl_ok(&gw);
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "curl waited"
    );
    let waited = wait_closed(&mut s);
    assert!(waited < Duration::from_secs(3), "closed after {waited:?}");
    eventually("one handshake timeout", || {
        gw.counter(&format!(
            "{scope}downstream_cx_transport_socket_connect_timeout"
        )) == 1
    });
}

#[test]
fn silent_client_times_out_in_handshake() {
    let _lock = support::exclusive();
    let gw = Gateway::start(
        &with_handshake_timeout(&base(), "1s"),
        &["--concurrency", "2"],
    );
    let scope = gw.scope("127.0.0.1");
    let timeouts = |gw: &Gateway| {
        gw.counter(&format!(
            "{scope}downstream_cx_transport_socket_connect_timeout"
        ))
    };
    let started = Instant::now();
    let mut silent: Vec<TcpStream> = (0..3).map(|_| connect(&gw)).collect();
    eventually("silent connections accepted", || {
        gw.counter(&format!("{scope}downstream_cx_active")) == 3
    });
    // Served while the silent ones wait.
    support::curl_ok(&gw);
    support::curl_ok(&gw);
    assert_eq!(
        timeouts(&gw),
        0,
        "nothing timed out within the first second"
    );
    for s in &mut silent {
        wait_closed(s);
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(4),
        "closed after {waited:?}"
    );
    eventually("three handshake timeouts", || timeouts(&gw) == 3);
    assert_eq!(gw.counter(&format!("{scope}ssl.connection_error")), 0);
    assert_eq!(gw.counter(&format!("{scope}ssl.handshake")), 2);
    support::curl_ok(&gw);
    eventually("all closed", || {
        gw.counter(&format!("{scope}downstream_cx_active")) == 0
    });
}

const LIMIT: &str = OVERLOAD_TWO_CONNECTIONS;

#[test]
fn global_connection_limit() {
    let _lock = support::shared();
    let template = format!("{}{LIMIT}", with_handshake_timeout(&base(), "30s"));
    let gw = Gateway::start(&template, &["--concurrency", "2"]);
    let scope = gw.scope("127.0.0.1");
    let overflow = |gw: &Gateway| gw.counter(&format!("{scope}downstream_cx_overflow"));
    support::curl_ok(&gw);
    eventually("curl's connection closed", || {
        gw.counter(&format!("{scope}downstream_cx_active")) == 0
    });

    let held: Vec<TcpStream> = (0..2).map(|_| connect(&gw)).collect();
    eventually("two held connections", || {
        gw.counter(&format!("{scope}downstream_cx_active")) == 2
    });
    assert_eq!(overflow(&gw), 0);

    // A third is closed at once, without a TLS answer.
    let mut third = connect(&gw);
    let _ = third.write_all(b"\x16\x03\x01");
    let waited = wait_closed(&mut third);
    assert!(waited < Duration::from_secs(2), "refused after {waited:?}");
    eventually("one overflow", || overflow(&gw) == 1);
    assert_eq!(
        gw.counter(&format!("{scope}downstream_global_cx_overflow")),
        1
    );
    assert_eq!(gw.counter(&format!("{scope}downstream_cx_active")), 2);

    drop(held);
    eventually("held connections closed", || {
        gw.counter(&format!("{scope}downstream_cx_active")) == 0
    });
    support::curl_ok(&gw);
    support::curl_ok(&gw);
    assert_eq!(overflow(&gw), 1, "no overflow once below the limit");
    assert_eq!(gw.counter("server.total_connections"), 0);
}

#[test]
fn global_connection_limit_from_runtime() {
    let _lock = support::shared();
    let runtime = r#"layered_runtime:
  layers:
  - name: static
    static_layer:
      overload:
        global_downstream_max_connections: 1
"#;
    let template = format!("{}{runtime}", with_handshake_timeout(&base(), "30s"));
    let gw = Gateway::start(&template, &["--concurrency", "1"]);
    let scope = gw.scope("127.0.0.1");
    let held = connect(&gw);
    eventually("one held connection", || {
        gw.counter(&format!("{scope}downstream_cx_active")) == 1
    });
    let out = curl(&["--cacert", &cert("rsa2048.cert.pem"), &gw.url("/")]);
    assert!(!out.status.success(), "curl over the limit must fail");
    eventually("one overflow", || {
        gw.counter(&format!("{scope}downstream_cx_overflow")) == 1
    });
    drop(held);
    eventually("held connection closed", || {
        gw.counter(&format!("{scope}downstream_cx_active")) == 0
    });
    support::curl_ok(&gw);
}

/// Two filter chains (SNI other.test, and a default): the gateway peeks at the ClientHello to
/// choose one before the handshake starts. `chain_extra` goes on both chains.
fn sni_template(chain_extra: &str) -> String {
    let chain = |sni: &str, name: &str| {
        format!(
            r#"    - {sni}transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates:
            - certificate_chain: {{ filename: {{{{CERTS}}}}/{name}.cert.pem }}
              private_key: {{ filename: {{{{CERTS}}}}/{name}.key.pem }}
{chain_extra}
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: {name}_http
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: / }}
                direct_response: {{ status: 200 }}
"#
        )
    };
    format!(
        r#"
static_resources:
  listeners:
  - name: sni
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {{{{PORT}}}} }} }}
    listener_filters:
    - name: envoy.filters.listener.tls_inspector
    filter_chains:
{}{}admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: {{{{ADMIN}}}} }} }}
"#,
        chain(
            "filter_chain_match: { server_names: [other.test] }\n      ",
            "other"
        ),
        chain("", "rsa2048")
    )
}

#[test]
fn sni_listener_garbage_and_silent_clients() {
    let _lock = support::shared();
    let gw = Gateway::start(
        &sni_template("      transport_socket_connect_timeout: 1s"),
        &["--concurrency", "2"],
    );
    let scope = gw.scope("127.0.0.1");
    support::curl_ok(&gw);
    let out = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--resolve",
        &format!("other.test:{}:127.0.0.1", gw.port),
        "--cacert",
        &cert("other.cert.pem"),
        &format!("https://other.test:{}/", gw.port),
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200");

    // Not TLS at all: the default chain's handshake fails on it.
    let mut s = connect(&gw);
    s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("write");
    wait_closed(&mut s);
    eventually("one connection error", || {
        gw.counter(&format!("{scope}ssl.connection_error")) == 1
    });

    // Silent: closed once the (1 s) timeout passes, while others are served.
    let started = Instant::now();
    let mut silent = connect(&gw);
    support::curl_ok(&gw);
    let waited = wait_closed(&mut silent);
    assert!(
        started.elapsed() >= Duration::from_millis(900) && waited < Duration::from_secs(4),
        "closed after {waited:?}"
    );
    eventually("the silent client is counted as a timeout", || {
        gw.counter(&format!("{scope}downstream_pre_cx_timeout"))
            + gw.counter(&format!(
                "{scope}downstream_cx_transport_socket_connect_timeout"
            ))
            == 1
    });
    assert_eq!(gw.counter(&format!("{scope}ssl.connection_error")), 1);
    support::curl_ok(&gw);
}

#[test]
fn sni_listener_truncated_client_hello_then_close_is_closed_promptly() {
    let _lock = support::shared();
    let hello = support::capture_client_hello();
    let gw = Gateway::start(&sni_template(""), &["--concurrency", "1"]);
    let scope = gw.scope("127.0.0.1");
    let mut s = connect(&gw);
    s.write_all(&hello[..50]).expect("write");
    s.shutdown(std::net::Shutdown::Write).expect("half-close");
    let waited = wait_closed(&mut s);
    assert!(
        waited < Duration::from_secs(2),
        "held for {waited:?} after the client closed"
    );
    eventually("the connection is gone", || {
        gw.counter(&format!("{scope}downstream_cx_active")) == 0
    });
    support::curl_ok(&gw);
}
