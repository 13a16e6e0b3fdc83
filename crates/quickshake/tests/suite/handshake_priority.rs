//! `--handshake-priority idle`: each worker handshakes on a `SCHED_IDLE` companion thread and
//! hands established connections to its serving thread. The data path behaves as in the
//! default mode (HTTP/1.1, HTTP/2, a provider key under load, tcp_proxy, drain); the latency
//! benefit is measured in the reliability_faults module. Every other module can be rerun in this
//! mode with `QS_TEST_HANDSHAKE_PRIORITY=idle`.
//!
//! Positive control: the scheduling-policy check reads the default mode's threads and finds no
//! idle-class thread there.

use std::io::{Read, Write};
use std::time::Duration;

use crate::support;
use crate::support::providers::batching_cert;
use crate::support::tls_client::{closed_loop, connector, ClientOpts};
use crate::support::upstreams::{tcp_proxy_config, Upstream};
use crate::support::*;

const IDLE: &[&str] = &["--handshake-priority", "idle", "--concurrency", "2"];

/// (thread name, scheduling policy) of every thread of `pid` (policy: field 41 of
/// /proc/PID/task/TID/stat; 5 = SCHED_IDLE).
fn threads(pid: u32) -> Vec<(String, u32)> {
    let dir = format!("/proc/{pid}/task");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let name = std::fs::read_to_string(path.join("comm")).ok()?;
            let stat = std::fs::read_to_string(path.join("stat")).ok()?;
            // Fields after the parenthesised name start at field 3.
            let after = stat.rsplit_once(')')?.1;
            let policy = after.split_whitespace().nth(41 - 3)?.parse().ok()?;
            Some((name.trim().to_string(), policy))
        })
        .collect()
}

const SCHED_IDLE: u32 = 5;

#[test]
fn handshake_threads_are_idle_class_and_workers_are_not() {
    let _lock = support::exclusive();
    let gw = Gateway::start(
        &direct_response_config(&plain_cert("rsa2048"), "", ""),
        IDLE,
    );
    curl_ok(&gw);
    let t = threads(gw.pid());
    let hs: Vec<_> = t.iter().filter(|(n, _)| n.starts_with("hs:")).collect();
    let wrk: Vec<_> = t.iter().filter(|(n, _)| n.starts_with("wrk:")).collect();
    assert_eq!(hs.len(), 2, "one handshake thread per worker: {t:?}");
    assert_eq!(wrk.len(), 2, "{t:?}");
    assert!(hs.iter().all(|(_, p)| *p == SCHED_IDLE), "{t:?}");
    assert!(wrk.iter().all(|(_, p)| *p != SCHED_IDLE), "{t:?}");

    // Control: the default mode has no idle-class thread, so the check can tell them apart.
    let normal = Gateway::start(
        &direct_response_config(&plain_cert("rsa2048"), "", ""),
        &["--concurrency", "2"],
    );
    curl_ok(&normal);
    let t = threads(normal.pid());
    assert!(!t.is_empty(), "no threads read");
    assert!(
        t.iter()
            .all(|(n, p)| *p != SCHED_IDLE && !n.starts_with("hs:")),
        "control: {t:?}"
    );
}

#[test]
fn http1_and_http2_are_served_after_the_hand_off() {
    let _lock = support::exclusive();
    let gw = Gateway::start(
        &direct_response_config(&plain_cert("rsa2048"), "", ""),
        IDLE,
    );
    for version in ["--http1.1", "--http2"] {
        let out = curl(&[
            version,
            "--cacert",
            &cert("rsa2048.cert.pem"),
            "-s",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{http_version}",
            &gw.url("/"),
            &gw.url("/again"),
        ]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let want = if version == "--http2" {
            "200 2"
        } else {
            "200 1.1"
        };
        assert_eq!(text, format!("{want}{want}"), "{}", gw.log_text());
    }
}

#[test]
fn a_provider_key_under_load_loses_nothing() {
    let _lock = support::exclusive();
    let certs = batching_cert("rsa2048", &[("engine", "software")]);
    let gw = Gateway::start(&direct_response_config(&certs, "", ""), IDLE);
    let done = closed_loop(gw.port, 16, Duration::from_secs(2), &ClientOpts::default())
        .expect("every handshake and request succeeds");
    assert!(done > 50, "only {done} handshakes");
    let scope = gw.scope("127.0.0.1");
    eventually("all connections closed and accounted", || {
        gw.counter(&format!("{scope}downstream_cx_active")) == 0
            && gw.counter(&format!("{scope}downstream_cx_destroy")) as usize >= done
    });
    assert!(gw.counter(&format!("{scope}ssl.handshake")) as usize >= done);
    assert_eq!(gw.counter(&format!("{scope}ssl.connection_error")), 0);
}

#[test]
fn tcp_proxy_is_served_after_the_hand_off() {
    let _lock = support::exclusive();
    let echo = Upstream::tcp_echo();
    let template = tcp_proxy_config("", echo.port);
    let gw = Gateway::start(&template, IDLE);
    let c = connector(&ClientOpts::default()).expect("connector");
    let tcp = std::net::TcpStream::connect(("127.0.0.1", gw.port)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut tls = c.connect("localhost", tcp).expect("handshake");
    let msg = vec![b'q'; 100_000];
    tls.write_all(&msg).expect("write");
    let mut back = vec![0u8; msg.len()];
    tls.read_exact(&mut back).expect("echo");
    assert!(back == msg, "echo differs");
}

#[test]
fn sigterm_drains_and_exits_zero() {
    let _lock = support::exclusive();
    let mut gw = Gateway::start(
        &direct_response_config(&plain_cert("rsa2048"), "", ""),
        &[
            "--handshake-priority",
            "idle",
            "--concurrency",
            "2",
            "--drain-time-s",
            "3",
        ],
    );
    curl_ok(&gw);
    gw.assert_terminates_cleanly_within(Duration::from_secs(5));
}
