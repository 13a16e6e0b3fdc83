//! Consistent-hash load balancing as the control planes write it, against quickshake and
//! against stock Envoy 1.39.3 (the reference), on one configuration: a Maglev cluster
//! (Envoy Gateway's typed `envoy.load_balancing_policies.maglev`) behind a route hashing the
//! `x-user-id` header, a ring hash cluster (Istio's legacy `lb_policy: RING_HASH` with
//! `ring_hash_lb_config`) behind routes hashing a cookie and the client's IP. The same value
//! always reaches the same host; different values spread. `weighted_clusters.use_hash_policy`
//! (Envoy Gateway's weighted backends with consistent hashing) picks the same cluster for the
//! same value. A cookie policy with `ttl` (Istio's `httpCookie`) generates the cookie when the
//! request has none, in Envoy's `Set-Cookie` form. (Which host a value reaches may differ from
//! Envoy's: not compared.)

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use crate::support::envoy::Envoy;
use crate::support::upstreams::{cluster_of, fetch, proxy_config, HttpOpts, Upstream};
use crate::support::{self, free_port, render, Gateway};

const ROUTES: &str = r#"              - match: { prefix: /maglev }
                route:
                  cluster: maglev
                  hash_policy:
                  - header: { header_name: x-user-id }
              - match: { prefix: /ring }
                route:
                  cluster: ring
                  hash_policy:
                  - cookie: { name: session }
                    terminal: true
                  - connection_properties: { source_ip: true }
              - match: { prefix: /weighted }
                route:
                  hash_policy:
                  - header: { header_name: x-user-id }
                  weighted_clusters:
                    clusters:
                    - { name: w0, weight: 1 }
                    - { name: w1, weight: 1 }
                    use_hash_policy: true
              - match: { prefix: /sticky }
                route:
                  cluster: ring
                  hash_policy:
                  - cookie: { name: route, ttl: 60s, path: / }
              - match: { prefix: /source }
                route:
                  cluster: ring
                  hash_policy:
                  - connection_properties: { source_ip: true }"#;

const MAGLEV: &str = r#"    load_balancing_policy:
      policies:
      - typed_extension_config:
          name: envoy.load_balancing_policies.maglev
          typed_config:
            "@type": type.googleapis.com/envoy.extensions.load_balancing_policies.maglev.v3.Maglev
            table_size: 65537"#;

const RING: &str = r#"    lb_policy: RING_HASH
    ring_hash_lb_config: { minimum_ring_size: 1024 }"#;

struct Upstreams(Vec<Upstream>);

impl Upstreams {
    fn start() -> Self {
        Upstreams(
            (0..4)
                .map(|_| Upstream::http(HttpOpts::default()))
                .collect(),
        )
    }

    fn config(&self) -> String {
        let eps: Vec<(&str, u16)> = self.0.iter().map(|u| ("127.0.0.1", u.port)).collect();
        let clusters = [
            cluster_of("maglev", "STATIC", &eps, MAGLEV),
            cluster_of("ring", "STATIC", &eps, RING),
            cluster_of("w0", "STATIC", &eps[..1], ""),
            cluster_of("w1", "STATIC", &eps[1..2], ""),
        ]
        .concat();
        proxy_config("", "", ROUTES, "", &clusters)
    }

    fn counts(&self) -> Vec<u64> {
        self.0
            .iter()
            .map(|u| u.state.requests.load(Ordering::SeqCst))
            .collect()
    }
}

/// Which upstream answered `args` on `path` (the one whose request count rose).
fn host_for(who: &str, port: u16, up: &Upstreams, path: &str, args: &[&str]) -> usize {
    let before = up.counts();
    let mut all = vec!["--http1.1"];
    all.extend_from_slice(args);
    let r = fetch(&all, &format!("https://localhost:{port}{path}"));
    assert_eq!(r.status, 200, "{who} {path} {args:?}: {r:?}");
    let after = up.counts();
    let rose: Vec<usize> = (0..after.len()).filter(|&i| after[i] > before[i]).collect();
    assert_eq!(rose.len(), 1, "{who}: {before:?} -> {after:?}");
    rose[0]
}

fn check(who: &str, port: u16, up: &Upstreams) {
    for (path, arg) in [
        ("/maglev", "x-user-id: user-{}"),
        ("/ring", "cookie: session=s{}"),
    ] {
        let mut hosts = HashSet::new();
        for k in 0..12 {
            let header = arg.replace("{}", &k.to_string());
            let first = host_for(who, port, up, path, &["-H", &header]);
            for _ in 0..2 {
                let again = host_for(who, port, up, path, &["-H", &header]);
                assert_eq!(again, first, "{who} {path} {header}: same value, same host");
            }
            hosts.insert(first);
        }
        assert!(hosts.len() >= 2, "{who} {path}: 12 values all on {hosts:?}");
    }
    // A generated cookie: Envoy's form, then sending it back sticks to one host.
    let r = fetch(&["--http1.1"], &format!("https://localhost:{port}/sticky"));
    assert_eq!(r.status, 200, "{who}: {r:?}");
    let set = r.header("set-cookie").unwrap_or_default().to_owned();
    let value = set
        .strip_prefix("route=\"")
        .and_then(|v| v.split_once('"'))
        .map(|(v, rest)| (v.to_owned(), rest.to_owned()));
    let Some((value, rest)) = value else {
        panic!("{who}: set-cookie {set:?}")
    };
    assert!(
        value.len() == 16 && value.bytes().all(|b| b.is_ascii_hexdigit()),
        "{who}: {set}"
    );
    assert_eq!(rest, "; Max-Age=60; Path=/; HttpOnly", "{who}: {set}");
    let cookie = format!("cookie: route=\"{value}\"");
    let first = host_for(who, port, up, "/sticky", &["-H", &cookie]);
    for _ in 0..3 {
        assert_eq!(
            host_for(who, port, up, "/sticky", &["-H", &cookie]),
            first,
            "{who} /sticky"
        );
    }
    // The client's IP: one client, one host.
    let first = host_for(who, port, up, "/source", &[]);
    for _ in 0..5 {
        assert_eq!(
            host_for(who, port, up, "/source", &[]),
            first,
            "{who} /source"
        );
    }
    // No hash (the Maglev route's header absent): a random host.
    let mut random = HashSet::new();
    for _ in 0..24 {
        random.insert(host_for(who, port, up, "/maglev", &[]));
    }
    assert!(random.len() >= 2, "{who}: no hash, random host: {random:?}");
}

#[test]
fn quickshake_balances_by_consistent_hash() {
    let _lock = support::shared();
    let up = Upstreams::start();
    let gw = Gateway::start(&up.config(), &["--concurrency", "1"]);
    check("quickshake", gw.port, &up);
}

#[test]
fn envoy_balances_by_consistent_hash() {
    let _lock = support::shared();
    let up = Upstreams::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, admin) = (free_port(), free_port());
    let yaml = render(&up.config(), port, free_port(), admin, dir.path());
    let _envoy = Envoy::start(&yaml, admin);
    check("envoy", port, &up);
}
