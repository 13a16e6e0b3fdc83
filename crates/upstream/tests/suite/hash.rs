//! Consistent-hash balancing (ring hash, Maglev): the same request hash always reaches the
//! same host, different hashes spread, no hash picks at random.

use std::collections::HashMap;

use quickshake_stats::Store;
use quickshake_upstream::{xxhash64, ClusterManager, LbPolicy, RequestHash};

use crate::common::*;

/// Which upstream (the first word of its answer) each of `keys` reached, `rounds` times each.
async fn hosts_for(lb: LbPolicy, keys: &[&str], rounds: usize) -> Vec<Vec<String>> {
    let mut addrs = Vec::new();
    for _ in 0..4 {
        addrs.push(upstream(Kind::H1).await.0);
    }
    let store = Store::new();
    let mut spec = static_spec("hashed", &addrs);
    spec.lb = lb;
    let cm = ClusterManager::new(vec![spec], &store).expect("manager");
    let c = cm.cluster("hashed").expect("cluster");
    let mut out = Vec::new();
    for key in keys {
        let mut seen = Vec::new();
        for _ in 0..rounds {
            let mut req = get("/");
            if !key.is_empty() {
                req.extensions_mut()
                    .insert(RequestHash(xxhash64(key.as_bytes(), 0)));
            }
            let resp = tokio::time::timeout(BOUND, c.send(req))
                .await
                .expect("bound")
                .expect("response");
            let body = read(resp.into_body()).await;
            seen.push(body.split_whitespace().next().unwrap_or("").to_owned());
        }
        out.push(seen);
    }
    out
}

#[tokio::test]
async fn same_hash_same_host_and_hashes_spread() {
    let keys: Vec<String> = (0..40).map(|i| format!("user-{i}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    for lb in [
        LbPolicy::RingHash {
            min_ring_size: 1024,
            max_ring_size: 8 * 1024 * 1024,
        },
        LbPolicy::Maglev { table_size: 65537 },
    ] {
        let got = hosts_for(lb, &keys, 3).await;
        let mut per_host: HashMap<&str, usize> = HashMap::new();
        for seen in &got {
            assert!(seen.iter().all(|h| *h == seen[0]), "{lb:?}: {seen:?}");
            *per_host.entry(seen[0].as_str()).or_default() += 1;
        }
        assert_eq!(
            per_host.len(),
            4,
            "{lb:?}: 40 keys over 4 hosts: {per_host:?}"
        );
    }
}

#[tokio::test]
async fn no_hash_picks_at_random() {
    let got = hosts_for(LbPolicy::Maglev { table_size: 65537 }, &[""], 40).await;
    let distinct: std::collections::HashSet<&String> = got[0].iter().collect();
    assert!(distinct.len() > 1, "{:?}", got[0]);
}
