//! The connection manager, router, listener and cluster options Envoy Gateway and istiod set by
//! default, with Envoy's effect, seen by curl and by the upstream: the router's
//! `suppress_envoy_headers` (`x-envoy-upstream-service-time` on the response,
//! `x-envoy-expected-rq-timeout-ms` on the upstream request), `server_header_transformation`
//! with `server_name`, `common_http_protocol_options.headers_with_underscores_action` (over
//! HTTP/1.1 and HTTP/2), `http2_protocol_options` (the SETTINGS and connection window a client
//! is sent), a listener's `max_connections_to_accept_per_socket_event` and
//! `per_connection_buffer_limit_bytes` (the largest body retried). Each
//! variant runs against quickshake and against stock Envoy 1.39.3, the reference. A cluster's
//! `dns_lookup_family` is checked on quickshake alone (Envoy's c-ares resolver would query DNS
//! for the families an IP literal lacks, which a sandbox may not answer).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use boring::ssl::{SslConnector, SslMethod, SslVerifyMode};

use crate::support::envoy::Envoy;
use crate::support::upstreams::{cluster, fetch, proxy_config, route, HttpOpts, Reply, Upstream};
use crate::support::{self, cert, free_port, render, Gateway};

/// The connection manager's `http2_protocol_options` (Envoy Gateway's ClientTrafficPolicy
/// defaults for windows: 64 KiB per stream, 1 MiB per connection).
const MAX_STREAMS: u32 = 7;
const STREAM_WINDOW: u32 = 65_536;
const CONNECTION_WINDOW: u32 = 1_048_576;

const ROUTER_TYPE: &str =
    "\"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";

/// One set of options, and what Envoy does with them.
#[derive(Clone, Copy, Debug)]
struct Variant {
    /// `server_header_transformation`.
    server: &'static str,
    /// `headers_with_underscores_action`.
    underscores: &'static str,
    suppress_envoy_headers: bool,
    proxy_100_continue: bool,
}

const VARIANTS: [Variant; 3] = [
    Variant {
        server: "APPEND_IF_ABSENT",
        underscores: "DROP_HEADER",
        suppress_envoy_headers: false,
        proxy_100_continue: false,
    },
    Variant {
        server: "OVERWRITE",
        underscores: "REJECT_REQUEST",
        suppress_envoy_headers: true,
        proxy_100_continue: true,
    },
    Variant {
        server: "PASS_THROUGH",
        underscores: "ALLOW",
        suppress_envoy_headers: false,
        proxy_100_continue: false,
    },
];

/// A TLS listener (accepting one connection per wakeup) in front of `up` (which answers with
/// `server: origin`): `/local` is a direct response, `/timeout` a route with a 3 s timeout,
/// everything else the route's default (15 s).
fn config(v: Variant, up: u16) -> String {
    let routes = [
        "              - match: { prefix: /local }\n                direct_response: { status: 200, body: { inline_string: local } }".to_owned(),
        route("/timeout", "up", "                  timeout: 3s"),
        route("/", "up", ""),
    ]
    .join("\n");
    let hcm = format!(
        "          server_name: gw\n          server_header_transformation: {}\n          common_http_protocol_options:\n            headers_with_underscores_action: {}\n          http2_protocol_options: {{ max_concurrent_streams: {MAX_STREAMS}, initial_stream_window_size: {STREAM_WINDOW}, initial_connection_window_size: {CONNECTION_WINDOW} }}\n          proxy_100_continue: {}",
        v.server, v.underscores, v.proxy_100_continue
    );
    let yaml = proxy_config(
        "    max_connections_to_accept_per_socket_event: 1",
        &hcm,
        &routes,
        "",
        &cluster("up", "STATIC", "127.0.0.1", up, ""),
    );
    yaml.replace(
        ROUTER_TYPE,
        &format!(
            "{ROUTER_TYPE}\n              suppress_envoy_headers: {}",
            v.suppress_envoy_headers
        ),
    )
}

fn upstream() -> Upstream {
    Upstream::http(HttpOpts {
        headers: vec![("server", "origin")],
        ..Default::default()
    })
}

