//! Static listeners and secrets (issue 30, points 3 and 6), as Envoy 1.39.3 serves them:
//! - a static listener whose certificate comes over ADS SDS (Istio's router bootstrap and its
//!   `kubernetes://NAME` credentials) does not serve before the secret arrives, serves with it,
//!   and a secret update rotates it;
//! - `static_resources.secrets` named by a static listener (no `sds_config`) serves.
//!
//! Both against Envoy (the reference) and quickshake, state of the world and delta, with the
//! go-control-plane test server.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::control_plane::ControlPlane;
use crate::support::tls_client::peer_serial;
use crate::support::xds::{
    istiod_cryptomb_secret, plain_secret, DataPlane, Mode, Plane, CLUSTER, LISTENER, SECRET,
};
use crate::support::{self, free_port};
use crate::xds::{get_path, serial_of};

const NODE: &str = "xds-static-sds";

/// A static TLS listener on `port` answering 200 `x-route: static` itself, its certificate
/// named by `cert_ref` (a `tls_certificate_sds_secret_configs` entry), as bootstrap YAML
/// (`static_resources.listeners`).
fn static_listener(port: u16, cert_ref: Value) -> String {
    let l = json!({
        "name": "static-https",
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
        "filter_chains": [{
            "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
                "common_tls_context": {
                    "alpn_protocols": ["h2", "http/1.1"],
                    "tls_certificate_sds_secret_configs": [cert_ref]}}},
            "filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": "static_https",
                "route_config": {"name": "local", "virtual_hosts": [{
                    "name": "all", "domains": ["*"],
                    "routes": [{"match": {"prefix": "/"}, "direct_response": {"status": 200},
                        "response_headers_to_add": [{"header": {"key": "x-route", "value": "static"}}]}]}]},
                "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]
        }]
    });
    format!("  listeners:\n  - {l}\n")
}

/// The bootstrap with `extra` (YAML under `static_resources`) appended.
fn start(plane: Plane, mode: Mode, cp: &ControlPlane, extra: String) -> DataPlane {
    DataPlane::start_edited(plane, mode, NODE, cp, |b| b + &extra)
}

fn push_secret(cp: &ControlPlane, version: &str, secrets: Vec<Value>) {
    cp.push(
        NODE,
        version,
        json!({LISTENER: [], CLUSTER: [], SECRET: secrets}),
    );
}

fn within(dp: &DataPlane, what: &str, mut f: impl FnMut() -> bool) {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = dp.log_text();
    let lines: Vec<&str> = log.lines().collect();
    panic!(
        "timed out waiting for: {what}\ndata plane log (tail):\n{}",
        lines[lines.len().saturating_sub(60)..].join("\n")
    );
}

/// a. A static listener's certificate over ADS SDS: not served before, served after, rotated.
fn static_listener_ads_secret(plane: Plane, mode: Mode) {
    let cp = ControlPlane::start_tcp();
    push_secret(&cp, "v1", vec![]);
    let port = free_port();
    let cert_ref = json!({"name": "kubernetes://gw-cred",
        "sds_config": {"ads": {}, "resource_api_version": "V3", "initial_fetch_timeout": "1s"}});
    let dp = start(plane, mode, &cp, static_listener(port, cert_ref));
    // No secret yet: the listener does not serve (Envoy: no certificate to handshake with;
    // quickshake: not bound until it warms).
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        get_path(port, "/").is_err(),
        "served before its secret came\n{}",
        dp.log_text()
    );
    push_secret(
        &cp,
        "v2",
        vec![plain_secret("kubernetes://gw-cred", "rsa2048")],
    );
    within(&dp, "the static listener serves", || {
        get_path(port, "/").is_ok_and(|r| r == "static")
    });
    assert_eq!(peer_serial(port).expect("handshake"), serial_of("rsa2048"));
    push_secret(
        &cp,
        "v3",
        vec![plain_secret("kubernetes://gw-cred", "other")],
    );
    within(&dp, "the rotated certificate", || {
        peer_serial(port).is_ok_and(|s| s == serial_of("other"))
    });
    assert_eq!(get_path(port, "/"), Ok("static".to_owned()));
}

