//! Connection storms: 10,000 clients that send a real ClientHello and vanish at once (half
//! close with FIN, half reset with RST), against a certificate held by a `quickshake.batching`
//! provider in timer mode (20 ms), so that key operations are still queued when their clients
//! are gone. After each storm the gateway still serves, every connection is closed, no key
//! operation counts as failed, and a second identical storm does not grow resident memory by
//! more than 5 MiB over the first (allocators keep freed pages, so storm is compared to storm,
//! not to start).
//!
//! Positive control for the memory check: the same measurement flags a process that allocates
//! and touches 30 MiB. See docs/reliability.md.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support;
use crate::support::providers::{batching_cert, provider_counter};
use crate::support::*;

const THREADS: usize = 32;
const PER_THREAD: usize = 313; // 32 × 313 = 10,016 connections
/// Allowed growth of resident memory from the first storm to the second.
const MAX_GROWTH_KIB: u64 = 5 * 1024;

/// Resident memory of a process, KiB (`VmRSS`).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

/// The memory check: growth from `before` to `after` (KiB) beyond the allowance.
fn grew_too_much(before: u64, after: u64) -> bool {
    after.saturating_sub(before) > MAX_GROWTH_KIB
}

/// Set SO_LINGER {on, 0}: close() sends RST at once.
fn linger_zero(s: &TcpStream) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor and a properly sized `linger`.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "setsockopt SO_LINGER");
}

struct StormResult {
    connected: usize,
    refused: usize,
    took: Duration,
}

/// THREADS × PER_THREAD connections: connect, send the ClientHello, close at once.
fn storm(port: u16, hello: &[u8]) -> StormResult {
    let started = Instant::now();
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let hello = hello.to_vec();
            std::thread::spawn(move || {
                let (mut ok, mut refused) = (0, 0);
                for i in 0..PER_THREAD {
                    match TcpStream::connect(("127.0.0.1", port)) {
                        Ok(mut s) => {
                            if (t + i) % 2 == 0 {
                                linger_zero(&s);
                            }
                            let _ = s.write_all(&hello);
                            ok += 1;
                        }
                        Err(_) => refused += 1,
                    }
                }
                (ok, refused)
            })
        })
        .collect();
    let (mut connected, mut refused) = (0, 0);
    for h in handles {
        let (o, r) = h.join().expect("storm thread");
        connected += o;
        refused += r;
    }
    StormResult {
        connected,
        refused,
        took: started.elapsed(),
    }
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out after {limit:?} waiting for: {what}");
}

/// Run one storm and wait until the gateway has settled; its resident memory then (KiB).
fn storm_and_settle(gw: &Gateway, hello: &[u8], n: usize) -> u64 {
    let scope = gw.scope("127.0.0.1");
    let signs_before = provider_counter(gw, "rsa_sign");
    let r = storm(gw.port, hello);
    assert!(
        r.took < Duration::from_secs(90),
        "storm {n} took {:?}",
        r.took
    );
    let settle = Instant::now();
    wait_for(
        "every storm connection closed",
        Duration::from_secs(60),
        || gw.counter(&format!("{scope}downstream_cx_active")) == 0,
    );
    // The queued operations drain: rsa_sign stops moving.
    let mut last = provider_counter(gw, "rsa_sign");
    wait_for(
        "queued key operations drained",
        Duration::from_secs(30),
        || {
            std::thread::sleep(Duration::from_millis(300));
            let now = provider_counter(gw, "rsa_sign");
            let still = now == last;
            last = now;
            still
        },
    );
    let settled = settle.elapsed();
    support::curl_ok(gw);
    let s = gw.stats();
    let get = |n: &str| s.get(&format!("{scope}{n}")).cloned().unwrap_or_default();
    let rss = rss_kib(gw.pid());
    eprintln!(
        "storm {n}: {} connected, {} refused by the kernel, in {:?}; settled in {settled:?}; \
         rsa_sign +{}, cryptomb.failed {}, ssl.connection_error {}, downstream_cx_total {}, \
         downstream_cx_destroy {}; VmRSS {rss} KiB",
        r.connected,
        r.refused,
        r.took,
        last - signs_before,
        get("cryptomb.failed"),
        get("ssl.connection_error"),
        get("downstream_cx_total"),
        get("downstream_cx_destroy"),
    );
    assert!(
        r.connected >= THREADS * PER_THREAD * 9 / 10,
        "storm {n}: only {} connections made",
        r.connected
    );
    // The storm reached the provider: operations were queued for clients that had left.
    assert!(
        last - signs_before >= 500,
        "storm {n}: only {} key operations; the storm did not exercise the provider",
        last - signs_before
    );
    assert_eq!(
        provider_counter(gw, "failed"),
        0,
        "a reply to a vanished handshake is not a failure"
    );
    rss
}

#[test]
fn handshake_storms_leave_nothing_behind() {
    let _lock = support::exclusive();
    let hello = support::capture_client_hello();
    let cert = batching_cert(
        "rsa2048",
        &[
            ("engine", "software"),
            ("batching", "timer"),
            ("poll_delay", "20ms"),
        ],
    );
    let gw = Gateway::start(
        &direct_response_config(&cert, "", ""),
        &["--concurrency", "2"],
    );
    support::curl_ok(&gw);
    let start_rss = rss_kib(gw.pid());
    let after1 = storm_and_settle(&gw, &hello, 1);
    let after2 = storm_and_settle(&gw, &hello, 2);
    eprintln!(
        "VmRSS: start {start_rss} KiB, after storm 1 {after1} KiB, after storm 2 {after2} KiB \
         (storm 2 - storm 1 = {} KiB)",
        after2 as i64 - after1 as i64
    );
    assert!(
        !grew_too_much(after1, after2),
        "resident memory grew {} KiB from storm 1 to storm 2",
        after2 - after1
    );
    let active = format!("{}downstream_cx_active", gw.scope("127.0.0.1"));
    assert_eq!(gw.counter(&active), 0);
}

/// Positive control for the memory check: a process that allocates and touches 30 MiB between
/// the two samples is flagged by `grew_too_much`, sampled the same way.
#[test]
fn memory_check_flags_a_growing_process() {
    let _lock = support::shared();
    let script = "import sys,time\nprint('ready',flush=True)\nsys.stdin.readline()\n\
                  a=bytearray(30*1024*1024)\nfor i in range(0,len(a),4096): a[i]=1\n\
                  print('grown',flush=True)\ntime.sleep(20)\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("ready");
    assert_eq!(line.trim(), "ready");
    let before = rss_kib(child.id());
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin).expect("signal");
    line.clear();
    out.read_line(&mut line).expect("grown");
    assert_eq!(line.trim(), "grown");
    let after = rss_kib(child.id());
    let _ = child.kill();
    let _ = child.wait();
    eprintln!("control: {before} KiB -> {after} KiB");
    assert!(
        grew_too_much(before, after),
        "the check missed {} KiB of growth",
        after - before
    );
    // And it does not flag a process that stays put.
    assert!(!grew_too_much(after, after + 1024));
}
