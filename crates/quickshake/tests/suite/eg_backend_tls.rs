//! Envoy Gateway's BackendTLSPolicy form: a cluster whose `transport_socket_matches` entry
//! (TLS with SNI, `combined_validation_context`: SANs in the default context, the CA from a
//! secret) is chosen per endpoint by its `envoy.transport_socket_match` metadata, beside an
//! endpoint on the cluster's plaintext socket; statically and over EDS. Against quickshake and
//! stock Envoy 1.39.3.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::control_plane::ControlPlane;
use crate::support::envoy::Envoy;
use crate::support::upstreams::{fetch, proxy_config, route, HttpOpts, Upstream};
use crate::support::xds::{
    load_assignment, plain_secret, route_config, tls_listener, DataPlane, Mode, Plane, CLUSTER,
    ENDPOINTS, LISTENER, ROUTE, SECRET,
};
use crate::support::{self, certs_dir, free_port, render, Gateway};

const NODE: &str = "backend-tls";

fn config(tls_port: u16, plain_port: u16) -> String {
    let cluster = format!(
        r#"  - name: backend
    connect_timeout: 5s
    type: STATIC
    transport_socket_matches:
    - name: backend/tls/0
      match: {{ name: backend/tls/0 }}
      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
          sni: localhost
          common_tls_context:
            combined_validation_context:
              default_validation_context:
                match_typed_subject_alt_names:
                - {{ san_type: DNS, matcher: {{ exact: localhost }} }}
              validation_context_sds_secret_config: {{ name: backend-ca }}
    load_assignment:
      cluster_name: backend
      endpoints:
      - lb_endpoints:
        - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {tls_port} }} }} }}
          metadata: {{ filter_metadata: {{ envoy.transport_socket_match: {{ name: backend/tls/0 }} }} }}
        - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {plain_port} }} }} }}
  secrets:
  - name: backend-ca
    validation_context: {{ trusted_ca: {{ filename: {{{{CERTS}}}}/rsa2048.cert.pem }} }}
"#
    );
    proxy_config("", "", &route("/", "backend", ""), "", &cluster)
}

fn check(who: &str, url: &dyn Fn(&str) -> String, tls: &Upstream, plain: &Upstream) {
    for _ in 0..4 {
        let r = fetch(&["--http1.1"], &url("/btls"));
        assert_eq!(r.status, 200, "{who}: {r:?}");
    }
    assert_eq!(tls.state.request_count(), 2, "{who}: the TLS endpoint");
    assert_eq!(
        plain.state.request_count(),
        2,
        "{who}: the plaintext endpoint"
    );
    let snis = tls.state.snis();
    assert!(
        !snis.is_empty() && snis.iter().all(|s| s.as_deref() == Some("localhost")),
        "{who}: SNI seen upstream: {snis:?}"
    );
    assert_eq!(
        tls.state
            .tls_failures
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

#[test]
fn quickshake_picks_the_transport_socket_per_endpoint() {
    let _lock = support::shared();
    let (tls, plain) = (
        Upstream::tls_http(HttpOpts::default()),
        Upstream::http(HttpOpts::default()),
    );
    let gw = Gateway::start(&config(tls.port, plain.port), &["--concurrency", "1"]);
    check("quickshake", &|p| gw.url(p), &tls, &plain);
}

#[test]
fn envoy_picks_the_transport_socket_per_endpoint() {
    let _lock = support::shared();
    let (tls, plain) = (
        Upstream::tls_http(HttpOpts::default()),
        Upstream::http(HttpOpts::default()),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, admin) = (free_port(), free_port());
    let yaml = render(
        &config(tls.port, plain.port),
        port,
        free_port(),
        admin,
        dir.path(),
    );
    let envoy = Envoy::start(&yaml, admin);
    check(
        "envoy",
        &|p| format!("https://localhost:{port}{p}"),
        &tls,
        &plain,
    );
    drop(envoy);
}

/// The same over ADS, as Envoy Gateway serves it: an EDS cluster, the metadata on the
/// `ClusterLoadAssignment`'s endpoints.
fn eds_scenario(plane: Plane) {
    let _lock = support::shared();
    let cp = ControlPlane::start_tcp();
    let (tls, plain) = (
        Upstream::tls_http(HttpOpts::default()),
        Upstream::http(HttpOpts::default()),
    );
    let port = free_port();
    let ca = certs_dir().join("rsa2048.cert.pem");
    let cluster = json!({
        "name": "svc",
        "type": "EDS",
        "connect_timeout": "1s",
        "eds_cluster_config": { "eds_config": { "ads": {}, "resource_api_version": "V3" } },
        "transport_socket_matches": [{
            "name": "svc/tls/0",
            "match": { "name": "svc/tls/0" },
            "transport_socket": { "name": "envoy.transport_sockets.tls", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                "sni": "localhost",
                "common_tls_context": { "validation_context": {
                    "trusted_ca": { "filename": ca.to_str().expect("utf-8 path") } } } } },
        }],
    });
    let mut endpoints = load_assignment("svc", &[tls.port, plain.port]);
    endpoints["endpoints"][0]["lb_endpoints"][0]["metadata"] =
        json!({ "filter_metadata": { "envoy.transport_socket_match": { "name": "svc/tls/0" } } });
    cp.push(
        NODE,
        "v1",
        json!({
            LISTENER: [tls_listener("https", port, "server-cert", "routes")],
            ROUTE: [route_config("routes", "svc", "v1")],
            CLUSTER: [cluster],
            ENDPOINTS: [endpoints],
            SECRET: [plain_secret("server-cert", "rsa2048")],
        }),
    );
    let dp = DataPlane::start(plane, Mode::Sotw, NODE, &cp);
    let who = format!("{plane:?} over EDS");
    let started = Instant::now();
    while tls.state.request_count() + plain.state.request_count() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{who}: never served\n{}",
            dp.log_text()
        );
        let _ = fetch(&["--http1.1"], &format!("https://localhost:{port}/warm"));
    }
    let warm = (tls.state.request_count(), plain.state.request_count());
    for _ in 0..4 {
        let r = fetch(&["--http1.1"], &format!("https://localhost:{port}/btls"));
        assert_eq!(r.status, 200, "{who}: {r:?}\n{}", dp.log_text());
    }
    assert_eq!(
        tls.state.request_count() - warm.0,
        2,
        "{who}: the TLS endpoint"
    );
    assert_eq!(
        plain.state.request_count() - warm.1,
        2,
        "{who}: the plaintext endpoint"
    );
    let snis = tls.state.snis();
    assert!(
        snis.iter().all(|s| s.as_deref() == Some("localhost")),
        "{who}: SNI seen upstream: {snis:?}"
    );
}

#[test]
fn envoy_picks_the_transport_socket_per_eds_endpoint() {
    eds_scenario(Plane::Envoy);
}

#[test]
fn quickshake_picks_the_transport_socket_per_eds_endpoint() {
    eds_scenario(Plane::Quickshake);
}
