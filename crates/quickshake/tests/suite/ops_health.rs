//! Upstream health, side by side with Envoy 1.39.3: an upstream failing its HTTP health check
//! gets no traffic until it passes again; an upstream answering 5xx is ejected by outlier
//! detection (`consecutive_5xx`) and returns after `base_ejection_time`; `/clusters` (text and
//! `?format=json`) carries the same fields, hosts and health flags as Envoy's, and the same
//! `outlier_detection.*` stats; with every host failing, panic mode sends to them all. Each
//! proxy has its own pair of upstreams (a tiny HTTP/1.1 server whose `/healthz` status and
//! request status the test sets), so traffic is counted per proxy. Short intervals keep the
//! module at a few seconds.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::envoy::Envoy;
use crate::support::upstreams::{fetch, proxy_config, route};
use crate::support::*;

/// A controllable upstream: `/healthz` answers `healthz`, anything else `status`; `hits`
/// counts the non-health-check requests. Stops when dropped.
struct Ctl {
    port: u16,
    healthz: Arc<AtomicU16>,
    status: Arc<AtomicU16>,
    hits: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Ctl {
    fn start() -> Ctl {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.set_nonblocking(true).expect("nonblocking");
        let port = l.local_addr().expect("addr").port();
        let ctl = Ctl {
            port,
            healthz: Arc::new(AtomicU16::new(200)),
            status: Arc::new(AtomicU16::new(200)),
            hits: Arc::new(AtomicU64::new(0)),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let (hz, st, hits, stop) = (
            ctl.healthz.clone(),
            ctl.status.clone(),
            ctl.hits.clone(),
            ctl.stop.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let Ok((mut s, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let (hz, st, hits) = (hz.clone(), st.clone(), hits.clone());
                std::thread::spawn(move || {
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    let Some(buf) = read_head(&mut s) else {
                        return;
                    };
                    let text = String::from_utf8_lossy(&buf);
                    let path = text.split_whitespace().nth(1).unwrap_or("/");
                    let code = if path == "/healthz" {
                        hz.load(Ordering::Relaxed)
                    } else {
                        hits.fetch_add(1, Ordering::Relaxed);
                        st.load(Ordering::Relaxed)
                    };
                    let _ = write!(
                        s,
                        "HTTP/1.1 {code} X\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
                    );
                });
            }
        });
        ctl
    }

    fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }
}

impl Drop for Ctl {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The proxy config: route `/` to cluster `hc` (two endpoints, `health` fields) and a
/// second, plain cluster `plain` on the first endpoint.
fn config(a: u16, b: u16, health: &str) -> String {
    let eps = |ports: &[u16]| -> String {
        ports
            .iter()
            .map(|p| {
                format!(
                    "        - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {p} }} }} }}\n"
                )
            })
            .collect()
    };
    let clusters = format!(
        r#"  - name: hc
    type: STATIC
    connect_timeout: 1s
{health}
    load_assignment:
      cluster_name: hc
      endpoints:
      - lb_endpoints:
{}  - name: plain
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: plain
      endpoints:
      - lb_endpoints:
{}"#,
        eps(&[a, b]),
        eps(&[a])
    );
    proxy_config("", "", &route("/", "hc", ""), "", &clusters)
}

/// One proxy under test: its listener, and how to read its admin pages.
struct Proxy {
    name: &'static str,
    port: u16,
    admin: Box<dyn Fn(&str) -> String>,
    a: Ctl,
    b: Ctl,
    _keep: Box<dyn std::any::Any>,
}

impl Proxy {
    fn quickshake(health: &str) -> Proxy {
        let (a, b) = (Ctl::start(), Ctl::start());
        let gw = Gateway::start(&config(a.port, b.port, health), &["--concurrency", "1"]);
        let admin = gw.admin;
        Proxy {
            name: "quickshake",
            port: gw.port,
            admin: Box::new(move |p| http_get(admin, p).map(|(_, b)| b).unwrap_or_default()),
            a,
            b,
            _keep: Box::new(gw),
        }
    }

    fn envoy(health: &str) -> Proxy {
        let (a, b) = (Ctl::start(), Ctl::start());
        let (port, admin) = (free_port(), free_port());
        let dir = tempfile::tempdir().expect("tempdir");
        let envoy = Envoy::start(
            &render(
                &config(a.port, b.port, health),
                port,
                free_port(),
                admin,
                dir.path(),
            ),
            admin,
        );
        Proxy {
            name: "envoy",
            port,
            admin: Box::new(move |p| {
                let out = curl(&[&format!("http://127.0.0.1:{admin}{p}")]);
                String::from_utf8_lossy(&out.stdout).to_string()
            }),
            a,
            b,
            _keep: Box::new((envoy, dir)),
        }
    }

    fn get(&self) -> u16 {
        fetch(&[], &format!("https://localhost:{}/x", self.port)).status
    }

    /// `hc::<B's address>::health_flags::...` from `/clusters`.
    fn flags_of_b(&self) -> String {
        self.flags_of(self.b.port)
    }

