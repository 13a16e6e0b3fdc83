//! The HTTP-layer fields istiod and Envoy Gateway emit by default: the `cors`, `fault` and
//! `grpc_stats` filters with `typed_per_filter_config`, the connection manager's
//! `forward_client_cert_details`, `request_id_extension`, `http_protocol_options`, and the
//! route fields (`require_tls`, attempt counts, `max_grpc_timeout`, gRPC `retry_on`,
//! `retry_host_predicate`, `max_direct_response_body_size_bytes`). What stays refused names
//! its field path.

use std::time::Duration;

use quickshake_config::*;
use serde_json::{json, Value};

mod common;
use common::*;

const HCM_PATH: &str = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config";

fn with_hcm(f: impl FnOnce(&mut Value)) -> Result<Bootstrap, ConfigError> {
    let mut v = fixture_json("seed.yaml");
    f(seed_hcm(&mut v));
    parse_json(&v)
}

/// The filters istiod's gateway listener has before its router.
fn istio_filters() -> Value {
    json!([
        {"name": "envoy.filters.http.grpc_stats", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.grpc_stats.v3.FilterConfig",
            "emit_filter_state": true, "stats_for_all_methods": false}},
        {"name": "envoy.filters.http.fault", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"}},
        {"name": "envoy.filters.http.cors", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"}},
        {"name": "envoy.filters.http.router", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}
    ])
}

#[test]
fn istios_default_filters_and_connection_manager_fields_load() {
    let b = with_hcm(|h| {
        h["http_filters"] = istio_filters();
        h["forward_client_cert_details"] = json!("SANITIZE_SET");
        h["set_current_client_cert_details"] = json!({"subject": true, "dns": true, "uri": true});
        h["request_id_extension"] = json!({"typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig",
            "use_request_id_for_trace_sampling": true}});
        h["http_protocol_options"] =
            json!({"accept_http_10": true, "default_host_for_http_10": "gw.example"});
    })
    .expect("loads");
    let h = b.listeners[0].filter_chains[0].http().expect("hcm");
    assert_eq!(h.http_filters.len(), 3);
    assert!(matches!(&h.http_filters[0], HttpFilter::GrpcStats(g) if g.emit_filter_state));
    assert!(
        matches!(&h.http_filters[1], HttpFilter::Fault { name, config, .. } if name == "envoy.filters.http.fault" && config.abort.is_none())
    );
    assert!(matches!(&h.http_filters[2], HttpFilter::Cors { .. }));
    assert_eq!(
        h.forward_client_cert,
        ForwardClientCert::SanitizeSet(ClientCertDetails {
            subject: true,
            dns: true,
            uri: true,
            ..Default::default()
        })
    );
    assert!(h.http1.accept_http_10);
    assert_eq!(
        h.http1.default_host_for_http_10.as_deref(),
        Some("gw.example")
    );

    // Envoy takes these filters by name alone, with their empty configuration.
    with_hcm(|h| {
        h["http_filters"] = json!([{"name": "envoy.filters.http.cors"},
            {"name": "envoy.filters.http.fault"}, {"name": "envoy.filters.http.router"}]);
    })
    .expect("name-only filters");
}

/// A change to the connection manager's JSON.
type Edit = Box<dyn Fn(&mut Value)>;

#[test]
fn refused_fields_name_their_path() {
    let cases: Vec<(Edit, String)> = vec![
        (
            Box::new(|h| h["forward_client_cert_details"] = json!("SOMETIMES")),
            format!("{HCM_PATH}.forward_client_cert_details"),
        ),
        (
            Box::new(|h| {
                h["request_id_extension"] =
                    json!({"typed_config": {"@type": "type.googleapis.com/x.Other"}})
            }),
            format!("{HCM_PATH}.request_id_extension.typed_config.@type"),
        ),
        (
            Box::new(|h| h["http_protocol_options"] = json!({"enable_trailers": true})),
            format!("{HCM_PATH}.http_protocol_options.enable_trailers: not supported yet"),
        ),
        (
            Box::new(|h| h["http_protocol_options"] = json!({"allow_absolute_url": false})),
            format!("{HCM_PATH}.http_protocol_options.allow_absolute_url: not supported yet"),
        ),
        (
            Box::new(|h| {
                h["http_filters"] = json!([{"name": "f", "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault",
                    "response_rate_limit": {"fixed_limit": {"limit_kbps": 1}}}}])
            }),
            format!(
                "{HCM_PATH}.http_filters[0].typed_config.response_rate_limit: not supported yet"
            ),
        ),
        (
            Box::new(|h| {
                h["http_filters"] = json!([{"name": "f", "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault",
                    "abort": {"http_status": 700}}}])
            }),
            format!(
                "{HCM_PATH}.http_filters[0].typed_config.abort.http_status: must be in 200..=599"
            ),
        ),
    ];
    for (edit, want) in cases {
        let e = with_hcm(|h| edit(h)).expect_err(&want).to_string();
        assert!(e.starts_with(&want), "{e}\nwanted {want}");
    }
}

