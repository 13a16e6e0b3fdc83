//! HTTP features of Envoy Gateway's and Istio's bootstraps, over real sockets with curl: route
//! `headers` matchers and `case_sensitive`, path normalization (Envoy Gateway's
//! `normalize_path` + `merge_slashes` + `UNESCAPE_AND_REDIRECT`), routes naming clusters that do
//! not exist (503 `NC`), the health-check filter (503 while failing), the compressor filter
//! (gzip, brotli, zstd by `Accept-Encoding`), EDS clusters before their endpoints arrive and RDS
//! listeners before their routes do.

use std::process::Command;

use crate::support;
use crate::support::upstreams::fetch;
use crate::support::Gateway;

const ARGS: &[&str] = &["--concurrency", "1"];

/// A TLS listener on `{{PORT}}` with `hcm_extra`, `filters` before the router, `routes`, and
/// `clusters` (may be empty).
fn config(hcm_extra: &str, filters: &str, routes: &str, clusters: &str) -> String {
    format!(
        r#"
static_resources:
  listeners:
  - name: main
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {{{{PORT}}}} }} }}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            alpn_protocols: [h2, http/1.1]
            tls_certificates:
            - certificate_chain: {{ filename: {{{{CERTS}}}}/rsa2048.cert.pem }}
              private_key: {{ filename: {{{{CERTS}}}}/rsa2048.key.pem }}
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress_http
{hcm_extra}
          route_config:
            name: local_route
            validate_clusters: false
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
{routes}
          http_filters:
{filters}
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters: [{clusters}]
admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: {{{{ADMIN}}}} }} }}
"#
    )
}

fn direct(matcher: &str, status: u16) -> String {
    format!(
        "              - match: {matcher}\n                direct_response: {{ status: {status}, body: {{ inline_string: \"r{status}\" }} }}\n"
    )
}

#[test]
fn header_matchers_case_and_path_normalization() {
    let _lock = support::shared();
    let routes = [
        direct("{ prefix: /m, headers: [{ name: ':method', string_match: { exact: POST } }] }", 201),
        direct("{ prefix: /m }", 200),
        direct("{ path: /CaSe, case_sensitive: false }", 202),
        direct("{ prefix: /x, headers: [{ name: x-tenant, present_match: false }] }", 203),
        direct("{ prefix: /x, headers: [{ name: x-tenant, string_match: { prefix: ab, ignore_case: true } }, { name: x-tenant, string_match: { safe_regex: { regex: '.*z' } }, invert_match: true }] }", 204),
        direct("{ prefix: /norm/a/c }", 205),
        "              - match: { prefix: /ghost }\n                route: { cluster: not-there }\n".to_string(),
    ]
    .concat();
    let hcm = "          normalize_path: true\n          merge_slashes: true\n          path_with_escaped_slashes_action: UNESCAPE_AND_REDIRECT";
    let gw = Gateway::start(&config(hcm, "", &routes, ""), ARGS);
    let status = |args: &[&str], path: &str| {
        let mut all = vec!["--http1.1", "--path-as-is"];
        all.extend_from_slice(args);
        fetch(&all, &gw.url(path))
    };
    assert_eq!(
        status(&["-X", "POST"], "/m").status,
        201,
        "{}",
        gw.log_text()
    );
    assert_eq!(status(&[], "/m").status, 200);
    assert_eq!(status(&[], "/cAsE").status, 202);
    assert_eq!(status(&[], "/x").status, 203, "header absent");
    assert_eq!(status(&["-H", "x-tenant: ABc"], "/x").status, 204);
    assert_eq!(
        status(&["-H", "x-tenant: abz"], "/x").status,
        404,
        "inverted regex"
    );
    assert_eq!(status(&["-H", "x-tenant: q"], "/x").status, 404);
    // Envoy Gateway's normalization, before routing.
    assert_eq!(status(&[], "/norm/a/b/../c").status, 205);
    assert_eq!(status(&[], "//norm//a/./c").status, 205);
    assert_eq!(status(&[], "/norm/%61/c").status, 205);
    let r = status(&[], "/norm/a%2Fc?q=1");
    assert_eq!(r.status, 307, "{r:?}");
    assert_eq!(r.header("location"), Some("/norm/a/c?q=1"));
    assert_eq!(
        gw.counter("http.ingress_http.downstream_rq_redirected_with_normalized_path"),
        1
    );
    // A route to a cluster that does not exist: 503 NC.
    let r = status(&["--http2"], "/ghost");
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(gw.counter("http.ingress_http.no_cluster"), 1);
}

fn compressor(name: &str, lib: &str, extra: &str) -> String {
    format!(
        "          - name: envoy.filters.http.compressor.{name}\n            typed_config:\n              \
         \"@type\": type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor\n              \
         compressor_library:\n                name: {name}\n                typed_config: {{ \"@type\": \
         type.googleapis.com/envoy.extensions.compression.{name}.compressor.v3.{lib} }}\n{extra}"
    )
}

/// curl's raw response body for `path` with `Accept-Encoding: encoding`, and its headers.
fn raw(gw: &Gateway, path: &str, encoding: &str) -> (Vec<u8>, String) {
    let dir = gw.dir.path();
    let headers = dir.join("headers.txt");
    let body = dir.join("body.bin");
    let ca = support::cert("rsa2048.cert.pem");
    let out = support::curl(&[
        "-s",
        "--cacert",
        &ca,
        "-H",
        &format!("Accept-Encoding: {encoding}"),
        "-D",
        headers.to_str().unwrap_or_default(),
        "-o",
        body.to_str().unwrap_or_default(),
        &gw.url(path),
    ]);
    assert!(out.status.success(), "{out:?}");
    (
        std::fs::read(&body).unwrap_or_default(),
        std::fs::read_to_string(&headers)
            .unwrap_or_default()
            .to_ascii_lowercase(),
    )
}

