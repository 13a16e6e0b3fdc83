//! Hostile clients against a running gateway: random bytes, lying and oversized ClientHellos,
//! TLS records with bad lengths, a slowloris ClientHello, HTTP request smuggling over TLS and
//! oversized headers. After each, a normal client is still served (curl 200) and the counters
//! say what happened.
//!
//! Every check has a positive control: the same predicate applied to a case it must flag (a
//! well-formed handshake is counted as a handshake and not as an error, a pipelined pair of
//! requests is counted as two, a normal header size is accepted, a completed handshake is not
//! closed at the handshake timeout). See docs/reliability.md.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use boring::ssl::SslStream;

use crate::support;
use crate::support::tls_client::{connector, ClientOpts};
use crate::support::*;

/// One TLS listener (direct response 200), handshake timeout 1 s, `max_request_headers_kb: 8`.
fn hostile_config() -> String {
    let t = direct_response_config(
        &plain_cert("rsa2048"),
        "",
        "          max_request_headers_kb: 8",
    );
    let t = t.replace(
        "\n      filters:\n",
        "\n      transport_socket_connect_timeout: 1s\n      filters:\n",
    );
    assert!(t.contains("transport_socket_connect_timeout"));
    t
}

fn curl_code(gw: &Gateway) -> String {
    support::curl_code(&gw.url("/"), "rsa2048.cert.pem")
}

fn curl_ok(gw: &Gateway) {
    assert_eq!(curl_code(gw), "200", "curl after hostile input");
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s
}

/// Offset of the two-byte extensions length in a ClientHello record.
fn extensions_len_offset(hello: &[u8]) -> usize {
    // record header 5, handshake header 4, version 2, random 32
    let mut i = 5 + 4 + 2 + 32;
    i += 1 + usize::from(hello[i]); // session id
    i += 2 + usize::from(u16::from_be_bytes([hello[i], hello[i + 1]])); // cipher suites
    i += 1 + usize::from(hello[i]); // compression methods
    let ext = usize::from(u16::from_be_bytes([hello[i], hello[i + 1]]));
    assert_eq!(
        i + 2 + ext,
        hello.len(),
        "parsed the ClientHello to its end"
    );
    i
}

fn noise(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 7) as u8
        })
        .collect()
}

struct Counts {
    errors: u64,
    handshakes: u64,
    timeouts: u64,
}

