//! A cluster's `ignore_health_on_host_removal` with active health checks, over EDS: by
//! default (Envoy's) a host the control plane drops keeps taking traffic while its health
//! checks pass and goes at its first failed check; with `true` it goes at once. The same
//! scenario runs against Envoy 1.39.3, the reference, and against quickshake.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::control_plane::ControlPlane;
use crate::support::upstreams::{HttpOpts, Upstream};
use crate::support::xds::{
    load_assignment, plain_secret, route_config, tls_listener, DataPlane, Mode, Plane, CLUSTER,
    ENDPOINTS, LISTENER, ROUTE, SECRET,
};
use crate::support::{self, curl, free_port};

const NODE: &str = "host-removal";

/// An EDS cluster health-checked every 200 ms (`GET /hc`, one failure makes a host unhealthy).
fn cluster(ignore_health_on_host_removal: bool) -> Value {
    json!({
        "name": "svc",
        "type": "EDS",
        "connect_timeout": "1s",
        "eds_cluster_config": { "eds_config": { "ads": {}, "resource_api_version": "V3" } },
        "ignore_health_on_host_removal": ignore_health_on_host_removal,
        "health_checks": [{
            "timeout": "1s",
            "interval": "0.2s",
            "no_traffic_interval": "0.2s",
            "unhealthy_threshold": 1,
            "healthy_threshold": 1,
            "http_health_check": { "path": "/hc" }
        }]
    })
}

/// Requests an upstream has answered whose path starts with `prefix` (`/req`: requests,
/// `/hc`: health checks).
fn answered(up: &Upstream, prefix: &str) -> usize {
    up.state
        .seen()
        .iter()
        .filter(|s| s.path.starts_with(prefix))
        .count()
}

fn served(up: &Upstream) -> usize {
    answered(up, "/req")
}

/// `n` requests; how many got a 200.
fn requests(port: u16, n: usize) -> usize {
    (0..n)
        .filter(|i| {
            let out = curl(&[
                "-k",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                &format!("https://localhost:{port}/req/{i}"),
            ]);
            String::from_utf8_lossy(&out.stdout) == "200"
        })
        .count()
}

fn scenario(plane: Plane, ignore: bool) {
    let _lock = support::shared();
    let cp = ControlPlane::start_tcp();
    let (a, b) = (
        Upstream::http(HttpOpts::default()),
        Upstream::http(HttpOpts::default()),
    );
    let port = free_port();
    let push = |version: &str, ports: &[u16]| {
        cp.push(
            NODE,
            version,
            json!({
                LISTENER: [tls_listener("https", port, "server-cert", "routes")],
                ROUTE: [route_config("routes", "svc", "v1")],
                CLUSTER: [cluster(ignore)],
                ENDPOINTS: [load_assignment("svc", ports)],
                SECRET: [plain_secret("server-cert", "rsa2048")],
            }),
        )
    };
    push("v1", &[a.port, b.port]);
    let dp = DataPlane::start(plane, Mode::Sotw, NODE, &cp);
    let who = format!("{plane:?}, ignore_health_on_host_removal {ignore}");
    let log = || dp.log_text();
    // Both hosts checked healthy (not only served in panic mode) and serving.
    let started = Instant::now();
    while served(&b) == 0 || served(&a) == 0 || answered(&a, "/hc") == 0 || answered(&b, "/hc") == 0
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{who}: both hosts never served\n{}",
            log()
        );
        requests(port, 2);
    }
    std::thread::sleep(Duration::from_millis(300));
    // The control plane drops b; b's health checks still pass.
    push("v2", &[a.port]);
    std::thread::sleep(Duration::from_millis(1000));
    let before = served(&b);
    assert_eq!(requests(port, 20), 20, "{who}\n{}", log());
    let to_b = served(&b) - before;
    if ignore {
        assert_eq!(to_b, 0, "{who}: b is gone at once");
        return;
    }
    assert!(to_b > 0, "{who}: b stays while healthy\n{}", log());
    // b stops: its next check fails and it goes; every request reaches a.
    drop(b);
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(requests(port, 10), 10, "{who}: after b failed\n{}", log());
}

#[test]
fn removed_healthy_host_stays_until_its_check_fails_as_envoy() {
    scenario(Plane::Envoy, false);
}

#[test]
fn removed_healthy_host_stays_until_its_check_fails_as_quickshake() {
    scenario(Plane::Quickshake, false);
}

#[test]
fn ignore_health_on_host_removal_drops_it_at_once_as_envoy() {
    scenario(Plane::Envoy, true);
}

#[test]
fn ignore_health_on_host_removal_drops_it_at_once_as_quickshake() {
    scenario(Plane::Quickshake, true);
}
