//! Cluster `transport_socket_matches` as Envoy Gateway emits it for a BackendTLSPolicy: the
//! entry an endpoint uses follows its `envoy.transport_socket_match` metadata.

use quickshake_config::*;
use serde_json::json;

const TLS: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext";

fn endpoint(ip: &str, labels: Option<serde_json::Value>) -> serde_json::Value {
    let mut e = json!({"endpoint": {"address": {"socket_address": {
        "address": ip, "port_value": 443}}}});
    if let Some(l) = labels {
        e["metadata"] = json!({"filter_metadata": {"envoy.transport_socket_match": l}});
    }
    e
}

fn cluster(matches: serde_json::Value) -> serde_json::Value {
    json!({
        "name": "backend",
        "connect_timeout": "10s",
        "type": "STATIC",
        "transport_socket_matches": matches,
        "load_assignment": {
            "cluster_name": "backend",
            "endpoints": [
                {"lb_endpoints": [
                    endpoint("10.0.0.1", Some(json!({"name": "backend/tls/0"}))),
                    endpoint("10.0.0.2", None),
                ]},
                {"lb_endpoints": [endpoint("10.0.0.3", None)],
                 "metadata": {"filter_metadata": {"envoy.transport_socket_match":
                    {"name": "backend/tls/1", "extra": 1}}}},
            ],
        },
    })
}

fn tls_entry(name: &str, sni: &str) -> serde_json::Value {
    json!({
        "name": name,
        "match": {"name": name},
        "transport_socket": {
            "name": "envoy.transport_sockets.tls",
            "typed_config": {"@type": TLS, "sni": sni, "common_tls_context": {}},
        },
    })
}

#[test]
fn endpoints_pick_the_first_entry_their_labels_match() {
    let c = cluster_resource(
        &cluster(json!([
            tls_entry("backend/tls/0", "a.example"),
            tls_entry("backend/tls/1", "b.example"),
        ])),
        "clusters[0]",
    )
    .expect("cluster");
    assert_eq!(c.transport_socket_matches.len(), 2);
    let m = &c.transport_socket_matches[0];
    assert_eq!(m.name, "backend/tls/0");
    assert_eq!(
        m.tls.as_ref().and_then(|t| t.sni.as_deref()),
        Some("a.example")
    );
    let picks: Vec<_> = c.endpoints.iter().map(|e| c.socket_match(e)).collect();
    // The locality's labels count when the endpoint's own match nothing; a match is a subset.
    assert_eq!(picks, vec![Some(0), None, Some(1)]);

    // An entry with an empty match takes every endpoint the ones before it did not, even
    // before the locality's labels are tried (as Envoy: endpoint labels first, every entry).
    let c = cluster_resource(
        &cluster(json!([
            tls_entry("backend/tls/1", "b.example"),
            {"name": "rest", "match": {}},
        ])),
        "clusters[0]",
    )
    .expect("cluster");
    let picks: Vec<_> = c.endpoints.iter().map(|e| c.socket_match(e)).collect();
    assert_eq!(picks, vec![Some(1), Some(1), Some(1)]);
    assert!(c.transport_socket_matches[1].tls.is_none(), "plaintext");
}

#[test]
fn eds_endpoints_carry_their_labels() {
    let eps = cluster_load_assignment(
        &json!({
            "cluster_name": "backend",
            "endpoints": [{"lb_endpoints": [
                endpoint("10.0.0.1", Some(json!({"name": "backend/tls/0"}))),
                endpoint("10.0.0.2", None),
            ]}],
        }),
        "ClusterLoadAssignment backend",
    )
    .expect("assignment");
    assert_eq!(eps[0].socket_labels[0]["name"], "\"backend/tls/0\"");
    assert!(eps[1].socket_labels[0].is_empty());
}

#[test]
fn refused_forms_name_their_field() {
    let proxy_protocol = json!([{
        "name": "pp",
        "transport_socket": {"name": "envoy.transport_sockets.upstream_proxy_protocol",
            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.proxy_protocol.v3.ProxyProtocolUpstreamTransport"}},
    }]);
    let e = cluster_resource(&cluster(proxy_protocol), "clusters[0]").expect_err("refused");
    assert!(
        e.to_string()
            .contains("transport_socket_matches[0].transport_socket.name"),
        "{e}"
    );
    let unnamed = json!([{"match": {}}]);
    let e = cluster_resource(&cluster(unnamed), "clusters[0]").expect_err("name required");
    assert!(
        e.to_string().contains("transport_socket_matches[0].name"),
        "{e}"
    );
    let bad_match = json!([{"name": "x", "match": "name"}]);
    let e = cluster_resource(&cluster(bad_match), "clusters[0]").expect_err("match is a Struct");
    assert!(
        e.to_string().contains("transport_socket_matches[0].match"),
        "{e}"
    );
}

/// Envoy Gateway's BackendTLSPolicy context: `combined_validation_context` with the SANs in
/// `default_validation_context` and the CA from an SDS secret.
#[test]
fn combined_validation_context_takes_default_sans_and_the_secrets_ca() {
    let combined = json!({
        "default_validation_context": {"match_typed_subject_alt_names": [
            {"san_type": "DNS", "matcher": {"exact": "example.com"}}]},
        "validation_context_sds_secret_config": {"name": "ca",
            "sds_config": {"path_config_source": {"path": "/etc/ca.json"}}},
    });
    let entry = |common: serde_json::Value| {
        json!([{
            "name": "backend/tls/0",
            "match": {"name": "backend/tls/0"},
            "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": {
                "@type": TLS, "sni": "example.com", "common_tls_context": common}},
        }])
    };
    let c = cluster_resource(
        &cluster(entry(json!({"combined_validation_context": combined}))),
        "clusters[0]",
    )
    .expect("cluster");
    let tls = c.transport_socket_matches[0].tls.as_ref().expect("tls");
    assert_eq!(tls.san_matchers.len(), 1);
    assert!(tls.trusted_ca_sds.is_some());
    assert!(tls.trusted_ca.is_none());

    let both = entry(json!({
        "combined_validation_context": combined,
        "validation_context": {"trusted_ca": {"filename": "/etc/ca.pem"}},
    }));
    let e = cluster_resource(&cluster(both), "clusters[0]").expect_err("oneof");
    assert!(e.to_string().contains("cannot be combined with"), "{e}");
}

/// Envoy picks a transport socket by its `typed_config` type: Envoy Gateway's
/// `dummy.transport_socket` with an `UpstreamTlsContext` is TLS.
#[test]
fn transport_socket_name_yields_to_its_type() {
    let mut c = cluster(json!([tls_entry("backend/tls/0", "a.example")]));
    c["transport_socket"] = json!({"name": "dummy.transport_socket",
        "typed_config": {"@type": TLS, "common_tls_context": {}}});
    let parsed = cluster_resource(&c, "clusters[0]").expect("cluster");
    assert!(parsed.upstream_tls.is_some());
}
