//! HTTP proxying to real upstream servers: static and DNS clusters, path rewrites, Envoy's
//! forwarding headers, HTTP/2 upstreams, connection pooling, Envoy's error responses (503 when
//! the upstream is down, 504 on a route timeout), retries, circuit breakers, redirects and
//! upstream TLS (SNI and certificate verification).

use std::time::{Duration, Instant};

use crate::support;
use crate::support::upstreams::{
    cluster, cluster_of, fetch, proxy_config, route, HttpOpts, Upstream, HTTP2_UPSTREAM,
};
use crate::support::{eventually, free_port, Gateway};

const ARGS: &[&str] = &["--concurrency", "1"];

/// One route `/` → `name`, one cluster `name` (STATIC on 127.0.0.1:`port`).
fn simple(name: &str, port: u16, route_extra: &str, cluster_extra: &str) -> String {
    proxy_config(
        "",
        "",
        &route("/", name, route_extra),
        "",
        &cluster(name, "STATIC", "127.0.0.1", port, cluster_extra),
    )
}

fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && groups
            .iter()
            .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
}

#[test]
fn static_cluster_rewrites_prefix_and_adds_forwarding_headers() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let cfg = proxy_config(
        "",
        "          use_remote_address: true",
        &route("/api/", "backend", "                  prefix_rewrite: /v1/"),
        "",
        &cluster("backend", "STATIC", "127.0.0.1", up.port, ""),
    );
    let gw = Gateway::start(&cfg, ARGS);

    let r = fetch(&["--http1.1"], &gw.url("/api/items?x=1"));
    assert_eq!(r.status, 200, "{r:?}\n{}", gw.log_text());
    let seen = up.state.last();
    assert_eq!(seen.method, "GET");
    assert_eq!(seen.path, "/v1/items?x=1", "prefix_rewrite");
    assert_eq!(seen.header("x-forwarded-proto"), Some("https"));
    assert_eq!(seen.header("x-forwarded-for"), Some("127.0.0.1"));
    let rid = seen.header("x-request-id").expect("x-request-id generated");
    assert!(is_uuid(rid), "x-request-id {rid:?} is not a UUID");
    assert_eq!(
        seen.header("host"),
        Some(format!("localhost:{}", gw.port).as_str()),
        "the Host header is passed on"
    );
    // The echoed JSON carries the same facts.
    assert_eq!(r.json()["path"], "/v1/items?x=1");
    let st = r
        .header("x-envoy-upstream-service-time")
        .expect("x-envoy-upstream-service-time");
    assert!(st.parse::<u64>().is_ok(), "service time {st:?}");
    assert_eq!(r.header("x-upstream-n"), Some("0"), "upstream headers pass");

    // An incoming x-forwarded-for is appended to; an incoming x-request-id is kept.
    let r = fetch(
        &[
            "--http1.1",
            "-H",
            "x-forwarded-for: 198.51.100.9",
            "-H",
            "x-request-id: my-request-1",
        ],
        &gw.url("/api/"),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let seen = up.state.last();
    assert_eq!(seen.path, "/v1/");
    assert_eq!(
        seen.header("x-forwarded-for"),
        Some("198.51.100.9, 127.0.0.1")
    );
    assert_eq!(seen.header("x-request-id"), Some("my-request-1"));

    // A path outside the route prefix has no route.
    let r = fetch(&["--http1.1"], &gw.url("/other"));
    assert_eq!(r.status, 404, "{r:?}");
    assert_eq!(up.state.request_count(), 2);
    assert!(gw.counter("cluster.backend.upstream_rq_200") >= 2);
    assert!(gw.counter("cluster.backend.upstream_rq_2xx") >= 2);
}

#[test]
fn without_use_remote_address_xff_is_not_appended() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let gw = Gateway::start(&simple("backend", up.port, "", ""), ARGS);
    let r = fetch(&["--http1.1"], &gw.url("/a"));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(up.state.last().header("x-forwarded-for"), None);
    assert_eq!(up.state.last().header("x-forwarded-proto"), Some("https"));
}

