//! The Grafana dashboard (`deploy/grafana/quickshake.json`): valid Grafana JSON with the
//! Prometheus datasource as a variable, the panels the deployment guide promises, and — the
//! point — every `envoy_*` name it queries exists in a live `/stats/prometheus` scrape of the real
//! gateway after real traffic through a `quickshake.batching` provider.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::support;
use crate::support::providers::batching_cert;
use crate::support::{direct_response_config, Gateway};

fn dashboard() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/grafana/quickshake.json");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// Every panel, rows' nested panels included.
fn panels(d: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        out.push(p.clone());
        if let Some(nested) = p["panels"].as_array() {
            out.extend(nested.iter().cloned());
        }
    }
    out
}

/// (panel title, expr) of every query target, and every templating variable's query.
fn queries(d: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in panels(d) {
        let title = p["title"].as_str().unwrap_or("?").to_string();
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("panel {title:?}: target without expr: {t}"));
            out.push((title.clone(), expr.to_string()));
        }
    }
    for v in d["templating"]["list"].as_array().into_iter().flatten() {
        if v["type"].as_str() == Some("query") {
            let q = match &v["query"] {
                Value::String(s) => s.clone(),
                other => other["query"].as_str().unwrap_or_default().to_string(),
            };
            out.push((format!("variable {}", v["name"]), q));
        }
    }
    out
}

/// Every `envoy_[a-z0-9_]+` token of an expression.
fn envoy_names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = expr.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let at_word_start = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if at_word_start && expr[i..].starts_with("envoy_") {
            let mut j = i + "envoy_".len();
            while j < b.len()
                && (b[j].is_ascii_lowercase() || b[j].is_ascii_digit() || b[j] == b'_')
            {
                j += 1;
            }
            out.insert(expr[i..j].to_string());
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// A Prometheus text scrape: metric families with their types, and every label name.
struct Scrape {
    families: BTreeMap<String, String>,
    labels: BTreeSet<String>,
    samples: BTreeMap<String, f64>,
}

fn parse_scrape(body: &str) -> Scrape {
    let mut families = BTreeMap::new();
    let mut labels = BTreeSet::new();
    let mut samples = BTreeMap::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split_whitespace();
            if let (Some(name), Some(ty)) = (it.next(), it.next()) {
                families.insert(name.to_string(), ty.to_string());
            }
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("sample line");
        let (name, labelset) = series.split_once('{').unwrap_or((series, ""));
        for pair in labelset.trim_end_matches('}').split(',') {
            if let Some((k, _)) = pair.split_once('=') {
                labels.insert(k.trim().to_string());
            }
        }
        let v: f64 = value.parse().unwrap_or(f64::NAN);
        *samples.entry(name.to_string()).or_insert(0.0) += v;
    }
    Scrape {
        families,
        labels,
        samples,
    }
}

/// The family a queried name belongs to: itself, or a histogram's `_bucket`/`_sum`/`_count`.
fn family_of<'a>(name: &'a str, scrape: &Scrape) -> Option<&'a str> {
    if scrape.families.contains_key(name) {
        return Some(name);
    }
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if scrape.families.get(base).map(String::as_str) == Some("histogram") {
                return Some(base);
            }
        }
    }
    None
}

