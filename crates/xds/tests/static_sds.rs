//! Static listeners whose secrets come from a control plane: subscribed from the start, warming
//! until the secret arrives, then assembled with it like a dynamic listener; a secret of the
//! wrong kind is the secret's fault.

use std::time::SystemTime;

use quickshake_config::{parse_str, Bootstrap};
use quickshake_xds::assemble::assemble;
use quickshake_xds::state::{static_secret_refs, wanted, Source};
use quickshake_xds::{Entry, Kind, Resources};
use serde_json::{json, Value};

fn bootstrap() -> Bootstrap {
    let b = json!({
        "dynamic_resources": {"ads_config": {"api_type": "GRPC",
            "grpc_services": [{"envoy_grpc": {"cluster_name": "xds"}}]}},
        "static_resources": {
            "clusters": [{"name": "xds", "load_assignment": {"cluster_name": "xds", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 18000}}}}]}]}}],
            "listeners": [{
                "name": "static-https",
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": 10443}},
                "filter_chains": [{
                    "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
                        "common_tls_context": {"tls_certificate_sds_secret_configs": [
                            {"name": "kubernetes://gw", "sds_config": {"ads": {}}}]}}},
                    "filters": [{"name": "envoy.filters.network.tcp_proxy", "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
                        "stat_prefix": "t", "cluster": "xds"}}],
                }],
            }],
        }
    });
    parse_str(&b.to_string()).expect("bootstrap")
}

fn with_secret(secret: Value) -> Resources {
    let mut r = Resources::new();
    let name = secret["name"].as_str().expect("name").to_owned();
    r.entry(Kind::Secret).or_default().insert(
        name,
        Entry {
            version: "1".into(),
            json: secret,
            last_updated: SystemTime::now(),
        },
    );
    r
}

#[test]
fn static_listener_secret_is_subscribed_from_the_start() {
    let boot = bootstrap();
    let statics = static_secret_refs(&boot.listeners);
    assert_eq!(statics.len(), 1);
    assert_eq!(statics[0].0, "kubernetes://gw");
    assert_eq!(statics[0].1, Source::Ads);
    let names = wanted(Kind::Secret, &Resources::new(), &Source::Ads, &statics).expect("named");
    assert!(names.contains("kubernetes://gw"));
    let other = Source::Cluster("sds-grpc".into());
    assert!(wanted(Kind::Secret, &Resources::new(), &other, &statics)
        .expect("named")
        .is_empty());
}

#[test]
fn static_listener_warms_until_its_secret_arrives() {
    let boot = bootstrap();
    let a = assemble(&boot, &Resources::new()).expect("assembles");
    assert!(a.listeners.is_empty());
    assert_eq!(
        a.warming,
        [(
            "static-https".to_owned(),
            "secret 'kubernetes://gw'".to_owned()
        )]
    );
    let secret = json!({"name": "kubernetes://gw", "tls_certificate": {
        "certificate_chain": {"filename": "/certs/server.pem"},
        "private_key": {"filename": "/certs/server.key"}}});
    let a = assemble(&boot, &with_secret(secret)).expect("assembles");
    assert!(a.warming.is_empty());
    let l = &a.listeners[0];
    assert_eq!(l.value.name, "static-https");
    let tls = l.value.filter_chains[0].tls.as_ref().expect("tls");
    assert!(tls.sds_certificates.is_empty());
    assert_eq!(tls.certificates.len(), 1);
    assert_eq!(l.uses, [(Kind::Secret, "kubernetes://gw".to_owned())]);
}

#[test]
fn a_secret_of_the_wrong_kind_is_refused_by_name() {
    let boot = bootstrap();
    let secret = json!({"name": "kubernetes://gw",
        "validation_context": {"trusted_ca": {"filename": "/certs/ca.pem"}}});
    let refused = assemble(&boot, &with_secret(secret)).expect_err("refused");
    assert_eq!(refused.0.len(), 1);
    assert_eq!(refused.0[0].kind, Kind::Secret);
    assert_eq!(refused.0[0].name, "kubernetes://gw");
}
