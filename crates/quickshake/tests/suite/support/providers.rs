//! Config snippets and stat readers for private key provider tests.

use super::Gateway;

/// The `quickshake.batching` provider block's one copy, shared with the Helm chart, bench/ and
/// scripts/quickstart (deploy/helm/quickshake/files/README.md).
const BATCHING_BLOCK: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../deploy/helm/quickshake/files/batching-provider.yaml"
));

/// A `tls_certificates` entry whose key is held by `quickshake.batching`: the shared block with
/// `poll_delay`, `engine` and `batching` from `fields` (else the provider's defaults: 0.01s,
/// auto, adaptive), `fallback` (else false, the default), and the other `fields` (`fault`)
/// added to its typed_config.
pub fn batching_cert_with(cert: &str, fields: &[(&str, &str)], fallback: Option<bool>) -> String {
    let field = |name: &str, default: &'static str| -> String {
        fields
            .iter()
            .find(|(k, _)| *k == name)
            .map_or(default, |(_, v)| *v)
            .to_string()
    };
    let block = BATCHING_BLOCK
        .replace(
            "${private_key}",
            &format!("{{ filename: {{{{CERTS}}}}/{cert}.key.pem }}"),
        )
        .replace("${fallback}", &fallback.unwrap_or(false).to_string())
        .replace("${poll_delay}", &field("poll_delay", "0.01s"))
        .replace("${engine}", &field("engine", "auto"))
        .replace("${batching}", &field("batching", "adaptive"));
    let mut s =
        format!("            - certificate_chain: {{ filename: {{{{CERTS}}}}/{cert}.cert.pem }}\n");
    for line in block.lines() {
        s.push_str(&format!("              {line}\n"));
    }
    for (k, v) in fields
        .iter()
        .filter(|(k, _)| !matches!(*k, "poll_delay" | "engine" | "batching"))
    {
        s.push_str(&format!("                  {k}: {v}\n"));
    }
    s
}

/// [`batching_cert_with`] without `fallback`.
pub fn batching_cert(cert: &str, fields: &[(&str, &str)]) -> String {
    batching_cert_with(cert, fields, None)
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
    let out = quickshake_test_support::gateway::quickshake_command()
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
