//! The HTTP local rate limit filter (`envoy.filters.http.local_ratelimit`) and filters installed
//! `disabled` in `http_filters`, enabled per route through `typed_per_filter_config` (Envoy
//! Gateway's shape), against quickshake and against stock Envoy 1.39.3 (the reference), on one
//! configuration:
//! - `/limited`: the connection manager's filter, 2 tokens an hour: the third request is
//!   refused with 429 `local_rate_limited` and the filter's `response_headers_to_add`;
//! - `/off`: the same filter disabled by the route's `FilterConfig`: never limited;
//! - `/per-route`: that filter disabled, and a second one (installed `disabled: true`) enabled by
//!   the route's own `LocalRateLimit` (1 token, status 503, `x-ratelimit-*` headers);
//! - a gzip compressor installed `disabled`, enabled on `/per-route` by `CompressorPerRoute`;
//! - `/shadow`: a route's own limit without `filter_enforced`: counted, not refused;
//! - the counters `<stat_prefix>.http_local_rate_limit.{enabled,ok,rate_limited,enforced}`.

use std::collections::HashMap;

use crate::support::envoy::Envoy;
use crate::support::upstreams::{cluster, fetch, proxy_config, HttpOpts, Upstream};
use crate::support::{self, free_port, render, Gateway};

const RL: &str =
    "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit";

fn routes() -> String {
    format!(
        r#"              - match: {{ prefix: /limited }}
                route: {{ cluster: up }}
              - match: {{ prefix: /off }}
                route: {{ cluster: up }}
                typed_per_filter_config:
                  envoy.filters.http.local_ratelimit:
                    "@type": type.googleapis.com/envoy.config.route.v3.FilterConfig
                    disabled: true
              - match: {{ prefix: /shadow }}
                route: {{ cluster: up }}
                typed_per_filter_config:
                  envoy.filters.http.local_ratelimit:
                    "@type": {RL}
                    stat_prefix: shadow_rl
                    token_bucket: {{ max_tokens: 1, tokens_per_fill: 1, fill_interval: 3600s }}
                    filter_enabled: {{ default_value: {{ numerator: 100 }} }}
              - match: {{ prefix: /per-route }}
                route: {{ cluster: up }}
                typed_per_filter_config:
                  envoy.filters.http.local_ratelimit:
                    "@type": type.googleapis.com/envoy.config.route.v3.FilterConfig
                    disabled: true
                  route_limit:
                    "@type": {RL}
                    stat_prefix: route_rl
                    status: {{ code: ServiceUnavailable }}
                    token_bucket: {{ max_tokens: 1, tokens_per_fill: 1, fill_interval: 3600s }}
                    filter_enabled: {{ default_value: {{ numerator: 100 }} }}
                    filter_enforced: {{ default_value: {{ numerator: 100 }} }}
                    enable_x_ratelimit_headers: DRAFT_VERSION_03
                  envoy.filters.http.compressor.gzip:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.compressor.v3.CompressorPerRoute
                    overrides: {{ response_direction_config: {{}} }}"#
    )
}

fn filters() -> String {
    format!(
        r#"          http_filters:
          - name: envoy.filters.http.local_ratelimit
            typed_config:
              "@type": {RL}
              stat_prefix: hcm_rl
              token_bucket: {{ max_tokens: 2, tokens_per_fill: 1, fill_interval: 3600s }}
              filter_enabled: {{ default_value: {{ numerator: 100 }} }}
              filter_enforced: {{ default_value: {{ numerator: 100 }} }}
              response_headers_to_add: [{{ header: {{ key: x-limited, value: "yes" }} }}]
          - name: envoy.filters.http.compressor.gzip
            disabled: true
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor
              compressor_library:
                name: gzip
                typed_config:
                  "@type": type.googleapis.com/envoy.extensions.compression.gzip.compressor.v3.Gzip
              response_direction_config:
                common_config: {{ min_content_length: 10, content_type: [application/json, text/plain] }}
          - name: route_limit
            disabled: true
            typed_config:
              "@type": {RL}
              stat_prefix: unused_rl
"#
    )
}

fn config(up: u16) -> String {
    proxy_config(
        "",
        "",
        &routes(),
        "",
        &cluster("up", "STATIC", "127.0.0.1", up, ""),
    )
    .replacen("          http_filters:\n", &filters(), 1)
}

