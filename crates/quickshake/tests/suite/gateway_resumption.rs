//! Session resumption both ways: on by default (s_client -reconnect resumes, ssl.session_reused
//! rises), off with disable_stateless_session_resumption + disable_stateful_session_resumption
//! (every handshake is full, the counter stays 0), and the load generator sees no resumption.

use std::process::{Command, Output};

use crate::support;
use crate::support::*;

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const DISABLED: &str = "          disable_stateless_session_resumption: true\n          disable_stateful_session_resumption: true";

fn template(tls_extra: &str) -> String {
    direct_response_config(&plain_cert("rsa2048"), tls_extra, "")
}

/// `s_client -reconnect` (1 + 5 connections); (reused, new) session lines.
fn reconnect(gw: &Gateway, extra: &[&str]) -> (usize, usize, String) {
    let connect = format!("127.0.0.1:{}", gw.port);
    let mut args = vec![
        "-connect",
        connect.as_str(),
        "-servername",
        "localhost",
        "-reconnect",
    ];
    args.extend_from_slice(extra);
    let out = text(&s_client(&args, ""));
    let reused = out.lines().filter(|l| l.starts_with("Reused, ")).count();
    let new = out.lines().filter(|l| l.starts_with("New, ")).count();
    (reused, new, out)
}

fn reused_counter(gw: &Gateway) -> u64 {
    gw.counter(&format!("{}ssl.session_reused", gw.scope("127.0.0.1")))
}

fn handshakes(gw: &Gateway) -> u64 {
    gw.counter(&format!("{}ssl.handshake", gw.scope("127.0.0.1")))
}

#[test]
fn tls12_resumption_enabled_by_default() {
    let _lock = support::shared();
    // Two workers: a resumed session may land on either.
    let gw = Gateway::start(&template(""), &["--concurrency", "2"]);
    let (reused, new, out) = reconnect(&gw, &["-tls1_2"]);
    assert_eq!(new, 1, "{out}");
    assert_eq!(reused, 5, "{out}");
    eventually("six handshakes", || handshakes(&gw) == 6);
    assert_eq!(reused_counter(&gw), 5);

    // Stateful only (session IDs): tickets off, the cache still resumes.
    let (reused, _, out) = reconnect(&gw, &["-tls1_2", "-no_ticket"]);
    assert_eq!(reused, 5, "session-ID resumption: {out}");
    eventually("counter moved", || reused_counter(&gw) == 10);
}

#[test]
fn tls12_stateless_only() {
    let _lock = support::shared();
    // Session cache off, tickets on: a ticket resumes, a session ID does not.
    let gw = Gateway::start(
        &template("          disable_stateful_session_resumption: true"),
        &["--concurrency", "1"],
    );
    let (reused, _, out) = reconnect(&gw, &["-tls1_2"]);
    assert_eq!(reused, 5, "tickets: {out}");
    let (reused, new, out) = reconnect(&gw, &["-tls1_2", "-no_ticket"]);
    assert_eq!((reused, new), (0, 6), "no session cache: {out}");
    eventually("handshakes counted", || handshakes(&gw) == 12);
    assert_eq!(reused_counter(&gw), 5);
}

#[test]
fn tls12_resumption_with_configured_ticket_keys() {
    let _lock = support::shared();
    let gw = Gateway::start(
        &template("          session_ticket_keys: { keys: [ { filename: {{CERTS}}/ticket.key } ] }\n          disable_stateful_session_resumption: true"),
        &["--concurrency", "2"],
    );
    let (reused, _, out) = reconnect(&gw, &["-tls1_2"]);
    assert_eq!(reused, 5, "{out}");
    eventually("counter", || reused_counter(&gw) == 5);
}

#[test]
fn tls12_resumption_disabled() {
    let _lock = support::shared();
    let gw = Gateway::start(&template(DISABLED), &["--concurrency", "2"]);
    for extra in [&["-tls1_2"][..], &["-tls1_2", "-no_ticket"][..]] {
        let (reused, new, out) = reconnect(&gw, extra);
        assert_eq!(reused, 0, "{extra:?}: {out}");
        assert_eq!(new, 6, "{extra:?}: {out}");
    }
    eventually("twelve handshakes", || handshakes(&gw) == 12);
    assert_eq!(reused_counter(&gw), 0);
}

