//! HTTP/3 data path, with aioquic as the client: a large proxied response streams through as
//! the upstream sends it (not read whole first), and the QUIC sockets use the kernel's
//! segmentation offloads (GSO on send, GRO on receive) where it has them, counted in
//! `listener.<address>.http3.*`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
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
        let (mut head, mut buf) = (Vec::new(), [0u8; 4096]);
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
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
