//! xDS end to end: a real control plane (`tests/xds-control-plane`, go-control-plane) feeds a
//! data plane over ADS, state of the world and delta, and real clients (curl, quickshake-bench,
//! a BoringSSL client) check what it serves. Each scenario runs against Envoy 1.39.3, the
//! reference, and against quickshake on the same bootstrap.
//!
//! The configuration: a TLS listener whose certificate comes by SDS, its routes by RDS, to an
//! EDS cluster of a real upstream (`support::upstreams`), all over one ADS stream.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::control_plane::ControlPlane;
use crate::support::tls_client::peer_serial;
use crate::support::upstreams::{HttpOpts, Upstream};
use crate::support::xds::{
    eds_cluster, istiod_cryptomb_secret, load_assignment, plain_secret, route_config, tls_listener,
    tls_listener_from, DataPlane, Mode, Plane, CLUSTER, ENDPOINTS, LISTENER, ROUTE, SECRET,
};
use crate::support::{
    self, bench_binary, certs_dir, curl, free_port, s_client_session, ticket_key,
};

const NODE: &str = "xds-test";

/// One test's world: control plane, two upstreams (clusters `a` and `b`), the data plane.
struct Scene {
    cp: ControlPlane,
    dp: DataPlane,
    /// The TLS listener's port.
    port: u16,
    a: Upstream,
    b: Upstream,
}

/// What a scene's snapshot holds; `resources` renders it.
struct Want<'a> {
    secret: Value,
    cluster: &'a str,
    tag: &'a str,
    listener: Value,
}

impl Scene {
    /// Push v1 (certificate rsa2048, route `v1` to cluster `a`), start the data plane and wait
    /// until the listener serves it.
    fn start(plane: Plane, mode: Mode, unix: bool, secret: Value) -> Scene {
        let cp = if unix {
            ControlPlane::start_unix()
        } else {
            ControlPlane::start_tcp()
        };
        let scene = Scene::with(
            cp,
            |port| Want {
                secret,
                cluster: "a",
                tag: "v1",
                listener: tls_listener("https", port, "server-cert", "routes"),
            },
            |cp| DataPlane::start(plane, mode, NODE, cp),
        );
        within(
            &scene,
            "the listener serves v1",
            Duration::from_secs(10),
            || get(scene.port).is_ok_and(|r| r == "v1"),
        );
        scene
    }

    /// Two upstreams and a free port; push what `v1` makes of the port on `cp`, then start the
    /// data plane with `start` (no wait).
    fn with(
        cp: ControlPlane,
        v1: impl FnOnce(u16) -> Want<'static>,
        start: impl FnOnce(&ControlPlane) -> DataPlane,
    ) -> Scene {
        let (a, b) = (
            Upstream::http(HttpOpts::default()),
            Upstream::http(HttpOpts::default()),
        );
        let port = free_port();
        cp.push(NODE, "v1", resources(&v1(port), a.port, b.port));
        let dp = start(&cp);
        Scene { cp, dp, port, a, b }
    }

    fn push(&self, version: &str, want: &Want) {
        self.cp
            .push(NODE, version, resources(want, self.a.port, self.b.port));
    }

    fn listener(&self) -> Value {
        tls_listener("https", self.port, "server-cert", "routes")
    }