/// Every check of variant `v` against the proxy (`who`) on `port` in front of `up`.
fn check(who: &str, v: Variant, port: u16, up: &Upstream, log: &dyn Fn() -> String) {
    let url = |path: &str| format!("https://localhost:{port}{path}");
    let ctx = |what: &str, r: &Reply| format!("{who}, {v:?}, {what}: {r:?}\n{}", log());

    // The Server header, from the upstream and on a local reply.
    let r = fetch(&["--http1.1"], &url("/up"));
    assert_eq!(r.status, 200, "{}", ctx("upstream", &r));
    let want = match v.server {
        "OVERWRITE" => Some("gw"),
        _ => Some("origin"),
    };
    assert_eq!(r.header("server"), want, "{}", ctx("upstream server", &r));
    let r = fetch(&["--http1.1"], &url("/local"));
    assert_eq!(r.status, 200, "{}", ctx("local", &r));
    let want = match v.server {
        "PASS_THROUGH" => None,
        _ => Some("gw"),
    };
    assert_eq!(
        r.header("server"),
        want,
        "{}",
        ctx("local reply server", &r)
    );

    // The router's x-envoy-* headers.
    for (path, timeout) in [("/up", "15000"), ("/timeout", "3000")] {
        let r = fetch(&["--http1.1"], &url(path));
        assert_eq!(r.status, 200, "{}", ctx(path, &r));
        let seen = up.state.last();
        if v.suppress_envoy_headers {
            assert_eq!(
                r.header("x-envoy-upstream-service-time"),
                None,
                "{}",
                ctx(path, &r)
            );
            assert_eq!(
                seen.header("x-envoy-expected-rq-timeout-ms"),
                None,
                "{who} {path}"
            );
        } else {
            let t = r.header("x-envoy-upstream-service-time");
            assert!(
                t.is_some_and(|t| t.parse::<u64>().is_ok()),
                "{}",
                ctx(path, &r)
            );
            assert_eq!(
                seen.header("x-envoy-expected-rq-timeout-ms"),
                Some(timeout),
                "{who} {path}: {seen:?}"
            );
        }
    }

    // Header names with underscores, over HTTP/1.1 and HTTP/2.
    for flag in ["--http1.1", "--http2"] {
        let before = up.state.request_count();
        let r = fetch(
            &[flag, "-H", "x_under: 1", "-H", "x-dash: 2"],
            &url("/underscore"),
        );
        let what = format!("underscore {flag}");
        match v.underscores {
            "REJECT_REQUEST" => {
                if flag == "--http1.1" {
                    assert_eq!(r.status, 400, "{}", ctx(&what, &r));
                } else {
                    // The stream is reset: no response.
                    assert_eq!(r.status, 0, "{}", ctx(&what, &r));
                }
                assert_eq!(up.state.request_count(), before, "{}", ctx(&what, &r));
            }
            action => {
                assert_eq!(r.status, 200, "{}", ctx(&what, &r));
                let seen = up.state.last();
                assert_eq!(seen.header("x-dash"), Some("2"), "{who} {what}");
                let want = (action == "ALLOW").then_some("1");
                assert_eq!(seen.header("x_under"), want, "{who} {what}: {seen:?}");
            }
        }
    }

    // `Expect: 100-continue` goes upstream only with `proxy_100_continue`; the client gets its
    // 100 either way and the body arrives.
    let r = fetch(
        &[
            "--http1.1",
            "-H",
            "Expect: 100-continue",
            "--data-binary",
            "0123456789",
        ],
        &url("/expect"),
    );
    assert!(
        r.status_line.contains("100") && r.body.contains(" 200 "),
        "{}",
        ctx("expect", &r)
    );
    let seen = up.state.last();
    let want = v.proxy_100_continue.then_some("100-continue");
    assert_eq!(seen.header("expect"), want, "{who} {v:?}: {seen:?}");
    assert_eq!(seen.body, b"0123456789", "{who}");

    // The HTTP/2 settings a client is sent.
    let (settings, connection_window) = h2_settings(port);
    assert_eq!(
        (settings.get(&3), settings.get(&4), connection_window),
        (Some(&MAX_STREAMS), Some(&STREAM_WINDOW), CONNECTION_WINDOW),
        "{who}: SETTINGS_MAX_CONCURRENT_STREAMS, SETTINGS_INITIAL_WINDOW_SIZE, connection window"
    );

    // One connection accepted per wakeup still serves many at once.
    let handles: Vec<_> = (0..12)
        .map(|i| {
            let u = url(&format!("/many/{i}"));
            std::thread::spawn(move || fetch(&["--http1.1"], &u).status)
        })
        .collect();
    for h in handles {
        assert_eq!(
            h.join().expect("curl thread"),
            200,
            "{who}, {v:?}: parallel"
        );
    }
}

#[test]
fn envoy_defaults_of_the_control_planes_as_quickshake() {
    let _lock = support::shared();
    for v in VARIANTS {
        let up = upstream();
        let gw = Gateway::start(&config(v, up.port), &["--concurrency", "1"]);
        check("quickshake", v, gw.port, &up, &|| gw.log_text());
    }
}