fn rds(v: Value) -> Result<RouteConfig, ConfigError> {
    route_configuration(&v, "RouteConfiguration r")
}

#[test]
fn route_fields_istio_emits() {
    let rc = rds(json!({
        "name": "r",
        "max_direct_response_body_size_bytes": 10,
        "typed_per_filter_config": {},
        "virtual_hosts": [{
            "name": "v", "domains": ["*"],
            "require_tls": "EXTERNAL_ONLY",
            "include_request_attempt_count": true,
            "include_attempt_count_in_response": true,
            "typed_per_filter_config": {
                "envoy.filters.http.cors": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy",
                    "allow_origin_string_match": [{"exact": "https://a.example"}],
                    "allow_methods": "GET,POST", "allow_credentials": true, "max_age": "60"}
            },
            "routes": [{
                "match": {"prefix": "/"},
                "typed_per_filter_config": {
                    "envoy.filters.http.fault": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault",
                        "delay": {"fixed_delay": "0.2s", "percentage": {"numerator": 100}},
                        "abort": {"grpc_status": 14, "percentage": {"numerator": 50, "denominator": "TEN_THOUSAND"}}},
                    "envoy.filters.http.cors": {
                        "@type": "type.googleapis.com/envoy.config.route.v3.FilterConfig", "disabled": true}
                },
                "route": {
                    "cluster": "c", "max_grpc_timeout": "0s", "grpc_timeout_offset": "0.01s",
                    "retry_policy": {
                        "retry_on": "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes",
                        "retry_host_predicate": [{"name": "envoy.retry_host_predicates.previous_hosts",
                            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"}}],
                        "host_selection_retry_max_attempts": "5"}
                }
            }, {
                "match": {"prefix": "/d"},
                "direct_response": {"status": 200, "body": {"inline_string": "0123456789"}}
            }]
        }]
    }))
    .expect("loads");
    let vh = &rc.virtual_hosts[0];
    assert_eq!(vh.require_tls, RequireTls::ExternalOnly);
    assert!(vh.include_request_attempt_count && vh.include_attempt_count_in_response);
    let Some((_, PerFilterConfig::Cors(p))) = vh.per_filter.first() else {
        panic!("{:?}", vh.per_filter)
    };
    assert_eq!(p.allow_methods.as_deref(), Some("GET,POST"));
    assert_eq!(p.allow_credentials, Some(true));
    let r = &vh.routes[0];
    let fault = r
        .per_filter
        .iter()
        .find_map(|(n, c)| match c {
            PerFilterConfig::Fault(f) if n == "envoy.filters.http.fault" => Some(f),
            _ => None,
        })
        .expect("fault override");
    assert_eq!(
        fault.delay.as_ref().and_then(|d| d.fixed),
        Some(Duration::from_millis(200))
    );
    let abort = fault.abort.as_ref().expect("abort");
    assert_eq!(abort.kind, FaultAbortKind::Grpc(14));
    assert_eq!(
        abort.percentage,
        Fraction {
            numerator: 50,
            denominator: 10_000
        }
    );
    assert!(r
        .per_filter
        .iter()
        .any(|(n, c)| n == "envoy.filters.http.cors" && matches!(c, PerFilterConfig::Disabled)));
    let RouteAction::Route(t) = &r.action else {
        panic!()
    };
    assert_eq!(t.max_grpc_timeout, Some(Duration::ZERO));
    assert_eq!(t.grpc_timeout_offset, Some(Duration::from_millis(10)));
    let rp = t.retry_policy.as_ref().expect("retry");
    assert!(rp.previous_hosts);
    assert_eq!(rp.host_selection_retry_max_attempts, 5);
    assert!(rp.retry_on.iter().any(|c| c == "unavailable"));
}

