//! gRPC (HTTP/2 end to end, trailers included) and WebSocket upgrades through the gateway, to
//! real upstream servers.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use boring::ssl::{SslConnector, SslMethod, SslVerifyMode};
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::support;
use crate::support::upstreams::{
    cluster, grpc_frame, grpc_messages, proxy_config, route, websocket_accept, Upstream,
    HTTP2_UPSTREAM,
};
use crate::support::{cert, Gateway};

const ARGS: &[&str] = &["--concurrency", "1"];

fn grpc_gateway(up: &Upstream) -> Gateway {
    let cfg = proxy_config(
        "",
        "",
        &route("/", "grpc", ""),
        "",
        &cluster("grpc", "STATIC", "127.0.0.1", up.port, HTTP2_UPSTREAM),
    );
    Gateway::start(&cfg, ARGS)
}

/// What a gRPC call returned.
#[derive(Debug)]
pub(crate) struct GrpcReply {
    status: StatusCode,
    headers: HeaderMap,
    data: Bytes,
    trailers: Option<HeaderMap>,
}

/// One unary call per message, over one TLS connection with ALPN h2 (hyper's HTTP/2 client).
pub(crate) fn grpc_calls(port: u16, path: &str, msgs: &[&[u8]]) -> Vec<GrpcReply> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), async {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect");
            let mut b = SslConnector::builder(SslMethod::tls()).expect("connector");
            b.set_ca_file(cert("rsa2048.cert.pem")).expect("CA");
            b.set_alpn_protos(b"\x02h2").expect("ALPN");
            let cfg = b.build().configure().expect("configure");
            let tls = tokio_boring::connect(cfg, "localhost", tcp)
                .await
                .expect("TLS handshake");
            assert_eq!(tls.ssl().selected_alpn_protocol(), Some(&b"h2"[..]));
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .expect("HTTP/2 handshake");
            tokio::spawn(conn);
            let mut out = Vec::new();
            for m in msgs {
                let req = Request::post(format!("https://localhost:{port}{path}"))
                    .header("content-type", "application/grpc")
                    .header("te", "trailers")
                    .header("grpc-timeout", "5S")
                    .body(Full::new(Bytes::from(grpc_frame(m))))
                    .expect("request");
                let resp = sender.send_request(req).await.expect("gRPC response");
                let (parts, body) = resp.into_parts();
                let collected = body.collect().await.expect("response body");
                let trailers = collected.trailers().cloned();
                out.push(GrpcReply {
                    status: parts.status,
                    headers: parts.headers,
                    data: collected.to_bytes(),
                    trailers,
                });
            }
            out
        })
        .await
        .expect("gRPC calls finished within 10 s")
    })
}

#[test]
fn grpc_unary_call_passes_messages_and_trailers() {
    let _lock = support::shared();
    let up = Upstream::grpc();
    let gw = grpc_gateway(&up);
    let replies = grpc_calls(gw.port, "/echo.Echo/Say", &[b"hello", b"", &[7u8; 3000]]);
    let expect: [&[u8]; 3] = [b"reply:hello", b"reply:", &[]];
    for (i, r) in replies.iter().enumerate() {
        assert_eq!(r.status, StatusCode::OK, "call {i}: {r:?}");
        assert_eq!(
            r.headers.get("content-type").map(|v| v.as_bytes()),
            Some(&b"application/grpc+proto"[..]),
            "call {i}: {r:?}"
        );
        let msgs = grpc_messages(&r.data).expect("whole gRPC frames");
        assert_eq!(msgs.len(), 1, "call {i}: {r:?}");
        if i < 2 {
            assert_eq!(msgs[0], expect[i], "call {i}");
        } else {
            assert_eq!(&msgs[0][..6], b"reply:");
            assert_eq!(&msgs[0][6..], &[7u8; 3000][..]);
        }
        let trailers = r.trailers.as_ref().unwrap_or_else(|| {
            panic!(
                "call {i}: no trailers (grpc-status lost): {r:?}\n{}",
                gw.log_text()
            )
        });
        assert_eq!(
            trailers.get("grpc-status").map(|v| v.as_bytes()),
            Some(&b"0"[..]),
            "call {i}: {trailers:?}"
        );
    }
    let seen = up.state.seen();
    assert_eq!(seen.len(), 3);
    for s in &seen {
        assert_eq!(s.method, "POST");
        assert_eq!(s.version, "HTTP/2.0");
        assert_eq!(s.path, "/echo.Echo/Say");
        assert_eq!(s.header("content-type"), Some("application/grpc"));
        assert_eq!(s.header("grpc-timeout"), Some("5S"));
    }
    assert!(gw.counter("cluster.grpc.upstream_rq_200") >= 3);
    assert!(gw.counter("http.ingress_http.downstream_rq_http2_total") >= 3);
}

