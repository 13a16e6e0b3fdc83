//! What istiod sends an ingress gateway, untouched (`testdata/istio/`, captured from Istio's
//! `FakeDiscoveryServer` by `tests/istio-harness -dump`, with istiod's defaults: metadata
//! exchange, `istio.alpn` and `istio.stats` on): every listener, cluster and endpoint
//! assignment loads. Istio's proxy-only filters are accepted with no effect
//! (docs/configuration.md, "Istio's own extensions"), the TLS inspector's
//! `initial_read_buffer_size` is accepted (quickshake reads a whole ClientHello anyway), the
//! outlier detection's `enforcing_success_rate: 0` too (it turns off a detector quickshake
//! does not have).

use quickshake_config::*;
use serde_json::{json, Value};

fn captured(file: &str) -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/istio/");
    let text = std::fs::read_to_string(format!("{path}{file}")).expect("captured resources");
    serde_json::from_str(&text).expect("JSON")
}

fn without_type(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("@type");
    }
    v
}

#[test]
fn istiods_gateway_listeners_clusters_and_endpoints_load_as_sent() {
    let clusters: Vec<String> = captured("clusters.json")
        .into_iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap_or_default().to_owned();
            cluster_resource(&without_type(c), &format!("Cluster {name}")).expect(&name);
            name
        })
        .collect();
    assert!(clusters.iter().any(|c| c == "BlackHoleCluster"));
    for l in captured("listeners.json") {
        let name = l["name"].as_str().unwrap_or_default().to_owned();
        listener_resource(&l, &clusters).expect(&name);
    }
    for e in captured("endpoints.json") {
        let name = e["cluster_name"].as_str().unwrap_or_default().to_owned();
        let eps = cluster_load_assignment(&without_type(e), &name).expect(&name);
        assert_eq!(eps.len(), 1, "{name}");
    }
}

#[test]
fn tls_inspector_initial_read_buffer_size_is_checked_against_envoys_bounds() {
    let listener = |size: Value| {
        json!({"name": "l", "address": {"socket_address": {"address": "127.0.0.1", "port_value": 8443}},
               "listener_filters": [{"name": "envoy.filters.listener.tls_inspector", "typed_config": {
                   "@type": "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector",
                   "initial_read_buffer_size": size}}],
               "filter_chains": [{"filters": [{"name": "envoy.filters.network.tcp_proxy", "typed_config": {
                   "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
                   "stat_prefix": "t", "cluster": "c"}}]}]})
    };
    let c = ["c".to_owned()];
    listener_resource(&listener(json!(512)), &c).expect("512");
    listener_resource(&listener(json!({"value": 65536})), &c).expect("65536");
    let e = listener_resource(&listener(json!(255)), &c).unwrap_err();
    assert!(
        e.to_string()
            .contains("listener_filters[0].typed_config.initial_read_buffer_size"),
        "{e}"
    );
}

#[test]
fn outlier_detection_takes_success_rate_off_only() {
    let cluster = |rate: u64| {
        json!({"name": "c", "type": "EDS", "eds_cluster_config": {"eds_config": {"ads": {}}},
               "connect_timeout": "1s",
               "outlier_detection": {"consecutive_5xx": 5, "enforcing_success_rate": rate}})
    };
    cluster_resource(&cluster(0), "Cluster c").expect("0 turns it off");
    let e = cluster_resource(&cluster(100), "Cluster c").unwrap_err();
    assert!(
        e.to_string()
            .contains("outlier_detection.enforcing_success_rate"),
        "{e}"
    );
}

#[test]
fn common_http_protocol_options_set_connection_reuse() {
    let cluster = |common: Value| {
        json!({"name": "c", "type": "EDS", "eds_cluster_config": {"eds_config": {"ads": {}}},
               "connect_timeout": "1s",
               "typed_extension_protocol_options": {
                   "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                       "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                       "common_http_protocol_options": common,
                       "explicit_http_config": {"http_protocol_options": {}}}}})
    };
    let c = cluster_resource(
        &cluster(json!({"idle_timeout": "60s", "max_requests_per_connection": 100})),
        "Cluster c",
    )
    .expect("Istio's connectionPool.http");
    assert_eq!(
        c.connection_reuse,
        ConnectionReuse {
            idle_timeout: Some(std::time::Duration::from_secs(60)),
            max_requests: Some(100)
        }
    );
    let c = cluster_resource(&cluster(json!({"idle_timeout": "0s"})), "Cluster c").expect("0s");
    assert_eq!(c.connection_reuse, ConnectionReuse::default());
    let e =
        cluster_resource(&cluster(json!({"max_stream_duration": "1s"})), "Cluster c").unwrap_err();
    assert!(
        e.to_string()
            .contains("common_http_protocol_options.max_stream_duration"),
        "{e}"
    );
}
