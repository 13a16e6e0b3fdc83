//! `static_resources.secrets` and the references that name them (no `sds_config`), as Envoy
//! resolves them; and static listeners whose secrets come from a control plane.

use quickshake_config::*;
use serde_json::{json, Value};

mod common;
use common::*;

fn bootstrap(secrets: Value, common_tls: Value) -> Value {
    json!({
        "static_resources": {
            "secrets": secrets,
            "clusters": [{"name": "be", "load_assignment": {"cluster_name": "be", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 9}}}}]}]}}],
            "listeners": [{
                "name": "tls",
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": 10443}},
                "filter_chains": [{
                    "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
                        "common_tls_context": common_tls,
                    }},
                    "filters": [{"name": "envoy.filters.network.tcp_proxy", "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
                        "stat_prefix": "t", "cluster": "be"}}],
                }],
            }],
        }
    })
}

fn cert_secret(name: &str) -> Value {
    json!({"name": name, "tls_certificate": {
        "certificate_chain": {"filename": "/certs/server.pem"},
        "private_key": {"filename": "/certs/server.key"},
    }})
}

fn tls(b: &Bootstrap) -> &DownstreamTls {
    b.listeners[0].filter_chains[0].tls.as_ref().unwrap()
}

#[test]
fn static_secret_becomes_the_certificate() {
    let v = bootstrap(
        json!([cert_secret("server")]),
        json!({"tls_certificate_sds_secret_configs": [{"name": "server"}]}),
    );
    let b = parse_json(&v).unwrap();
    let t = tls(&b);
    assert!(t.sds_certificates.is_empty());
    assert_eq!(t.certificates.len(), 1);
    assert_eq!(
        t.certificates[0].certificate_chain,
        DataSource::Filename("/certs/server.pem".into())
    );
    assert!(t.certificates[0].path.contains("static secret 'server'"));
    assert!(b.listeners[0].control_plane_secrets().is_empty());
}

#[test]
fn static_secret_keeps_its_private_key_provider() {
    let secret = json!({"name": "pkp", "tls_certificate": {
        "certificate_chain": {"filename": "/certs/server.pem"},
        "private_key_provider": {"provider_name": "cryptomb", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.private_key_providers.cryptomb.v3alpha.CryptoMbPrivateKeyMethodConfig",
            "private_key": {"filename": "/certs/server.key"}}},
    }});
    let v = bootstrap(
        json!([secret]),
        json!({"tls_certificate_sds_secret_configs": [{"name": "pkp"}]}),
    );
    let b = parse_json(&v).unwrap();
    let p = tls(&b).certificates[0]
        .private_key_provider
        .as_ref()
        .unwrap();
    assert_eq!(p.provider_name, "cryptomb");
}

#[test]
fn unknown_static_secret_is_refused() {
    let v = bootstrap(
        json!([cert_secret("server")]),
        json!({"tls_certificate_sds_secret_configs": [{"name": "other"}]}),
    );
    let e = err(&v).to_string();
    assert!(e.contains("Unknown static secret: other"), "{e}");
    assert!(e.contains("tls_certificate_sds_secret_configs[0]"), "{e}");
}

#[test]
fn duplicate_static_secret_is_refused() {
    let v = bootstrap(
        json!([cert_secret("server"), cert_secret("server")]),
        json!({"tls_certificate_sds_secret_configs": [{"name": "server"}]}),
    );
    let e = err(&v).to_string();
    assert!(e.contains("duplicate static secret name \"server\""), "{e}");
}

#[test]
fn static_secret_of_another_kind_is_refused() {
    let ca =
        json!({"name": "ca", "validation_context": {"trusted_ca": {"filename": "/certs/ca.pem"}}});
    let v = bootstrap(
        json!([ca]),
        json!({"tls_certificate_sds_secret_configs": [{"name": "ca"}]}),
    );
    let e = err(&v).to_string();
    assert!(
        e.contains("holds a validation_context, not a tls_certificate"),
        "{e}"
    );
}

#[test]
fn downstream_validation_context_from_a_static_secret() {
    let ca =
        json!({"name": "ca", "validation_context": {"trusted_ca": {"filename": "/certs/ca.pem"}}});
    let v = bootstrap(
        json!([cert_secret("server"), ca]),
        json!({
            "tls_certificate_sds_secret_configs": [{"name": "server"}],
            "validation_context_sds_secret_config": {"name": "ca"},
        }),
    );
    let b = parse_json(&v).unwrap();
    assert_eq!(
        tls(&b).trusted_ca,
        Some(DataSource::Filename("/certs/ca.pem".into()))
    );
}

#[test]
fn xds_resources_resolve_the_bootstraps_static_secrets() {
    let v = bootstrap(
        json!([cert_secret("server")]),
        json!({"tls_certificates": [{
        "certificate_chain": {"filename": "/certs/a.pem"}, "private_key": {"filename": "/certs/a.key"}}]}),
    );
    let b = parse_json(&v).unwrap();
    let mut l = v["static_resources"]["listeners"][0].clone();
    l["filter_chains"][0]["transport_socket"]["typed_config"]["common_tls_context"] =
        json!({"tls_certificate_sds_secret_configs": [{"name": "server"}]});
    let names = vec!["be".to_owned()];
    assert!(listener_resource(&l, &names).is_err());
    let parsed = with_static_secrets(&b, || listener_resource(&l, &names)).unwrap();
    let t = parsed.filter_chains[0].tls.as_ref().unwrap();
    assert_eq!(t.certificates.len(), 1);
}

#[test]
fn static_listener_with_ads_secret_names_it() {
    let mut v = bootstrap(
        json!([]),
        json!({"tls_certificate_sds_secret_configs": [{"name": "kubernetes://gw", "sds_config": {"ads": {}}}]}),
    );
    v["dynamic_resources"] = json!({"ads_config": {"api_type": "GRPC",
        "grpc_services": [{"envoy_grpc": {"cluster_name": "be"}}]}});
    let b = parse_json(&v).unwrap();
    let refs = b.listeners[0].control_plane_secrets();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0].name, "kubernetes://gw");
}