    fn context(&self) -> String {
        format!(
            "control plane status: {}\ncontrol plane log:\n{}\ndata plane log (tail):\n{}",
            self.cp.status(),
            self.cp.log_text(),
            tail(&self.dp.log_text(), 60)
        )
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn resources(w: &Want, a_port: u16, b_port: u16) -> Value {
    json!({
        LISTENER: [w.listener],
        ROUTE: [route_config("routes", w.cluster, w.tag)],
        CLUSTER: [eds_cluster("a"), eds_cluster("b")],
        ENDPOINTS: [load_assignment("a", &[a_port]), load_assignment("b", &[b_port])],
        // One secret, or a list of them.
        SECRET: match &w.secret {
            Value::Array(all) => all.clone(),
            one => vec![one.clone()],
        },
    })
}

/// GET https://localhost:port/ with curl (-k): the `x-route` header of a 200, or what failed.
fn get(port: u16) -> Result<String, String> {
    get_path(port, "/")
}

/// GET https://localhost:`port``path` with curl (-k): the `x-route` header of a 200, or what
/// failed.
pub(crate) fn get_path(port: u16, path: &str) -> Result<String, String> {
    let out = curl(&[
        "-k",
        "-o",
        "/dev/null",
        "-D",
        "-",
        &format!("https://localhost:{port}{path}"),
    ]);
    let head = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success()
        || (!head.starts_with("HTTP/2 200") && !head.starts_with("HTTP/1.1 200"))
    {
        return Err(format!(
            "curl: {head}{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(head
        .lines()
        .find_map(|l| l.strip_prefix("x-route: "))
        .unwrap_or("")
        .trim()
        .to_string())
}

/// Poll `f` every 20 ms for up to `limit`; panic with the scene's context if it stays false.
fn within(scene: &Scene, what: &str, limit: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while started.elapsed() < limit {
        if f() {
            return started.elapsed();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!(
        "timed out ({limit:?}) waiting for: {what}\n{}",
        scene.context()
    );
}

/// quickshake-bench against the listener: new TLS connection per request, `seconds` long.
fn load(port: u16, seconds: u32) -> std::thread::JoinHandle<Value> {
    let bench = bench_binary();
    std::thread::spawn(move || {
        let out = Command::new("timeout")
            .arg("60")
            .arg(bench)
            .args(["-c", "4", "-d", &format!("{seconds}s"), "--json", "-k"])
            .arg(format!("https://localhost:{port}/"))
            .output()
            .expect("run quickshake-bench");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "bench JSON: {e}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    })
}

fn assert_no_errors(scene: &Scene, report: &Value) {
    assert_eq!(
        report["errors"]["total"],
        0,
        "no failed request under load: {report}\n{}",
        scene.context()
    );
    assert!(
        report["handshakes"].as_u64().unwrap_or(0) > 10,
        "the load ran: {report}"
    );
}

/// The serial number of `testdata/certs/<cert>.cert.pem`, in lower-case hex.
pub(crate) fn serial_of(cert: &str) -> String {
    let pem = std::fs::read(certs_dir().join(format!("{cert}.cert.pem"))).expect("test cert");
    let x = boring::x509::X509::from_pem(&pem).expect("PEM certificate");
    let bn = x.serial_number().to_bn().expect("serial");
    bn.to_hex_str().expect("hex").to_string().to_lowercase()
}

// ---------------------------------------------------------------------------------------------
// Scenarios

/// a. The listener, its certificate (SDS), routes (RDS) and cluster endpoints (EDS) all come
/// over ADS, and curl over TLS gets the upstream's answer.
fn tls_sds_rds_eds(plane: Plane, mode: Mode, unix: bool) {
    let s = Scene::start(plane, mode, unix, plain_secret("server-cert", "rsa2048"));
    let out = curl(&[
        "--cacert",
        &support::cert("rsa2048.cert.pem"),
        &format!("https://localhost:{}/hello", s.port),
    ]);
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "curl: {:?}\n{}", out, s.context());
    let echo: Value = serde_json::from_str(&body).expect("the upstream's JSON echo");
    assert_eq!(echo["path"], "/hello", "{echo}");
    assert!(s.a.state.request_count() >= 1, "upstream a answered");
    assert_eq!(
        peer_serial(s.port).expect("handshake"),
        serial_of("rsa2048")
    );
    let st = s.cp.type_status(NODE, SECRET);
    assert_eq!(st["last_acked_version"], "v1", "SDS ACKed: {st}");
    let dump = match &s.dp {
        DataPlane::Envoy(e) => e.config_dump().to_string(),
        DataPlane::Quickshake(g) => {
            let (_, body) = g.admin_get("/config_dump");
            serde_json::from_str::<Value>(&body)
                .expect("config_dump JSON")
                .to_string()
        }
    };
    assert!(
        dump.contains("\"version_info\":\"v1\""),
        "config_dump: {dump}"
    );
    for section in [
        "dynamic_listeners",
        "dynamic_active_clusters",
        "dynamic_active_secrets",
    ] {
        assert!(dump.contains(section), "config_dump has {section}: {dump}");
    }
    assert!(
        !dump.contains("PRIVATE KEY"),
        "keys are redacted in config_dump"
    );
}

/// b. A route change is applied in under a second (push to the first request that sees it),
/// with no failed request in the load running meanwhile.
/// Pushes version `v2` (same certificate and listener, cluster `b` tagged `v2`) and waits until
/// the gateway routes to it.
fn push_v2_route(s: &Scene) {
    s.push(
        "v2",
        &Want {
            secret: plain_secret("server-cert", "rsa2048"),
            cluster: "b",
            tag: "v2",
            listener: s.listener(),
        },
    );
    within(s, "the v2 route", Duration::from_secs(5), || {
        get(s.port).is_ok_and(|r| r == "v2")
    });
}

fn route_change_under_load(plane: Plane, mode: Mode) {
    let s = Scene::start(plane, mode, false, plain_secret("server-cert", "rsa2048"));
    let running = load(s.port, 3);
    std::thread::sleep(Duration::from_millis(700));
    let pushed = Instant::now();
    push_v2_route(&s);
    let took = pushed.elapsed();
    eprintln!("{plane:?} {mode:?}: route change seen {took:?} after the push");
    let report = running.join().expect("load thread");
    assert!(took < Duration::from_secs(1), "route change took {took:?}");
    assert!(s.b.state.request_count() >= 1, "cluster b got traffic");
    assert_no_errors(&s, &report);
}

/// c. The certificate rotates by SDS under load: no failed handshake, and new handshakes get
/// the new certificate.
fn secret_rotation_under_load(plane: Plane, mode: Mode) {
    let s = Scene::start(plane, mode, false, plain_secret("server-cert", "rsa2048"));
    let (old, new) = (serial_of("rsa2048"), serial_of("other"));
    assert_ne!(old, new);
    assert_eq!(peer_serial(s.port).expect("handshake"), old);
    let running = load(s.port, 3);
    std::thread::sleep(Duration::from_millis(700));
    s.push(
        "v2",
        &Want {
            secret: plain_secret("server-cert", "other"),
            cluster: "a",
            tag: "v1",
            listener: s.listener(),
        },
    );
    let took = within(&s, "the new certificate", Duration::from_secs(5), || {
        peer_serial(s.port).is_ok_and(|x| x == new)
    });
    eprintln!("{plane:?} {mode:?}: new certificate served {took:?} after the push");
    for _ in 0..5 {
        assert_eq!(peer_serial(s.port).expect("handshake"), new, "stays new");
    }
    let report = running.join().expect("load thread");
    assert_no_errors(&s, &report);
    let st = s.cp.type_status(NODE, SECRET);
    assert_eq!(st["last_acked_version"], "v2", "SDS ACKed: {st}");
}

/// d. A listener the data plane must reject (HCM with an empty stat_prefix: valid protobuf,
/// refused by Envoy's PGV rule `min_len: 1`) is NACKed with a message, the NACK is not
/// answered by resending it (go-control-plane issue 962), and v1 keeps serving.
fn bad_listener_nacked(plane: Plane, mode: Mode) {
    let s = Scene::start(plane, mode, false, plain_secret("server-cert", "rsa2048"));
    let mut bad = s.listener();
    bad["filter_chains"][0]["filters"][0]["typed_config"]["stat_prefix"] = json!("");
    s.push(
        "v2",
        &Want {
            secret: plain_secret("server-cert", "rsa2048"),
            cluster: "b",
            tag: "v2",
            listener: bad,
        },
    );
    within(&s, "the listener NACK", Duration::from_secs(5), || {
        s.cp.type_status(NODE, LISTENER)["last_nack"]["version"] == "v2"
    });
    let st = s.cp.type_status(NODE, LISTENER);
    let message = st["last_nack"]["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    eprintln!("{plane:?} {mode:?} NACK: {message}");
    assert!(!message.is_empty(), "a NACK message: {st}");
    match plane {
        // Envoy: "Error adding/updating listener(s) https: <redacted marker> <the HCM as
        // text>: Proto constraint validation failed (HttpConnectionManagerValidationError.
        // StatPrefix: value length must be at least 1 characters)".
        Plane::Envoy => assert!(message.contains("StatPrefix"), "{message}"),
        Plane::Quickshake => assert!(
            message.contains("filter_chains[0].filters[0]"),
            "the NACK names the field path: {message}"
        ),
    }
    assert_eq!(st["last_acked_version"], "v1", "{st}");
    // The route change that came in the same snapshot applies; the listener stays v1's.
    within(
        &s,
        "v1's listener serving v2's route",
        Duration::from_secs(5),
        || get(s.port).is_ok_and(|r| r == "v2"),
    );
    std::thread::sleep(Duration::from_secs(1));
    let st = s.cp.type_status(NODE, LISTENER);
    assert_eq!(st["nacks"], 1, "the rejected version is not resent: {st}");
    if let DataPlane::Envoy(_) = s.dp {
        assert!(s.dp.stat("listener_manager.lds.update_rejected") >= Some(1));
    }
}

/// e. The control plane dies and comes back on the same port: requests keep succeeding
/// meanwhile, `control_plane.connected_state` goes 0 then 1, and a change pushed to the new
/// control plane is applied.
fn control_plane_restart(plane: Plane, mode: Mode) {
    let mut s = Scene::start(plane, mode, false, plain_secret("server-cert", "rsa2048"));
    let connected = |s: &Scene| s.dp.stat("control_plane.connected_state");
    within(&s, "connected", Duration::from_secs(5), || {
        connected(&s) == Some(1)
    });
    s.cp.kill();
    within(&s, "disconnected", Duration::from_secs(5), || {
        connected(&s) == Some(0)
    });
    for _ in 0..5 {
        assert_eq!(get(s.port), Ok("v1".to_string()), "serving while down");
        std::thread::sleep(Duration::from_millis(100));
    }
    let restarted = Instant::now();
    s.cp.restart();
    s.push(
        "v2",
        &Want {
            secret: plain_secret("server-cert", "rsa2048"),
            cluster: "b",
            tag: "v2",
            listener: s.listener(),
        },
    );
    within(&s, "reconnected", Duration::from_secs(20), || {
        connected(&s) == Some(1)
    });
    within(&s, "v2 applied", Duration::from_secs(10), || {
        get(s.port).is_ok_and(|r| r == "v2")
    });
    eprintln!(
        "{plane:?} {mode:?}: reconnected and applied v2 {:?} after the restart",
        restarted.elapsed()
    );
}

/// f. The Secret istiod sends for cryptomb (key inside the provider config, fallback on)
/// serves.
fn istiod_cryptomb_secret_serves(plane: Plane, mode: Mode) {
    let s = Scene::start(
        plane,
        mode,
        false,
        istiod_cryptomb_secret("server-cert", "rsa2048"),
    );
    assert_eq!(get(s.port), Ok("v1".to_string()));
}

/// One test per data plane and ADS mode; quickshake's are ignored until its xDS client lands.
macro_rules! per_plane {
    ($scenario:ident, $lock:ident) => {
        mod $scenario {
            use super::*;
            #[test]
            fn envoy_sotw() {
                let _lock = support::$lock();
                super::$scenario(Plane::Envoy, Mode::Sotw);
            }
            #[test]
            fn envoy_delta() {
                let _lock = support::$lock();
                super::$scenario(Plane::Envoy, Mode::Delta);
            }
            #[test]
            fn quickshake_sotw() {
                let _lock = support::$lock();
                super::$scenario(Plane::Quickshake, Mode::Sotw);
            }
            #[test]
            fn quickshake_delta() {
                let _lock = support::$lock();
                super::$scenario(Plane::Quickshake, Mode::Delta);
            }
        }
    };
}

/// g. A route change reaches a connection that was open before it: the next request on it
/// uses the new routes (Envoy's RDS semantics), while the TLS session stays the same.
fn route_change_on_open_connection(plane: Plane, mode: Mode) {
    use std::io::Write;
    let s = Scene::start(plane, mode, false, plain_secret("server-cert", "rsa2048"));
    let connector = crate::support::tls_client::connector(&Default::default()).expect("client");
    let tcp = std::net::TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut tls = connector.connect("localhost", tcp).expect("handshake");
    let ask = |tls: &mut boring::ssl::SslStream<std::net::TcpStream>| {
        tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .expect("request");
        let (code, head) = support::read_http1_response(tls).expect("response");
        assert_eq!(code, 200, "{head}");
        head.lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("x-route: ")
                    .map(str::to_owned)
            })
            .unwrap_or_default()
    };
    assert_eq!(ask(&mut tls), "v1");
    push_v2_route(&s);
    assert_eq!(
        ask(&mut tls),
        "v2",
        "the open connection's next request\n{}",
        s.context()
    );
}

/// h. Istio's sidecar shape: listeners, routes and clusters over ADS, the certificate over an
/// SDS stream of its own (`sds_config.api_config_source` to a static `sds-grpc` cluster, here
/// the same control plane), which follows a rotation too.
fn sds_on_its_own_stream(plane: Plane, mode: Mode) {
    let cp = ControlPlane::start_tcp();
    let api_type = match mode {
        Mode::Sotw => "GRPC",
        Mode::Delta => "DELTA_GRPC",
    };
    let listener = move |port| {
        tls_listener_from(
            "https",
            port,
            "default",
            "routes",
            json!({"resource_api_version": "V3", "api_config_source": {
                "api_type": api_type, "transport_api_version": "V3",
                "grpc_services": [{"envoy_grpc": {"cluster_name": "sds-grpc"}}]}}),
        )
    };
    let want = move |port, version: &'static str, cert: &str| Want {
        secret: plain_secret("default", cert),
        cluster: "a",
        tag: version,
        listener: listener(port),
    };
    let grpc_port = cp.grpc_port.expect("tcp control plane");
    let sds_cluster = format!(
        r#"  - name: sds-grpc
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{ http2_protocol_options: {{}} }}
    load_assignment:
      cluster_name: sds-grpc
      endpoints:
      - lb_endpoints:
        - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {grpc_port} }} }} }}