#[test]
fn envoy_defaults_of_the_control_planes_as_envoy() {
    let _lock = support::shared();
    for v in VARIANTS {
        let up = upstream();
        let dir = tempfile::tempdir().expect("tempdir");
        let (port, admin) = (free_port(), free_port());
        let yaml = render(&config(v, up.port), port, free_port(), admin, dir.path());
        let envoy = Envoy::start(&yaml, admin);
        check("envoy", v, port, &up, &|| envoy.log_text());
    }
}

/// `dns_lookup_family` on STRICT_DNS and LOGICAL_DNS clusters whose name is `127.0.0.1` (one
/// IPv4 address): V4_ONLY, V4_PREFERRED, AUTO (IPv6 first, falling back to IPv4) and ALL reach
/// it; V6_ONLY finds no address, so the cluster has no host (503 `no healthy upstream`).
#[test]
fn dns_lookup_family_chooses_the_addresses() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let families = ["V4_ONLY", "V4_PREFERRED", "AUTO", "ALL", "V6_ONLY"];
    let mut routes = Vec::new();
    let mut clusters = String::new();
    for f in families {
        for kind in ["STRICT_DNS", "LOGICAL_DNS"] {
            let name = format!("{}_{}", f.to_ascii_lowercase(), kind.to_ascii_lowercase());
            routes.push(route(&format!("/{name}"), &name, ""));
            clusters += &cluster(
                &name,
                kind,
                "127.0.0.1",
                up.port,
                &format!("    dns_lookup_family: {f}"),
            );
        }
    }
    let gw = Gateway::start(
        &proxy_config("", "", &routes.join("\n"), "", &clusters),
        &["--concurrency", "1"],
    );
    for f in families {
        for kind in ["strict_dns", "logical_dns"] {
            let path = format!("/{}_{kind}", f.to_ascii_lowercase());
            let r = fetch(&["--http1.1"], &gw.url(&path));
            if f == "V6_ONLY" {
                assert_eq!(r.status, 503, "{path}: {r:?}");
                assert_eq!(r.body, "no healthy upstream", "{path}");
            } else {
                assert_eq!(r.status, 200, "{path}: {r:?}\n{}", gw.log_text());
                assert_eq!(r.json()["path"], path);
            }
        }
    }
}

/// A listener's `per_connection_buffer_limit_bytes` (Envoy Gateway sets 32768) bounds the
/// request body buffered for a retry, as Envoy's router takes its stream's buffer limit: a
/// larger body is forwarded once and its 503 comes back; a smaller one is retried.
fn check_buffer_limit(who: &str, port: u16, up: &Upstream, log: &dyn Fn() -> String) {
    let url = format!("https://localhost:{port}/post");
    for (size, status, requests) in [(40_000, 503, 1), (20_000, 200, 2)] {
        let before = up.state.request_count();
        let body = "a".repeat(size);
        let r = fetch(&["--http1.1", "--data-binary", &body], &url);
        assert_eq!(r.status, status, "{who}, {size} bytes: {r:?}\n{}", log());
        assert_eq!(
            up.state.request_count() - before,
            requests,
            "{who}, {size} bytes: upstream requests"
        );
        assert_eq!(up.state.last().body.len(), size, "{who}");
    }
}

fn buffer_limit_config(up: u16) -> String {
    proxy_config(
        "    per_connection_buffer_limit_bytes: 32768",
        "",
        &route(
            "/",
            "up",
            "                  retry_policy: { retry_on: 5xx, num_retries: 1 }",
        ),
        "",
        &cluster(
            "up",
            "STATIC",
            "127.0.0.1",
            up,
            "    per_connection_buffer_limit_bytes: 32768",
        ),
    )
}

#[test]
fn per_connection_buffer_limit_bounds_retried_bodies_as_quickshake() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::statuses(&[503, 503]));
    let gw = Gateway::start(&buffer_limit_config(up.port), &["--concurrency", "1"]);
    check_buffer_limit("quickshake", gw.port, &up, &|| gw.log_text());
}

#[test]
fn per_connection_buffer_limit_bounds_retried_bodies_as_envoy() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::statuses(&[503, 503]));
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, admin) = (free_port(), free_port());
    let yaml = render(
        &buffer_limit_config(up.port),
        port,
        free_port(),
        admin,
        dir.path(),
    );
    let envoy = Envoy::start(&yaml, admin);
    check_buffer_limit("envoy", port, &up, &|| envoy.log_text());
}

