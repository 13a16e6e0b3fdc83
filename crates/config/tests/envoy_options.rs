//! The connection manager, router, listener and cluster options Envoy Gateway and istiod set
//! by default parse into the model with Envoy's defaults, by enum name or number; an unknown
//! value is an error naming the field.

use quickshake_config::*;
use serde_json::{json, Value};

mod common;
use common::*;

fn hcm(v: &mut Value) -> &mut Value {
    &mut v["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
}

fn base() -> Value {
    fixture_json("no_effect.yaml")
}

fn parsed_hcm(b: &Bootstrap) -> &HttpConnectionManager {
    b.listeners[0].filter_chains[0].http().expect("an HCM")
}

#[test]
fn defaults_are_envoys() {
    let b = parse_json(&base()).unwrap();
    let h = parsed_hcm(&b);
    assert_eq!(
        h.stream_idle_timeout,
        Some(std::time::Duration::from_secs(300))
    );
    assert!(!h.proxy_100_continue);
    assert_eq!(h.http2, Http2Options::default());
    assert!(!h.suppress_envoy_headers);
    assert_eq!(
        h.server_header_transformation,
        ServerHeaderTransformation::Overwrite
    );
    assert_eq!(
        h.headers_with_underscores_action,
        HeadersWithUnderscoresAction::Allow
    );
    assert_eq!(h.connection_buffer_limit_bytes, None);
    let l = &b.listeners[0];
    assert_eq!(l.max_connections_to_accept_per_socket_event, None);
    let c = &b.clusters[0];
    assert_eq!(c.dns_lookup_family, None);
    assert_eq!(c.per_connection_buffer_limit_bytes, None);
    assert!(!c.ignore_health_on_host_removal);
}

#[test]
fn options_parse() {
    let mut v = base();
    v["static_resources"]["listeners"][0]["max_connections_to_accept_per_socket_event"] = json!(1);
    v["static_resources"]["listeners"][0]["per_connection_buffer_limit_bytes"] = json!(32768);
    let h = hcm(&mut v);
    h["server_header_transformation"] = json!("PASS_THROUGH");
    h["common_http_protocol_options"] =
        json!({"headers_with_underscores_action": "REJECT_REQUEST"});
    h["http_filters"][0]["typed_config"]["suppress_envoy_headers"] = json!(true);
    h["proxy_100_continue"] = json!(true);
    h["stream_idle_timeout"] = json!("0s");
    h["http2_protocol_options"] = json!({
        "max_concurrent_streams": 100,
        "initial_stream_window_size": 65536,
        "initialConnectionWindowSize": "1048576"
    });
    let c = &mut v["static_resources"]["clusters"][0];
    c["dnsLookupFamily"] = json!("V4_PREFERRED");
    c["per_connection_buffer_limit_bytes"] = json!(32768);
    c["ignore_health_on_host_removal"] = json!(true);
    let b = parse_json(&v).unwrap_or_else(|e| panic!("{e}"));
    let h = parsed_hcm(&b);
    assert_eq!(h.stream_idle_timeout, None, "0s disables it");
    assert!(h.proxy_100_continue);
    assert!(h.suppress_envoy_headers);
    assert_eq!(
        h.server_header_transformation,
        ServerHeaderTransformation::PassThrough
    );
    assert_eq!(
        h.headers_with_underscores_action,
        HeadersWithUnderscoresAction::RejectRequest
    );
    assert_eq!(
        h.connection_buffer_limit_bytes,
        Some(32768),
        "the listener's limit"
    );
    assert_eq!(
        h.http2,
        Http2Options {
            max_concurrent_streams: Some(100),
            initial_stream_window_size: Some(65536),
            initial_connection_window_size: Some(1_048_576),
        }
    );
    assert_eq!(
        b.listeners[0].max_connections_to_accept_per_socket_event,
        Some(1)
    );
    let c = &b.clusters[0];
    assert_eq!(c.dns_lookup_family, Some(DnsLookupFamily::V4Preferred));
    assert_eq!(c.per_connection_buffer_limit_bytes, Some(32768));
    assert!(c.ignore_health_on_host_removal);

    // Enum values by number, as protobuf JSON allows.
    let mut v = base();
    hcm(&mut v)["server_header_transformation"] = json!(1);
    hcm(&mut v)["common_http_protocol_options"] = json!({"headers_with_underscores_action": 2});
    v["static_resources"]["clusters"][0]["dns_lookup_family"] = json!(4);
    let b = parse_json(&v).unwrap();
    let h = parsed_hcm(&b);
    assert_eq!(
        h.server_header_transformation,
        ServerHeaderTransformation::AppendIfAbsent
    );
    assert_eq!(
        h.headers_with_underscores_action,
        HeadersWithUnderscoresAction::DropHeader
    );
    assert_eq!(b.clusters[0].dns_lookup_family, Some(DnsLookupFamily::All));
}

#[test]
fn bad_values_name_their_field() {
    let t = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config";
    let cases: Vec<(Mutate, String)> = vec![
        (
            Box::new(|v: &mut Value| hcm(v)["server_header_transformation"] = json!("REPLACE")),
            format!("{t}.server_header_transformation: expected OVERWRITE, APPEND_IF_ABSENT or PASS_THROUGH, got \"REPLACE\""),
        ),
        (
            Box::new(|v: &mut Value| {
                hcm(v)["common_http_protocol_options"] =
                    json!({"headers_with_underscores_action": 3})
            }),
            format!("{t}.common_http_protocol_options.headers_with_underscores_action: expected ALLOW, REJECT_REQUEST or DROP_HEADER (0..=2), got 3"),
        ),
        (
            Box::new(|v: &mut Value| {
                v["static_resources"]["clusters"][0]["dns_lookup_family"] = json!("V4_FIRST")
            }),
            "static_resources.clusters[0].dns_lookup_family: expected AUTO, V4_ONLY, V6_ONLY, V4_PREFERRED or ALL, got \"V4_FIRST\"".into(),
        ),
        (
            Box::new(|v: &mut Value| {
                v["static_resources"]["listeners"][0]
                    ["max_connections_to_accept_per_socket_event"] = json!(0)
            }),
            "static_resources.listeners[0].max_connections_to_accept_per_socket_event: must be in 1..=4294967295, got 0".into(),
        ),
        (
            Box::new(|v: &mut Value| {
                hcm(v)["http2_protocol_options"] = json!({"initial_stream_window_size": 100})
            }),
            format!("{t}.http2_protocol_options.initial_stream_window_size: must be in 65535..=2147483647, got 100"),
        ),
        (
            Box::new(|v: &mut Value| {
                hcm(v)["http2_protocol_options"] = json!({"hpack_table_size": 100})
            }),
            format!("{t}.http2_protocol_options.hpack_table_size: not supported yet"),
        ),
        (
            Box::new(|v: &mut Value| {
                hcm(v)["http_filters"][0]["typed_config"]["suppress_envoy_headers"] = json!("yes")
            }),
            format!("{t}.http_filters[0].typed_config.suppress_envoy_headers"),
        ),
    ];
    for (mutate, want) in cases {
        let mut v = base();
        mutate(&mut v);
        let e = err(&v).to_string();
        assert!(e.contains(&want), "{e}\nwanted: {want}");
    }
}