/// b. `static_resources.secrets` named by a static listener without `sds_config`.
fn static_resources_secret(plane: Plane, mode: Mode) {
    serves_with_static_secret(plane, mode, plain_secret("local-cert", "rsa2048"));
}

/// A static listener naming `secret` (`local-cert`, of rsa2048) of `static_resources.secrets`
/// serves with it.
fn serves_with_static_secret(plane: Plane, mode: Mode, secret: Value) {
    let cp = ControlPlane::start_tcp();
    push_secret(&cp, "v1", vec![]);
    let port = free_port();
    let extra = format!(
        "{}  secrets:\n  - {secret}\n",
        static_listener(port, json!({"name": "local-cert"}))
    );
    let dp = start(plane, mode, &cp, extra);
    within(&dp, "the static listener serves", || {
        get_path(port, "/").is_ok_and(|r| r == "static")
    });
    assert_eq!(peer_serial(port).expect("handshake"), serial_of("rsa2048"));
}

/// c. Istio's shape: the static listener's certificate over an SDS stream of its own
/// (`sds_config.api_config_source` to a static `sds-grpc` cluster, here the same control
/// plane); served once it comes, rotated on an update.
fn static_listener_sds_stream(plane: Plane, mode: Mode) {
    let cp = ControlPlane::start_tcp();
    push_secret(&cp, "v1", vec![]);
    let port = free_port();
    let api_type = match mode {
        Mode::Sotw => "GRPC",
        Mode::Delta => "DELTA_GRPC",
    };
    // Envoy's server initialization waits for the secret up to its initial_fetch_timeout
    // (15 s by default): 1 s, so the data plane is ready before the secret is pushed.
    let cert_ref = json!({"name": "default", "sds_config": {"resource_api_version": "V3",
        "initial_fetch_timeout": "1s",
        "api_config_source": {"api_type": api_type, "transport_api_version": "V3",
            "grpc_services": [{"envoy_grpc": {"cluster_name": "sds-grpc"}}]}}});
    let grpc_port = cp.grpc_port.expect("tcp control plane");
    let sds_cluster = json!({"name": "sds-grpc", "type": "STATIC", "connect_timeout": "1s",
        "typed_extension_protocol_options": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "explicit_http_config": {"http2_protocol_options": {}}}},
        "load_assignment": {"cluster_name": "sds-grpc", "endpoints": [{"lb_endpoints": [{"endpoint":
            {"address": {"socket_address": {"address": "127.0.0.1", "port_value": grpc_port}}}}]}]}});
    let extra = format!("  - {sds_cluster}\n{}", static_listener(port, cert_ref));
    let dp = start(plane, mode, &cp, extra);
    assert!(
        get_path(port, "/").is_err(),
        "served before its secret came"
    );
    push_secret(&cp, "v2", vec![plain_secret("default", "rsa2048")]);
    within(&dp, "the static listener serves", || {
        get_path(port, "/").is_ok_and(|r| r == "static")
    });
    assert_eq!(peer_serial(port).expect("handshake"), serial_of("rsa2048"));
    push_secret(&cp, "v3", vec![plain_secret("default", "other")]);
    within(&dp, "the rotated certificate", || {
        peer_serial(port).is_ok_and(|s| s == serial_of("other"))
    });
}

/// d. A static secret with a `private_key_provider` (the Secret istiod sends for cryptomb,
/// software fallback on) serves; quickshake only (Envoy's official build has no cryptomb).
fn static_secret_with_key_provider(plane: Plane, mode: Mode) {
    let secret = istiod_cryptomb_secret("local-cert", "rsa2048");
    serves_with_static_secret(plane, mode, secret);
}

per_plane!(static_listener_ads_secret, shared);
per_plane!(static_resources_secret, shared);
per_plane!(static_listener_sds_stream, shared);

mod static_secret_with_key_provider {
    use super::*;
    #[test]
    fn quickshake_sotw() {
        let _lock = support::shared();
        static_secret_with_key_provider(Plane::Quickshake, Mode::Sotw);
    }
}
