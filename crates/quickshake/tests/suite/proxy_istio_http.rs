//! The HTTP filters and fields istiod (and Envoy Gateway) emit by default, with Envoy's effect
//! seen by curl and the upstream: the `cors` filter with per-route `CorsPolicy` (preflights,
//! allowed and refused origins, a route that disables it), the `fault` filter with per-route
//! aborts (HTTP, gRPC, header-controlled) and delays, `grpc_stats` (a call's outcome),
//! `forward_client_cert_details: SANITIZE_SET` with every `set_current_client_cert_details`
//! field, `request_id_extension`, `http_protocol_options` (`default_host_for_http_10`), the
//! virtual host's attempt counts and `require_tls`, `max_grpc_timeout` and the gRPC `retry_on`
//! conditions. The same checks run against quickshake and against stock Envoy 1.39.3, the
//! reference.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::envoy::Envoy;
use crate::support::upstreams::{
    cluster, fetch, proxy_config, HttpOpts, Reply, Upstream, HTTP2_UPSTREAM,
};
use crate::support::{self, cert, free_port, render, Gateway};

const ROUTER: &str = "          http_filters:\n          - name: envoy.filters.http.router\n";

/// The filters before the router, as istiod writes them.
const FILTERS: &str = r#"          http_filters:
          - name: envoy.filters.http.grpc_stats
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.grpc_stats.v3.FilterConfig
              emit_filter_state: true
              stats_for_all_methods: false
          - name: envoy.filters.http.fault
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault
          - name: envoy.filters.http.cors
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors
          - name: envoy.filters.http.router
"#;

const HCM: &str = r#"          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: "{{DIR}}/access.log"
              log_format: { text_format_source: { inline_string: "%REQ(:PATH)% %UPSTREAM_CLUSTER_RAW% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS%\n" } }
          use_remote_address: true
          forward_client_cert_details: SANITIZE_SET
          set_current_client_cert_details: { subject: true, cert: true, chain: true, uri: true, dns: true }
          request_id_extension:
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig
              use_request_id_for_trace_sampling: true
          http_protocol_options: { accept_http_10: true, default_host_for_http_10: gw.default }"#;

fn fault(body: &str) -> String {
    format!(
        "                typed_per_filter_config:\n                  envoy.filters.http.fault:\n                    \"@type\": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault\n{body}"
    )
}

fn route(prefix: &str, per_filter: &str, cluster: &str, extra: &str) -> String {
    format!(
        "              - match: {{ prefix: \"{prefix}\" }}\n{per_filter}                route:\n                  cluster: {cluster}\n{extra}"
    )
}

/// The upstreams: `up` (echo), `flaky` (503 once), `unavailable` (always `grpc-status: 14`),
/// `slow` (answers after 500 ms), `grpc` (a unary gRPC echo over h2c).
struct Ups {
    up: Upstream,
    flaky: Upstream,
    unavailable: Upstream,
    slow: Upstream,
    grpc: Upstream,
}

impl Ups {
    fn new() -> Ups {
        Ups {
            up: Upstream::http(HttpOpts::default()),
            flaky: Upstream::http(HttpOpts::statuses(&[503])),
            unavailable: Upstream::http(HttpOpts {
                headers: vec![("grpc-status", "14")],
                ..Default::default()
            }),
            slow: Upstream::http(HttpOpts {
                delay: Duration::from_millis(500),
                ..Default::default()
            }),
            grpc: Upstream::grpc(),
        }
    }
}