"#
    );
    let s = Scene::with(
        cp,
        |port| want(port, "v1", "rsa2048"),
        |cp| DataPlane::start_with(plane, mode, NODE, cp, &sds_cluster),
    );
    let port = s.port;
    within(
        &s,
        "the listener serves v1",
        Duration::from_secs(10),
        || get(port).is_ok_and(|r| r == "v1"),
    );
    assert_eq!(peer_serial(port).expect("handshake"), serial_of("rsa2048"));
    let status = s.cp.status().to_string();
    assert!(
        status.contains("\"streams_opened_total\":2")
            || status.contains("\"streams_opened_total\":3"),
        "an ADS stream and an SDS stream: {status}"
    );
    s.push("v2", &want(port, "v2", "other"));
    within(
        &s,
        "the rotated certificate",
        Duration::from_secs(5),
        || peer_serial(port).is_ok_and(|serial| serial == serial_of("other")),
    );
}

/// i. The xDS cluster over mTLS, its client certificate and CA from SDS files, as Envoy
/// Gateway renders it: the stream comes up and the listener serves.
fn xds_over_mtls(plane: Plane, mode: Mode) {
    let sds_dir = tempfile::tempdir().expect("tempdir");
    let s = Scene::with(
        ControlPlane::start_tcp_mtls(),
        |port| Want {
            secret: plain_secret("server-cert", "rsa2048"),
            cluster: "a",
            tag: "v1",
            listener: tls_listener("https", port, "server-cert", "routes"),
        },
        |cp| DataPlane::start_mtls(plane, mode, NODE, cp, sds_dir.path()),
    );
    let port = s.port;
    within(
        &s,
        "the listener serves v1 over an mTLS xDS stream",
        Duration::from_secs(10),
        || get(port).is_ok_and(|r| r == "v1"),
    );
    assert_eq!(s.dp.stat("control_plane.connected_state"), Some(1));
}

