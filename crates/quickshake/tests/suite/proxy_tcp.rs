//! `tcp_proxy` behind TLS termination, and the PROXY protocol listener filter (v1 and v2):
//! the client address it carries reaches the access log and `x-forwarded-for`; a malformed
//! header ends only that connection.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use boring::ssl::{SslConnector, SslMethod, SslStream};

use crate::support;
use crate::support::upstreams::{
    cluster, proxy_config, route, tcp_proxy_config, HttpOpts, Upstream,
};
use crate::support::{cert, eventually, Gateway};

const ARGS: &[&str] = &["--concurrency", "1"];

const PROXY_PROTOCOL: &str = r#"    listener_filters:
    - name: envoy.filters.listener.proxy_protocol
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol"#;

fn connector() -> SslConnector {
    let mut b = SslConnector::builder(SslMethod::tls()).expect("connector");
    b.set_ca_file(cert("rsa2048.cert.pem")).expect("CA");
    b.build()
}

fn tcp(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    s.set_nodelay(true).expect("nodelay");
    s
}

/// Connect, send `preamble` (a PROXY header, or nothing), then the TLS handshake on the same
/// socket.
fn tls_after(port: u16, preamble: &[u8]) -> Result<SslStream<TcpStream>, String> {
    let mut s = tcp(port);
    s.write_all(preamble).map_err(|e| e.to_string())?;
    connector()
        .connect("localhost", s)
        .map_err(|e| e.to_string())
}

fn echo_round_trip(tls: &mut SslStream<TcpStream>, msg: &[u8]) {
    tls.write_all(msg).expect("write");
    let mut back = vec![0u8; msg.len()];
    tls.read_exact(&mut back).expect("read the echo");
    assert!(back == msg, "echo differs ({} bytes)", msg.len());
}

#[test]
fn tcp_proxy_terminates_tls_in_front_of_an_echo_server() {
    let _lock = support::shared();
    let echo = Upstream::tcp_echo();
    let gw = Gateway::start(&tcp_proxy_config("", echo.port), ARGS);
    for i in 0..2u8 {
        let mut tls = tls_after(gw.port, b"").unwrap_or_else(|e| panic!("{e}\n{}", gw.log_text()));
        echo_round_trip(&mut tls, b"hello through tcp_proxy\n");
        let big: Vec<u8> = (0..200_000u32).map(|x| (x % 253) as u8 ^ i).collect();
        echo_round_trip(&mut tls, &big);
    }
    eventually("tcp.echo.downstream_cx_total == 2", || {
        gw.counter("tcp.echo.downstream_cx_total") == 2
    });
    assert_eq!(
        echo.state.connection_count(),
        2,
        "one upstream connection each"
    );
    assert!(gw.counter("cluster.echo.upstream_cx_total") >= 2);
}

#[test]
fn tcp_proxy_with_the_upstream_down_closes_the_connection() {
    let _lock = support::shared();
    let closed = support::free_port();
    let gw = Gateway::start(&tcp_proxy_config("", closed), ARGS);
    let mut tls = tls_after(gw.port, b"").expect("the handshake is the gateway's");
    let _ = tls.write_all(b"anyone?");
    let mut buf = [0u8; 16];
    match tls.read(&mut buf) {
        Ok(0) | Err(_) => {}
        Ok(n) => panic!("got {n} bytes from a proxy with no upstream"),
    }
    eventually("upstream_cx_connect_fail counted", || {
        gw.counter("cluster.echo.upstream_cx_connect_fail") >= 1
    });
}

// ---------------------------------------------------------------------------------------------
// PROXY protocol

fn v1(src: &str, sport: u16, dport: u16) -> Vec<u8> {
    format!("PROXY TCP4 {src} 127.0.0.1 {sport} {dport}\r\n").into_bytes()
}

