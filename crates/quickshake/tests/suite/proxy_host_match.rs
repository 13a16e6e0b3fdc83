//! Virtual host selection by `Host` with its port, as Envoy 1.39.3 does it: a domain without a
//! port does not match `Host: example.com:8443` (and one with a port matches only that port)
//! unless the route configuration says `ignore_port_in_host_matching: true`; and a STATIC
//! cluster with no endpoints (Istio's `BlackHoleCluster`) is accepted and answers 503
//! `no healthy upstream`. Every check runs against quickshake and against stock Envoy, the
//! reference.

use crate::support::envoy::Envoy;
use crate::support::{self, free_port, http_exchange, render, Gateway};

/// A plaintext HTTP listener on `{{PORT}}` whose virtual hosts answer a status of their own
/// (`example.com` 201, `example.com:8443` 202, `*.example.org` 203, `api.*` 204), and route
/// `blackhole` / `blackhole2` to STATIC clusters with no `load_assignment` / an empty one.
/// `ignore_port` sets the route configuration's `ignore_port_in_host_matching`.
fn config(ignore_port: bool) -> String {
    let vh = |name: &str, domain: &str, action: &str| {
        format!(
            "            - name: {name}\n              domains: [\"{domain}\"]\n              routes:\n              - match: {{ prefix: / }}\n                {action}\n"
        )
    };
    let mut hosts = String::new();
    for (name, domain, status) in [
        ("plain", "example.com", 201),
        ("with_port", "example.com:8443", 202),
        ("suffix", "*.example.org", 203),
        ("prefix", "api.*", 204),
    ] {
        hosts += &vh(
            name,
            domain,
            &format!("direct_response: {{ status: {status} }}"),
        );
    }
    hosts += &vh("bh", "blackhole", "route: { cluster: BlackHoleCluster }");
    hosts += &vh("bh2", "blackhole2", "route: { cluster: empty_assignment }");
    format!(
        r#"
static_resources:
  listeners:
  - name: main
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {{{{PORT}}}} }} }}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress_http
          route_config:
            name: local_route
            ignore_port_in_host_matching: {ignore_port}
            virtual_hosts:
{hosts}          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: BlackHoleCluster
    type: STATIC
    connect_timeout: 10s
  - name: empty_assignment
    type: STATIC
    connect_timeout: 1s
    load_assignment: {{ cluster_name: empty_assignment }}
admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: {{{{ADMIN}}}} }} }}
"#
    )
}

/// `Host` → (status, body) without the flag, as Envoy 1.39.3 answers.
const BY_PORT: &[(&str, u16, &str)] = &[
    ("example.com", 201, ""),
    ("example.com:8443", 202, ""),
    ("EXAMPLE.com:8443", 202, ""),
    ("example.com:80", 404, ""),
    ("www.example.org", 203, ""),
    ("www.example.org:1", 404, ""),
    ("api.x", 204, ""),
    ("api.x:9", 204, ""),
    ("other:1", 404, ""),
    ("blackhole", 503, "no healthy upstream"),
    ("blackhole2", 503, "no healthy upstream"),
];

/// The same with `ignore_port_in_host_matching: true`: the port is dropped before matching, so
/// a domain with a port never matches.
const IGNORING_PORT: &[(&str, u16, &str)] = &[
    ("example.com", 201, ""),
    ("example.com:8443", 201, ""),
    ("example.com:80", 201, ""),
    ("www.example.org:1", 203, ""),
    ("api.x:9", 204, ""),
    ("other:1", 404, ""),
    ("[::1]:80", 404, ""),
    ("blackhole:7", 503, "no healthy upstream"),
];

fn check(who: &str, port: u16, cases: &[(&str, u16, &str)], log: &dyn Fn() -> String) {
    for (host, status, body) in cases {
        let (got, got_body) = http_exchange(
            port,
            &format!("GET /x HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        )
        .unwrap_or_else(|e| panic!("{who}, Host {host}: {e}"));
        assert_eq!(
            (got, got_body.as_str()),
            (*status, *body),
            "{who}, Host {host}\n{}",
            log()
        );
    }
}

fn cases(ignore_port: bool) -> &'static [(&'static str, u16, &'static str)] {
    if ignore_port {
        IGNORING_PORT
    } else {
        BY_PORT
    }
}

#[test]
fn host_port_matching_and_black_hole_as_quickshake() {
    let _lock = support::shared();
    for ignore_port in [false, true] {
        let gw = Gateway::start(&config(ignore_port), &["--concurrency", "1"]);
        check(
            &format!("quickshake, ignore_port_in_host_matching {ignore_port}"),
            gw.port,
            cases(ignore_port),
            &|| gw.log_text(),
        );
    }
}

#[test]
fn host_port_matching_and_black_hole_as_envoy() {
    let _lock = support::shared();
    for ignore_port in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (port, admin) = (free_port(), free_port());
        let yaml = render(&config(ignore_port), port, free_port(), admin, dir.path());
        let envoy = Envoy::start(&yaml, admin);
        check(
            &format!("envoy, ignore_port_in_host_matching {ignore_port}"),
            port,
            cases(ignore_port),
            &|| envoy.log_text(),
        );
    }
}