#[test]
fn dashboard_is_grafana_json_with_a_prometheus_datasource_variable() {
    let _lock = support::shared();
    let d = dashboard();
    assert!(d["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(d["uid"].as_str().is_some_and(|u| !u.is_empty()));
    assert!(d["schemaVersion"].as_u64().is_some());
    let vars = d["templating"]["list"].as_array().expect("templating.list");
    let ds = vars
        .iter()
        .find(|v| v["type"].as_str() == Some("datasource"))
        .expect("a datasource variable");
    assert_eq!(ds["query"].as_str(), Some("prometheus"));
    let ds_ref = format!("${{{}}}", ds["name"].as_str().expect("variable name"));
    let mut ids = BTreeSet::new();
    for p in panels(&d) {
        let title = p["title"].as_str().unwrap_or("?").to_string();
        let id = p["id"].as_u64().unwrap_or_else(|| panic!("{title}: no id"));
        assert!(ids.insert(id), "duplicate panel id {id}");
        for k in ["x", "y", "w", "h"] {
            assert!(p["gridPos"][k].as_u64().is_some(), "{title}: gridPos.{k}");
        }
        if p["type"].as_str() == Some("row") {
            continue;
        }
        assert_eq!(
            p["datasource"]["uid"].as_str(),
            Some(ds_ref.as_str()),
            "{title}: the panel uses the datasource variable"
        );
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no queries");
        for t in targets {
            assert_eq!(
                t["datasource"]["uid"].as_str(),
                Some(ds_ref.as_str()),
                "{title}: target datasource"
            );
        }
    }
    // Variables that query Prometheus use the datasource variable too.
    for v in vars.iter().filter(|v| v["type"].as_str() == Some("query")) {
        assert_eq!(
            v["datasource"]["uid"].as_str(),
            Some(ds_ref.as_str()),
            "{v}"
        );
    }
}

#[test]
fn dashboard_has_the_promised_panels() {
    let _lock = support::shared();
    let d = dashboard();
    let all: Vec<(String, String)> = queries(&d);
    let has = |what: &str, f: &dyn Fn(&str) -> bool| {
        assert!(
            all.iter().any(|(_, e)| f(e)),
            "no query for {what}; queries: {all:#?}"
        );
    };
    has("the handshake rate", &|e| {
        e.contains("rate(envoy_listener_ssl_handshake{") && e.contains("[1m])")
    });
    has("the handshake latency", &|e| {
        e.contains("histogram_quantile(")
            && e.contains("envoy_listener_ssl_handshake_time_ms_bucket")
    });
    has("the RSA batch-size distribution", &|e| {
        e.contains("envoy_listener_cryptomb_rsa_queue_sizes_bucket") && e.contains("by (le)")
    });
    has("fallbacks", &|e| {
        e.contains("envoy_listener_cryptomb_fallback")
    });
    has("software retries", &|e| {
        e.contains("envoy_listener_cryptomb_software_retry")
    });
    has("verification failures", &|e| {
        e.contains("envoy_listener_cryptomb_verify_failed")
    });
    has("requests by code class", &|e| {
        e.contains("envoy_http_downstream_rq_xx") && e.contains("envoy_response_code_class")
    });
    has("active connections", &|e| {
        e.contains("downstream_cx_active")
    });
}

#[test]
fn every_dashboard_metric_is_in_a_live_scrape() {
    let _lock = support::shared();
    // A gateway whose key is held by quickshake.batching (software engine: works on any CPU),
    // so the provider's `cryptomb.*` stats exist, then real HTTPS traffic with curl.
    let cert = batching_cert("rsa2048", &[("engine", "software")]);
    let gw = Gateway::start(
        &direct_response_config(&cert, "", ""),
        &["--concurrency", "2"],
    );
    for _ in 0..5 {
        let out = support::curl(&["--cacert", &support::cert("rsa2048.cert.pem"), &gw.url("/")]);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("hello from quickshake"),
            "curl: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            gw.log_text()
        );
    }
    let (code, body) = gw.admin_get("/stats/prometheus");
    assert_eq!(code, 200);
    let scrape = parse_scrape(&body);
    // The traffic reached the stats the dashboard is about.
    for (name, min) in [
        ("envoy_listener_ssl_handshake", 5.0),
        ("envoy_listener_cryptomb_rsa_sign", 5.0),
        ("envoy_listener_cryptomb_rsa_queue_sizes_count", 1.0),
        ("envoy_listener_ssl_handshake_time_ms_count", 5.0),
    ] {
        let v = scrape.samples.get(name).copied().unwrap_or(0.0);
        assert!(v >= min, "{name} = {v} after 5 handshakes:\n{body}");
    }

    let d = dashboard();
    let mut missing = Vec::new();
    let mut metrics = BTreeSet::new();
    for (title, expr) in queries(&d) {
        for name in envoy_names(&expr) {
            // `envoy_listener_address`, `envoy_response_code_class`, … are label names: they
            // must be labels of the scrape; everything else must be a metric family.
            if scrape.labels.contains(&name) {
                continue;
            }
            match family_of(&name, &scrape) {
                Some(f) => {
                    metrics.insert(f.to_string());
                }
                None => missing.push(format!("{title}: {name}")),
            }
        }
    }
    assert!(
        missing.is_empty(),
        "dashboard names missing from the live scrape:\n{}\n\nscrape families: {:?}\nlabels: {:?}",
        missing.join("\n"),
        scrape.families.keys().collect::<Vec<_>>(),
        scrape.labels
    );
    for want in [
        "envoy_listener_ssl_handshake",
        "envoy_listener_ssl_handshake_time_ms",
        "envoy_listener_cryptomb_rsa_queue_sizes",
        "envoy_listener_cryptomb_fallback",
        "envoy_listener_cryptomb_software_retry",
        "envoy_listener_cryptomb_verify_failed",
        "envoy_http_downstream_rq_xx",
    ] {
        assert!(
            metrics.contains(want),
            "the dashboard queries {want}: {metrics:?}"
        );
    }
}

#[test]
fn envoy_names_are_extracted_from_promql() {
    let _lock = support::shared();
    let names = envoy_names(
        r#"histogram_quantile(0.9, sum by (le, envoy_listener_address) (rate(envoy_listener_ssl_handshake_time_ms_bucket{envoy_listener_address=~"$l"}[1m]))) / xenvoy_no"#,
    );
    let want: BTreeSet<String> = [
        "envoy_listener_address",
        "envoy_listener_ssl_handshake_time_ms_bucket",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(names, want);
}