const V2_SIG: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// A v2 PROXY header (command PROXY, TCP over IPv4 or IPv6) with optional TLVs.
fn v2(src: std::net::SocketAddr, dst: std::net::SocketAddr, tlvs: &[(u8, &[u8])]) -> Vec<u8> {
    let mut addrs = Vec::new();
    let fam = match (src.ip(), dst.ip()) {
        (std::net::IpAddr::V4(s), std::net::IpAddr::V4(d)) => {
            addrs.extend_from_slice(&s.octets());
            addrs.extend_from_slice(&d.octets());
            0x11
        }
        (std::net::IpAddr::V6(s), std::net::IpAddr::V6(d)) => {
            addrs.extend_from_slice(&s.octets());
            addrs.extend_from_slice(&d.octets());
            0x21
        }
        _ => panic!("mixed address families"),
    };
    addrs.extend_from_slice(&src.port().to_be_bytes());
    addrs.extend_from_slice(&dst.port().to_be_bytes());
    for (t, v) in tlvs {
        addrs.push(*t);
        addrs.extend_from_slice(&u16::try_from(v.len()).expect("tlv").to_be_bytes());
        addrs.extend_from_slice(v);
    }
    let mut h = V2_SIG.to_vec();
    h.push(0x21); // version 2, PROXY
    h.push(fam);
    h.extend_from_slice(&u16::try_from(addrs.len()).expect("len").to_be_bytes());
    h.extend_from_slice(&addrs);
    h
}

/// An HTTP gateway behind PROXY protocol, `use_remote_address: true`, access log
/// `<remote address> <path>` in `{{DIR}}/access.log`, routing to `up`.
fn proxied_http_gateway(up: &Upstream) -> Gateway {
    let hcm = r#"          use_remote_address: true
          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: {{DIR}}/access.log
              log_format: { text_format: "%DOWNSTREAM_REMOTE_ADDRESS% %REQ(:PATH)%\n" }"#;
    let cfg = proxy_config(
        PROXY_PROTOCOL,
        hcm,
        &route("/", "backend", ""),
        "",
        &cluster("backend", "STATIC", "127.0.0.1", up.port, ""),
    );
    Gateway::start(&cfg, ARGS)
}

/// One HTTP/1.1 request after `preamble` and TLS; the status line.
fn request_after(port: u16, preamble: &[u8], path: &str) -> Result<String, String> {
    let mut tls = tls_after(port, preamble)?;
    tls.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let _ = tls.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).to_string();
    Ok(text.lines().next().unwrap_or("").to_string())
}

fn access_log_lines(gw: &Gateway, n: usize) -> Vec<String> {
    let path = gw.dir.path().join("access.log");
    let mut lines = Vec::new();
    eventually(&format!("{n} access log lines"), || {
        lines = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        lines.len() >= n
    });
    lines
}

#[test]
fn proxy_protocol_v1_carries_the_client_address() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let gw = proxied_http_gateway(&up);
    let status = request_after(gw.port, &v1("203.0.113.7", 51234, gw.port), "/v1")
        .unwrap_or_else(|e| panic!("{e}\n{}", gw.log_text()));
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(
        up.state.last().header("x-forwarded-for"),
        Some("203.0.113.7")
    );
    assert_eq!(up.state.last().header("x-forwarded-proto"), Some("https"));

    // UNKNOWN: the connection's own address is used.
    let status = request_after(gw.port, b"PROXY UNKNOWN\r\n", "/unknown").expect("request");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(up.state.last().header("x-forwarded-for"), Some("127.0.0.1"));

    let lines = access_log_lines(&gw, 2);
    assert_eq!(lines[0], "203.0.113.7:51234 /v1", "{lines:?}");
    assert!(
        lines[1].starts_with("127.0.0.1:") && lines[1].ends_with(" /unknown"),
        "{lines:?}"
    );
}

#[test]
fn proxy_protocol_v2_carries_the_client_address() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let gw = proxied_http_gateway(&up);
    let dst = format!("127.0.0.1:{}", gw.port).parse().expect("addr");
    // With TLVs (authority, and a vendor TLV), as load balancers send them.
    let h = v2(
        "203.0.113.7:40000".parse().expect("addr"),
        dst,
        &[(0x02, b"example.com"), (0xEA, b"\x01vpce-0123")],
    );
    let status =
        request_after(gw.port, &h, "/v2").unwrap_or_else(|e| panic!("{e}\n{}", gw.log_text()));
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(
        up.state.last().header("x-forwarded-for"),
        Some("203.0.113.7")
    );

    // IPv6 source.
    let h = v2(
        "[2001:db8::7]:40001".parse().expect("addr"),
        "[::1]:443".parse().expect("addr"),
        &[],
    );
    let status = request_after(gw.port, &h, "/v2-ipv6").expect("request");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(
        up.state.last().header("x-forwarded-for"),
        Some("2001:db8::7")
    );

    let lines = access_log_lines(&gw, 2);
    assert_eq!(lines[0], "203.0.113.7:40000 /v2", "{lines:?}");
    assert_eq!(lines[1], "[2001:db8::7]:40001 /v2-ipv6", "{lines:?}");
}

