//! `envoy.filters.http.local_ratelimit` and HTTP filters installed `disabled` (enabled per route
//! through `typed_per_filter_config`), as Envoy Gateway emits them.

use std::time::Duration;

use quickshake_config::*;
use serde_json::{json, Value};

mod common;
use common::*;

const HCM_PATH: &str = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config";
const RL: &str =
    "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit";

fn with_hcm(f: impl FnOnce(&mut Value)) -> Result<Bootstrap, ConfigError> {
    let mut v = fixture_json("seed.yaml");
    f(seed_hcm(&mut v));
    parse_json(&v)
}

fn router() -> Value {
    json!({"name": "envoy.filters.http.router", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}})
}

fn limit(extra: Value) -> Value {
    let mut v = json!({"@type": RL, "stat_prefix": "rl",
        "token_bucket": {"max_tokens": 2, "tokens_per_fill": 1, "fill_interval": "60s"}});
    if let (Some(m), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    v
}

fn hcm(b: &Bootstrap) -> &HttpConnectionManager {
    b.listeners[0].filter_chains[0].http().expect("hcm")
}

#[test]
fn filter_settings_load() {
    let b = with_hcm(|h| {
        h["http_filters"] = json!([
            {"name": "envoy.filters.http.local_ratelimit", "typed_config": limit(json!({
                "status": {"code": "ServiceUnavailable"},
                "filter_enabled": {"runtime_key": "k", "default_value": {"numerator": 100}},
                "filter_enforced": {"default_value": {"numerator": 50, "denominator": "TEN_THOUSAND"}},
                "response_headers_to_add": [{"header": {"key": "x-limited", "value": "yes"}}],
                "enable_x_ratelimit_headers": "DRAFT_VERSION_03",
                "always_consume_default_token_bucket": false,
                "max_dynamic_descriptors": 10000
            }))},
            router()
        ]);
    })
    .expect("loads");
    let HttpFilter::LocalRateLimit {
        name,
        disabled,
        config,
    } = &hcm(&b).http_filters[0]
    else {
        panic!("{:?}", hcm(&b).http_filters)
    };
    assert_eq!(name, "envoy.filters.http.local_ratelimit");
    assert!(!disabled);
    assert_eq!(config.stat_prefix, "rl");
    assert_eq!(
        config.token_bucket,
        Some(TokenBucket {
            max_tokens: 2,
            tokens_per_fill: 1,
            fill_interval: Duration::from_secs(60)
        })
    );
    assert_eq!(config.status, 503);
    assert_eq!(config.filter_enabled, Fraction::ALL);
    assert_eq!(
        config.filter_enforced,
        Fraction {
            numerator: 50,
            denominator: 10_000
        }
    );
    assert_eq!(config.response_headers_to_add[0].name, "x-limited");
    assert!(config.x_ratelimit_headers);
}

/// Envoy's defaults: absent `filter_enabled` / `filter_enforced` are 0% (the filter does
/// nothing), `status` 429 (a code below 400 too), no `token_bucket` limits nothing.
#[test]
fn defaults_are_envoys() {
    let b = with_hcm(|h| {
        h["http_filters"] = json!([
            {"name": "a", "typed_config": {"@type": RL, "stat_prefix": "eg",
                "status": {"code": 302}}},
            router()
        ]);
    })
    .expect("loads");
    let HttpFilter::LocalRateLimit { config, .. } = &hcm(&b).http_filters[0] else {
        panic!()
    };
    assert_eq!(config.token_bucket, None);
    assert_eq!(config.status, 429);
    assert!(!config.filter_enabled.hits(0));
    assert!(!config.filter_enforced.hits(0));
    assert!(!config.x_ratelimit_headers);
}

/// Envoy Gateway's shape: the filter in `http_filters` with only `stat_prefix`, the limit per
/// route; and filters `disabled: true`, enabled per route by `FilterConfig`.
#[test]
fn per_route_limits_and_disabled_filters_load() {
    let b = with_hcm(|h| {
        h["http_filters"] = json!([
            {"name": "envoy.filters.http.cors", "disabled": true, "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"}},
            {"name": "envoy.filters.http.fault", "disabled": false, "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"}},
            {"name": "envoy.filters.http.local_ratelimit", "disabled": true,
             "typed_config": {"@type": RL, "stat_prefix": "http_local_rate_limiter"}},
            {"name": "envoy.filters.http.compressor.gzip", "disabled": true, "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor",
                "compressor_library": {"name": "gzip", "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.compression.gzip.compressor.v3.Gzip"}}}},
            router()
        ]);
        h["route_config"]["virtual_hosts"][0]["routes"][0]["typed_per_filter_config"] = json!({
            "envoy.filters.http.local_ratelimit": limit(json!({
                "filter_enabled": {"default_value": {"numerator": 100}},
                "filter_enforced": {"default_value": {"numerator": 100}}})),
            "envoy.filters.http.cors": {
                "@type": "type.googleapis.com/envoy.config.route.v3.FilterConfig",
                "disabled": false},
            "envoy.filters.http.compressor.gzip": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.compressor.v3.CompressorPerRoute",
                "overrides": {"response_direction_config": {}}}
        });
        h["route_config"]["virtual_hosts"][0]["typed_per_filter_config"] = json!({
            "envoy.filters.http.compressor.gzip": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.compressor.v3.CompressorPerRoute",
                "disabled": true}
        });
    })
    .expect("loads");
    let filters = &hcm(&b).http_filters;
    assert!(matches!(
        &filters[0],
        HttpFilter::Cors { disabled: true, .. }
    ));
    assert!(matches!(
        &filters[1],
        HttpFilter::Fault {
            disabled: false,
            ..
        }
    ));
    assert!(matches!(
        &filters[2],
        HttpFilter::LocalRateLimit { disabled: true, .. }
    ));
    assert!(
        matches!(&filters[3], HttpFilter::Compressor(c) if c.disabled && c.name == "envoy.filters.http.compressor.gzip")
    );
    let RouteSource::Static(rc) = &hcm(&b).routes else {
        panic!()
    };
    let per = &rc.virtual_hosts[0].routes[0].per_filter;
    assert!(per.iter().any(|(n, c)| n == "envoy.filters.http.local_ratelimit"
        && matches!(c, PerFilterConfig::LocalRateLimit(l) if l.filter_enforced == Fraction::ALL)));
    assert!(per
        .iter()
        .any(|(n, c)| n == "envoy.filters.http.cors" && matches!(c, PerFilterConfig::Ignored)));
    assert!(per
        .iter()
        .any(|(n, c)| n == "envoy.filters.http.compressor.gzip"
            && matches!(c, PerFilterConfig::Ignored)));
    assert!(matches!(
        rc.virtual_hosts[0].per_filter.first(),
        Some((_, PerFilterConfig::Disabled))
    ));
}

