//! Batched X25519: a TLS 1.3 handshake's key exchange computed in its certificate provider's
//! batch and handed to BoringSSL as a handshake hint, with real clients (BoringSSL's client
//! under load, `openssl s_client` alone). A handshake that completes proves the batched secret
//! right: the client derives its own from our share, and a wrong one fails its Finished.

use std::time::Duration;

use crate::support;
use crate::support::providers::{batching_cert, mean_batch, provider_counter, queue_sizes};
use crate::support::tls_client::{
    closed_loop, closed_loop_with, connector_with_groups, ClientOpts,
};
use crate::support::{direct_response_config, s_client, Gateway};

/// The engines with a batched X25519 on this machine: portable (tests), ifma where usable.
fn engines() -> Vec<String> {
    let mut e = vec!["portable".to_string()];
    if support::providers::accelerated_engines()
        .iter()
        .any(|(name, usable)| name == "ifma" && *usable)
    {
        e.push("ifma".into());
    } else {
        support::skip::missing(
            "ifma",
            "no ifma engine on this CPU: its X25519 run is skipped",
        );
    }
    e
}

fn gateway(fields: &[(&str, &str)]) -> Gateway {
    Gateway::start(
        &direct_response_config(&batching_cert("rsa2048", fields), "", ""),
        &["--concurrency", "1"],
    )
}

fn s_client_ok(gw: &Gateway, groups: &str) {
    let port = format!("127.0.0.1:{}", gw.port);
    let out = s_client(
        &["-connect", &port, "-tls1_3", "-groups", groups, "-ign_eof"],
        "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("HTTP/1.1 200"),
        "s_client -groups {groups}: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn x25519_is_batched_under_load_and_left_to_boringssl_otherwise() {
    let _lock = support::exclusive();
    for engine in engines() {
        let gw = gateway(&[("engine", &engine)]);
        // Alone: a batch of one is below the crossover, so the handshake computes it.
        s_client_ok(&gw, "X25519");
        assert_eq!(provider_counter(&gw, "x25519_inline"), 1, "{engine}");
        assert_eq!(provider_counter(&gw, "x25519"), 0, "{engine}");
        // A client without X25519: nothing is queued.
        s_client_ok(&gw, "P-256");
        assert_eq!(provider_counter(&gw, "x25519_inline"), 1, "{engine}");
        // Under load: batches of several, every handshake complete.
        let done = closed_loop(gw.port, 16, Duration::from_secs(1), &ClientOpts::default())
            .unwrap_or_else(|e| panic!("{engine}: {e}\n{}", gw.log_text()));
        let batched = provider_counter(&gw, "x25519");
        let sizes = queue_sizes(&gw, "x25519");
        eprintln!("{engine}: {done} handshakes, {batched} X25519 batched, batch sizes {sizes:?}");
        assert!(
            batched > 0,
            "{engine}: no X25519 batched in {done} handshakes"
        );
        assert!(mean_batch(&sizes) >= 2.0, "{engine}: {sizes:?}");
        assert_eq!(provider_counter(&gw, "failed"), 0, "{engine}");
        // The hybrid group current browsers send first: its X25519 half batched, ML-KEM-768
        // encapsulated beside it; BoringSSL's client derives the same hybrid secret.
        let hybrid =
            connector_with_groups(&ClientOpts::default(), "X25519MLKEM768:X25519").expect("client");
        let before = provider_counter(&gw, "x25519");
        let done = closed_loop_with(&hybrid, gw.port, 16, Duration::from_secs(1))
            .unwrap_or_else(|e| panic!("{engine} X25519MLKEM768: {e}\n{}", gw.log_text()));
        let batched = provider_counter(&gw, "x25519") - before;
        eprintln!("{engine}: {done} X25519MLKEM768 handshakes, {batched} X25519 halves batched");
        assert!(
            batched > 0,
            "{engine}: no hybrid exchange batched in {done}"
        );
    }
}

#[test]
fn batch_key_exchange_false_leaves_x25519_to_boringssl() {
    let _lock = support::exclusive();
    let gw = gateway(&[("engine", "portable"), ("batch_key_exchange", "false")]);
    let done = closed_loop(
        gw.port,
        8,
        Duration::from_millis(500),
        &ClientOpts::default(),
    )
    .expect("handshakes");
    assert!(done > 0);
    assert!(provider_counter(&gw, "rsa_sign") > 0);
    let stats = gw.stats();
    assert!(
        !stats.keys().any(|k| k.contains("x25519")),
        "no key-exchange stats without batching"
    );
}