#[test]
fn strict_and_logical_dns_clusters_resolve_localhost() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let routes = [
        route("/strict", "strict", ""),
        route("/logical", "logical", ""),
    ]
    .join("\n");
    let clusters = [
        cluster(
            "strict",
            "STRICT_DNS",
            "localhost",
            up.port,
            "    dns_refresh_rate: 1s",
        ),
        cluster("logical", "LOGICAL_DNS", "localhost", up.port, ""),
    ]
    .join("");
    let gw = Gateway::start(&proxy_config("", "", &routes, "", &clusters), ARGS);
    for path in ["/strict", "/logical", "/strict/again", "/logical/again"] {
        let r = fetch(&["--http1.1"], &gw.url(path));
        assert_eq!(r.status, 200, "{path}: {r:?}\n{}", gw.log_text());
        assert_eq!(r.json()["path"], path);
    }
    assert_eq!(up.state.request_count(), 4);
    for c in ["strict", "logical"] {
        assert_eq!(
            gw.counter(&format!("cluster.{c}.upstream_rq_200")),
            2,
            "{c}"
        );
        assert!(
            gw.counter(&format!("cluster.{c}.membership_total")) >= 1,
            "{c} has members"
        );
    }
}

#[test]
fn http2_upstream_with_http2_downstream() {
    let _lock = support::shared();
    let up = Upstream::h2c(HttpOpts::default());
    let gw = Gateway::start(&simple("h2", up.port, "", HTTP2_UPSTREAM), ARGS);
    for i in 0..3 {
        let r = fetch(&["--http2"], &gw.url(&format!("/h2/{i}")));
        assert_eq!(r.status, 200, "{r:?}\n{}", gw.log_text());
        assert!(r.status_line.starts_with("HTTP/2"), "{}", r.status_line);
        let seen = up.state.last();
        assert_eq!(seen.version, "HTTP/2.0", "upstream spoke HTTP/2");
        assert_eq!(seen.path, format!("/h2/{i}"));
        assert_eq!(seen.header("x-forwarded-proto"), Some("https"));
    }
    // HTTP/1.1 downstream to the same HTTP/2 upstream.
    let r = fetch(&["--http1.1"], &gw.url("/from-h1"));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(up.state.last().version, "HTTP/2.0");
    assert!(gw.counter("cluster.h2.upstream_cx_http2_total") >= 1);
    // One worker shares one HTTP/2 connection to the endpoint.
    assert_eq!(up.state.connection_count(), 1, "HTTP/2 connection reused");
}

#[test]
fn http1_upstream_connections_are_kept_alive_and_pooled() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let gw = Gateway::start(&simple("pooled", up.port, "", ""), ARGS);
    for i in 0..10 {
        // A new downstream connection each time (a new curl).
        let r = fetch(&["--http1.1"], &gw.url(&format!("/k/{i}")));
        assert_eq!(r.status, 200, "{r:?}");
    }
    assert_eq!(up.state.request_count(), 10);
    let cx = gw.counter("cluster.pooled.upstream_cx_total");
    assert!(
        (1..=2).contains(&cx),
        "10 sequential requests used {cx} upstream connections"
    );
    assert!(up.state.connection_count() <= 2);
    assert_eq!(gw.counter("cluster.pooled.upstream_rq_total"), 10);
}

#[test]
fn upstream_down_is_503_with_a_body() {
    let _lock = support::shared();
    let closed = free_port();
    let gw = Gateway::start(&simple("down", closed, "", ""), ARGS);
    let started = Instant::now();
    let r = fetch(&["--http1.1"], &gw.url("/x"));
    assert_eq!(r.status, 503, "{r:?}");
    assert!(
        r.body.contains("upstream connect error") || r.body.contains("no healthy upstream"),
        "503 body: {:?}",
        r.body
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    eventually("upstream_cx_connect_fail counted", || {
        gw.counter("cluster.down.upstream_cx_connect_fail") >= 1
    });
    assert!(gw.counter("http.ingress_http.downstream_rq_5xx") >= 1);
    // The gateway is still fine.
    let r = fetch(&["--http2"], &gw.url("/y"));
    assert_eq!(r.status, 503, "{r:?}");
}

#[test]
fn route_timeout_is_504() {
    let _lock = support::exclusive();
    let up = Upstream::http(HttpOpts::delay(Duration::from_secs(1)));
    let gw = Gateway::start(
        &simple("slow", up.port, "                  timeout: 0.2s", ""),
        ARGS,
    );
    let started = Instant::now();
    let r = fetch(&["--http1.1"], &gw.url("/slow"));
    let took = started.elapsed();
    assert_eq!(r.status, 504, "{r:?}");
    assert_eq!(r.body, "upstream request timeout");
    assert!(
        took < Duration::from_millis(900),
        "504 came after {took:?}, the upstream answers after 1 s"
    );
    assert!(
        took >= Duration::from_millis(150),
        "504 came early: {took:?}"
    );
    assert_eq!(gw.counter("cluster.slow.upstream_rq_timeout"), 1);
}

#[test]
fn retries_on_5xx_until_success() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::statuses(&[503, 503]));
    let policy = "                  retry_policy: { retry_on: 5xx, num_retries: 2 }";
    let gw = Gateway::start(&simple("flaky", up.port, policy, ""), ARGS);
    let r = fetch(&["--http1.1", "-X", "POST", "-d", "payload"], &gw.url("/r"));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["n"], 2, "the third try answered");
    assert_eq!(up.state.request_count(), 3);
    // Every try carried the body.
    for s in up.state.seen() {
        assert_eq!(s.body, b"payload", "{s:?}");
        assert_eq!(s.method, "POST");
    }
    assert_eq!(gw.counter("cluster.flaky.upstream_rq_retry"), 2);
}

