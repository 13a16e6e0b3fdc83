//! HTTP/3 data path, with aioquic as the client: a large proxied response streams through as
//! the upstream sends it (not read whole first), a stalled client stops the gateway reading
//! the upstream (backpressure, not buffering), and the QUIC sockets use the kernel's
//! segmentation offloads (GSO on send, GRO on receive) where it has them, counted in
//! `listener.<address>.http3.*`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use boring::hash::{hash, MessageDigest};

use crate::gateway_http3::{config, h3client, inline_cert};
use crate::support::envoy::envoy_binary;
use crate::support::{self, Gateway};

/// Large next to every window on the way (aioquic's 1 MiB stream window, quiche's stream
/// buffer, the 4-chunk channel); small enough for aioquic on a busy 2-core machine.
const BODY: usize = 4 << 20;

/// 4 MiB of pseudo-random bytes (xorshift).
fn body() -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity(BODY);
    while out.len() < BODY {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(BODY);
    out
}

/// An HTTP/1.1 upstream for one request that answers `body` in two halves, the second only
/// once told to (through the returned sender).
fn split_upstream(body: Vec<u8>) -> (u16, mpsc::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    let port = listener.local_addr().expect("upstream address").port();
    let (tx, rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        if support::read_head(&mut s).is_none() {
            return;
        }
        let mut buf = [0u8; 4096];
        let half = body.len() / 2;
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        if s.write_all(reply.as_bytes()).is_err() || s.write_all(&body[..half]).is_err() {
            return;
        }
        if rx.recv_timeout(Duration::from_secs(60)).is_err() {
            return;
        }
        let _ = s.write_all(&body[half..]);
        // Hold the connection until the gateway is done with it.
        let _ = s.read(&mut buf);
    });
    (port, tx)
}

#[test]
fn a_large_proxied_response_streams_and_quic_sockets_use_gso_and_gro() {
    let _lock = support::shared();
    let data = body();
    let expected: String = hash(MessageDigest::sha256(), &data)
        .expect("sha256")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let (port, second_half) = split_upstream(data);
    let gw = Gateway::start(&config(&inline_cert(), "", port), &["--concurrency", "1"]);
    let scope = gw.scope("127.0.0.1");
    // The upstream sends its second half only once the client has the first: a gateway that
    // read the body whole before writing it would never answer.
    let _ = envoy_binary(); // the venv with aioquic
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut client = Command::new("timeout")
        .arg("60")
        .arg(root.join("../../.venv/bin/python"))
        .arg(root.join("tests/suite/h3client.py"))
        .args(["requests", "127.0.0.1", &gw.port.to_string(), "localhost"])
        .arg(serde_json::json!([{"path": "/echo/big", "timeout": 50}]).to_string())
        .args(["--progress", &(BODY / 2).to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn h3client");
    let stdout = client.stdout.take().expect("client stdout");
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    assert!(
        first.contains("\"progress\""),
        "the first half did not arrive by itself: {first}\n{}",
        gw.log_text()
    );
    second_half.send(()).expect("the upstream waits");
    let last = lines.next().and_then(Result::ok).unwrap_or_default();
    assert!(client.wait().expect("h3client ends").success(), "{last}");
    let out: serde_json::Value = serde_json::from_str(&last).expect("JSON");
    let r = &out["results"][0];
    assert_eq!(r["status"], 200, "{out}");
    assert_eq!(r["len"], BODY, "{out}");
    assert_eq!(r["sha256"], expected.as_str(), "the body arrived intact");

    // GSO: the 4 MiB went out in sends of several datagrams each, where the kernel has
    // UDP_SEGMENT. GRO: 20 datagrams sent in one GSO send over loopback reach the gateway's
    // socket as one buffer, which it splits into 20 (each a truncated header: malformed).
    let malformed = gw.counter(&format!("{scope}http3.malformed_packets"));
    let gso = h3client(&["gso", "127.0.0.1", &gw.port.to_string(), "20"]);
    support::eventually("the 20 datagrams counted", || {
        gw.counter(&format!("{scope}http3.malformed_packets")) == malformed + 20
    });
    let sent = gw.counter(&format!("{scope}http3.datagrams_sent"));
    let received = gw.counter(&format!("{scope}http3.datagrams_received"));
    let gso_sends = gw.counter(&format!("{scope}http3.gso_sends"));
    let gro_batches = gw.counter(&format!("{scope}http3.gro_batches"));
    eprintln!(
        "http3: {sent} datagrams sent in {gso_sends} GSO sends and single ones, \
         {received} received, {gro_batches} GRO batches"
    );
    assert!(sent > (BODY / 1350) as u64, "{sent} datagrams sent");
    assert!(received > 20, "{received} datagrams received");
    if gso["gso"] == true {
        assert!(
            gso_sends >= 10,
            "{gso_sends} GSO sends for {sent} datagrams"
        );
        assert!(gro_batches >= 1, "GRO batches: {gro_batches}");
    } else {
        eprintln!("this kernel has no UDP GSO: one datagram per send");
        assert_eq!((gso_sends, gro_batches), (0, 0));
    }
}

/// An HTTP/1.1 upstream for one request that answers a body of `len` bytes as fast as the
/// gateway takes it; the returned counter is how much it has written so far.
fn endless_upstream(len: usize) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    let port = listener.local_addr().expect("upstream address").port();
    let written = Arc::new(AtomicUsize::new(0));
    let w = written.clone();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        if support::read_head(&mut s).is_none() {
            return;
        }
        let reply = format!("HTTP/1.1 200 OK\r\ncontent-length: {len}\r\n\r\n");
        if s.write_all(reply.as_bytes()).is_err() {
            return;
        }
        let piece = vec![b'x'; 64 << 10];
        while w.load(Ordering::Relaxed) < len {
            if s.write_all(&piece).is_err() {
                return;
            }
            w.fetch_add(piece.len(), Ordering::Relaxed);
        }
    });
    (port, written)
}

#[test]
fn a_stalled_http3_client_stops_the_gateway_reading_the_upstream() {
    let _lock = support::shared();
    const LEN: usize = 256 << 20;
    let (port, written) = endless_upstream(LEN);
    let gw = Gateway::start(&config(&inline_cert(), "", port), &["--concurrency", "1"]);
    let _ = envoy_binary();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The client takes 256 KiB, then stops reading for 4 s.
    let mut client = Command::new("timeout")
        .arg("30")
        .arg(root.join("../../.venv/bin/python"))
        .arg(root.join("tests/suite/h3client.py"))
        .args(["requests", "127.0.0.1", &gw.port.to_string(), "localhost"])
        .arg(serde_json::json!([{"path": "/echo/endless", "timeout": 20}]).to_string())
        .args(["--progress", &(256 << 10).to_string(), "--stall", "4"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn h3client");
    let stdout = client.stdout.take().expect("client stdout");
    let first = BufReader::new(stdout)
        .lines()
        .next()
        .and_then(Result::ok)
        .unwrap_or_default();
    assert!(first.contains("\"progress\""), "{first}");
    // Once the socket buffers on the way are full, the upstream can write no more: the
    // gateway holds a few chunks per stream, not the body.
    std::thread::sleep(Duration::from_millis(1500));
    let before = written.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(1000));
    let after = written.load(Ordering::Relaxed);
    let _ = client.wait();
    eprintln!("upstream wrote {before} bytes, then {after} while the client stalled");
    assert!(before < 48 << 20, "{before} bytes taken from the upstream");
    assert!(after - before < 4 << 20, "{before} then {after}");
}
