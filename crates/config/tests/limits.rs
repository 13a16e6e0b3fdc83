//! Admission filters in a whole bootstrap: Envoy's `local_ratelimit` listener and network
//! filters and quickshake's `handshake_limit`: where they sit, in which order, and what Envoy
//! refuses about their placement.

use std::time::Duration;

use quickshake_config::*;
use serde_json::{json, Value};

mod common;
use common::*;

const LISTENER_RL: &str =
    "type.googleapis.com/envoy.extensions.filters.listener.local_ratelimit.v3.LocalRateLimit";
const NETWORK_RL: &str =
    "type.googleapis.com/envoy.extensions.filters.network.local_ratelimit.v3.LocalRateLimit";
const HANDSHAKE_LIMIT: &str = "type.googleapis.com/quickshake.filters.listener.v1.HandshakeLimit";

fn listener_rl(prefix: &str) -> Value {
    json!({
        "name": "envoy.filters.listener.local_ratelimit",
        "typed_config": {
            "@type": LISTENER_RL,
            "stat_prefix": prefix,
            "token_bucket": {"max_tokens": 3, "fill_interval": "60s"}
        }
    })
}

fn network_rl(prefix: &str) -> Value {
    json!({
        "name": "envoy.filters.network.local_ratelimit",
        "typed_config": {
            "@type": NETWORK_RL,
            "stat_prefix": prefix,
            "share_key": "edge",
            "token_bucket": {"max_tokens": 10, "tokens_per_fill": 5, "fill_interval": "1s"}
        }
    })
}

fn handshake_limit(n: u64) -> Value {
    json!({
        "name": "quickshake.filters.listener.handshake_limit",
        "typed_config": {"@type": HANDSHAKE_LIMIT, "max_handshakes_per_source": n}
    })
}

fn proxy_protocol() -> Value {
    json!({"name": "envoy.filters.listener.proxy_protocol"})
}

fn seed_with(listener_filters: Value) -> Value {
    let mut v = fixture_json("seed.yaml");
    v["static_resources"]["listeners"][0]["listener_filters"] = listener_filters;
    v
}

fn filters(v: &mut Value) -> &mut Value {
    &mut v["static_resources"]["listeners"][0]["filter_chains"]["filters"]
}

#[test]
fn listener_filters_in_order_with_their_stage() {
    let v = seed_with(json!([
        listener_rl("before"),
        handshake_limit(4),
        proxy_protocol(),
        {"name": "envoy.filters.listener.tls_inspector"},
        listener_rl("after"),
    ]));
    let b = parse_json(&v).unwrap();
    let l = &b.listeners[0];
    assert!(l.proxy_protocol);
    let got: Vec<(String, bool)> = l
        .limits
        .iter()
        .map(|x| {
            let what = match &x.limit {
                SocketLimit::LocalRateLimit(r) => format!("rl {} {}", r.stat_prefix, r.path),
                SocketLimit::HandshakeLimit(h) => format!("hl {}", h.max_handshakes_per_source),
            };
            (what, x.after_proxy_protocol)
        })
        .collect();
    let p = "static_resources.listeners[0].listener_filters";
    assert_eq!(
        got,
        [
            (format!("rl before {p}[0]"), false),
            // The handshake limit counts the address the PROXY header carries, wherever it is
            // listed.
            ("hl 4".to_owned(), true),
            (format!("rl after {p}[4]"), true),
        ]
    );
    if let SocketLimit::LocalRateLimit(r) = &l.limits[0].limit {
        assert_eq!(
            r.token_bucket,
            TokenBucket {
                max_tokens: 3,
                tokens_per_fill: 1,
                fill_interval: Duration::from_secs(60)
            }
        );
    }

    // Without proxy_protocol, everything acts at accept.
    let b = parse_json(&seed_with(json!([handshake_limit(2), listener_rl("x")]))).unwrap();
    assert!(b.listeners[0]
        .limits
        .iter()
        .all(|l| !l.after_proxy_protocol));
}

#[test]
fn network_rate_limits_come_before_the_terminal_filter() {
    let mut v = fixture_json("seed.yaml");
    let hcm = filters(&mut v)[0].take();
    *filters(&mut v) = json!([network_rl("a"), network_rl("b"), hcm]);
    let b = parse_json(&v).unwrap();
    let fc = &b.listeners[0].filter_chains[0];
    assert!(fc.http().is_some());
    let prefixes: Vec<&str> = fc
        .rate_limits
        .iter()
        .map(|r| r.stat_prefix.as_str())
        .collect();
    assert_eq!(prefixes, ["a", "b"]);
    assert_eq!(fc.rate_limits[0].share_key, "edge");
    assert_eq!(
        fc.rate_limits[1].path,
        "static_resources.listeners[0].filter_chains[0].filters[1]"
    );

    // Envoy: "terminal filter ... must be the last filter in a network filter chain".
    let hcm = filters(&mut v)[2].take();
    *filters(&mut v) = json!([hcm, network_rl("late")]);
    let e = err(&v).to_string();
    assert!(
        e.contains("filter_chains[0].filters[1]") && e.contains("must be the last filter"),
        "{e}"
    );
    // Envoy: "non-terminal filter ... is the last filter in a network filter chain".
    *filters(&mut v) = json!([network_rl("alone")]);
    let e = err(&v).to_string();
    assert!(e.contains("a terminal network filter"), "{e}");
}

#[test]
fn placement_errors() {
    let e = err(&seed_with(json!([handshake_limit(2), handshake_limit(3)]))).to_string();
    assert!(
        e.contains("listener_filters[1]") && e.contains("duplicate handshake_limit"),
        "{e}"
    );
    let e = err(&seed_with(
        json!([{"name": "envoy.filters.listener.original_dst"}]),
    ))
    .to_string();
    assert!(e.contains("envoy.filters.listener.local_ratelimit"), "{e}");
    // A listener filter's settings in the network filter's type, and the reverse.
    let mut wrong = listener_rl("x");
    wrong["typed_config"]["@type"] = json!(NETWORK_RL);
    let e = err(&seed_with(json!([wrong]))).to_string();
    assert!(e.contains("listener_filters[0].typed_config.@type"), "{e}");
    let e = err(&seed_with(
        json!([{"name": "envoy.filters.listener.local_ratelimit"}]),
    ))
    .to_string();
    assert!(e.contains("listener_filters[0].typed_config"), "{e}");
}