fn counts(gw: &Gateway) -> Counts {
    let scope = gw.scope("127.0.0.1");
    let s = gw.stats();
    let get = |n: &str| {
        s.get(&format!("{scope}{n}"))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Counts {
        errors: get("ssl.connection_error"),
        handshakes: get("ssl.handshake"),
        timeouts: get("downstream_cx_transport_socket_connect_timeout"),
    }
}

/// Send `bytes`, half-close, wait for the gateway to close; then the connection must be counted
/// as exactly one TLS error, no handshake, and curl must still get 200. Returns whether the
/// connection was counted as an error (so that the positive control can use the same check).
fn hostile_case(gw: &Gateway, what: &str, bytes: &[u8]) -> bool {
    let before = counts(gw);
    let mut s = connect(gw.port);
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let closed = support::closed_within(&mut s);
    assert!(
        closed.is_some(),
        "{what}: the gateway kept the connection open"
    );
    drop(s);
    let active = format!("{}downstream_cx_active", gw.scope("127.0.0.1"));
    eventually("connection gone", || gw.counter(&active) == 0);
    let after = counts(gw);
    eprintln!(
        "{what}: {} bytes, closed in {:?}, ssl.connection_error +{}, ssl.handshake +{}",
        bytes.len(),
        closed.unwrap_or_default(),
        after.errors - before.errors,
        after.handshakes - before.handshakes
    );
    assert_eq!(after.handshakes, before.handshakes, "{what}: no handshake");
    after.errors == before.errors + 1
}

#[test]
fn hostile_bytes_and_client_hellos_hurt_only_themselves() {
    let _lock = support::shared();
    let hello = support::capture_client_hello();
    let gw = Gateway::start(&hostile_config(), &["--concurrency", "2"]);
    curl_ok(&gw);

    // Positive control: a well-formed handshake (boring client, one request) is counted as a
    // handshake and not as an error, so the error predicate below can tell the two apart.
    let before = counts(&gw);
    let (_, status) =
        support::tls_client::handshake(gw.port, &ClientOpts::default()).expect("handshake");
    assert!(status.contains("200"), "{status}");
    let after = counts(&gw);
    assert_eq!(after.handshakes, before.handshakes + 1, "control: counted");
    assert_eq!(after.errors, before.errors, "control: not an error");

    let ext = extensions_len_offset(&hello);
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("random bytes", noise(4096, 0x9e37_79b9)),
        ("record header claiming 16 KB, then garbage", {
            let mut v = vec![0x16, 0x03, 0x01, 0x40, 0x00];
            v.extend(noise(300, 7));
            v
        }),
        ("record length above the TLS maximum", {
            let mut v = vec![0x16, 0x03, 0x01, 0x48, 0x01];
            v.extend(noise(64, 11));
            v
        }),
        ("handshake message length larger than its record", {
            let mut v = hello.clone();
            v[6..9].copy_from_slice(&[0x00, 0xff, 0xff]);
            v
        }),
        ("ClientHello whose extensions length lies (longer)", {
            let mut v = hello.clone();
            let n = u16::from_be_bytes([v[ext], v[ext + 1]]) + 200;
            v[ext..ext + 2].copy_from_slice(&n.to_be_bytes());
            v
        }),
        ("ClientHello whose extensions length lies (shorter)", {
            let mut v = hello.clone();
            let n = u16::from_be_bytes([v[ext], v[ext + 1]]) - 10;
            v[ext..ext + 2].copy_from_slice(&n.to_be_bytes());
            v
        }),
        (
            "record length shorter than the ClientHello (split mid-message, garbage after)",
            {
                let mut v = hello.clone();
                v[3..5].copy_from_slice(&50u16.to_be_bytes());
                v
            },
        ),
        ("truncated ClientHello", hello[..hello.len() / 2].to_vec()),
        ("application data record before the handshake", {
            let mut v = vec![0x17, 0x03, 0x03, 0x00, 0x20];
            v.extend(noise(32, 3));
            v
        }),
        (
            "oversized ClientHello: 16 KB record of padding extension garbage",
            {
                let mut v = hello[..5 + 4].to_vec();
                v[3..5].copy_from_slice(&0x4000u16.to_be_bytes());
                v[6..9].copy_from_slice(&[0x00, 0x3f, 0xfc]);
                v.extend(noise(0x4000 - 4, 5));
                v
            },
        ),
    ];
    for (what, bytes) in cases.drain(..) {
        assert!(hostile_case(&gw, what, &bytes), "{what}: not counted");
        curl_ok(&gw);
    }
    let end = counts(&gw);
    eprintln!(
        "totals: ssl.connection_error {}, ssl.handshake {}",
        end.errors, end.handshakes
    );
}

