//! `/clusters`: what the server reports of its upstream clusters ([`ClusterStatus`]) and its
//! two renderings, Envoy's text lines (`<cluster>::<host:port>::health_flags::healthy`) and
//! Envoy's `ClusterStatuses` JSON (`?format=json`). Pure: no server state here.

use std::net::SocketAddr;

use serde_json::{json, Map, Value};

/// Circuit-breaker thresholds of one priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    pub max_connections: u64,
    pub max_pending_requests: u64,
    pub max_requests: u64,
    pub max_retries: u64,
}

impl Default for Thresholds {
    /// Envoy's defaults (1024, 1024, 1024, 3).
    fn default() -> Self {
        Thresholds {
            max_connections: 1024,
            max_pending_requests: 1024,
            max_requests: 1024,
            max_retries: 3,
        }
    }
}

/// One cluster as `/clusters` shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterStatus {
    pub name: String,
    pub added_via_api: bool,
    /// Whether the cluster has outlier detection (Envoy then prints its `outlier::` lines).
    pub outlier_detection: bool,
    pub default_priority: Thresholds,
    pub high_priority: Thresholds,
    pub hosts: Vec<HostStatus>,
}

/// Stat names and values.
type Named<const N: usize> = [(&'static str, u64); N];

/// One host: address, health flags and Envoy's per-host stats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostStatus {
    pub address: SocketAddr,
    pub failed_active_hc: bool,
    pub failed_outlier_check: bool,
    pub cx_active: u64,
    pub cx_connect_fail: u64,
    pub cx_total: u64,
    pub rq_active: u64,
    pub rq_error: u64,
    pub rq_pending_active: u64,
    pub rq_success: u64,
    pub rq_timeout: u64,
    pub rq_total: u64,
}

impl HostStatus {
    /// Envoy's `health_flags`: `healthy`, or `/failed_active_hc`, `/failed_outlier_check`.
    fn health_flags(&self) -> String {
        let mut s = String::new();
        if self.failed_active_hc {
            s.push_str("/failed_active_hc");
        }
        if self.failed_outlier_check {
            s.push_str("/failed_outlier_check");
        }
        if s.is_empty() {
            s.push_str("healthy");
        }
        s
    }

    /// Counters then gauges, each sorted by name (Envoy's order).
    fn stats(&self) -> (Named<6>, Named<3>) {
        (
            [
                ("cx_connect_fail", self.cx_connect_fail),
                ("cx_total", self.cx_total),
                ("rq_error", self.rq_error),
                ("rq_success", self.rq_success),
                ("rq_timeout", self.rq_timeout),
                ("rq_total", self.rq_total),
            ],
            [
                ("cx_active", self.cx_active),
                ("rq_active", self.rq_active),
                ("rq_pending_active", self.rq_pending_active),
            ],
        )
    }
}

/// Envoy's text format.
pub fn render_text(clusters: &[ClusterStatus]) -> String {
    let mut out = String::new();
    for c in clusters {
        let n = &c.name;
        out.push_str(&format!("{n}::observability_name::{n}\n"));
        if c.outlier_detection {
            for k in [
                "success_rate_average",
                "success_rate_ejection_threshold",
                "local_origin_success_rate_average",
                "local_origin_success_rate_ejection_threshold",
            ] {
                out.push_str(&format!("{n}::outlier::{k}::-1\n"));
            }
        }
        for (p, t) in [
            ("default_priority", c.default_priority),
            ("high_priority", c.high_priority),
        ] {
            out.push_str(&format!(
                "{n}::{p}::max_connections::{}\n",
                t.max_connections
            ));
            out.push_str(&format!(
                "{n}::{p}::max_pending_requests::{}\n",
                t.max_pending_requests
            ));
            out.push_str(&format!("{n}::{p}::max_requests::{}\n", t.max_requests));
            out.push_str(&format!("{n}::{p}::max_retries::{}\n", t.max_retries));
        }
        out.push_str(&format!("{n}::added_via_api::{}\n", c.added_via_api));
        for h in &c.hosts {
            let a = h.address;
            let (counters, gauges) = h.stats();
            let mut all: Vec<(&str, u64)> = counters.into_iter().chain(gauges).collect();
            all.sort_by_key(|(k, _)| *k);
            for (k, v) in all {
                out.push_str(&format!("{n}::{a}::{k}::{v}\n"));
            }
            out.push_str(&format!("{n}::{a}::hostname::\n"));
            out.push_str(&format!("{n}::{a}::health_flags::{}\n", h.health_flags()));
            for (k, v) in [
                ("weight", "1"),
                ("region", ""),
                ("zone", ""),
                ("sub_zone", ""),
                ("canary", "false"),
                ("priority", "0"),
                ("success_rate", "-1"),
                ("local_origin_success_rate", "-1"),
            ] {
                out.push_str(&format!("{n}::{a}::{k}::{v}\n"));
            }
        }
    }
    out
}

fn thresholds_json(t: Thresholds, high: bool) -> Value {
    let mut v = json!({
        "max_connections": t.max_connections,
        "max_pending_requests": t.max_pending_requests,
        "max_requests": t.max_requests,
        "max_retries": t.max_retries,
    });
    if let (true, Some(o)) = (high, v.as_object_mut()) {
        o.insert("priority".into(), json!("HIGH"));
    }
    v
}

/// Envoy's `ClusterStatuses` JSON (proto3 JSON: zero values and false booleans omitted,
/// 64-bit counters as strings).
pub fn render_json(clusters: &[ClusterStatus]) -> Value {
    let statuses: Vec<Value> = clusters
        .iter()
        .map(|c| {
            let hosts: Vec<Value> = c
                .hosts
                .iter()
                .map(|h| {
                    let (counters, gauges) = h.stats();
                    let mut stats: Vec<Value> = Vec::new();
                    for (k, v) in counters {
                        let mut s = Map::new();
                        s.insert("name".into(), json!(k));
                        if v != 0 {
                            s.insert("value".into(), json!(v.to_string()));
                        }
                        stats.push(Value::Object(s));
                    }
                    for (k, v) in gauges {
                        let mut s = Map::new();
                        s.insert("type".into(), json!("GAUGE"));
                        s.insert("name".into(), json!(k));
                        if v != 0 {
                            s.insert("value".into(), json!(v.to_string()));
                        }
                        stats.push(Value::Object(s));
                    }
                    let mut health = Map::new();
                    if h.failed_active_hc {
                        health.insert("failed_active_health_check".into(), json!(true));
                    }
                    if h.failed_outlier_check {
                        health.insert("failed_outlier_check".into(), json!(true));
                    }
                    health.insert("eds_health_status".into(), json!("HEALTHY"));
                    json!({
                        "address": {"socket_address": {
                            "address": h.address.ip().to_string(),
                            "port_value": h.address.port(),
                        }},
                        "stats": stats,
                        "health_status": health,
                        "weight": 1,
                        "locality": {},
                    })
                })
                .collect();
            let mut o = Map::new();
            o.insert("name".into(), json!(c.name));
            if c.added_via_api {
                o.insert("added_via_api".into(), json!(true));
            }
            if !hosts.is_empty() {
                o.insert("host_statuses".into(), Value::Array(hosts));
            }
            o.insert(
                "circuit_breakers".into(),
                json!({"thresholds": [
                    thresholds_json(c.default_priority, false),
                    thresholds_json(c.high_priority, true),
                ]}),
            );
            o.insert("observability_name".into(), json!(c.name));
            Value::Object(o)
        })
        .collect();
    json!({ "cluster_statuses": statuses })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<ClusterStatus> {
        vec![ClusterStatus {
            name: "hc".into(),
            outlier_detection: true,
            hosts: vec![HostStatus {
                address: "127.0.0.1:8080".parse().expect("addr"),
                failed_active_hc: true,
                failed_outlier_check: true,
                cx_active: 0,
                cx_connect_fail: 0,
                cx_total: 2,
                rq_active: 0,
                rq_error: 0,
                rq_pending_active: 0,
                rq_success: 0,
                rq_timeout: 0,
                rq_total: 0,
            }],
            ..Default::default()
        }]
    }

    #[test]
    fn text_has_envoys_lines() {
        let t = render_text(&sample());
        assert!(t.contains("hc::outlier::success_rate_average::-1\n"), "{t}");
        assert!(t.contains("hc::default_priority::max_retries::3\n"), "{t}");
        assert!(t.contains("hc::127.0.0.1:8080::cx_total::2\n"), "{t}");
        assert!(
            t.contains(
                "hc::127.0.0.1:8080::health_flags::/failed_active_hc/failed_outlier_check\n"
            ),
            "{t}"
        );
    }

    #[test]
    fn json_is_proto3_shaped() {
        let j = render_json(&sample());
        let h = &j["cluster_statuses"][0]["host_statuses"][0];
        assert_eq!(h["address"]["socket_address"]["port_value"], 8080);
        assert_eq!(h["health_status"]["failed_active_health_check"], true);
        assert_eq!(h["stats"][1]["value"], "2");
        assert!(h["stats"][0].get("value").is_none());
        assert!(j["cluster_statuses"][0].get("added_via_api").is_none());
    }
}
