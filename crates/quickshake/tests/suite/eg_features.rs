//! The route and filter fields Envoy Gateway renders for the Gateway API features that
//! `scripts/run-envoy-gateway` exercises, each with Envoy's effect, against quickshake and
//! against stock Envoy 1.39.3 (the reference), on one configuration:
//! - `redirect` `scheme_redirect`, `port_redirect`, `host_redirect`, `path_redirect` (the query
//!   kept), `prefix_rewrite` with `strip_query`, `regex_rewrite` (the `Location` as Envoy's
//!   `newUri` builds it);
//! - `match.query_parameters` (`string_match` on the first value as written, `present_match`);
//! - `route` `regex_rewrite`, `host_rewrite_literal` with `append_x_forwarded_host`;
//! - `request_mirror_policies` (the `-shadow` host suffix, and without it);
//! - `weighted_clusters` with per-cluster request headers;
//! - `retry_policy.retry_back_off`;
//! - the `envoy.filters.http.grpc_web` filter (binary gRPC-Web to an h2c gRPC upstream whose
//!   cluster sets HTTP/2 windows, as Envoy Gateway's GRPCRoute clusters do).

use std::time::{Duration, Instant};

use crate::support::envoy::Envoy;
use crate::support::upstreams::{cluster, fetch, grpc_frame, proxy_config, HttpOpts, Upstream};
use crate::support::{self, free_port, render, Gateway};

const ROUTES: &str = r#"              - match: { prefix: /rd/scheme }
                redirect: { scheme_redirect: https, port_redirect: 8443 }
              - match: { prefix: /rd/port }
                redirect: { port_redirect: 9090, response_code: FOUND }
              - match: { prefix: /rd/host }
                redirect: { host_redirect: other.test }
              - match: { prefix: /rd/path }
                redirect: { path_redirect: /moved }
              - match: { path_separated_prefix: /rd/prefix }
                redirect: { prefix_rewrite: /new, strip_query: true }
              - match: { prefix: /rd/regex }
                redirect:
                  regex_rewrite: { pattern: { regex: "^/rd/regex/(\\w+)$" }, substitution: "/r/\\1" }
              - match:
                  prefix: /q
                  query_parameters: [{ name: k, string_match: { exact: "v1" } }]
                direct_response: { status: 200, body: { inline_string: exact } }
              - match:
                  prefix: /q
                  query_parameters: [{ name: p, present_match: true }]
                direct_response: { status: 200, body: { inline_string: present } }
              - match: { prefix: /q }
                direct_response: { status: 200, body: { inline_string: none } }
              - match: { prefix: /rw/ }
                route:
                  cluster: echo
                  regex_rewrite: { pattern: { regex: "^/rw/(.*)$" }, substitution: "/\\1/x" }
                  host_rewrite_literal: backend.test
                  append_x_forwarded_host: true
              - match: { prefix: /mirror-plain }
                route:
                  cluster: echo
                  request_mirror_policies:
                  - { cluster: shadow, disable_shadow_host_suffix_append: true }
              - match: { prefix: /mirror }
                route:
                  cluster: echo
                  request_mirror_policies:
                  - cluster: shadow
                    runtime_fraction: { default_value: { numerator: 100 } }
              - match: { prefix: /weighted }
                route:
                  weighted_clusters:
                    clusters:
                    - name: echo
                      weight: 1
                      request_headers_to_add: [{ header: { key: x-pick, value: echo } }]
                    - name: shadow
                      weight: 1
                      request_headers_to_add: [{ header: { key: x-pick, value: shadow } }]
              - match: { prefix: /retry }
                route:
                  cluster: flaky
                  retry_policy:
                    retry_on: 5xx
                    num_retries: 3
                    retry_back_off: { base_interval: 0.01s, max_interval: 0.05s }
              - match: { prefix: /echo.Echo/ }
                route: { cluster: grpc }"#;

const GRPC_WEB: &str = r#"          http_filters:
          - name: envoy.filters.http.grpc_web
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.grpc_web.v3.GrpcWeb
"#;

/// The gRPC cluster's protocol options: HTTP/2 with Envoy Gateway's windows.
const GRPC_H2: &str = r#"    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config:
          http2_protocol_options: { initial_stream_window_size: 65536, initial_connection_window_size: 1048576 }"#;

struct Upstreams {
    echo: Upstream,
    shadow: Upstream,
    flaky: Upstream,
    grpc: Upstream,
}

impl Upstreams {
    fn start() -> Self {
        Upstreams {
            echo: Upstream::http(HttpOpts::default()),
            shadow: Upstream::http(HttpOpts::default()),
            flaky: Upstream::http(HttpOpts::statuses(&[503, 503])),
            grpc: Upstream::grpc(),
        }
    }

    fn config(&self) -> String {
        let clusters = [
            cluster("echo", "STATIC", "127.0.0.1", self.echo.port, ""),
            cluster("shadow", "STATIC", "127.0.0.1", self.shadow.port, ""),
            cluster("flaky", "STATIC", "127.0.0.1", self.flaky.port, ""),
            cluster("grpc", "STATIC", "127.0.0.1", self.grpc.port, GRPC_H2),
        ]
        .concat();
        proxy_config("", "", ROUTES, "", &clusters).replacen(
            "          http_filters:\n",
            GRPC_WEB,
            1,
        )
    }
}