#[test]
fn retries_exhausted_returns_the_last_503() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::statuses(&[503; 10]));
    let policy = "                  retry_policy: { retry_on: 5xx, num_retries: 1 }";
    let gw = Gateway::start(&simple("broken", up.port, policy, ""), ARGS);
    let started = Instant::now();
    let r = fetch(&["--http1.1"], &gw.url("/r"));
    assert_eq!(r.status, 503, "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(up.state.request_count(), 2, "one try and one retry");
    assert_eq!(gw.counter("cluster.broken.upstream_rq_retry"), 1);
}

#[test]
fn circuit_breaker_max_requests_overflows_with_503() {
    let _lock = support::exclusive();
    let up = Upstream::http(HttpOpts::delay(Duration::from_secs(1)));
    let breakers =
        "    circuit_breakers:\n      thresholds:\n      - { priority: DEFAULT, max_requests: 1 }";
    let gw = Gateway::start(&simple("narrow", up.port, "", breakers), ARGS);
    let url = gw.url("/slow");
    let first = {
        let url = url.clone();
        std::thread::spawn(move || fetch(&["--http1.1"], &url))
    };
    // Let the first request reach the upstream, then send the second while it is in flight.
    eventually("first request in flight", || up.state.request_count() == 1);
    let second = fetch(&["--http1.1"], &url);
    let first = first.join().expect("first request thread");
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(second.status, 503, "{second:?}");
    assert_eq!(
        second.header("x-envoy-overloaded"),
        Some("true"),
        "{second:?}"
    );
    assert_eq!(
        up.state.request_count(),
        1,
        "the overflowing request never left"
    );
    assert!(gw.counter("cluster.narrow.upstream_rq_pending_overflow") >= 1);
    // With the first one done the breaker lets requests through again.
    let third = fetch(&["--http1.1"], &url);
    assert_eq!(third.status, 200, "{third:?}");
}

#[test]
fn plaintext_listener_redirects_to_https() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let plain = r#"  - name: plain
    address: { socket_address: { address: 127.0.0.1, port_value: {{PORT2}} } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: plain_http
          route_config:
            virtual_hosts:
            - name: redirect
              domains: ["*"]
              routes:
              - match: { prefix: / }
                redirect: { https_redirect: true }
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"#;
    let cfg = proxy_config(
        "",
        "",
        &route("/", "backend", ""),
        plain,
        &cluster("backend", "STATIC", "127.0.0.1", up.port, ""),
    );
    let gw = Gateway::start(&cfg, ARGS);
    // As Envoy 1.39.3 builds the Location (Http::Utility::newUri): the Host's port goes only
    // when it is the old scheme's default (`:80` for http); any other port is kept.
    let r = fetch(
        &["-H", "Host: shop.example.com:80"],
        &format!("http://127.0.0.1:{}/cart?item=7", gw.port2),
    );
    assert_eq!(r.status, 301, "{r:?}");
    assert_eq!(
        r.header("location"),
        Some("https://shop.example.com/cart?item=7"),
        "{r:?}"
    );
    let r = fetch(
        &["-H", &format!("Host: shop.example.com:{}", gw.port2)],
        &format!("http://127.0.0.1:{}/cart?item=7", gw.port2),
    );
    assert_eq!(
        r.header("location"),
        Some(format!("https://shop.example.com:{}/cart?item=7", gw.port2).as_str()),
        "{r:?}"
    );
    assert_eq!(
        up.state.request_count(),
        0,
        "redirects never reach the upstream"
    );
    // The TLS listener still proxies.
    assert_eq!(fetch(&["--http1.1"], &gw.url("/")).status, 200);
}