/// TLS 1.3: the ticket arrives after the handshake, so the first connection sends a request and
/// reads to the end (saving the session), and the second offers it.
fn tls13_pair(gw: &Gateway) -> (String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let sess = dir.path().join("sess.pem");
    let sess = sess.to_str().expect("utf-8 path");
    let connect = format!("127.0.0.1:{}", gw.port);
    let request = "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    let first = text(&s_client(
        &[
            "-connect",
            &connect,
            "-servername",
            "localhost",
            "-tls1_3",
            "-ign_eof",
            "-sess_out",
            sess,
        ],
        request,
    ));
    assert!(first.contains("200 OK"), "{first}");
    let second = if std::path::Path::new(sess).exists() {
        text(&s_client(
            &[
                "-connect",
                &connect,
                "-servername",
                "localhost",
                "-tls1_3",
                "-ign_eof",
                "-sess_in",
                sess,
            ],
            request,
        ))
    } else {
        String::from("(no session saved)")
    };
    (first, second)
}

#[test]
fn tls13_resumption_enabled_by_default() {
    let _lock = support::shared();
    let gw = Gateway::start(&template(""), &["--concurrency", "1"]);
    let (first, second) = tls13_pair(&gw);
    assert!(first.contains("New, TLSv1.3"), "{first}");
    assert!(second.contains("Reused, TLSv1.3"), "{second}");
    assert!(second.contains("200 OK"), "{second}");
    eventually("counter", || reused_counter(&gw) == 1);
}

#[test]
fn tls13_resumption_disabled() {
    let _lock = support::shared();
    let gw = Gateway::start(&template(DISABLED), &["--concurrency", "1"]);
    let (first, second) = tls13_pair(&gw);
    assert!(first.contains("New, TLSv1.3"), "{first}");
    assert!(!second.contains("Reused,"), "{second}");
    eventually("handshakes", || handshakes(&gw) >= 1);
    assert_eq!(reused_counter(&gw), 0);
}

fn run_bench(gw: &Gateway) -> serde_json::Value {
    let out = Command::new("timeout")
        .arg("30")
        .arg(support::bench_binary())
        .args(["-c", "8", "-d", "2s", "--json", "--cacert"])
        .arg(cert("rsa2048.cert.pem"))
        .arg("--server-stats")
        .arg(format!("http://127.0.0.1:{}", gw.admin))
        .arg(format!("https://localhost:{}/", gw.port))
        .output()
        .expect("run quickshake-bench");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "bench failed ({}): {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("bench JSON: {e}: {stdout}"))
}

fn check_bench(gw: &Gateway, v: &serde_json::Value) {
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["resumed"], 0, "{v}");
    let handshakes_client = v["handshakes"].as_u64().unwrap_or(0);
    assert!(handshakes_client > 20, "too few handshakes: {v}");
    assert_eq!(v["server"]["session_reused"], 0, "{v}");
    let server_handshakes = v["server"]["handshakes"].as_u64().unwrap_or(0);
    assert!(server_handshakes > 0, "server counted no handshakes: {v}");
    assert_eq!(
        v["errors"]
            .as_object()
            .map(|m| m.values().filter_map(|x| x.as_u64()).sum::<u64>())
            .unwrap_or(0),
        0,
        "{v}"
    );
    assert_eq!(reused_counter(gw), 0);
    // The server finishes a TLS 1.3 handshake after the client does: give it a moment. A
    // connection the client drops as the window closes (at most one per slot, -c 8) may be reset
    // before the server reads the client's Finished.
    let handshakes_client = handshakes_client.saturating_sub(8);
    let mut server_total = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while std::time::Instant::now() < deadline {
        server_total = handshakes(gw);
        if server_total >= handshakes_client {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        server_total >= handshakes_client,
        "server counted {server_total} handshakes, client {handshakes_client}: {v}"
    );
}

#[test]
fn bench_under_load_with_resumption_enabled() {
    let _lock = support::shared();
    // The server would resume; the load generator must not offer sessions.
    let gw = Gateway::start(&template(""), &["--concurrency", "2"]);
    let v = run_bench(&gw);
    check_bench(&gw, &v);
}

#[test]
fn bench_under_load_with_resumption_disabled() {
    let _lock = support::shared();
    let gw = Gateway::start(&template(DISABLED), &["--concurrency", "2"]);
    let v = run_bench(&gw);
    check_bench(&gw, &v);
}