fn config(u: &Ups) -> String {
    let routes = [
        route(
            "/cors-off",
            "                typed_per_filter_config:\n                  envoy.filters.http.cors:\n                    \"@type\": type.googleapis.com/envoy.config.route.v3.FilterConfig\n                    disabled: true\n",
            "up",
            "",
        ),
        route(
            "/cors",
            "                typed_per_filter_config:\n                  envoy.filters.http.cors:\n                    \"@type\": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy\n                    allow_methods: \"GET,PUT\"\n",
            "up",
            "",
        ),
        route(
            "/abort",
            &fault("                    abort: { http_status: 418, percentage: { numerator: 100 } }\n"),
            "up",
            "",
        ),
        route(
            "/delay",
            &fault("                    delay: { fixed_delay: 0.3s, percentage: { numerator: 100 } }\n"),
            "up",
            "",
        ),
        route(
            "/header-fault",
            &fault("                    abort: { header_abort: {}, percentage: { numerator: 100 } }\n"),
            "up",
            "",
        ),
        route(
            "/grpc-abort",
            &fault("                    abort: { grpc_status: 14, percentage: { numerator: 100 } }\n"),
            "up",
            "",
        ),
        route(
            "/retry",
            "",
            "flaky",
            "                  retry_policy: { retry_on: 5xx, num_retries: 1 }\n",
        ),
        route(
            "/grpc-retry",
            "",
            "unavailable",
            "                  retry_policy: { retry_on: \"cancelled,unavailable\", num_retries: 2 }\n",
        ),
        route(
            "/grpc-timeout",
            "",
            "slow",
            "                  timeout: 0.1s\n                  max_grpc_timeout: 5s\n",
        ),
        route("/helloworld.Greeter/", "", "grpc", ""),
        route("/", "", "up", ""),
    ]
    .join("");
    let vhost = r#"              include_request_attempt_count: true
              include_attempt_count_in_response: true
              typed_per_filter_config:
                envoy.filters.http.cors:
                  "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
                  allow_origin_string_match: [{ exact: "https://a.example" }, { suffix: ".b.example" }]
                  allow_headers: "*"
                  expose_headers: x-exposed
                  max_age: "600"
                  allow_credentials: true
              routes:
"#;
    // A plaintext listener whose virtual host requires TLS.
    let plain = concat!(
        "  - name: plain\n",
        "    address: { socket_address: { address: 127.0.0.1, port_value: {{PORT2}} } }\n",
        "    filter_chains: [{ filters: [{ name: envoy.filters.network.http_connection_manager, typed_config: {\n",
        "      \"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager,\n",
        "      stat_prefix: plain,\n",
        "      http_filters: [{ name: envoy.filters.http.router, typed_config: { \"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router } }],\n",
        "      route_config: { virtual_hosts: [{ name: tls_only, domains: [\"*\"], require_tls: ALL,\n",
        "        routes: [{ match: { prefix: / }, route: { cluster: up } }] }] } } }] }]\n",
    );
    let clusters = cluster("up", "STATIC", "127.0.0.1", u.up.port, "")
        + &cluster("flaky", "STATIC", "127.0.0.1", u.flaky.port, "")
        + &cluster("unavailable", "STATIC", "127.0.0.1", u.unavailable.port, "")
        + &cluster("slow", "STATIC", "127.0.0.1", u.slow.port, "")
        + &cluster("grpc", "STATIC", "127.0.0.1", u.grpc.port, HTTP2_UPSTREAM);
    proxy_config("", HCM, &routes, plain, &clusters)
        .replacen("              routes:\n", vhost, 1)
        .replacen(ROUTER, FILTERS, 1)
        .replacen(
            "            alpn_protocols: [h2, http/1.1]\n",
            "            alpn_protocols: [h2, http/1.1]\n            validation_context: { trusted_ca: { filename: {{CERTS}}/client-ca.cert.pem } }\n",
            1,
        )
}

