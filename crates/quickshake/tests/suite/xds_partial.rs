//! Per-resource acceptance (issue 30, point 3): one LDS update carries a valid and an invalid
//! listener, one CDS update a valid and an invalid cluster. As Envoy does, the valid ones serve,
//! each update is NACKed naming the invalid resource (and, on quickshake, its field path), what
//! ran before keeps running, and a later update that fixes them is taken. An invalid route
//! configuration in an RDS update leaves the accepted one serving. State of the world and delta,
//! each against Envoy 1.39.3 (the reference) and quickshake, with the go-control-plane test
//! server (`tests/xds-control-plane`).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::control_plane::ControlPlane;
use crate::support::tls_client::peer_serial;
use crate::support::upstreams::{HttpOpts, Upstream};
use crate::support::xds::{
    eds_cluster, load_assignment, plain_secret, route_config, tls_listener, DataPlane, Mode, Plane,
    CLUSTER, ENDPOINTS, LISTENER, ROUTE, SECRET,
};
use crate::support::{self, certs_dir, free_port};
use crate::xds::{get_path as get, serial_of};

const NODE: &str = "xds-partial";

struct World {
    cp: ControlPlane,
    dp: DataPlane,
    /// The upstreams behind clusters `a`..`d`, kept alive.
    upstreams: (Upstream, Upstream),
}

impl World {
    fn context(&self) -> String {
        let log = self.dp.log_text();
        let lines: Vec<&str> = log.lines().collect();
        format!(
            "control plane status: {}\ndata plane log (tail):\n{}",
            self.cp.status(),
            lines[lines.len().saturating_sub(60)..].join("\n")
        )
    }

    /// Poll `f` every 20 ms for up to 10 s; panic with the context if it stays false.
    fn within(&self, what: &str, mut f: impl FnMut() -> bool) {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if f() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("timed out waiting for: {what}\n{}", self.context());
    }

    fn status(&self, type_url: &str) -> Value {
        self.cp.type_status(NODE, type_url)
    }

