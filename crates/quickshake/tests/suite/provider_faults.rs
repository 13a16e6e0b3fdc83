//! Fault injection through the provider: wrong results are caught by the public-key check,
//! engine errors and panics fail only their handshake (or fall back), clients that leave while
//! their operation is queued leave nothing behind, and nothing hangs. `engine: fault` is a test
//! engine: its tests run the test-only `quickshake-test` (`support::shared_with_fault_engine`).

use std::time::Duration;

use crate::support;
use crate::support::providers::{batching_cert, batching_cert_with, provider_counter};
use crate::support::tls_client::{connector, handshake, handshake_with, ClientOpts};
use crate::support::{direct_response_config, eventually, Gateway};

fn fault_gateway(fault: &str, fallback: Option<bool>) -> Gateway {
    let fields = [
        ("engine", "fault"),
        ("batching", "adaptive"),
        ("fault", fault),
    ];
    let cert = batching_cert_with("rsa2048", &fields, fallback);
    Gateway::start(
        &direct_response_config(&cert, "", ""),
        &["--concurrency", "1"],
    )
}

fn sequential(gw: &Gateway, n: usize) -> (usize, usize) {
    let mut ok = 0;
    for _ in 0..n {
        if let Ok((_, status)) = handshake(gw.port, &ClientOpts::default()) {
            assert!(status.contains("200"));
            ok += 1;
        }
    }
    (ok, n - ok)
}

#[test]
fn wrong_results_are_caught_and_redone() {
    let _lock = support::shared_with_fault_engine();
    let gw = fault_gateway("{ corrupt_every: 1 }", None);
    assert_eq!(sequential(&gw, 4), (4, 0), "{}", gw.log_text());
    assert_eq!(provider_counter(&gw, "verify_failed"), 4);
    assert_eq!(provider_counter(&gw, "software_retry"), 4);
    assert_eq!(provider_counter(&gw, "failed"), 0);
    assert!(
        gw.log_text().contains("public-key check"),
        "logged once: {}",
        gw.log_text()
    );
}

#[test]
fn engine_errors_fail_only_their_handshake() {
    let _lock = support::shared_with_fault_engine();
    let gw = fault_gateway("{ error_every: 2 }", Some(false));
    assert_eq!(sequential(&gw, 6), (3, 3));
    assert_eq!(provider_counter(&gw, "engine_error"), 3);
    assert_eq!(provider_counter(&gw, "failed"), 3);
    // The worker keeps serving.
    assert_eq!(sequential(&gw, 2).0 + sequential(&gw, 2).0, 2);
}

#[test]
fn engine_errors_fall_back_when_configured() {
    let _lock = support::shared_with_fault_engine();
    let gw = fault_gateway("{ error_every: 1 }", Some(true));
    assert_eq!(sequential(&gw, 4), (4, 0));
    assert_eq!(provider_counter(&gw, "engine_error"), 4);
    assert_eq!(provider_counter(&gw, "software_retry"), 4);
}

#[test]
fn engine_panics_are_contained() {
    let _lock = support::shared_with_fault_engine();
    let gw = fault_gateway("{ panic_every: 1 }", Some(false));
    assert_eq!(sequential(&gw, 3), (0, 3));
    assert_eq!(provider_counter(&gw, "engine_error"), 3);
    let gw = fault_gateway("{ panic_every: 2 }", Some(true));
    assert_eq!(sequential(&gw, 4), (4, 0), "{}", gw.log_text());
}

#[test]
fn client_leaving_while_queued_leaves_nothing_behind() {
    let _lock = support::shared();
    let cert = batching_cert(
        "rsa2048",
        &[
            ("engine", "software"),
            ("batching", "timer"),
            ("poll_delay", "300ms"),
        ],
    );
    let gw = Gateway::start(
        &direct_response_config(&cert, "", ""),
        &["--concurrency", "1"],
    );
    let active = format!("{}downstream_cx_active", gw.scope("127.0.0.1"));
    // Clients give up after 50 ms, while their signature waits for the 300 ms timer.
    let c = connector(&ClientOpts::default()).expect("connector");
    for _ in 0..3 {
        let port = gw.port;
        let c = c.clone();
        std::thread::spawn(move || {
            let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
            tcp.set_read_timeout(Some(Duration::from_millis(50))).ok();
            let _ = c.connect("localhost", tcp);
        })
        .join()
        .expect("client thread");
    }
    eventually("queued operations processed and connections closed", || {
        provider_counter(&gw, "rsa_sign") == 3 && gw.counter(&active) == 0
    });
    assert_eq!(provider_counter(&gw, "failed"), 0);
    // And the next client is served normally.
    let (took, status) = handshake_with(&c, gw.port).expect("handshake after abandoned ones");
    assert!(status.contains("200") && took < Duration::from_secs(1));
}
