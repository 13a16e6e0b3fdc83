//! `grpc_services[].initial_metadata` goes out as request metadata when an xDS stream opens, as
//! Envoy sends it (istiod's authenticators read it): on the ADS stream (state of the world and
//! delta, from `ads_config`) and on an SDS stream of its own (a listener's
//! `sds_config.api_config_source`, as Istio's `sds-grpc`), each stream with its own entries.
//! The control plane (`tests/xds-control-plane`) records every stream's metadata; the same
//! checks run against Envoy 1.39.3, the reference.

use serde_json::{json, Value};

use crate::support::control_plane::ControlPlane;
use crate::support::xds::{
    plain_secret, route_config, tls_listener_from, DataPlane, Mode, Plane, LISTENER, ROUTE, SECRET,
};
use crate::support::{self, eventually, free_port};

const NODE: &str = "xds-metadata";
const SDS: &str = "/envoy.service.secret.v3.SecretDiscoveryService/StreamSecrets";

/// The bootstrap's ADS `grpc_services` entry, and the same with two metadata entries.
const ADS_SERVICE: &str = "grpc_services: [{ envoy_grpc: { cluster_name: xds_cluster } }]";
const ADS_SERVICE_WITH_METADATA: &str = "grpc_services: [{ envoy_grpc: { cluster_name: xds_cluster }, initial_metadata: [{ key: X-Ads-Token, value: ads-secret }, { key: x-tenant, value: \"team a\" }] }]";

fn ads_method(mode: Mode) -> &'static str {
    match mode {
        Mode::Sotw => {
            "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
        }
        Mode::Delta => {
            "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
        }
    }
}

/// One metadata key's values on the last stream of `method` (`Null` when absent).
fn values(cp: &ControlPlane, method: &str, key: &str) -> Value {
    cp.stream_metadata(method)[key].clone()
}

fn check(plane: Plane, mode: Mode) {
    let cp = ControlPlane::start_tcp();
    let port = free_port();
    // The listener's certificate comes over an SDS stream of its own, with its own metadata.
    let sds = json!({
        "api_config_source": {
            "api_type": "GRPC",
            "transport_api_version": "V3",
            "grpc_services": [{
                "envoy_grpc": { "cluster_name": "xds_cluster" },
                "initial_metadata": [{ "key": "x-sds-token", "value": "sds-secret" }]
            }]
        },
        "resource_api_version": "V3"
    });
    cp.push(
        NODE,
        "v1",
        json!({
            LISTENER: [tls_listener_from("https", port, "server-cert", "routes", sds)],
            ROUTE: [route_config("routes", "a", "v1")],
            SECRET: [plain_secret("server-cert", "rsa2048")],
        }),
    );
    let dp = DataPlane::start_edited(plane, mode, NODE, &cp, |b| {
        assert!(b.contains(ADS_SERVICE), "{b}");
        b.replace(ADS_SERVICE, ADS_SERVICE_WITH_METADATA)
    });
    let who = format!("{plane:?} {mode:?}");
    let ads = ads_method(mode);
    eventually(&format!("{who}: the ADS stream's metadata"), || {
        values(&cp, ads, "x-ads-token") == json!(["ads-secret"])
    });
    assert_eq!(values(&cp, ads, "x-tenant"), json!(["team a"]), "{who}");
    assert_eq!(values(&cp, ads, "x-sds-token"), Value::Null, "{who}");
    eventually(&format!("{who}: the SDS stream's metadata"), || {
        values(&cp, SDS, "x-sds-token") == json!(["sds-secret"])
    });
    assert_eq!(
        values(&cp, SDS, "x-ads-token"),
        Value::Null,
        "{who}: {}\n{}",
        cp.status(),
        dp.log_text()
    );
}

#[test]
fn initial_metadata_is_sent_on_ads_and_sds_streams() {
    let _lock = support::shared();
    for mode in [Mode::Sotw, Mode::Delta] {
        check(Plane::Quickshake, mode);
    }
}

#[test]
fn envoy_sends_initial_metadata_the_same_way() {
    let _lock = support::shared();
    for mode in [Mode::Sotw, Mode::Delta] {
        check(Plane::Envoy, mode);
    }
}