#[test]
fn slowloris_client_hello_is_closed_at_the_handshake_timeout() {
    let _lock = support::exclusive();
    let hello = support::capture_client_hello();
    let gw = Gateway::start(&hostile_config(), &["--concurrency", "1"]);
    let c = connector(&ClientOpts::default()).expect("connector");

    // Positive control: a client that finished its handshake within the timeout is NOT closed
    // at the handshake timeout (the same `closed_within` check reports it open).
    let tcp = connect(gw.port);
    let mut ok = c.connect("localhost", tcp).expect("handshake");
    ok.get_ref()
        .set_read_timeout(Some(Duration::from_millis(1600)))
        .expect("timeout");

    let mut s = connect(gw.port);
    let mut w = s.try_clone().expect("clone");
    let started = Instant::now();
    let trickle = std::thread::spawn(move || {
        let mut sent = 0;
        for b in hello.iter().take(25) {
            if w.write_all(std::slice::from_ref(b)).is_err() {
                break;
            }
            sent += 1;
            std::thread::sleep(Duration::from_millis(200));
        }
        sent
    });
    // Others are served at once while the slow client trickles.
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    curl_ok(&gw);
    assert!(t.elapsed() < Duration::from_millis(700), "curl waited");
    let closed = support::closed_within(&mut s).expect("slowloris connection still open after 5 s");
    let at = started.elapsed();
    let sent = trickle.join().expect("trickle thread");
    eprintln!("slowloris: closed after {at:?} ({closed:?} of reading), {sent} bytes trickled");
    assert!(
        at >= Duration::from_millis(900) && at < Duration::from_millis(2500),
        "closed after {at:?}, want about 1 s"
    );
    assert!(sent < 20, "the gateway accepted {sent} trickled bytes");
    eventually("one handshake timeout counted", || {
        counts(&gw).timeouts == 1
    });

    // The control connection survived the timeout and is still served.
    assert!(
        support::closed_within(&mut ok).is_none(),
        "control: a completed handshake was closed at the handshake timeout"
    );
    let (code, _) = keepalive_get(&mut ok, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(code, 200);
    assert_eq!(counts(&gw).timeouts, 1, "control: not counted as a timeout");
    curl_ok(&gw);
}

/// Write one raw request; read one response (head and Content-Length body).
fn keepalive_get(s: &mut SslStream<TcpStream>, raw: &str) -> (u16, String) {
    s.write_all(raw.as_bytes()).expect("write request");
    read_http1_response(s).expect("a response")
}

/// Send a raw request (possibly several) on a fresh TLS connection; every response the gateway
/// sends until it closes or goes quiet for 1.5 s, whether it closed, and how much
/// `downstream_rq_total` grew.
fn raw_exchange(gw: &Gateway, raw: &[u8]) -> (Vec<u16>, bool, u64) {
    let total = format!("{}downstream_rq_total", "http.ingress_http.");
    let before = gw.counter(&total);
    let c = connector(&ClientOpts::default()).expect("connector");
    let tcp = connect(gw.port);
    let mut s = c.connect("localhost", tcp).expect("handshake");
    s.get_ref()
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .expect("timeout");
    // The gateway may answer (431) and close before it has read everything: a failed write is
    // part of the outcome, not an error of the harness.
    let _ = s.write_all(raw);
    let mut codes = Vec::new();
    while let Some((code, _)) = read_http1_response(&mut s) {
        codes.push(code);
    }
    let closed = support::closed_within(&mut s).is_some();
    std::thread::sleep(Duration::from_millis(100));
    (codes, closed, gw.counter(&total) - before)
}

#[test]
fn request_smuggling_attempts_are_rejected_not_split() {
    let _lock = support::shared();
    let gw = Gateway::start(&hostile_config(), &["--concurrency", "2"]);

    // Positive control: two honest pipelined requests ARE two requests, two responses; the
    // checks below would flag a smuggled request the same way.
    let (codes, _, grew) = raw_exchange(
        &gw,
        b"GET /a HTTP/1.1\r\nHost: localhost\r\n\r\nGET /b HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert_eq!(codes, vec![200, 200], "control: two pipelined requests");
    assert_eq!(grew, 2, "control: both counted");

    let smuggled = "GET /smuggled HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let attempts = [
        (
            "Content-Length + Transfer-Encoding: chunked",
            format!(
                "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\n\
                 Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n{smuggled}"
            ),
        ),
        (
            "two different Content-Length headers",
            format!(
                "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\
                 Content-Length: {}\r\n\r\n{smuggled}",
                smuggled.len()
            ),
        ),
        (
            "Transfer-Encoding: xchunked",
            format!(
                "POST / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: xchunked\r\n\r\n\
                 0\r\n\r\n{smuggled}"
            ),
        ),
        (
            "Transfer-Encoding: chunked, then Content-Length (reversed order)",
            format!(
                "POST / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\
                 Content-Length: 4\r\n\r\n0\r\n\r\n{smuggled}"
            ),
        ),
    ];
    let mut failures = Vec::new();
    for (what, raw) in &attempts {
        let (codes, closed, grew) = raw_exchange(&gw, raw.as_bytes());
        eprintln!("{what}: responses {codes:?}, closed {closed}, downstream_rq_total +{grew}");
        if grew > 1 || codes.len() > 1 || !closed {
            failures.push(format!(
                "{what}: responses {codes:?}, closed {closed}, rq_total +{grew}"
            ));
        }
        if let Some(c) = codes.first() {
            if *c != 400 && *c != 200 {
                failures.push(format!("{what}: answered {c}"));
            }
        }
        curl_ok(&gw);
    }
    assert!(
        failures.is_empty(),
        "smuggled requests were served: {failures:#?}"
    );
}

#[test]
fn oversized_headers_are_refused_and_counted() {
    let _lock = support::shared();
    let gw = Gateway::start(&hostile_config(), &["--concurrency", "1"]);
    let rq4xx = "http.ingress_http.downstream_rq_4xx";

    // Positive control: a 6 KB header (below max_request_headers_kb: 8) is accepted.
    let small = format!(
        "GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n",
        "a".repeat(6 * 1024)
    );
    let (codes, _, grew) = raw_exchange(&gw, small.as_bytes());
    assert_eq!(codes, vec![200], "control: 6 KB of headers accepted");
    assert_eq!(grew, 1);

    for (what, raw) in [
        (
            "one 12 KB header",
            format!(
                "GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n",
                "a".repeat(12 * 1024)
            ),
        ),
        (
            "200 headers of 64 bytes",
            format!(
                "GET / HTTP/1.1\r\nHost: localhost\r\n{}\r\n",
                (0..200)
                    .map(|i| format!("X-H{i}: {}\r\n", "b".repeat(58)))
                    .collect::<String>()
            ),
        ),
        (
            "a 64 KB header that never ends",
            format!(
                "GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: {}",
                "c".repeat(64 * 1024)
            ),
        ),
    ] {
        let before4 = gw.counter(rq4xx);
        let errs = format!("{}downstream_cx_protocol_error", "http.ingress_http.");
        let before_pe = gw.counter(&errs);
        let (codes, closed, grew) = raw_exchange(&gw, raw.as_bytes());
        let after4 = gw.counter(rq4xx);
        let after_pe = gw.counter(&errs);
        eprintln!(
            "{what}: responses {codes:?}, closed {closed}, rq_total +{grew}, rq_4xx +{}, \
             cx_protocol_error +{}",
            after4 - before4,
            after_pe - before_pe
        );
        assert!(
            codes.iter().all(|c| *c == 431 || *c == 400),
            "{what}: answered {codes:?}"
        );
        assert!(closed, "{what}: connection kept open");
        assert_eq!(grew, 0, "{what}: reached the router");
        curl_ok(&gw);
    }
}

/// Requests the HTTP codec refuses (431, 400) should be counted somewhere, as Envoy counts them
/// (`downstream_rq_4xx` for the local reply, `downstream_cx_protocol_error` for the codec
/// error). hyper answers them before the request reaches `handle_request`, so the connection
/// counts them from `serve_connection`'s error.
#[test]
fn refused_requests_are_counted() {
    let _lock = support::shared();
    let gw = Gateway::start(&hostile_config(), &["--concurrency", "1"]);
    let http = "http.ingress_http.";
    let counted = |gw: &Gateway| {
        gw.counter(&format!("{http}downstream_rq_4xx"))
            + gw.counter(&format!("{http}downstream_rq_2xx"))
            + gw.counter(&format!("{http}downstream_cx_protocol_error"))
    };
    // Positive control: an accepted request moves the same sum.
    let before = counted(&gw);
    let (codes, _, _) = raw_exchange(&gw, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(codes, vec![200]);
    assert_eq!(counted(&gw), before + 1, "control: a 200 is counted");

    for (what, raw) in [
        (
            "12 KB header (431)",
            format!(
                "GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n",
                "a".repeat(12 * 1024)
            ),
        ),
        (
            "two Content-Length values (400)",
            "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n"
                .to_string(),
        ),
    ] {
        let before = counted(&gw);
        let (codes, _, _) = raw_exchange(&gw, raw.as_bytes());
        assert!(!codes.is_empty() && codes[0] >= 400, "{what}: {codes:?}");
        assert!(
            counted(&gw) > before,
            "{what}: answered {codes:?} but not counted"
        );
    }
}