/// j. A listener removed and another added: the old port stops accepting (its open connection
/// still finishes its next request), the new one serves.
fn listener_removed_and_added(plane: Plane, mode: Mode) {
    use std::io::Write;
    let s = Scene::start(plane, mode, false, plain_secret("server-cert", "rsa2048"));
    let connector = crate::support::tls_client::connector(&Default::default()).expect("client");
    let tcp = std::net::TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut open = connector.connect("localhost", tcp).expect("handshake");
    let listed = s.dp.admin_text("/listeners");
    assert!(
        listed.ends_with(&format!("::127.0.0.1:{}\n", s.port)),
        "{listed}"
    );
    let new_port = free_port();
    s.push(
        "v2",
        &Want {
            secret: plain_secret("server-cert", "rsa2048"),
            cluster: "a",
            tag: "v1",
            listener: tls_listener("https-2", new_port, "server-cert", "routes"),
        },
    );
    within(
        &s,
        "the new listener serves",
        Duration::from_secs(5),
        || get(new_port).is_ok(),
    );
    within(
        &s,
        "the old listener stops accepting",
        Duration::from_secs(5),
        || std::net::TcpStream::connect(("127.0.0.1", s.port)).is_err(),
    );
    // `/listeners` shows the listener added over xDS, and no longer the removed one.
    let listed = s.dp.admin_text("/listeners");
    assert_eq!(listed, format!("https-2::127.0.0.1:{new_port}\n"));
    open.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .expect("request on the open connection");
    let (code, _) = support::read_http1_response(&mut open).expect("its answer");
    assert_eq!(
        code, 200,
        "the removed listener's open connection finishes its request"
    );
}