/// `data` through a decoder command (`gzip -dc`, `zstd -dc`, python's brotli...).
fn decode(cmd: &[&str], data: &[u8]) -> Option<Vec<u8>> {
    use std::io::Write;
    let mut child = Command::new(cmd[0])
        .args(&cmd[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(data).ok()?;
    let out = child.wait_with_output().ok()?;
    out.status.success().then_some(out.stdout)
}

#[test]
fn health_check_and_compression() {
    let _lock = support::shared();
    let body = "quickshake compresses this line. ".repeat(64);
    let routes = format!(
        "              - match: {{ prefix: /big }}\n                direct_response: {{ status: 200, body: {{ inline_string: \"{body}\" }} }}\n{}",
        "              - match: { prefix: /small }\n                direct_response: { status: 200, body: { inline_string: tiny } }\n"
    );
    let filters = [
        "          - name: envoy.filters.http.health_check\n            typed_config:\n              \
         \"@type\": type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck\n              \
         pass_through_mode: false\n              headers: [{ name: ':path', string_match: { exact: /ready } }]\n"
            .to_string(),
        compressor("gzip", "Gzip", ""),
        compressor("brotli", "Brotli", ""),
        compressor("zstd", "Zstd", ""),
    ]
    .concat();
    let gw = Gateway::start(&config("", &filters, &routes, ""), ARGS);

    // The ready endpoint, as Envoy Gateway's readiness probe uses it.
    let r = fetch(&["--http1.1"], &gw.url("/ready"));
    assert_eq!(r.status, 200, "{r:?}\n{}", gw.log_text());
    assert_eq!(gw.admin_post("/healthcheck/fail").0, 200);
    let r = fetch(&["--http1.1"], &gw.url("/ready"));
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(
        fetch(&[], &gw.url("/big")).status,
        200,
        "only health checks fail"
    );
    gw.admin_post("/healthcheck/ok");
    assert_eq!(fetch(&[], &gw.url("/ready")).status, 200);

    // curl --compressed decodes what it asked for.
    let r = fetch(&["--compressed"], &gw.url("/big"));
    assert_eq!(r.status, 200);
    assert!(r.header("content-encoding").is_some(), "{r:?}");
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    assert_eq!(r.body, body);
    for (coding, decoder) in [
        ("gzip", vec!["gzip", "-dc"]),
        ("br", vec!["python3", "-c", "import sys,brotli; sys.stdout.buffer.write(brotli.decompress(sys.stdin.buffer.read()))"]),
        ("zstd", vec!["zstd", "-dc"]),
    ] {
        let r = fetch(&["--compressed", "-H", &format!("Accept-Encoding: {coding}")], &gw.url("/big"));
        assert_eq!(r.header("content-encoding"), Some(coding), "{r:?}");
        assert_eq!(r.body, body, "{coding} decoded by curl");
        let (bytes, headers) = raw(&gw, "/big", coding);
        assert!(headers.contains(&format!("content-encoding: {coding}")), "{headers}");
        assert!(bytes.len() < body.len() / 4, "{coding}: {} bytes", bytes.len());
        if let Some(plain) = decode(&decoder, &bytes) {
            assert_eq!(plain, body.as_bytes(), "{coding} through {decoder:?}");
        }
    }
    // The client's preference picks among the compressors; ties go to the first filter.
    let (_, h) = raw(&gw, "/big", "gzip;q=0.5, zstd;q=0.9, br;q=0.1");
    assert!(h.contains("content-encoding: zstd"), "{h}");
    let (_, h) = raw(&gw, "/big", "*");
    assert!(h.contains("content-encoding: gzip"), "{h}");
    // Not compressed: no acceptable encoding (Vary still said), below min_content_length.
    let (bytes, h) = raw(&gw, "/big", "identity");
    assert!(!h.contains("content-encoding"), "{h}");
    assert!(h.contains("vary: accept-encoding"), "{h}");
    assert_eq!(bytes, body.as_bytes());
    let (bytes, h) = raw(&gw, "/small", "gzip");
    assert!(!h.contains("content-encoding"), "{h}");
    assert_eq!(bytes, b"tiny");
}

#[test]
fn eds_cluster_and_rds_listener_start_empty() {
    let _lock = support::shared();
    let cluster = "{ name: svc, type: EDS, connect_timeout: 1s, eds_cluster_config: { service_name: svc, eds_config: { ads: {}, resource_api_version: V3 } } }";
    let routes = "              - match: { prefix: / }\n                route: { cluster: svc }\n";
    let mut cfg = config("", "", routes, cluster);
    // A second listener whose routes come by RDS.
    cfg = cfg.replace(
        "  clusters:",
        r#"  - name: rds
    address: { socket_address: { address: 127.0.0.1, port_value: {{PORT2}} } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: rds_http
          rds: { route_config_name: r1, config_source: { ads: {}, resource_api_version: V3 } }
          http_filters: [{ name: envoy.filters.http.router }]
  clusters:"#,
    );
    let gw = Gateway::start(&cfg, ARGS);
    let r = fetch(&["--http1.1"], &gw.url("/"));
    assert_eq!(r.status, 503, "no endpoints yet: {r:?}\n{}", gw.log_text());
    assert_eq!(r.body, "no healthy upstream");
    let (code, _) = support::http_get(gw.port2, "/").expect("rds listener answers");
    assert_eq!(code, 404, "no routes yet");
}