/// Every check against the proxy (`who`) on `port`; `stats` reads its counters.
fn check(
    who: &str,
    port: u16,
    stats: &dyn Fn() -> HashMap<String, String>,
    log: &dyn Fn() -> String,
) {
    let get = |path: &str| fetch(&["--http1.1"], &format!("https://localhost:{port}{path}"));
    let gzip = |path: &str| {
        fetch(
            &["--http1.1", "-H", "accept-encoding: gzip"],
            &format!("https://localhost:{port}{path}"),
        )
    };
    for i in 0..2 {
        let r = gzip("/limited");
        assert_eq!(r.status, 200, "{who} /limited #{i}: {r:?}\n{}", log());
        // The compressor is installed disabled, and this route does not enable it.
        assert_eq!(r.header("content-encoding"), None, "{who}: {r:?}");
    }
    let r = get("/limited");
    assert_eq!(r.status, 429, "{who}: {r:?}\n{}", log());
    assert_eq!(r.body, "local_rate_limited", "{who}: {r:?}");
    assert_eq!(r.header("x-limited"), Some("yes"), "{who}: {r:?}");
    for i in 0..4 {
        let r = get("/off");
        assert_eq!(r.status, 200, "{who} /off #{i}: {r:?}\n{}", log());
    }
    let r = gzip("/per-route");
    assert_eq!(r.status, 200, "{who}: {r:?}\n{}", log());
    // Its `CompressorPerRoute` enables the compressor installed disabled.
    assert_eq!(r.header("content-encoding"), Some("gzip"), "{who}: {r:?}");
    assert_eq!(r.header("x-ratelimit-limit"), Some("1"), "{who}: {r:?}");
    assert_eq!(r.header("x-ratelimit-remaining"), Some("0"), "{who}: {r:?}");
    assert_eq!(r.header("x-ratelimit-reset"), Some("3600"), "{who}: {r:?}");
    let r = get("/per-route");
    assert_eq!(r.status, 503, "{who}: {r:?}\n{}", log());
    assert_eq!(r.body, "local_rate_limited", "{who}: {r:?}");
    assert_eq!(r.header("x-limited"), None, "{who}: {r:?}");
    // The refusal carries them too.
    assert_eq!(r.header("x-ratelimit-limit"), Some("1"), "{who}: {r:?}");
    assert_eq!(r.header("x-ratelimit-remaining"), Some("0"), "{who}: {r:?}");
    // `filter_enforced` absent (0%): over the limit, counted and let through.
    for i in 0..2 {
        let r = get("/shadow");
        assert_eq!(r.status, 200, "{who} /shadow #{i}: {r:?}\n{}", log());
    }
    let s = stats();
    eprintln!(
        "{who}: shadow_mode {:?}",
        s.get("shadow_rl.http_local_rate_limit.shadow_mode")
    );
    let n = |name: &str| {
        s.get(name)
            .map(String::as_str)
            .unwrap_or("absent")
            .to_owned()
    };
    for (name, want) in [
        ("hcm_rl.http_local_rate_limit.enabled", "3"),
        ("hcm_rl.http_local_rate_limit.ok", "2"),
        ("hcm_rl.http_local_rate_limit.rate_limited", "1"),
        ("hcm_rl.http_local_rate_limit.enforced", "1"),
        ("route_rl.http_local_rate_limit.enabled", "2"),
        ("route_rl.http_local_rate_limit.ok", "1"),
        ("route_rl.http_local_rate_limit.rate_limited", "1"),
        ("route_rl.http_local_rate_limit.enforced", "1"),
        ("shadow_rl.http_local_rate_limit.enabled", "2"),
        ("shadow_rl.http_local_rate_limit.ok", "1"),
        ("shadow_rl.http_local_rate_limit.rate_limited", "1"),
        ("shadow_rl.http_local_rate_limit.enforced", "0"),
        // Envoy 1.39.3 keeps it, and leaves it 0 for a limit not enforced too.
        ("shadow_rl.http_local_rate_limit.shadow_mode", "0"),
        // The filter's own counters exist before any request reaches it.
        ("unused_rl.http_local_rate_limit.enabled", "0"),
    ] {
        assert_eq!(n(name), want, "{who}: {name}");
    }
}

#[test]
fn quickshake_limits_requests_per_filter_and_route() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let gw = Gateway::start(&config(up.port), &["--concurrency", "1"]);
    check("quickshake", gw.port, &|| gw.stats(), &|| gw.log_text());
}

#[test]
fn envoy_limits_the_same_requests() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, admin) = (free_port(), free_port());
    let yaml = render(&config(up.port), port, free_port(), admin, dir.path());
    let envoy = Envoy::start(&yaml, admin);
    check("envoy", port, &|| envoy.stats(), &|| envoy.log_text());
}