/// k. A listener whose route configuration never comes starts serving when the RDS source's
/// `initial_fetch_timeout` (1 s here) has passed, with no routes: 404, as Envoy does.
fn warming_listener_times_out(plane: Plane, mode: Mode) {
    let s = Scene::with(
        ControlPlane::start_tcp(),
        |port| {
            let mut listener = tls_listener("https", port, "server-cert", "nowhere");
            listener["filter_chains"][0]["filters"][0]["typed_config"]["rds"]["config_source"]
                ["initial_fetch_timeout"] = json!("1s");
            Want {
                secret: plain_secret("server-cert", "rsa2048"),
                cluster: "a",
                tag: "v1",
                listener,
            }
        },
        |cp| DataPlane::start(plane, mode, NODE, cp),
    );
    let port = s.port;
    let code = || {
        let out = curl(&[
            "-k",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &format!("https://localhost:{port}/"),
        ]);
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let took = within(
        &s,
        "the listener serves without routes",
        Duration::from_secs(10),
        || code() == "404",
    );
    eprintln!("{plane:?} {mode:?}: warming listener served {took:?} after start");
}

/// l. Session ticket keys by SDS over ADS (`session_ticket_keys_sds_secret_config`): a ticket
/// issued under K1 resumes after the control plane rotates the keys to `[K2, K1]`, and is a
/// full handshake after `[K2]`; TLS 1.2 and 1.3.
fn ticket_keys_over_ads(plane: Plane, mode: Mode) {
    let secrets = |keys: &[String]| {
        let keys: Vec<Value> = keys.iter().map(|k| json!({ "inline_string": k })).collect();
        json!([
            plain_secret("server-cert", "rsa2048"),
            { "name": "ticket-keys", "session_ticket_keys": { "keys": keys } }
        ])
    };
    let listener = |port: u16| {
        let mut l = tls_listener("https", port, "server-cert", "routes");
        let chain = &mut l["filter_chains"][0];
        chain["transport_socket"]["typed_config"]["session_ticket_keys_sds_secret_config"] = json!({
            "name": "ticket-keys",
            "sds_config": { "ads": {}, "resource_api_version": "V3" }
        });
        if plane == Plane::Envoy {
            // Envoy holds a closing connection up to 1 s for the peer's close; s_client waits.
            chain["filters"][0]["typed_config"]["delayed_close_timeout"] = json!("0s");
        }
        l
    };
    let (k1, k2) = (ticket_key(1), ticket_key(2));
    let s = Scene::with(
        ControlPlane::start_tcp(),
        |port| Want {
            secret: secrets(std::slice::from_ref(&k1)),
            cluster: "a",
            tag: "v1",
            listener: listener(port),
        },
        |cp| DataPlane::start(plane, mode, NODE, cp),
    );
    let port = s.port;
    within(
        &s,
        "the listener serves v1",
        Duration::from_secs(10),
        || get(port).is_ok_and(|r| r == "v1"),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let session = |tls: &str| dir.path().join(format!("{tls}.pem"));
    for tls in ["-tls1_2", "-tls1_3"] {
        assert!(!s_client_session(port, tls, None, Some(&session(tls))));
        assert!(
            s_client_session(port, tls, Some(&session(tls)), None),
            "{tls}: K1 ticket on [K1]"
        );
    }
    let push = |version: &str, keys: &[String]| {
        s.push(
            version,
            &Want {
                secret: secrets(keys),
                cluster: "a",
                tag: "v1",
                listener: listener(port),
            },
        );
        within(&s, "the secrets ACKed", Duration::from_secs(10), || {
            s.cp.type_status(NODE, SECRET)["last_acked_version"] == version
        });
    };
    push("v2", &[k2.clone(), k1]);
    for tls in ["-tls1_2", "-tls1_3"] {
        within(
            &s,
            "K1 ticket resumes on [K2, K1]",
            Duration::from_secs(5),
            || s_client_session(port, tls, Some(&session(tls)), None),
        );
    }
    push("v3", std::slice::from_ref(&k2));
    for tls in ["-tls1_2", "-tls1_3"] {
        within(
            &s,
            "K1 ticket is refused on [K2]",
            Duration::from_secs(5),
            || !s_client_session(port, tls, Some(&session(tls)), None),
        );
    }
    // Both redact the keys in the dump (and never log them).
    let seen = format!("{}\n{}", s.dp.config_dump_text(), s.dp.log_text());
    assert!(seen.contains("ticket-keys"), "the secret is in the dump");
    assert!(!seen.contains(&k2[16..]), "a ticket key leaked");
}

fn tls_sds_rds_eds_tcp(plane: Plane, mode: Mode) {
    tls_sds_rds_eds(plane, mode, false);
}

fn tls_sds_rds_eds_unix(plane: Plane, mode: Mode) {
    tls_sds_rds_eds(plane, mode, true);
}

per_plane!(tls_sds_rds_eds_tcp, shared);
per_plane!(tls_sds_rds_eds_unix, shared);
per_plane!(route_change_under_load, exclusive);
per_plane!(route_change_on_open_connection, shared);
per_plane!(sds_on_its_own_stream, shared);
per_plane!(xds_over_mtls, shared);
per_plane!(listener_removed_and_added, shared);
per_plane!(warming_listener_times_out, shared);
per_plane!(secret_rotation_under_load, exclusive);
per_plane!(bad_listener_nacked, shared);
per_plane!(control_plane_restart, shared);
per_plane!(ticket_keys_over_ads, shared);

/// f runs against quickshake only (Envoy's official build has no cryptomb).
mod istiod_cryptomb {
    use super::*;
    #[test]
    fn quickshake_sotw() {
        let _lock = support::shared();
        istiod_cryptomb_secret_serves(Plane::Quickshake, Mode::Sotw);
    }
    #[test]
    fn quickshake_delta() {
        let _lock = support::shared();
        istiod_cryptomb_secret_serves(Plane::Quickshake, Mode::Delta);
    }
}