#[test]
fn route_errors_name_their_path() {
    let base = |edit: &dyn Fn(&mut Value)| {
        let mut v = json!({"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"],
            "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "c"}}]}]});
        edit(&mut v);
        rds(v).expect_err("refused").to_string()
    };
    let e = base(
        &|v| v["virtual_hosts"][0]["routes"][0] = json!({"match": {"prefix": "/"}, "direct_response": {"status": 200, "body": {"inline_string": "x".repeat(4097)}}}),
    );
    assert!(
        e.starts_with("RouteConfiguration r: virtual_hosts[0].routes[0].direct_response.body.inline_string: response body size is 4097 bytes; maximum is 4096"),
        "{e}"
    );
    let e = base(&|v| v["virtual_hosts"][0]["require_tls"] = json!("SOME"));
    assert!(
        e.starts_with("RouteConfiguration r: virtual_hosts[0].require_tls"),
        "{e}"
    );
    let e = base(
        &|v| v["virtual_hosts"][0]["typed_per_filter_config"] = json!({"envoy.filters.http.lua": {"@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.LuaPerRoute"}}),
    );
    assert!(
        e.starts_with("RouteConfiguration r: virtual_hosts[0].typed_per_filter_config.envoy.filters.http.lua.@type: not supported yet"),
        "{e}"
    );
    // An optional filter's unknown per-route config is ignored, as Envoy ignores it.
    let mut v = json!({"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [],
        "typed_per_filter_config": {"x": {"@type": "type.googleapis.com/envoy.config.route.v3.FilterConfig",
            "is_optional": true, "config": {"@type": "type.googleapis.com/x.Unknown"}}}}]});
    rds(v.clone()).expect("optional");
    v["virtual_hosts"][0]["routes"] = json!([{"match": {"prefix": "/"}, "route": {"cluster": "c",
        "retry_policy": {"retry_host_predicate": [{"name": "envoy.retry_host_predicates.omit_canary_hosts"}]}}}]);
    let e = rds(v).expect_err("predicate").to_string();
    assert!(
        e.starts_with("RouteConfiguration r: virtual_hosts[0].routes[0].route.retry_policy.retry_host_predicate[0]: not supported yet"),
        "{e}"
    );
}

fn captured(file: &str) -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/istio/");
    let text = std::fs::read_to_string(format!("{path}{file}")).expect("captured resources");
    serde_json::from_str(&text).expect("JSON")
}

/// What istiod sends an ingress gateway (`testdata/istio/`, from Istio's `FakeDiscoveryServer`):
/// every route configuration loads, and the gateway's listeners load once Istio's proxy-only
/// filters (`istio.*`) and the TLS inspector's `initial_read_buffer_size` (not this test's
/// fields) are left out.
#[test]
fn istiods_gateway_resources_load() {
    for mut r in captured("routes.json") {
        r.as_object_mut()
            .expect("route configuration")
            .remove("@type");
        let name = r["name"].as_str().unwrap_or_default().to_owned();
        let rc = route_configuration(&r, &format!("RouteConfiguration {name}")).expect(&name);
        assert!(
            rc.virtual_hosts
                .iter()
                .all(|v| v.include_request_attempt_count),
            "{name}"
        );
    }
    for mut l in captured("listeners.json") {
        let name = l["name"].as_str().unwrap_or_default().to_owned();
        for f in l["listener_filters"].as_array_mut().into_iter().flatten() {
            if let Some(o) = f["typed_config"].as_object_mut() {
                o.remove("initial_read_buffer_size");
            }
        }
        for c in l["filter_chains"].as_array_mut().into_iter().flatten() {
            for f in c["filters"].as_array_mut().into_iter().flatten() {
                if let Some(hf) = f["typed_config"]["http_filters"].as_array_mut() {
                    hf.retain(|x| !x["name"].as_str().unwrap_or("").starts_with("istio."));
                }
            }
        }
        let listener = listener_resource(&l, &[]).expect(&name);
        let h = listener.filter_chains[0].http().expect("hcm");
        assert!(
            matches!(h.forward_client_cert, ForwardClientCert::SanitizeSet(d) if d.subject && d.cert && d.uri && d.dns && !d.chain),
            "{name}: {:?}",
            h.forward_client_cert
        );
        let kinds: Vec<&str> = h
            .http_filters
            .iter()
            .map(|f| match f {
                HttpFilter::GrpcStats(_) => "grpc_stats",
                HttpFilter::Fault { .. } => "fault",
                HttpFilter::Cors { .. } => "cors",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["grpc_stats", "fault", "cors"], "{name}");
    }
}