    /// The NACK of `version` for `type_url`, once it came: its message.
    fn nack(&self, type_url: &str, version: &str) -> String {
        self.within(&format!("the NACK of {version} ({type_url})"), || {
            self.status(type_url)["last_nack"]["version"] == version
        });
        let st = self.status(type_url);
        st["last_nack"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

/// A route configuration: `/c` to cluster `c_cluster` (tag `<tag>c`), the rest to `cluster`.
fn two_way_routes(name: &str, cluster: &str, c_cluster: &str, tag: &str) -> Value {
    let mut rc = route_config(name, cluster, tag);
    let c_route = json!({
        "match": { "prefix": "/c" },
        "route": { "cluster": c_cluster },
        "response_headers_to_add": [{ "header": { "key": "x-route", "value": format!("{tag}c") } }]
    });
    if let Some(routes) = rc["virtual_hosts"][0]["routes"].as_array_mut() {
        routes.insert(0, c_route);
    }
    rc
}

/// The HTTP connection manager's `stat_prefix` of `listener` set to `prefix` (`""` is valid
/// protobuf that Envoy's PGV rule `min_len: 1` and quickshake both refuse).
fn with_stat_prefix(mut listener: Value, prefix: &str) -> Value {
    listener["filter_chains"][0]["filters"][0]["typed_config"]["stat_prefix"] = json!(prefix);
    listener
}

/// A STATIC cluster of one endpoint, `host`:`port`. A host that is not an IP address passes
/// Envoy's proto validation (which would refuse the whole response) and is refused when the
/// cluster is added ("malformed IP address"), resource by resource; quickshake refuses it too.
fn static_cluster(name: &str, host: &str, port: u16) -> Value {
    json!({
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{ "lb_endpoints": [{ "endpoint": { "address": {
                "socket_address": { "address": host, "port_value": port }
            } } }] }]
        }
    })
}

fn per_resource(plane: Plane, mode: Mode) {
    let cp = ControlPlane::start_tcp();
    let (a, b) = (
        Upstream::http(HttpOpts::default()),
        Upstream::http(HttpOpts::default()),
    );
    let (p1, p2, p3) = (free_port(), free_port(), free_port());
    let secret = plain_secret("server-cert", "rsa2048");
    // An ADS control plane answers a state-of-the-world EDS request only with every endpoint
    // resource it holds named: `c`'s come with `c`.
    let endpoints = json!([
        load_assignment("a", &[a.port]),
        load_assignment("b", &[b.port])
    ]);
    let mut all_endpoints = endpoints.clone();
    if let Some(list) = all_endpoints.as_array_mut() {
        list.push(load_assignment("c", &[a.port]));
    }
    cp.push(
        NODE,
        "v1",
        json!({
            LISTENER: [tls_listener("https", p1, "server-cert", "routes")],
            ROUTE: [route_config("routes", "a", "v1")],
            CLUSTER: [eds_cluster("a"), eds_cluster("b")],
            ENDPOINTS: endpoints,
            SECRET: [secret],
        }),
    );
    let dp = DataPlane::start(plane, mode, NODE, &cp);
    let w = World {
        cp,
        dp,
        upstreams: (a, b),
    };
    w.within("v1 serves", || get(p1, "/").is_ok_and(|r| r == "v1"));

    // v2: a valid new listener and an invalid one; a valid new cluster and an invalid one.
    let b_port = w.upstreams.1.port;
    let v2 = |bad_prefix: &str, d_host: &str, tag: &str, to: &str| {
        json!({
            LISTENER: [
                tls_listener("https", p1, "server-cert", "routes"),
                tls_listener("good", p2, "server-cert", "routes2"),
                with_stat_prefix(tls_listener("bad", p3, "server-cert", "routes2"), bad_prefix),
            ],
            ROUTE: [
                route_config("routes", "a", "v1"),
                two_way_routes("routes2", to, "c", tag),
            ],
            CLUSTER: [
                eds_cluster("a"),
                eds_cluster("b"),
                eds_cluster("c"),
                static_cluster("d", d_host, b_port),
            ],
            ENDPOINTS: all_endpoints,
            SECRET: [secret],
        })
    };
    w.cp.push(NODE, "v2", v2("", "not-an-ip", "v2", "b"));
    let lds = w.nack(LISTENER, "v2");
    let cds = w.nack(CLUSTER, "v2");
    eprintln!("{plane:?} {mode:?} LDS NACK: {lds}\n{plane:?} {mode:?} CDS NACK: {cds}");
    assert!(
        lds.starts_with("Error adding/updating listener(s) bad: "),
        "the LDS NACK names the invalid listener: {lds}"
    );
    assert!(!lds.contains("good"), "only the invalid listener: {lds}");
    assert!(
        cds.starts_with("Error adding/updating cluster(s) d: "),
        "the CDS NACK names the invalid cluster: {cds}"
    );
    match plane {
        Plane::Envoy => {
            assert!(lds.contains("StatPrefix"), "{lds}");
            assert!(cds.contains("malformed IP address"), "{cds}");
        }
        Plane::Quickshake => {
            assert!(
                lds.contains("filter_chains[0].filters[0]") && lds.contains("stat_prefix"),
                "the field path: {lds}"
            );
            assert!(
                cds.contains("load_assignment.endpoints[0].lb_endpoints[0]"),
                "the field path: {cds}"
            );
        }
    }
    // The valid listener and cluster of the refused updates serve; what ran before still does.
    w.within("the valid new listener serves", || {
        get(p2, "/").is_ok_and(|r| r == "v2")
    });
    w.within("the valid new cluster serves", || {
        get(p2, "/c").is_ok_and(|r| r == "v2c")
    });
    assert_eq!(get(p1, "/"), Ok("v1".to_owned()), "the old listener serves");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", p3)).is_err(),
        "the invalid listener is not bound"
    );
    for t in [LISTENER, CLUSTER] {
        let st = w.status(t);
        assert_eq!(
            st["last_acked_version"], "v1",
            "{t}: the NACK names the last version: {st}"
        );
    }
    if let DataPlane::Envoy(_) = w.dp {
        assert!(w.dp.stat("listener_manager.lds.update_rejected") >= Some(1));
        assert!(w.dp.stat("cluster_manager.cds.update_rejected") >= Some(1));
    }

    // v3 fixes both; `routes2` now sends `/` to the fixed cluster `d`.
    w.cp.push(NODE, "v3", v2("ingress_bad", "127.0.0.1", "v3", "d"));
    w.within("LDS and CDS take v3", || {
        w.status(LISTENER)["last_acked_version"] == "v3"
            && w.status(CLUSTER)["last_acked_version"] == "v3"
    });
    w.within("the fixed listener and cluster serve", || {
        get(p3, "/").is_ok_and(|r| r == "v3") && get(p2, "/").is_ok_and(|r| r == "v3")
    });
    assert_eq!(get(p1, "/"), Ok("v1".to_owned()));

