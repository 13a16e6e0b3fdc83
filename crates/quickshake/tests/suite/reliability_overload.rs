//! Overload and drain: at the global connection limit new connections are refused fast and
//! counted while established keep-alive connections keep getting 200; on SIGTERM an in-flight
//! request completes and the process exits 0.
//!
//! Positive controls: the "refused fast" check reports a connection under the limit as not
//! refused; after the drain a further request on the drained connection gets no response.
//! See docs/reliability.md.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use boring::ssl::SslStream;

use crate::support;
use crate::support::tls_client::{connector, ClientOpts};
use crate::support::*;

const LIMIT: &str = OVERLOAD_TWO_CONNECTIONS;

fn base() -> String {
    direct_response_config(&plain_cert("rsa2048"), "", "")
}

fn keepalive(port: u16) -> SslStream<TcpStream> {
    let c = connector(&ClientOpts::default()).expect("connector");
    let tcp = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    c.connect("localhost", tcp).expect("handshake")
}

fn get(s: &mut SslStream<TcpStream>) -> Option<u16> {
    s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .ok()?;
    read_http1_response(s).map(|(code, _)| code)
}

/// Connect and start a ClientHello; how long until the gateway closed it, `None` if it was
/// still open after `within` (not refused).
fn refused_within(port: u16, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(within)).expect("timeout");
    let _ = s.write_all(b"\x16\x03\x01");
    support::closed_within(&mut s).map(|_| started.elapsed())
}

#[test]
fn at_the_connection_limit_new_connections_are_refused_fast() {
    let _lock = support::exclusive();
    let gw = Gateway::start(&format!("{}{LIMIT}", base()), &["--concurrency", "2"]);
    let scope = gw.scope("127.0.0.1");
    let active = format!("{scope}downstream_cx_active");
    let overflow = format!("{scope}downstream_cx_overflow");

    let mut a = keepalive(gw.port);
    let mut b = keepalive(gw.port);
    assert_eq!(get(&mut a), Some(200));
    assert_eq!(get(&mut b), Some(200));
    eventually("two active", || gw.counter(&active) == 2);

    let limit = Duration::from_millis(50);
    let mut slowest = Duration::ZERO;
    for i in 0..20 {
        let took = refused_within(gw.port, Duration::from_secs(2))
            .unwrap_or_else(|| panic!("attempt {i}: not refused within 2 s"));
        slowest = slowest.max(took);
        // The established connections are unaffected, between refusals too.
        if i % 5 == 0 {
            assert_eq!(get(&mut a), Some(200));
            assert_eq!(get(&mut b), Some(200));
        }
    }
    eprintln!(
        "20 connections over the limit: slowest refusal {slowest:?}; downstream_cx_overflow {}",
        gw.counter(&overflow)
    );
    assert!(slowest < limit, "a refusal took {slowest:?}");
    eventually("20 overflows counted", || gw.counter(&overflow) == 20);
    assert_eq!(gw.counter(&active), 2);
    for _ in 0..10 {
        assert_eq!(get(&mut a), Some(200));
        assert_eq!(get(&mut b), Some(200));
    }

    // Positive control: below the limit the same check reports "not refused" (the connection
    // waits for the rest of its ClientHello).
    drop(b);
    eventually("one active", || gw.counter(&active) == 1);
    assert_eq!(
        refused_within(gw.port, Duration::from_millis(300)),
        None,
        "control: a connection under the limit was refused"
    );
    assert_eq!(gw.counter(&overflow), 20, "control: not counted");
    assert_eq!(get(&mut a), Some(200));
}

/// Size of the response that is still being sent when SIGTERM lands.
const BIG: usize = 16 << 20;

#[test]
fn sigterm_drains_in_flight_requests_and_exits_zero() {
    let _lock = support::shared();
    // A direct response this large needs the route configuration's leave, in Envoy too
    // (`max_direct_response_body_size_bytes`, default 4096).
    let template = base()
        .replace(
            "inline_string: \"hello from quickshake\"",
            &format!("inline_string: \"{}\"", "x".repeat(BIG)),
        )
        .replace(
            "          route_config:\n",
            &format!(
                "          route_config:\n            max_direct_response_body_size_bytes: {BIG}\n"
            ),
        );
    let mut gw = Gateway::start(&template, &["--concurrency", "1", "--drain-time-s", "5"]);
    let mut s = keepalive(gw.port);
    s.get_ref()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");

    // In flight: a 16 MB response of which the client has read only the first 64 KB (the rest
    // is more than the loopback socket buffers hold) when SIGTERM lands.
    s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("request");
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0;
    while got < buf.len() {
        let n = s.read(&mut buf[got..]).expect("first bytes");
        assert!(n > 0, "closed early");
        got += n;
    }
    let head = String::from_utf8_lossy(&buf[..got]).to_string();
    assert!(head.starts_with("HTTP/1.1 200"), "{}", &head[..40]);
    let head_len = head.find("\r\n\r\n").expect("head") + 4;
    let started = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &gw.pid().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    std::thread::sleep(Duration::from_millis(300));
    // The drain waits for the response: the process is still there.
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", gw.pid())).unwrap_or_default();
    let state = stat.rsplit(')').next().unwrap_or("").trim().chars().next();
    assert!(
        matches!(state, Some('S' | 'R' | 'D')),
        "the gateway did not wait for the in-flight response (state {state:?})"
    );
    // Positive control: a new connection is no longer accepted while draining.
    let c = connector(&ClientOpts::default()).expect("connector");
    let refused = TcpStream::connect(("127.0.0.1", gw.port))
        .map_err(|e| e.to_string())
        .and_then(|t| {
            t.set_read_timeout(Some(Duration::from_secs(2))).ok();
            c.connect("localhost", t)
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
    assert!(
        refused.is_err(),
        "control: a new connection was served while draining"
    );

    // The rest of the response arrives in full.
    let mut body = got - head_len;
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => body += n,
            Err(_) => break,
        }
        if body >= BIG {
            break;
        }
    }
    assert_eq!(body, BIG, "the in-flight response was cut");
    // Positive control: after the drain the connection takes no new request.
    assert_eq!(
        get(&mut s),
        None,
        "control: a request after the drain was answered"
    );
    let status = gw.terminate().expect("exited within 20 s");
    eprintln!(
        "drain: {BIG} byte response completed, exited {status} {:?} after SIGTERM",
        started.elapsed()
    );
    assert!(status.success(), "exit status {status}");
    assert!(started.elapsed() < Duration::from_secs(5));
}