/// An HTTP/2 connection's opening as the server sends it: its SETTINGS (identifier → value)
/// and its connection flow-control window (65535 plus the WINDOW_UPDATEs on stream 0 that
/// come with it).
fn h2_settings(port: u16) -> (HashMap<u16, u32>, u32) {
    let mut b = SslConnector::builder(SslMethod::tls()).expect("connector");
    b.set_ca_file(cert("rsa2048.cert.pem")).expect("CA");
    b.set_verify(SslVerifyMode::PEER);
    b.set_alpn_protos(b"\x02h2").expect("ALPN");
    let tcp = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("read timeout");
    let mut tls = b.build().connect("localhost", tcp).expect("TLS handshake");
    assert_eq!(tls.ssl().selected_alpn_protocol(), Some(&b"h2"[..]));
    // The preface and an empty SETTINGS frame.
    tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .expect("preface");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    // Read until the server goes quiet (it waits for our requests).
    while let Ok(n) = tls.read(&mut chunk) {
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let (mut settings, mut window) = (HashMap::new(), 65_535u32);
    let mut rest = buf.as_slice();
    while rest.len() >= 9 {
        let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
        let (kind, flags) = (rest[3], rest[4]);
        let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff;
        let Some(payload) = rest.get(9..9 + len) else {
            break;
        };
        match kind {
            // SETTINGS, not an ACK.
            0x4 if flags & 1 == 0 => {
                for p in payload.chunks_exact(6) {
                    settings.insert(
                        u16::from_be_bytes([p[0], p[1]]),
                        u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
                    );
                }
            }
            // WINDOW_UPDATE on the connection.
            0x8 if stream == 0 && payload.len() == 4 => {
                window += u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                    & 0x7fff_ffff;
            }
            _ => {}
        }
        rest = &rest[9 + len..];
    }
    (settings, window)
}

/// `stream_idle_timeout: 0.5s` with the route's timeout off: a whole request to an upstream
/// that answers after 2 s is answered 504 `stream timeout` (Envoy 1.39.3: 504 once the request
/// is complete); a request whose body stops coming, 408 `stream timeout`; one to an upstream
/// that answers at once, 200.
fn check_stream_idle(who: &str, port: u16, log: &dyn Fn() -> String) {
    let url = |path: &str| format!("https://localhost:{port}{path}");
    let r = fetch(&["--http1.1"], &url("/slow"));
    assert_eq!(
        (r.status, r.body.as_str()),
        (504, "stream timeout"),
        "{who}: {r:?}\n{}",
        log()
    );
    // Headers announcing 100 body bytes, 10 of them, then nothing.
    let mut tls = crate::proxy_grpc_ws::tls_connect(port);
    tls.write_all(
        b"POST /fast HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n0123456789",
    )
    .expect("write");
    let (head, _) = crate::proxy_grpc_ws::read_head(&mut tls);
    assert!(
        head.starts_with("HTTP/1.1 408"),
        "{who}, a stalled body: {head}\n{}",
        log()
    );
    let r = fetch(&["--http2"], &url("/fast"));
    assert_eq!(r.status, 200, "{who}: {r:?}\n{}", log());
}

fn stream_idle_config(slow: u16, fast: u16) -> String {
    proxy_config(
        "",
        "          stream_idle_timeout: 0.5s",
        &[
            route("/slow", "slow", "                  timeout: 0s"),
            route("/fast", "fast", "                  timeout: 0s"),
        ]
        .join("\n"),
        "",
        &(cluster("slow", "STATIC", "127.0.0.1", slow, "")
            + &cluster("fast", "STATIC", "127.0.0.1", fast, "")),
    )
}

#[test]
fn stream_idle_timeout_as_quickshake() {
    let _lock = support::shared();
    let slow = Upstream::http(HttpOpts::delay(Duration::from_secs(2)));
    let fast = Upstream::http(HttpOpts::default());
    let gw = Gateway::start(
        &stream_idle_config(slow.port, fast.port),
        &["--concurrency", "1"],
    );
    check_stream_idle("quickshake", gw.port, &|| gw.log_text());
    assert_eq!(
        gw.counter("http.ingress_http.downstream_rq_idle_timeout"),
        2
    );
}

#[test]
fn stream_idle_timeout_as_envoy() {
    let _lock = support::shared();
    let slow = Upstream::http(HttpOpts::delay(Duration::from_secs(2)));
    let fast = Upstream::http(HttpOpts::default());
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, admin) = (free_port(), free_port());
    let yaml = render(
        &stream_idle_config(slow.port, fast.port),
        port,
        free_port(),
        admin,
        dir.path(),
    );
    let envoy = Envoy::start(&yaml, admin);
    check_stream_idle("envoy", port, &|| envoy.log_text());
}