#[test]
fn malformed_proxy_header_closes_only_that_connection() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let gw = proxied_http_gateway(&up);
    let scope = gw.scope("127.0.0.1");
    let errors = format!("{scope}downstream_cx_proxy_proto_error");
    // A good connection is open while the bad ones come and go.
    let mut good = tls_after(gw.port, &v1("198.51.100.1", 1000, gw.port)).expect("good connection");

    let bad: [&[u8]; 3] = [
        b"PROXY GARBAGE\r\n",
        b"PROXY TCP4 203.0.113.999 127.0.0.1 1 2\r\n",
        b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    ];
    for (i, preamble) in bad.iter().enumerate() {
        let mut s = tcp(gw.port);
        s.write_all(preamble).expect("write");
        let mut buf = [0u8; 64];
        match s.read(&mut buf) {
            Ok(0) => {}
            Err(e)
                if e.kind() != std::io::ErrorKind::WouldBlock
                    && e.kind() != std::io::ErrorKind::TimedOut => {}
            other => panic!("bad header {i}: connection not closed: {other:?}"),
        }
        eventually(&format!("{errors} >= {}", i + 1), || {
            gw.counter(&errors) > i as u64
        });
    }
    // No PROXY header at all (a bare TLS handshake) is refused too.
    assert!(
        tls_after(gw.port, b"").is_err(),
        "TLS without a PROXY header"
    );

    // The open connection and new connections still work.
    good.write_all(b"GET /still-good HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut buf = Vec::new();
    let _ = good.read_to_end(&mut buf);
    assert!(
        String::from_utf8_lossy(&buf).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&buf)
    );
    assert_eq!(
        up.state.last().header("x-forwarded-for"),
        Some("198.51.100.1")
    );
    let status = request_after(gw.port, &v1("203.0.113.7", 2000, gw.port), "/next").expect("next");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(
        up.state.last().header("x-forwarded-for"),
        Some("203.0.113.7")
    );
    assert_eq!(
        up.state.request_count(),
        2,
        "nothing from the bad connections"
    );
}

#[test]
fn proxy_protocol_in_front_of_tcp_proxy() {
    let _lock = support::shared();
    let echo = Upstream::tcp_echo();
    let gw = Gateway::start(&tcp_proxy_config(PROXY_PROTOCOL, echo.port), ARGS);
    let dst = format!("127.0.0.1:{}", gw.port).parse().expect("addr");
    let mut tls = tls_after(
        gw.port,
        &v2("203.0.113.7:40000".parse().expect("addr"), dst, &[]),
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", gw.log_text()));
    echo_round_trip(&mut tls, b"behind a load balancer");
    let mut tls = tls_after(gw.port, &v1("203.0.113.8", 1, gw.port)).expect("v1");
    echo_round_trip(&mut tls, b"v1 too");
    eventually("two tcp_proxy connections", || {
        gw.counter("tcp.echo.downstream_cx_total") == 2
    });
}

#[test]
fn access_log_sees_the_headers_the_gateway_set() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let hcm = r#"          use_remote_address: true
          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: {{DIR}}/access.log
              log_format: { text_format: "%REQ(X-FORWARDED-FOR)% %REQ(X-REQUEST-ID)%\n" }"#;
    let cfg = proxy_config(
        PROXY_PROTOCOL,
        hcm,
        &route("/", "backend", ""),
        "",
        &cluster("backend", "STATIC", "127.0.0.1", up.port, ""),
    );
    let gw = Gateway::start(&cfg, ARGS);
    let status = request_after(gw.port, &v1("203.0.113.7", 5, gw.port), "/").expect("request");
    assert_eq!(status, "HTTP/1.1 200 OK");
    let rid = up
        .state
        .last()
        .header("x-request-id")
        .expect("id")
        .to_string();
    let lines = access_log_lines(&gw, 1);
    assert_eq!(lines[0], format!("203.0.113.7 {rid}"));
}