    fn flags_of(&self, port: u16) -> String {
        let key = format!("hc::127.0.0.1:{port}::health_flags::");
        (self.admin)("/clusters")
            .lines()
            .find_map(|l| l.strip_prefix(&key).map(str::to_owned))
            .unwrap_or_default()
    }

    /// Every `/stats` line under `prefix`, as name → value.
    fn stats_under(&self, prefix: &str) -> BTreeMap<String, String> {
        (self.admin)("/stats")
            .lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    fn stat(&self, name: &str) -> u64 {
        (self.admin)("/stats")
            .lines()
            .find_map(|l| {
                l.strip_prefix(&format!("{name}: "))
                    .and_then(|v| v.parse().ok())
            })
            .unwrap_or(0)
    }

    /// `/clusters` text with the upstream ports replaced by `A`/`B` and the counter values
    /// dropped (each proxy has its own traffic).
    fn clusters_text(&self) -> BTreeSet<String> {
        let body = (self.admin)("/clusters");
        body.lines()
            .map(|l| {
                let l = l
                    .replace(&format!("127.0.0.1:{}", self.a.port), "A")
                    .replace(&format!("127.0.0.1:{}", self.b.port), "B");
                let parts: Vec<&str> = l.split("::").collect();
                match parts.as_slice() {
                    [c, h, k, _] if k.starts_with("cx_") || k.starts_with("rq_") => {
                        format!("{c}::{h}::{k}")
                    }
                    _ => l,
                }
            })
            .collect()
    }

    /// `/clusters?format=json` reduced to its shape: per cluster, per host (`A`/`B`), the set of
    /// key paths, the health status and the stat names.
    fn clusters_json(&self) -> BTreeMap<String, Value> {
        let v: Value = serde_json::from_str(&(self.admin)("/clusters?format=json"))
            .unwrap_or_else(|e| panic!("{}: /clusters JSON: {e}", self.name));
        let mut out = BTreeMap::new();
        for c in v["cluster_statuses"].as_array().expect("cluster_statuses") {
            let name = c["name"].as_str().expect("name").to_owned();
            let mut keys: Vec<String> = c.as_object().expect("object").keys().cloned().collect();
            keys.sort();
            let mut hosts = BTreeMap::new();
            for h in c["host_statuses"].as_array().into_iter().flatten() {
                let port = h["address"]["socket_address"]["port_value"]
                    .as_u64()
                    .unwrap_or(0);
                let label = if port == u64::from(self.a.port) {
                    "A"
                } else {
                    "B"
                };
                let mut stats: Vec<String> = h["stats"]
                    .as_array()
                    .expect("stats")
                    .iter()
                    .map(|s| {
                        format!(
                            "{}{}",
                            s["name"],
                            s.get("type").map(|t| t.to_string()).unwrap_or_default()
                        )
                    })
                    .collect();
                stats.sort();
                let mut hkeys: Vec<&String> = h.as_object().expect("host").keys().collect();
                hkeys.sort();
                hosts.insert(
                    label.to_owned(),
                    serde_json::json!({
                        "keys": hkeys,
                        "address": h["address"]["socket_address"]["address"],
                        "health_status": h["health_status"],
                        "stats": stats,
                        "weight": h["weight"],
                        "circuit_breakers": c["circuit_breakers"],
                    }),
                );
            }
            out.insert(name, serde_json::json!({"keys": keys, "hosts": hosts}));
        }
        out
    }
}

/// Poll (up to 10 s) until `f` holds.
fn until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for: {what}");
}

const HEALTH_CHECK: &str = r#"    health_checks:
    - timeout: 0.5s
      interval: 0.2s
      no_traffic_interval: 0.2s
      unhealthy_threshold: 2
      healthy_threshold: 1
      http_health_check: { path: /healthz }"#;

/// `/clusters` has the same lines on both (counter values aside, as `clusters_text` reads it).
fn assert_same_clusters_text(qs: &Proxy, envoy: &Proxy) {
    let (t_qs, t_envoy) = (qs.clusters_text(), envoy.clusters_text());
    assert_eq!(
        t_qs.symmetric_difference(&t_envoy).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "/clusters text differs from Envoy's"
    );
}

#[test]
fn failing_health_check_gets_no_traffic_until_it_passes() {
    let _lock = shared();
    let proxies = [Proxy::quickshake(HEALTH_CHECK), Proxy::envoy(HEALTH_CHECK)];
    for p in &proxies {
        p.b.healthz.store(503, Ordering::Relaxed);
    }
    for p in &proxies {
        until(&format!("{}: B fails its health check", p.name), || {
            p.flags_of_b() == "/failed_active_hc"
        });
    }
    // /clusters: same lines (counter values aside) and the same JSON shape as Envoy's.
    let (qs, envoy) = (&proxies[0], &proxies[1]);
    assert_same_clusters_text(qs, envoy);
    assert_eq!(
        qs.clusters_json(),
        envoy.clusters_json(),
        "/clusters JSON shape"
    );
    let names = |p: &Proxy| -> Vec<String> {
        p.stats_under("cluster.hc.health_check.")
            .into_keys()
            .collect()
    };
    assert_eq!(names(qs), names(envoy), "health_check stat names");

    for p in &proxies {
        let before = p.b.hits();
        for _ in 0..6 {
            assert_eq!(p.get(), 200, "{}", p.name);
        }
        assert_eq!(
            p.b.hits(),
            before,
            "{}: the unhealthy host got traffic",
            p.name
        );
        assert_eq!(p.stat("cluster.hc.membership_healthy"), 1, "{}", p.name);
        assert!(p.stat("cluster.hc.health_check.failure") >= 1, "{}", p.name);
        p.b.healthz.store(200, Ordering::Relaxed);
    }
    for p in &proxies {
        until(&format!("{}: B passes again", p.name), || {
            p.flags_of_b() == "healthy"
        });
        // Envoy hands health changes to its workers within `update_merge_window` (1 s).
        let before = p.b.hits();
        until(
            &format!("{}: the healthy host gets traffic again", p.name),
            || {
                assert_eq!(p.get(), 200, "{}", p.name);
                p.b.hits() > before
            },
        );
        assert_eq!(p.stat("cluster.hc.membership_healthy"), 2, "{}", p.name);
        assert_eq!(p.stat("cluster.hc.health_check.healthy"), 2, "{}", p.name);
        assert!(p.stat("cluster.hc.health_check.success") >= 2, "{}", p.name);
    }
    // Every host failing: panic mode (below healthy_panic_threshold, 50%) sends to all.
    for p in &proxies {
        p.a.healthz.store(503, Ordering::Relaxed);
        p.b.healthz.store(503, Ordering::Relaxed);
    }
    for p in &proxies {
        until(&format!("{}: A and B fail", p.name), || {
            p.flags_of(p.a.port) == "/failed_active_hc" && p.flags_of_b() == "/failed_active_hc"
        });
        until(
            &format!("{}: panic mode routes to the failed hosts", p.name),
            || {
                assert_eq!(p.get(), 200, "{}", p.name);
                p.stat("cluster.hc.lb_healthy_panic") > 0
            },
        );
        assert_eq!(p.stat("cluster.hc.membership_healthy"), 0, "{}", p.name);
    }
}

const OUTLIER: &str = r#"    outlier_detection:
      consecutive_5xx: 3
      interval: 0.3s
      base_ejection_time: 1s
      max_ejection_percent: 50"#;

#[test]
fn upstream_answering_5xx_is_ejected_and_returns() {
    let _lock = shared();
    let proxies = [Proxy::quickshake(OUTLIER), Proxy::envoy(OUTLIER)];
    let mut codes = [Vec::new(), Vec::new()];
    for p in &proxies {
        p.b.status.store(503, Ordering::Relaxed);
    }
    // Round robin: B answers every other request; its third 503 ejects it. The two proxies
    // take turns so that both are ejected (and compared) within base_ejection_time.
    for _ in 0..6 {
        for (p, c) in proxies.iter().zip(codes.iter_mut()) {
            c.push(p.get());
        }
    }
    for (p, c) in proxies.iter().zip(&codes) {
        assert_eq!(
            c.iter().filter(|c| **c == 503).count(),
            3,
            "{}: {c:?}",
            p.name
        );
        until(&format!("{}: B ejected", p.name), || {
            p.flags_of_b() == "/failed_outlier_check"
        });
    }
    // Same /clusters lines (outlier lines included) and the same outlier_detection stats.
    let (qs, envoy) = (&proxies[0], &proxies[1]);
    assert_same_clusters_text(qs, envoy);
    assert_eq!(
        qs.stats_under("cluster.hc.outlier_detection."),
        envoy.stats_under("cluster.hc.outlier_detection."),
        "outlier_detection stats"
    );
    for p in &proxies {
        let before = p.b.hits();
        for _ in 0..4 {
            assert_eq!(p.get(), 200, "{}", p.name);
        }
        assert_eq!(
            p.b.hits(),
            before,
            "{}: the ejected host got traffic",
            p.name
        );
        assert_eq!(
            p.stat("cluster.hc.outlier_detection.ejections_enforced_consecutive_5xx"),
            1,
            "{}",
            p.name
        );
        assert_eq!(
            p.stat("cluster.hc.outlier_detection.ejections_active"),
            1,
            "{}",
            p.name
        );
        p.b.status.store(200, Ordering::Relaxed);
    }
    let ejected_at = Instant::now();
    for p in &proxies {
        until(
            &format!("{}: B back after base_ejection_time", p.name),
            || p.flags_of_b() == "healthy",
        );
        let before = p.b.hits();
        until(
            &format!("{}: the returned host gets traffic", p.name),
            || {
                assert_eq!(p.get(), 200, "{}", p.name);
                p.b.hits() > before
            },
        );
        assert_eq!(
            p.stat("cluster.hc.outlier_detection.ejections_active"),
            0,
            "{}",
            p.name
        );
    }
    assert!(ejected_at.elapsed() < Duration::from_secs(5));
}
