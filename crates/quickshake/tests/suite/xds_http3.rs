//! HTTP/3 listeners from a control plane (LDS): a UDP listener with `quic_options` and a QUIC
//! filter chain whose certificate comes by SDS, all over ADS from the go-control-plane harness,
//! served to aioquic by Envoy 1.39.3 and by quickshake alike; on quickshake, an update (new
//! certificate and routes) serves new connections while an established one finishes its request,
//! a certificate rotated by SDS alone serves new handshakes, new `quic_options` (an idle
//! timeout, `enabled: false`) apply to new connections in place, and removing the listener drains its connections (GOAWAY, then CONNECTION_CLOSE H3_NO_ERROR)
//! and then frees the port.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::gateway_http3::requests_sni;
use crate::support::control_plane::ControlPlane;
use crate::support::envoy::envoy_binary;
use crate::support::upstreams::{HttpOpts, Upstream};
use crate::support::xds::{plain_secret, DataPlane, Mode, Plane, CLUSTER, LISTENER, ROUTE, SECRET};
use crate::support::{self, free_port};

const NODE: &str = "xds-h3";
const SERIAL_RSA2048: &str = "5312d086f89969a2f1a141e2390e34708b498762";
const SERIAL_OTHER: &str = "41a71146c89fbe6ed5c9d349007e9fc7215c43d3";

/// The QUIC listener as a control plane sends it: certificate `server-cert` by SDS over ADS,
/// `/slow` to the `slow` cluster, the rest answered with `tag`.
fn quic_listener(port: u16, tag: &str) -> Value {
    quic_listener_with(port, tag, json!({}))
}

/// [`quic_listener`] with these `quic_options`.
fn quic_listener_with(port: u16, tag: &str, quic_options: Value) -> Value {
    let ads = json!({ "ads": {}, "resource_api_version": "V3" });
    json!({
        "name": "h3",
        "address": { "socket_address": { "address": "127.0.0.1", "port_value": port, "protocol": "UDP" } },
        "udp_listener_config": { "quic_options": quic_options },
        "filter_chains": [{
            "transport_socket": {
                "name": "envoy.transport_sockets.quic",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.transport_sockets.quic.v3.QuicDownstreamTransport",
                    "downstream_tls_context": { "common_tls_context": {
                        "tls_certificate_sds_secret_configs": [{ "name": "server-cert", "sds_config": ads }]
                    }}
                }
            },
            "filters": [{
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                    "codec_type": "HTTP3",
                    "stat_prefix": "ingress_h3",
                    // The listener may come before the cluster it routes to (see the report).
                    "route_config": { "validate_clusters": false, "virtual_hosts": [{
                        "name": "all",
                        "domains": ["*"],
                        "routes": [
                            { "match": { "prefix": "/slow" }, "route": { "cluster": "slow" } },
                            { "match": { "prefix": "/" }, "direct_response": { "status": 200, "body": { "inline_string": tag } } }
                        ]
                    }]},
                    "http_filters": [{
                        "name": "envoy.filters.http.router",
                        "typed_config": { "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" }
                    }]
                }
            }]
        }]
    })
}

/// The snapshot: the listener (if any), certificate `cert`, the `slow` cluster.
fn resources(listener: Option<Value>, cert: &str, slow_port: u16) -> Value {
    let cluster = json!({
        "name": "slow",
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": { "cluster_name": "slow", "endpoints": [{ "lb_endpoints": [
            { "endpoint": { "address": { "socket_address": { "address": "127.0.0.1", "port_value": slow_port } } } }
        ]}]}
    });
    json!({
        LISTENER: listener.into_iter().collect::<Vec<_>>(),
        ROUTE: [],
        CLUSTER: [cluster],
        SECRET: [plain_secret("server-cert", cert)],
    })
}

fn get(port: u16) -> Value {
    requests_sni(port, "localhost", &json!([{"path": "/"}]), &[])
}

/// `h3client.py` in the background: one request to `path`, then (`wait_close`) until the
/// server closes the connection.
fn background(port: u16, path: &str, wait_close: bool) -> std::process::Child {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let _ = envoy_binary();
    let mut cmd = Command::new(root.join("../../.venv/bin/python"));
    cmd.arg(root.join("tests/suite/h3client.py"))
        .args(["requests", "127.0.0.1", &port.to_string(), "localhost"])
        .arg(json!([{ "path": path }]).to_string());
    if wait_close {
        cmd.arg("--wait-close");
    }
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn h3client")
}

