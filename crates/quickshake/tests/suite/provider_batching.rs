//! Batching semantics of private key providers, with real handshakes: Envoy's timer (a batch
//! of 8 goes at once, a partial batch waits `poll_delay`) and quickshake's adaptive mode.

use std::time::Duration;

use crate::support;
use crate::support::providers::{batching_cert, mean_batch, provider_counter, queue_sizes};
use crate::support::tls_client::{closed_loop, concurrent, handshake, ClientOpts};
use crate::support::{direct_response_config, Gateway};

fn timer_gateway() -> Gateway {
    let cert = batching_cert(
        "rsa2048",
        &[
            ("poll_delay", "200ms"),
            ("engine", "software"),
            ("batching", "timer"),
        ],
    );
    Gateway::start(
        &direct_response_config(&cert, "", ""),
        &["--concurrency", "1"],
    )
}

#[test]
fn timer_full_batch_goes_at_once() {
    let _lock = support::exclusive();
    let gw = timer_gateway();
    let results = concurrent(gw.port, 8, &ClientOpts::default());
    for r in &results {
        let (took, status) = r.as_ref().expect("handshake");
        assert!(status.contains("200"), "{status}");
        assert!(
            *took < Duration::from_millis(150),
            "a full batch must not wait for poll_delay: {took:?}"
        );
    }
    assert_eq!(
        queue_sizes(&gw, "rsa"),
        [0, 0, 0, 0, 0, 0, 0, 1],
        "exactly one batch of 8"
    );
    assert_eq!(provider_counter(&gw, "rsa_sign"), 8);
}

#[test]
fn timer_partial_batch_waits_poll_delay() {
    let _lock = support::exclusive();
    let gw = timer_gateway();
    let results = concurrent(gw.port, 3, &ClientOpts::default());
    for r in &results {
        let (took, _) = r.as_ref().expect("handshake");
        assert!(
            *took >= Duration::from_millis(200),
            "a partial batch waits poll_delay: {took:?}"
        );
        assert!(*took < Duration::from_millis(400), "{took:?}");
    }
    assert_eq!(
        queue_sizes(&gw, "rsa"),
        [0, 0, 1, 0, 0, 0, 0, 0],
        "exactly one batch of 3"
    );
    let (took, _) = handshake(gw.port, &ClientOpts::default()).expect("lone handshake");
    assert!(
        (Duration::from_millis(200)..Duration::from_millis(300)).contains(&took),
        "a lone handshake takes poll_delay: {took:?}"
    );
}

fn adaptive_gateway() -> Gateway {
    let cert = batching_cert(
        "rsa2048",
        &[
            ("poll_delay", "200ms"),
            ("engine", "software"),
            ("batching", "adaptive"),
        ],
    );
    Gateway::start(
        &direct_response_config(&cert, "", ""),
        &["--concurrency", "1"],
    )
}

#[test]
fn adaptive_lone_handshake_does_not_wait() {
    let _lock = support::exclusive();
    let gw = adaptive_gateway();
    // Warm up once (first connection pays for lazy set-up), then measure.
    handshake(gw.port, &ClientOpts::default()).expect("warm-up");
    for _ in 0..5 {
        let (took, status) = handshake(gw.port, &ClientOpts::default()).expect("handshake");
        assert!(status.contains("200"));
        assert!(
            took < Duration::from_millis(20),
            "under 10% of poll_delay: {took:?}"
        );
    }
}

#[test]
fn adaptive_batches_fill_under_load() {
    let _lock = support::exclusive();
    let gw = adaptive_gateway();
    // 32 concurrent closed-loop clients.
    let done = closed_loop(gw.port, 32, Duration::from_secs(2), &ClientOpts::default())
        .expect("handshakes under load");
    assert!(done > 0);
    let sizes = queue_sizes(&gw, "rsa");
    let mean = mean_batch(&sizes);
    eprintln!("adaptive batch sizes {sizes:?}, mean {mean:.2}");
    assert!(
        mean >= 4.0,
        "mean batch size {mean:.2} with 32 concurrent clients: {sizes:?}"
    );
}