/// Every check against the proxy (`who`) on `port`.
fn check(who: &str, port: u16, up: &Upstreams, log: &dyn Fn() -> String) {
    let url = |path: &str| format!("https://localhost:{port}{path}");
    let get = |path: &str| fetch(&["--http1.1"], &url(path));
    // Redirects: the Location as Envoy's newUri builds it.
    for (path, status, location) in [
        (
            "/rd/scheme?a=1",
            301,
            "https://localhost:8443/rd/scheme?a=1".to_owned(),
        ),
        (
            "/rd/port/x",
            302,
            "https://localhost:9090/rd/port/x".to_owned(),
        ),
        ("/rd/host", 301, "https://other.test/rd/host".to_owned()),
        (
            "/rd/path/x?k=v",
            301,
            format!("https://localhost:{port}/moved?k=v"),
        ),
        (
            "/rd/prefix/x?y=1",
            301,
            format!("https://localhost:{port}/new/x"),
        ),
        (
            "/rd/regex/abc",
            301,
            format!("https://localhost:{port}/r/abc"),
        ),
    ] {
        let r = get(path);
        assert_eq!(
            (r.status, r.header("location")),
            (status, Some(location.as_str())),
            "{who} {path}: {r:?}\n{}",
            log()
        );
    }
    // Query parameter matches.
    for (path, body) in [
        ("/q?k=v1", "exact"),
        ("/q?x=1&k=v1&k=v2", "exact"),
        ("/q?k=v%31", "none"),
        ("/q?k=v2&k=v1", "none"),
        ("/q?k=a", "none"),
        ("/q?p", "present"),
        ("/q?p=&k=z", "present"),
        ("/q", "none"),
    ] {
        let r = get(path);
        assert_eq!(
            (r.status, r.body.as_str()),
            (200, body),
            "{who} {path}: {r:?}"
        );
    }
    // regex_rewrite (the query kept out of it), host_rewrite_literal, append_x_forwarded_host.
    let r = get("/rw/a/b?z=/rw/");
    assert_eq!(r.status, 200, "{who}: {r:?}\n{}", log());
    let seen = up.echo.state.last();
    assert_eq!(seen.path, "/a/b/x?z=/rw/", "{who}: {seen:?}");
    assert_eq!(seen.header("host"), Some("backend.test"), "{who}: {seen:?}");
    assert_eq!(
        seen.header("x-forwarded-host"),
        Some(format!("localhost:{port}").as_str()),
        "{who}: {seen:?}"
    );
    // Mirrors: the client gets the primary's answer; the shadow gets a copy.
    for (path, host) in [
        ("/mirror?id=1", format!("localhost-shadow:{port}")),
        ("/mirror-plain?id=2", format!("localhost:{port}")),
    ] {
        let r = get(path);
        assert_eq!(r.status, 200, "{who} {path}: {r:?}");
        assert_eq!(up.echo.state.last().path, path, "{who}");
        let deadline = Instant::now() + Duration::from_secs(5);
        let copy = loop {
            if let Some(s) = up.shadow.state.seen().into_iter().find(|s| s.path == path) {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "{who}: no mirror of {path}\n{}",
                log()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(copy.header("host"), Some(host.as_str()), "{who}: {copy:?}");
    }
    // Weighted clusters, each with its own request headers.
    for _ in 0..30 {
        assert_eq!(get("/weighted").status, 200, "{who}\n{}", log());
    }
    for (up, name) in [(&up.echo, "echo"), (&up.shadow, "shadow")] {
        let picked: Vec<_> = up
            .state
            .seen()
            .into_iter()
            .filter(|s| s.path == "/weighted")
            .collect();
        assert!(!picked.is_empty(), "{who}: {name} never picked");
        assert!(
            picked.iter().all(|s| s.header("x-pick") == Some(name)),
            "{who}: {name}: {picked:?}"
        );
    }
    // Retries with a back-off: two 503s, then 200.
    let r = get("/retry");
    assert_eq!(r.status, 200, "{who}: {r:?}\n{}", log());
    assert_eq!(up.flaky.state.request_count(), 3, "{who}");
    // gRPC-Web (binary) to a gRPC upstream.
    let dir = tempfile::tempdir().expect("tempdir");
    let body = dir.path().join("req.bin");
    std::fs::write(&body, grpc_frame(b"hi")).expect("write the request");
    let data = format!("@{}", body.display());
    let r = fetch(
        &[
            "--http2",
            "-X",
            "POST",
            "-H",
            "content-type: application/grpc-web+proto",
            "--data-binary",
            &data,
        ],
        &url("/echo.Echo/Say"),
    );
    assert_eq!(r.status, 200, "{who}: {r:?}\n{}", log());
    assert_eq!(
        r.header("content-type"),
        Some("application/grpc-web+proto"),
        "{who}: {r:?}"
    );
    assert!(r.body.contains("reply:hi"), "{who}: {r:?}");
    assert!(
        r.body.contains("grpc-status:0\r\n"),
        "{who}: the trailer frame: {r:?}"
    );
    let seen = up.grpc.state.last();
    assert_eq!(
        seen.header("content-type"),
        Some("application/grpc"),
        "{who}: {seen:?}"
    );
}

#[test]
fn quickshake_serves_envoy_gateway_route_features() {
    let _lock = support::shared();
    let up = Upstreams::start();
    let gw = Gateway::start(&up.config(), &["--concurrency", "1"]);
    check("quickshake", gw.port, &up, &|| gw.log_text());
}

#[test]
fn envoy_serves_the_same_route_features() {
    let _lock = support::shared();
    let up = Upstreams::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, admin) = (free_port(), free_port());
    let yaml = render(&up.config(), port, free_port(), admin, dir.path());
    let envoy = Envoy::start(&yaml, admin);
    check("envoy", port, &up, &|| envoy.log_text());
}