fn tls_cluster(name: &str, port: u16, ca: &str) -> String {
    let tls = format!(
        r#"    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: localhost
        common_tls_context:
          validation_context:
            trusted_ca: {{ filename: {{{{CERTS}}}}/{ca} }}"#
    );
    cluster(name, "STATIC", "127.0.0.1", port, &tls)
}

#[test]
fn upstream_tls_sends_sni_and_verifies_the_server() {
    let _lock = support::shared();
    let up = Upstream::tls_http(HttpOpts::default());
    let cfg = proxy_config(
        "",
        "",
        &route("/", "secure", ""),
        "",
        &tls_cluster("secure", up.port, "rsa2048.cert.pem"),
    );
    let gw = Gateway::start(&cfg, ARGS);
    for _ in 0..2 {
        let r = fetch(&["--http1.1"], &gw.url("/tls"));
        assert_eq!(r.status, 200, "{r:?}\n{}", gw.log_text());
    }
    assert_eq!(up.state.request_count(), 2);
    let snis = up.state.snis();
    assert!(!snis.is_empty());
    assert!(
        snis.iter().all(|s| s.as_deref() == Some("localhost")),
        "SNI seen upstream: {snis:?}"
    );
    assert_eq!(up.state.last().header("x-forwarded-proto"), Some("https"));
}

#[test]
fn upstream_tls_with_the_wrong_ca_is_503() {
    let _lock = support::shared();
    let up = Upstream::tls_http(HttpOpts::default());
    let cfg = proxy_config(
        "",
        "",
        &route("/", "untrusted", ""),
        "",
        &tls_cluster("untrusted", up.port, "other.cert.pem"),
    );
    let gw = Gateway::start(&cfg, ARGS);
    let r = fetch(&["--http1.1"], &gw.url("/tls"));
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.body.contains("upstream connect error"), "{r:?}");
    assert_eq!(
        up.state.request_count(),
        0,
        "no request over an unverified connection"
    );
    eventually("the upstream saw the handshake fail", || {
        up.state
            .tls_failures
            .load(std::sync::atomic::Ordering::SeqCst)
            >= 1
    });
}

#[test]
fn http2_downstream_to_http1_upstream_sends_origin_form_and_host() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let gw = Gateway::start(&simple("h1", up.port, "", ""), ARGS);
    let r = fetch(&["--http2"], &gw.url("/mixed?q=1"));
    assert_eq!(r.status, 200, "{r:?}\n{}", gw.log_text());
    assert!(r.status_line.starts_with("HTTP/2"), "{}", r.status_line);
    let seen = up.state.last();
    assert_eq!(seen.version, "HTTP/1.1");
    assert_eq!(
        seen.path, "/mixed?q=1",
        "origin-form request target upstream"
    );
    // hyper's server takes an absolute-form target too: the target as received says which.
    assert_eq!(seen.target, "/mixed?q=1", "origin-form, not absolute-form");
    assert_eq!(
        seen.header("host"),
        Some(format!("localhost:{}", gw.port).as_str()),
        "HTTP/1.1 upstream requests carry Host (from :authority)"
    );
}

#[test]
fn large_bodies_stream_both_ways() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let gw = Gateway::start(&simple("big", up.port, "", ""), ARGS);
    let body = gw.dir.path().join("body.bin");
    std::fs::write(&body, vec![b'x'; 1 << 20]).expect("write body");
    let data = format!("@{}", body.display());
    for proto in ["--http1.1", "--http2"] {
        let r = fetch(
            &[proto, "-X", "POST", "--data-binary", &data],
            &gw.url("/upload"),
        );
        assert_eq!(r.status, 200, "{proto}: {r:?}");
        assert_eq!(r.json()["body_len"], 1 << 20, "{proto}");
    }
}

#[test]
fn large_body_on_a_retrying_route_is_forwarded_once() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let policy = "                  retry_policy: { retry_on: 5xx, num_retries: 2 }";
    let gw = Gateway::start(&simple("retrying", up.port, policy, ""), ARGS);
    let body = gw.dir.path().join("body.bin");
    std::fs::write(&body, vec![b'y'; 200 * 1024]).expect("write body");
    let r = fetch(
        &[
            "--http1.1",
            "-X",
            "POST",
            "--data-binary",
            &format!("@{}", body.display()),
        ],
        &gw.url("/upload"),
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["body_len"], 200 * 1024);
}