    // v4: the route configuration `routes` turns invalid (a route with no action; Envoy's PGV
    // rule: `action` is required): RDS is NACKed and the accepted `routes` keeps serving.
    let mut v4 = v2("ingress_bad", "127.0.0.1", "v3", "d");
    v4[ROUTE][0]["virtual_hosts"][0]["routes"][0] = json!({ "match": { "prefix": "/" } });
    w.cp.push(NODE, "v4", v4);
    let rds = w.nack(ROUTE, "v4");
    eprintln!("{plane:?} {mode:?} RDS NACK: {rds}");
    if plane == Plane::Quickshake {
        assert!(
            rds.starts_with("Error adding/updating route configuration(s) routes: ")
                && rds.contains("virtual_hosts[0].routes[0]"),
            "the RDS NACK names the route configuration and the field path: {rds}"
        );
    }
    for _ in 0..5 {
        assert_eq!(
            get(p1, "/"),
            Ok("v1".to_owned()),
            "the accepted routes serve"
        );
        assert_eq!(get(p2, "/"), Ok("v3".to_owned()));
        std::thread::sleep(Duration::from_millis(100));
    }

    // v5: the certificate's secret gets a key that does not match it: SDS is NACKed and the
    // accepted certificate keeps serving.
    let mut v5 = v2("ingress_bad", "127.0.0.1", "v3", "d");
    v5[SECRET][0]["tls_certificate"]["private_key"]["inline_string"] =
        json!(std::fs::read_to_string(certs_dir().join("mismatch.key.pem")).expect("test key"));
    w.cp.push(NODE, "v5", v5);
    let sds = w.nack(SECRET, "v5");
    eprintln!("{plane:?} {mode:?} SDS NACK: {sds}");
    if plane == Plane::Quickshake {
        assert!(
            sds.starts_with("Error adding/updating secret(s) server-cert: listener '"),
            "the SDS NACK names the secret: {sds}"
        );
    }
    let rsa2048 = serial_of("rsa2048");
    for port in [p1, p2, p3] {
        assert_eq!(peer_serial(port).ok(), Some(rsa2048.clone()), "port {port}");
    }
    assert_eq!(get(p1, "/"), Ok("v1".to_owned()));
}

/// The first LDS and CDS updates each carry an invalid resource beside valid ones (Istio's
/// case: one filter or cluster quickshake cannot serve): with `initial_fetch_timeout: 0s`
/// (wait for them) the data plane still becomes LIVE, as Envoy's LDS and CDS init targets are
/// ready after a NACK, and the valid listener serves.
fn first_update_partly_invalid(plane: Plane, mode: Mode) {
    let cp = ControlPlane::start_tcp();
    let (a, b) = (
        Upstream::http(HttpOpts::default()),
        Upstream::http(HttpOpts::default()),
    );
    let (p1, p3) = (free_port(), free_port());
    cp.push(
        NODE,
        "v1",
        json!({
            LISTENER: [
                tls_listener("https", p1, "server-cert", "routes"),
                with_stat_prefix(tls_listener("bad", p3, "server-cert", "routes"), ""),
            ],
            ROUTE: [route_config("routes", "a", "v1")],
            CLUSTER: [eds_cluster("a"), eds_cluster("b"), static_cluster("d", "not-an-ip", b.port)],
            ENDPOINTS: [load_assignment("a", &[a.port]), load_assignment("b", &[b.port])],
            SECRET: [plain_secret("server-cert", "rsa2048")],
        }),
    );
    // `start` returns once `/ready` says LIVE.
    let dp = DataPlane::start_edited(plane, mode, NODE, &cp, |b| {
        b.replace("initial_fetch_timeout: 5s", "initial_fetch_timeout: 0s")
    });
    let w = World {
        cp,
        dp,
        upstreams: (a, b),
    };
    assert!(w.nack(LISTENER, "v1").contains("listener(s) bad: "));
    assert!(w.nack(CLUSTER, "v1").contains("cluster(s) d: "));
    w.within("the valid listener serves", || {
        get(p1, "/").is_ok_and(|r| r == "v1")
    });
}

// `per_plane!` (from `xds`): one test per data plane and ADS mode.
per_plane!(per_resource, shared);
per_plane!(first_update_partly_invalid, shared);