fn openssl(args: &[&str]) -> String {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .expect("run openssl");
    assert!(out.status.success(), "openssl {args:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The XFCC element Envoy builds for `client.cert.pem` (a v1 certificate: no SAN, so `URI=`
/// and no `DNS`) with every detail set, and no `By` (our certificate has no URI SAN).
fn expected_xfcc() -> String {
    let file = cert("client.cert.pem");
    let der = Command::new("openssl")
        .args(["x509", "-in", &file, "-outform", "DER"])
        .output()
        .expect("openssl x509")
        .stdout;
    let hash: String = boring::hash::hash(boring::hash::MessageDigest::sha256(), &der)
        .expect("sha256")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let pem = openssl(&["x509", "-in", &file]);
    let enc = pem
        .replace('\n', "%0A")
        .replace(' ', "%20")
        .replace('+', "%2B")
        .replace('/', "%2F")
        .replace('=', "%3D");
    let subject = openssl(&[
        "x509", "-in", &file, "-noout", "-subject", "-nameopt", "RFC2253",
    ]);
    let subject = subject.trim().trim_start_matches("subject=");
    format!("Hash={hash};Cert=\"{enc}\";Chain=\"{enc}\";Subject=\"{subject}\";URI=")
}

/// An empty gRPC request over HTTP/2 (`args` added).
fn grpc_fetch(args: &[&str], url: &str) -> Reply {
    let mut all = vec![
        "--http2",
        "-H",
        "content-type: application/grpc",
        "--data-binary",
        "",
    ];
    all.extend_from_slice(args);
    fetch(&all, url)
}

/// A CORS preflight from `origin` for `PUT` (`args` added).
fn preflight(origin: &str, args: &[&str], url: &str) -> Reply {
    let o = format!("Origin: {origin}");
    let mut all = vec![
        "--http1.1",
        "-X",
        "OPTIONS",
        "-H",
        o.as_str(),
        "-H",
        "Access-Control-Request-Method: PUT",
    ];
    all.extend_from_slice(args);
    fetch(&all, url)
}

fn check(
    who: &str,
    dir: &std::path::Path,
    port: u16,
    port2: u16,
    u: &Ups,
    stat: &dyn Fn(&str) -> u64,
    log: &dyn Fn() -> String,
) {
    let url = |path: &str| format!("https://localhost:{port}{path}");
    let ctx = |what: &str, r: &Reply| format!("{who}, {what}: {r:?}\n{}", log());
    let allow_origin = |r: &Reply| r.header("access-control-allow-origin").map(str::to_owned);

    // CORS: a preflight from an allowed origin is answered here.
    let before = u.up.state.request_count();
    let r = preflight(
        "https://a.example",
        &["-H", "Access-Control-Request-Headers: x-a,x-b"],
        &url("/cors"),
    );
    assert_eq!(r.status, 200, "{}", ctx("preflight", &r));
    assert_eq!(
        u.up.state.request_count(),
        before,
        "{}",
        ctx("preflight", &r)
    );
    for (h, want) in [
        ("access-control-allow-origin", "https://a.example"),
        ("access-control-allow-credentials", "true"),
        ("access-control-allow-methods", "GET,PUT"),
        ("access-control-allow-headers", "x-a,x-b"),
        ("access-control-max-age", "600"),
        ("access-control-expose-headers", "x-exposed"),
    ] {
        assert_eq!(r.header(h), Some(want), "{}", ctx(h, &r));
    }
    // A simple request from an allowed origin goes upstream and gets the headers back.
    let r = fetch(
        &["--http2", "-H", "Origin: https://x.b.example"],
        &url("/cors"),
    );
    assert_eq!(r.status, 200, "{}", ctx("simple", &r));
    assert_eq!(
        allow_origin(&r).as_deref(),
        Some("https://x.b.example"),
        "{}",
        ctx("simple", &r)
    );
    assert_eq!(r.header("access-control-expose-headers"), Some("x-exposed"));
    assert_eq!(r.header("access-control-allow-credentials"), Some("true"));
    // Origins not allowed, no origin, a route that turns CORS off: no headers; a preflight
    // from an origin not allowed goes upstream.
    for (path, origin) in [
        ("/cors", "https://evil.example"),
        ("/cors", ""),
        ("/cors-off", "https://a.example"),
    ] {
        let mut args = vec!["--http1.1"];
        let o = format!("Origin: {origin}");
        if !origin.is_empty() {
            args.extend(["-H", o.as_str()]);
        }
        let r = fetch(&args, &url(path));
        assert_eq!(r.status, 200, "{}", ctx(path, &r));
        assert_eq!(
            allow_origin(&r),
            None,
            "{}",
            ctx(&format!("{path} {origin}"), &r)
        );
    }
    let before = u.up.state.request_count();
    let r = preflight("https://evil.example", &[], &url("/cors"));
    assert_eq!(r.status, 200, "{}", ctx("refused preflight", &r));
    assert_eq!(
        u.up.state.request_count(),
        before + 1,
        "{}",
        ctx("refused preflight", &r)
    );
    assert_eq!(allow_origin(&r), None);
    assert_eq!(stat("http.ingress_http.cors.origin_valid"), 2, "{who}");
    assert_eq!(stat("http.ingress_http.cors.origin_invalid"), 2, "{who}");

    // Faults.
    let r = fetch(&["--http1.1"], &url("/abort"));
    assert_eq!(
        (r.status, r.body.as_str()),
        (418, "fault filter abort"),
        "{}",
        ctx("abort", &r)
    );
    let t = Instant::now();
    let r = fetch(&["--http1.1"], &url("/delay"));
    assert_eq!(r.status, 200, "{}", ctx("delay", &r));
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{who}: delayed {:?}",
        t.elapsed()
    );
    let r = fetch(&["--http1.1"], &url("/header-fault"));
    assert_eq!(r.status, 200, "{}", ctx("no fault header", &r));
    let r = fetch(
        &["--http1.1", "-H", "x-envoy-fault-abort-request: 429"],
        &url("/header-fault"),
    );
    assert_eq!(r.status, 429, "{}", ctx("fault header", &r));
    let r = grpc_fetch(&[], &url("/grpc-abort"));
    assert_eq!(r.status, 200, "{}", ctx("grpc abort", &r));
    assert_eq!(
        r.header("grpc-status"),
        Some("14"),
        "{}",
        ctx("grpc abort", &r)
    );
    assert_eq!(stat("http.ingress_http.fault.aborts_injected"), 3, "{who}");
    assert_eq!(stat("http.ingress_http.fault.delays_injected"), 1, "{who}");

    // Attempt counts, on the upstream request and on the response.
    let r = fetch(&["--http1.1"], &url("/retry"));
    assert_eq!(r.status, 200, "{}", ctx("retry", &r));
    assert_eq!(
        r.header("x-envoy-attempt-count"),
        Some("2"),
        "{}",
        ctx("retry", &r)
    );
    assert_eq!(
        u.flaky.state.last().header("x-envoy-attempt-count"),
        Some("2"),
        "{who}"
    );
    // gRPC retry conditions: `grpc-status: 14` in the response headers is `unavailable`.
    let before = u.unavailable.state.request_count();
    let r = grpc_fetch(&[], &url("/grpc-retry"));
    assert_eq!(
        r.header("x-envoy-attempt-count"),
        Some("3"),
        "{}",
        ctx("grpc retry", &r)
    );
    assert_eq!(u.unavailable.state.request_count() - before, 3, "{who}");
    // grpc_stats counts nothing there: `grpc-status` in headers that do not end the response.
    assert_eq!(stat("cluster.unavailable.grpc.total"), 0, "{who}");
    // grpc_stats (`stats_for_all_methods: false`): unary calls to a gRPC upstream, counted in
    // the cluster's `grpc.` namespace with their messages.
    let replies =
        crate::proxy_grpc_ws::grpc_calls(port, "/helloworld.Greeter/SayHello", &[b"a", b"b"]);
    assert_eq!(replies.len(), 2, "{who}");
    for (name, want) in [
        ("total", 2),
        ("success", 2),
        ("failure", 0),
        ("0", 2),
        ("request_message_count", 2),
        ("response_message_count", 2),
    ] {
        assert_eq!(
            stat(&format!("cluster.grpc.grpc.{name}")),
            want,
            "{who}: grpc.{name}\n{}",
            log()
        );
    }

    // max_grpc_timeout: a gRPC request's grpc-timeout replaces the route's 0.1 s.
    let grpc = |timeout: &str| {
        let h = format!("grpc-timeout: {timeout}");
        grpc_fetch(&["-H", &h], &url("/grpc-timeout"))
    };
    let r = grpc("3S");
    assert_eq!(r.status, 200, "{}", ctx("grpc-timeout 3S", &r));
    assert_eq!(
        r.header("grpc-status"),
        None,
        "{}",
        ctx("grpc-timeout 3S", &r)
    );
    let t = Instant::now();
    let r = grpc("100m");
    // Envoy answers a gRPC request's timeout as gRPC (200, `grpc-status: 14`), quickshake 504.
    assert!(
        r.status == 504 || (r.status == 200 && r.header("grpc-status") == Some("14")),
        "{}",
        ctx("grpc-timeout 100m", &r)
    );
    assert!(
        t.elapsed() < Duration::from_millis(450),
        "{who}: {:?}",
        t.elapsed()
    );
    let r = fetch(&["--http1.1"], &url("/grpc-timeout"));
    assert_eq!(r.status, 504, "{}", ctx("not gRPC", &r));

    // x-forwarded-client-cert: this hop's element with a client certificate, removed without.
    let (c, k) = (cert("client.cert.pem"), cert("client.key.pem"));
    let r = fetch(
        &[
            "--http1.1",
            "--cert",
            &c,
            "--key",
            &k,
            "-H",
            "x-forwarded-client-cert: By=forged",
        ],
        &url("/xfcc"),
    );
    assert_eq!(r.status, 200, "{}", ctx("xfcc", &r));
    let seen = u.up.state.last();
    assert_eq!(
        seen.header("x-forwarded-client-cert"),
        Some(expected_xfcc().as_str()),
        "{who}"
    );
    let r = fetch(
        &["--http1.1", "-H", "x-forwarded-client-cert: By=forged"],
        &url("/xfcc"),
    );
    assert_eq!(r.status, 200, "{}", ctx("no client cert", &r));
    assert_eq!(
        u.up.state.last().header("x-forwarded-client-cert"),
        None,
        "{who}"
    );

    // An edge request (`use_remote_address`): the client's internal-only `x-envoy-*` headers
    // are removed and `x-envoy-external-address` is the client's address.
    let r = fetch(
        &[
            "--http1.1",
            "-H",
            "x-envoy-retry-on: 5xx",
            "-H",
            "x-envoy-downstream-service-node: n",
            "-H",
            "x-envoy-external-address: 192.0.2.66",
        ],
        &url("/edge"),
    );
    assert_eq!(r.status, 200, "{}", ctx("edge", &r));
    let seen = u.up.state.last();
    assert_eq!(seen.header("x-envoy-retry-on"), None, "{who}: {seen:?}");
    assert_eq!(
        seen.header("x-envoy-downstream-service-node"),
        None,
        "{who}: {seen:?}"
    );
    assert_eq!(
        seen.header("x-envoy-external-address"),
        Some("127.0.0.1"),
        "{who}: {seen:?}"
    );

    // HTTP/1.0 without Host: default_host_for_http_10.
    let r = fetch(&["--http1.0", "-H", "Host:"], &url("/http10"));
    assert_eq!(r.status, 200, "{}", ctx("http/1.0", &r));
    assert_eq!(
        u.up.state.last().header("host"),
        Some("gw.default"),
        "{who}"
    );

    // require_tls: ALL on the plaintext listener.
    let out = support::curl(&[
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{redirect_url}",
        &format!("http://localhost:{port2}/x?y=1"),
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("301 https://localhost:{port2}/x?y=1"),
        "{who}\n{}",
        log()
    );

    // The access log: the route's cluster (`%UPSTREAM_CLUSTER_RAW%`) with the fault flags and
    // the filters' response code details.
    let want = [
        "/cors up - cors_response",
        "/abort up FI fault_filter_abort",
        "/delay up DI via_upstream",
        "/grpc-timeout slow UT response_timeout",
    ];
    let path = dir.join("access.log");
    support::eventually("access log lines", || {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        want.iter().all(|w| text.lines().any(|l| l == *w))
    });
}

#[test]
fn istio_http_defaults_as_quickshake() {
    let _lock = support::shared();
    let u = Ups::new();
    let gw = Gateway::start(&config(&u), &["--concurrency", "1"]);
    check(
        "quickshake",
        gw.dir.path(),
        gw.port,
        gw.port2,
        &u,
        &|n| gw.counter(n),
        &|| gw.log_text(),
    );
}

#[test]
fn istio_http_defaults_as_envoy() {
    let _lock = support::shared();
    let u = Ups::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, port2, admin) = (free_port(), free_port(), free_port());
    let yaml = render(&config(&u), port, port2, admin, dir.path());
    let envoy = Envoy::start_with_args(&yaml, admin, &["--file-flush-interval-msec", "50"]);
    let stat = |n: &str| {
        envoy
            .stats()
            .get(n)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    check("envoy", dir.path(), port, port2, &u, &stat, &|| {
        envoy.log_text()
    });
}