#[test]
fn access_log_names_the_upstream_host() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let log = r#"          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: {{DIR}}/access.log
              log_format: { text_format: "%RESPONSE_CODE% %UPSTREAM_HOST% %REQ(:PATH)%\n" }"#;
    let cfg = proxy_config(
        "",
        log,
        &route("/", "backend", ""),
        "",
        &cluster("backend", "STATIC", "127.0.0.1", up.port, ""),
    );
    let gw = Gateway::start(&cfg, ARGS);
    assert_eq!(fetch(&["--http1.1"], &gw.url("/logged")).status, 200);
    let path = gw.dir.path().join("access.log");
    let mut text = String::new();
    eventually("an access log line", || {
        text = std::fs::read_to_string(&path).unwrap_or_default();
        text.lines().count() >= 1
    });
    assert_eq!(
        text.trim_end(),
        format!("200 127.0.0.1:{} /logged", up.port),
        "%UPSTREAM_HOST% is the endpoint the request went to"
    );
}

#[test]
fn round_robin_spreads_requests_over_endpoints() {
    let _lock = support::shared();
    let (a, b) = (
        Upstream::http(HttpOpts::default()),
        Upstream::http(HttpOpts::default()),
    );
    let cfg = proxy_config(
        "",
        "",
        &route("/", "pair", ""),
        "",
        &cluster_of(
            "pair",
            "STATIC",
            &[("127.0.0.1", a.port), ("127.0.0.1", b.port)],
            "",
        ),
    );
    let gw = Gateway::start(&cfg, ARGS);
    for i in 0..6 {
        assert_eq!(fetch(&["--http1.1"], &gw.url(&format!("/{i}"))).status, 200);
    }
    assert_eq!(
        (a.state.request_count(), b.state.request_count()),
        (3, 3),
        "round robin over two endpoints"
    );
    assert_eq!(gw.counter("cluster.pair.membership_total"), 2);
}

#[test]
fn connect_failure_is_retried_on_another_endpoint() {
    let _lock = support::shared();
    let up = Upstream::http(HttpOpts::default());
    let dead = free_port();
    let cfg = proxy_config(
        "",
        "",
        &route(
            "/",
            "half",
            "                  retry_policy: { retry_on: connect-failure, num_retries: 1 }",
        ),
        "",
        &cluster_of(
            "half",
            "STATIC",
            &[("127.0.0.1", dead), ("127.0.0.1", up.port)],
            "",
        ),
    );
    let gw = Gateway::start(&cfg, ARGS);
    for i in 0..4 {
        let r = fetch(&["--http1.1"], &gw.url(&format!("/{i}")));
        assert_eq!(r.status, 200, "request {i}: {r:?}");
    }
    assert_eq!(up.state.request_count(), 4);
    assert!(gw.counter("cluster.half.upstream_cx_connect_fail") >= 1);
    assert!(gw.counter("cluster.half.upstream_rq_retry") >= 1);
}

#[test]
fn upstream_closing_connections_does_not_fail_requests() {
    let _lock = support::shared();
    // Connection: close on every response.
    let up = Upstream::http(HttpOpts {
        no_keep_alive: true,
        ..Default::default()
    });
    let gw = Gateway::start(&simple("closing", up.port, "", ""), ARGS);
    for i in 0..5 {
        let r = fetch(&["--http1.1"], &gw.url(&format!("/c/{i}")));
        assert_eq!(r.status, 200, "request {i}: {r:?}");
        assert_eq!(r.header("connection"), None, "hop-by-hop header passed on");
    }
    assert_eq!(up.state.connection_count(), 5);
    drop(gw);

    // Kept-alive connections the upstream closes while idle in the pool.
    let up = Upstream::http(HttpOpts {
        idle_close: Some(Duration::from_millis(100)),
        ..Default::default()
    });
    let gw = Gateway::start(&simple("idle", up.port, "", ""), ARGS);
    for i in 0..4 {
        let r = fetch(&["--http1.1"], &gw.url(&format!("/i/{i}")));
        assert_eq!(r.status, 200, "request {i}: {r:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(up.state.request_count(), 4);
    assert!(
        up.state.connection_count() >= 2,
        "the upstream closed idle connections ({} opened)",
        up.state.connection_count()
    );
}
