//! Config snippets and stat readers for private key provider tests.

use super::Gateway;

/// A `tls_certificates` entry whose key is held by a provider.
pub fn provider_cert(
    cert: &str,
    provider_name: &str,
    type_url: &str,
    fields: &[(&str, &str)],
    fallback: Option<bool>,
) -> String {
    let mut s = format!(
        "            - certificate_chain: {{ filename: {{{{CERTS}}}}/{cert}.cert.pem }}\n              private_key_provider:\n                provider_name: {provider_name}\n"
    );
    if let Some(f) = fallback {
        s.push_str(&format!("                fallback: {f}\n"));
    }
    s.push_str(&format!(
        "                typed_config:\n                  \"@type\": {type_url}\n                  private_key: {{ filename: {{{{CERTS}}}}/{cert}.key.pem }}\n"
    ));
    for (k, v) in fields {
        s.push_str(&format!("                  {k}: {v}\n"));
    }
    s
}

pub const BATCHING: &str = "type.googleapis.com/quickshake.private_key_providers.v1.BatchingConfig";

/// A `quickshake.batching` certificate entry.
pub fn batching_cert(cert: &str, fields: &[(&str, &str)]) -> String {
    provider_cert(cert, "quickshake.batching", BATCHING, fields, None)
}

/// Per-size batch counts `[size 1, ..., size 8]` of `cryptomb.<class>_queue_sizes`.
pub fn queue_sizes(gw: &Gateway, class: &str) -> [u64; 8] {
    let name = format!("{}cryptomb.{class}_queue_sizes", gw.scope("127.0.0.1"));
    let (_, body) = gw.admin_get(&format!("/stats?filter={name}&histogram_buckets=disjoint"));
    let mut out = [0u64; 8];
    let Some(line) = body.lines().find(|l| l.starts_with(&name)) else {
        return out;
    };
    for tok in line.split_whitespace().skip(1) {
        // B3(interval,cumulative)
        let Some(rest) = tok.strip_prefix('B') else {
            continue;
        };
        let Some((bound, vals)) = rest.split_once('(') else {
            continue;
        };
        let count = vals
            .trim_end_matches(')')
            .split(',')
            .nth(1)
            .and_then(|v| v.parse::<f64>().ok());
        if let (Ok(b), Some(c)) = (bound.parse::<usize>(), count) {
            if (1..=8).contains(&b) {
                out[b - 1] = c as u64;
            }
        }
    }
    out
}

/// Mean batch size from per-size counts.
pub fn mean_batch(sizes: &[u64; 8]) -> f64 {
    let batches: u64 = sizes.iter().sum();
    let ops: u64 = sizes
        .iter()
        .enumerate()
        .map(|(i, c)| (i as u64 + 1) * c)
        .sum();
    if batches == 0 {
        0.0
    } else {
        ops as f64 / batches as f64
    }
}

/// A provider counter, e.g. `rsa_sign`.
pub fn provider_counter(gw: &Gateway, name: &str) -> u64 {
    gw.counter(&format!("{}cryptomb.{name}", gw.scope("127.0.0.1")))
}

fn doctor_engines() -> serde_json::Value {
    let out = std::process::Command::new(super::binary())
        .args(["doctor", "--json"])
        .output()
        .expect("doctor runs");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["engines"].clone()
}

/// The accelerated engines in `auto` order (those `auto` leaves out on this CPU last) and
/// whether each is usable (from the doctor).
pub fn accelerated_engines() -> Vec<(String, bool)> {
    doctor_engines()["accelerated"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["name"].as_str()?.to_string(), e["usable"].as_bool()?)))
        .collect()
}

/// The engine `auto` (and `cryptomb`) picks on this machine: the first usable engine of the
/// CPU's committed ranking; `None` when there is none.
pub fn auto_engine() -> Option<String> {
    let v = doctor_engines();
    let ranked: Vec<&str> = v["auto_order"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_str())
        .collect();
    accelerated_engines()
        .into_iter()
        .find(|(name, usable)| *usable && ranked.contains(&name.as_str()))
        .map(|(name, _)| name)
}