#[test]
fn refusals_name_their_field() {
    let cases: Vec<(Value, &str)> = vec![
        // A disabled filter quickshake runs no per-route lookup for.
        (
            json!({"name": "envoy.filters.http.grpc_web", "disabled": true}),
            "http_filters[0].disabled",
        ),
        // A disabled filter quickshake does not implement.
        (
            json!({"name": "x", "disabled": true, "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer"}}),
            "http_filters[0].typed_config.@type",
        ),
        (
            json!({"name": "rl", "typed_config": limit(json!({"descriptors": [
                {"entries": [{"key": "k", "value": "v"}],
                 "token_bucket": {"max_tokens": 1, "fill_interval": "1s"}}]}))}),
            "http_filters[0].typed_config.descriptors",
        ),
        (
            json!({"name": "rl", "typed_config": limit(json!({"rate_limits": [
                {"actions": [{"remote_address": {}}]}]}))}),
            "http_filters[0].typed_config.rate_limits",
        ),
        (
            json!({"name": "rl", "typed_config": limit(json!({
                "local_rate_limit_per_downstream_connection": true}))}),
            "http_filters[0].typed_config.local_rate_limit_per_downstream_connection",
        ),
        (
            json!({"name": "rl", "typed_config": {"@type": RL}}),
            "http_filters[0].typed_config.stat_prefix",
        ),
        (
            json!({"name": "rl", "typed_config": limit(json!({
                "token_bucket": {"max_tokens": 2, "fill_interval": "0.01s"}}))}),
            "http_filters[0].typed_config.token_bucket.fill_interval",
        ),
        (
            json!({"name": "rl", "typed_config": limit(json!({
                "enable_x_ratelimit_headers": "DRAFT_VERSION_99"}))}),
            "http_filters[0].typed_config.enable_x_ratelimit_headers",
        ),
    ];
    for (filter, path) in cases {
        let e = with_hcm(|h| h["http_filters"] = json!([filter, router()]))
            .expect_err("refused")
            .to_string();
        assert!(e.contains(&format!("{HCM_PATH}.{path}")), "{path}: {e}");
    }
}