#[test]
fn grpc_te_trailers_reaches_the_upstream() {
    let _lock = support::shared();
    let up = Upstream::grpc();
    let gw = grpc_gateway(&up);
    let replies = grpc_calls(gw.port, "/echo.Echo/Say", &[b"te"]);
    assert_eq!(replies[0].status, StatusCode::OK, "{replies:?}");
    assert_eq!(up.state.last().header("te"), Some("trailers"));
}

// ---------------------------------------------------------------------------------------------
// WebSocket

fn ws_gateway(up: &Upstream, upgrades: bool) -> Gateway {
    let hcm = if upgrades {
        "          upgrade_configs:\n          - upgrade_type: websocket"
    } else {
        ""
    };
    let cfg = proxy_config(
        "",
        hcm,
        &route("/", "ws", ""),
        "",
        &cluster("ws", "STATIC", "127.0.0.1", up.port, ""),
    );
    Gateway::start(&cfg, ARGS)
}

pub(crate) type Tls = boring::ssl::SslStream<TcpStream>;

/// A TLS connection with ALPN http/1.1 (WebSocket over HTTP/1.1).
pub(crate) fn tls_connect(port: u16) -> Tls {
    let mut b = SslConnector::builder(SslMethod::tls()).expect("connector");
    b.set_ca_file(cert("rsa2048.cert.pem")).expect("CA");
    b.set_verify(SslVerifyMode::PEER);
    b.set_alpn_protos(b"\x08http/1.1").expect("ALPN");
    let tcp = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    let tls = b.build().connect("localhost", tcp).expect("TLS handshake");
    assert_eq!(tls.ssl().selected_alpn_protocol(), Some(&b"http/1.1"[..]));
    tls
}

/// Read up to the end of the response head; the head and any bytes after it.
pub(crate) fn read_head(tls: &mut Tls) -> (String, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return (String::from_utf8_lossy(&buf).to_string(), rest);
        }
        let n = tls.read(&mut chunk).expect("read the response head");
        assert!(n > 0, "closed before the response head: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

pub(crate) fn head_header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
}

pub(crate) const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

fn upgrade_request(port: u16, path: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
}

#[test]
fn websocket_upgrade_then_bytes_echo_both_ways() {
    let _lock = support::shared();
    // The RFC 6455 example.
    assert_eq!(websocket_accept(KEY), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    let up = Upstream::websocket();
    let gw = ws_gateway(&up, true);
    let mut tls = tls_connect(gw.port);
    tls.write_all(upgrade_request(gw.port, "/chat?room=1").as_bytes())
        .expect("write upgrade");
    let (head, rest) = read_head(&mut tls);
    assert!(
        head.starts_with("HTTP/1.1 101"),
        "{head}\n{}",
        gw.log_text()
    );
    assert!(
        rest.is_empty(),
        "no bytes before the client spoke: {rest:?}"
    );
    assert_eq!(
        head_header(&head, "sec-websocket-accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
        "{head}"
    );
    assert!(head_header(&head, "upgrade").is_some_and(|v| v.eq_ignore_ascii_case("websocket")));
    // Bytes both ways: a small message, then 256 KiB in one go.
    let msgs: [Vec<u8>; 2] = [
        b"\x81\x05hello".to_vec(),
        (0..256 * 1024).map(|i| (i % 251) as u8).collect(),
    ];
    for m in &msgs {
        tls.write_all(m).expect("write");
        let mut back = vec![0u8; m.len()];
        tls.read_exact(&mut back).expect("read the echo");
        assert!(back == *m, "echo differs ({} bytes)", m.len());
    }
    let seen = up.state.last();
    assert_eq!(seen.path, "/chat?room=1");
    assert_eq!(seen.header("upgrade"), Some("websocket"));
    assert_eq!(seen.header("sec-websocket-key"), Some(KEY));
    assert_eq!(seen.header("x-forwarded-proto"), Some("https"));
    drop(tls);
    // The gateway keeps serving new upgrades.
    let mut again = tls_connect(gw.port);
    again
        .write_all(upgrade_request(gw.port, "/again").as_bytes())
        .expect("write upgrade");
    let (head, _) = read_head(&mut again);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    again.write_all(b"ping").expect("write");
    let mut back = [0u8; 4];
    again.read_exact(&mut back).expect("echo");
    assert_eq!(&back, b"ping");
}

#[test]
fn websocket_upgrade_is_not_forwarded_without_upgrade_configs() {
    let _lock = support::shared();
    let up = Upstream::websocket();
    let gw = ws_gateway(&up, false);
    let mut tls = tls_connect(gw.port);
    tls.write_all(upgrade_request(gw.port, "/chat").as_bytes())
        .expect("write upgrade");
    let (head, _) = read_head(&mut tls);
    assert!(
        !head.starts_with("HTTP/1.1 101"),
        "upgraded without upgrade_configs: {head}"
    );
    // If the request reached the upstream at all, the upgrade headers were stripped.
    for s in up.state.seen() {
        assert_eq!(s.header("upgrade"), None, "{s:?}");
    }
}