fn result(child: std::process::Child) -> Value {
    let out = child.wait_with_output().expect("h3client ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("h3client JSON")
}

#[test]
fn an_http3_listener_from_lds_is_served_updated_and_drained() {
    let _lock = support::shared();
    let slow = Upstream::http(HttpOpts::delay(Duration::from_millis(2500)));
    for plane in [Plane::Envoy, Plane::Quickshake] {
        let cp = ControlPlane::start_tcp();
        let port = free_port();
        cp.push(
            NODE,
            "v1",
            resources(Some(quic_listener(port, "v1")), "rsa2048", slow.port),
        );
        let dp = DataPlane::start(plane, Mode::Sotw, NODE, &cp);
        // Up to 15 s: the data plane starts, takes the ADS push, binds the listener.
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            let reqs = json!([{"path": "/"}]);
            let out = requests_sni(port, "localhost", &reqs, &["--may-fail"]);
            if out["results"][0]["body"] == "v1" {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{plane:?} does not serve the LDS listener over HTTP/3: {out}\n{}",
                dp.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let out = get(port);
        assert_eq!(out["peer_serial"], SERIAL_RSA2048, "{plane:?}: {out}");
        assert!(
            dp.stat("http.ingress_h3.downstream_cx_http3_total")
                .unwrap_or(0)
                >= 1,
            "{plane:?}"
        );
        if plane == Plane::Envoy {
            continue;
        }
        // An update (new certificate by SDS, new routes) while a request is in flight: new
        // connections get the new chain, the established one finishes on its own.
        let before = slow.state.request_count();
        let inflight = background(port, "/slow", false);
        support::eventually("the slow request reached the upstream", || {
            slow.state.request_count() == before + 1
        });
        cp.push(
            NODE,
            "v2",
            resources(Some(quic_listener(port, "v2")), "other", slow.port),
        );
        let mut inflight = Some(inflight);
        support::eventually("new connections get v2", || {
            let out = get(port);
            out["results"][0]["body"] == "v2" && out["peer_serial"] == SERIAL_OTHER
        });
        let done_early = inflight.as_mut().and_then(|c| c.try_wait().ok().flatten());
        assert!(
            done_early.is_none(),
            "the slow request ended before the update applied"
        );
        let out = result(inflight.take().expect("client"));
        assert_eq!(
            out["results"][0]["status"], 200,
            "established connection: {out}"
        );
        assert_eq!(out["peer_serial"], SERIAL_RSA2048, "{out}");
        // A secret alone changes (the listener as it was): new handshakes get its certificate.
        cp.push(
            NODE,
            "v2b",
            resources(Some(quic_listener(port, "v2")), "rsa2048", slow.port),
        );
        support::eventually(
            "a rotated SDS certificate serves new QUIC handshakes",
            || get(port)["peer_serial"] == SERIAL_RSA2048,
        );
        // New quic_options apply in place to new connections: a 1 s idle timeout closes a
        // client that leaves without a word.
        let applied = dp.stat("listener_manager.lds.update_success").unwrap_or(0);
        cp.push(
            NODE,
            "v2c",
            resources(
                Some(quic_listener_with(
                    port,
                    "v2",
                    json!({ "idle_timeout": "1s" }),
                )),
                "rsa2048",
                slow.port,
            ),
        );
        support::eventually("the new quic_options applied", || {
            dp.stat("listener_manager.lds.update_success").unwrap_or(0) > applied
        });
        let scope = "listener.127.0.0.1_".to_owned() + &port.to_string() + ".";
        let out = requests_sni(port, "localhost", &json!([{"path": "/"}]), &["--idle"]);
        assert_eq!(out["results"][0]["body"], "v2", "{out}");
        support::eventually("the new idle_timeout closed the connection", || {
            dp.stat(&format!("{scope}http3.idle_timeout")).unwrap_or(0) == 1
        });
        // `enabled: false` (Envoy's disabled QUIC listener): no new connection is served.
        let applied = dp.stat("listener_manager.lds.update_success").unwrap_or(0);
        let disabled = json!({ "enabled": { "default_value": false, "runtime_key": "h3.off" } });
        cp.push(
            NODE,
            "v2d",
            resources(
                Some(quic_listener_with(port, "v2", disabled)),
                "rsa2048",
                slow.port,
            ),
        );
        support::eventually("the disabled listener applied", || {
            dp.stat("listener_manager.lds.update_success").unwrap_or(0) > applied
        });
        let out = requests_sni(port, "localhost", &json!([{"path": "/"}]), &["--may-fail"]);
        assert!(
            out["failed"].is_string(),
            "a disabled listener served: {out}"
        );
        // Back to the defaults (the slow request below idles longer than 1 s).
        let applied = dp.stat("listener_manager.lds.update_success").unwrap_or(0);
        cp.push(
            NODE,
            "v2e",
            resources(Some(quic_listener(port, "v2")), "rsa2048", slow.port),
        );
        support::eventually("the default quic_options applied", || {
            dp.stat("listener_manager.lds.update_success").unwrap_or(0) > applied
        });
        assert_eq!(get(port)["results"][0]["body"], "v2");
        // Removal drains: the request in flight is answered, then GOAWAY and
        // CONNECTION_CLOSE (H3_NO_ERROR); then the port is free.
        let before = slow.state.request_count();
        let draining = background(port, "/slow", true);
        support::eventually("the slow request reached the upstream", || {
            slow.state.request_count() == before + 1
        });
        cp.push(NODE, "v3", resources(None, "other", slow.port));
        let out = result(draining);
        assert_eq!(out["results"][0]["status"], 200, "{out}\n{}", dp.log_text());
        assert_eq!(out["close_error_code"], 0x100, "{out}");
        support::eventually("the removed listener's UDP port is free", || {
            std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok()
        });
    }
}
