//! Rendering tests against Envoy's documented/tested output shapes.

use super::*;

fn q(qs: &str) -> StatsQuery {
    match StatsQuery::from_query_string(qs) {
        Ok(q) => q,
        Err(e) => panic!("bad test query {qs}: {e}"),
    }
}

#[test]
fn handles_share_state_and_registration_is_idempotent() {
    let s = Store::new();
    let c = s.counter("server.total_connections");
    c.inc();
    s.counter("server.total_connections").add(4);
    assert_eq!(c.clone().value(), 5);
    assert_eq!(s.counter_value("server.total_connections"), Some(5));
    assert_eq!(s.counter_value("nope"), None);

    let g = s.gauge("listener.0.0.0.0_9000.downstream_cx_active");
    g.inc();
    g.inc();
    g.dec();
    g.add(10);
    g.sub(3);
    assert_eq!(g.value(), 8);
    g.set(-2);
    assert_eq!(
        s.gauge_value("listener.0.0.0.0_9000.downstream_cx_active"),
        Some(-2)
    );

    let h = s.histogram("h", &[1.0, 2.0]);
    h.record(1.5);
    h.record(f64::NAN);
    let h2 = s.histogram("h", &[100.0]);
    assert_eq!(h2.bounds(), &[1.0, 2.0]);
    assert_eq!((h2.count(), h2.sum()), (1, 1.5));
}

#[test]
fn text_interleaves_counters_and_gauges_then_histograms() {
    let s = Store::new();
    s.counter("c2").add(20);
    s.gauge("c1g").set(7);
    s.counter("c1").add(10);
    s.histogram("h2", DEFAULT_BUCKETS);
    s.histogram("h1", DEFAULT_BUCKETS).record(200.0);
    let r = s.render(&q(""));
    assert_eq!(r.content_type, CONTENT_TYPE_TEXT);
    assert_eq!(
        r.body,
        "c1: 10\nc1g: 7\nc2: 20\n\
         h1: P0(200,200) P25(200,200) P50(200,200) P75(200,200) P90(200,200) P95(200,200) \
         P99(200,200) P99.5(200,200) P99.9(200,200) P100(200,200)\n\
         h2: No recorded values\n"
    );
}

#[test]
fn summary_interpolates_within_buckets() {
    let s = Store::new();
    let h = s.histogram("h", &[10.0, 20.0]);
    for v in 1..=20 {
        h.record(v as f64);
    }
    let body = s.render(&q("")).body;
    assert!(
        body.starts_with("h: P0(1,1) P25(5.5,5.5) P50(10,10) P75(15,15)"),
        "{body}"
    );
    assert!(body.ends_with("P100(20,20)\n"), "{body}");
}

#[test]
fn disjoint_buckets_for_cryptomb_acceptance() {
    let s = Store::new();
    s.counter("listener.0.0.0.0_9000.ssl.handshake").inc();
    let h = s.histogram(
        "cryptomb.rsa_queue_sizes",
        &[1., 2., 3., 4., 5., 6., 7., 8.],
    );
    for v in [1.0, 1.0, 2.0, 3.5, 8.0, 9.0] {
        h.record(v);
    }
    let body = s
        .render(&q("histogram_buckets=disjoint&filter=cryptomb"))
        .body;
    assert_eq!(
        body,
        "cryptomb.rsa_queue_sizes: B1(2,2) B2(1,1) B3(0,0) B4(1,1) B5(0,0) B6(0,0) B7(0,0) \
         B8(1,1)\n"
    );
    // After an interval closes, the interval half shows only new samples.
    s.merge_histograms();
    h.record(2.0);
    s.merge_histograms();
    let body = s
        .render(&q("histogram_buckets=cumulative&filter=cryptomb"))
        .body;
    assert_eq!(
        body,
        "cryptomb.rsa_queue_sizes: B1(0,2) B2(1,4) B3(1,4) B4(1,5) B5(1,5) B6(1,5) B7(1,5) \
         B8(1,6)\n"
    );
}

#[test]
fn cumulative_default_buckets_print_like_envoy() {
    let s = Store::new();
    s.histogram("h1", DEFAULT_BUCKETS).record(300.0);
    assert_eq!(
        s.render(&q("histogram_buckets=cumulative")).body,
        "h1: B0.5(0,0) B1(0,0) B5(0,0) B10(0,0) B25(0,0) B50(0,0) B100(0,0) B250(0,0) \
         B500(1,1) B1000(1,1) B2500(1,1) B5000(1,1) B10000(1,1) B30000(1,1) B60000(1,1) \
         B300000(1,1) B600000(1,1) B1.8e+06(1,1) B3.6e+06(1,1)\n"
    );
}

#[test]
fn detailed_text() {
    let s = Store::new();
    s.histogram("h", &[1.0, 2.0]).record(1.5);
    let body = s.render(&q("histogram_buckets=detailed")).body;
    assert!(
        body.starts_with("h:\n  totals=1,1:1\n  intervals=1,1:1\n  summary=P0(1.5,1.5)"),
        "{body}"
    );
}

#[test]
fn used_only_and_type_filter() {
    let s = Store::new();
    s.counter("a.unused");
    s.counter("a.used").inc();
    s.gauge("a.gauge_zero").set(0);
    s.histogram("a.hist", DEFAULT_BUCKETS);
    assert_eq!(
        s.render(&q("usedonly")).body,
        "a.gauge_zero: 0\na.used: 1\n"
    );
    assert_eq!(
        s.render(&q("type=Counters")).body,
        "a.unused: 0\na.used: 1\n"
    );
    assert_eq!(
        s.render(&q("type=Histograms")).body,
        "a.hist: No recorded values\n"
    );
}

#[test]
fn prometheus_listener_and_http_families() {
    let s = Store::new();
    s.counter("listener.0.0.0.0_9000.ssl.handshake").add(3);
    s.counter("listener.[__1]_9001.ssl.handshake").add(1);
    s.counter("http.ingress.downstream_rq_2xx").add(5);
    s.counter("http.ingress.downstream_rq_5xx").add(1);
    s.gauge("server.live").set(1);
    let h = s.histogram(
        "listener.0.0.0.0_9000.downstream_cx_length_ms",
        &[0.5, 1.0, 5.0],
    );
    h.record(0.25);
    h.record(3.0);
    h.record(7.0);
    let r = s.render(&q("format=prometheus"));
    assert_eq!(r.content_type, CONTENT_TYPE_TEXT);
    assert_eq!(
        r.body,
        "# TYPE envoy_http_downstream_rq_xx counter\n\
         envoy_http_downstream_rq_xx{envoy_response_code_class=\"2\",envoy_http_conn_manager_prefix=\"ingress\"} 5\n\
         envoy_http_downstream_rq_xx{envoy_response_code_class=\"5\",envoy_http_conn_manager_prefix=\"ingress\"} 1\n\
         \n\
         # TYPE envoy_listener_ssl_handshake counter\n\
         envoy_listener_ssl_handshake{envoy_listener_address=\"0.0.0.0_9000\"} 3\n\
         envoy_listener_ssl_handshake{envoy_listener_address=\"[__1]_9001\"} 1\n\
         \n\
         # TYPE envoy_server_live gauge\n\
         envoy_server_live{} 1\n\
         \n\
         # TYPE envoy_listener_downstream_cx_length_ms histogram\n\
         envoy_listener_downstream_cx_length_ms_bucket{envoy_listener_address=\"0.0.0.0_9000\",le=\"0.5\"} 1\n\
         envoy_listener_downstream_cx_length_ms_bucket{envoy_listener_address=\"0.0.0.0_9000\",le=\"1\"} 1\n\
         envoy_listener_downstream_cx_length_ms_bucket{envoy_listener_address=\"0.0.0.0_9000\",le=\"5\"} 2\n\
         envoy_listener_downstream_cx_length_ms_bucket{envoy_listener_address=\"0.0.0.0_9000\",le=\"+Inf\"} 3\n\
         envoy_listener_downstream_cx_length_ms_sum{envoy_listener_address=\"0.0.0.0_9000\"} 10.25\n\
         envoy_listener_downstream_cx_length_ms_count{envoy_listener_address=\"0.0.0.0_9000\"} 3\n\
         \n"
    );
}

#[test]
fn prometheus_untagged_histogram_and_filter_on_full_name() {
    let s = Store::new();
    s.histogram("cryptomb.rsa_queue_sizes", &[1.0, 2.0])
        .record(2.0);
    s.counter("listener.0.0.0.0_9000.ssl.handshake").inc();
    let body = s
        .render(&q("format=prometheus&filter=0%2E0%2E0%2E0_9000"))
        .body;
    assert_eq!(
        body,
        "# TYPE envoy_listener_ssl_handshake counter\n\
         envoy_listener_ssl_handshake{envoy_listener_address=\"0.0.0.0_9000\"} 1\n\n"
    );
    let body = s.render(&q("format=prometheus&filter=cryptomb")).body;
    assert_eq!(
        body,
        "# TYPE envoy_cryptomb_rsa_queue_sizes histogram\n\
         envoy_cryptomb_rsa_queue_sizes_bucket{le=\"1\"} 0\n\
         envoy_cryptomb_rsa_queue_sizes_bucket{le=\"2\"} 1\n\
         envoy_cryptomb_rsa_queue_sizes_bucket{le=\"+Inf\"} 1\n\
         envoy_cryptomb_rsa_queue_sizes_sum{} 2\n\
         envoy_cryptomb_rsa_queue_sizes_count{} 1\n\n"
    );
}

#[test]
fn json_shapes() -> Result<(), serde_json::Error> {
    let s = Store::new();
    s.counter("c1").add(10);
    s.gauge("g\"1").set(-1);
    let r = s.render(&q("format=json"));
    assert_eq!(r.content_type, CONTENT_TYPE_JSON);
    let v: serde_json::Value = serde_json::from_str(&r.body)?;
    assert_eq!(
        v,
        serde_json::json!({"stats":[{"name":"c1","value":10},{"name":"g\"1","value":-1}]})
    );

    let h = s.histogram("h1", &[1.0, 2.0]);
    h.record(1.0);
    s.histogram("h2", &[1.0]);
    let v: serde_json::Value = serde_json::from_str(&s.render(&q("format=json&filter=h")).body)?;
    let hist = &v["stats"][0]["histograms"];
    assert_eq!(
        hist["supported_quantiles"],
        serde_json::json!([0, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 100])
    );
    assert_eq!(hist["computed_quantiles"][0]["name"], "h1");
    assert_eq!(
        hist["computed_quantiles"][0]["values"][0],
        serde_json::json!({"cumulative":1,"interval":1})
    );
    assert_eq!(
        hist["computed_quantiles"][1]["values"][0],
        serde_json::json!({"cumulative":null,"interval":null})
    );

    let v: serde_json::Value = serde_json::from_str(
        &s.render(&q("format=json&filter=h1&histogram_buckets=cumulative"))
            .body,
    )?;
    assert_eq!(
        v,
        serde_json::json!({"stats":[{"histograms":[{"name":"h1","buckets":[
            {"upper_bound":1,"interval":1,"cumulative":1},
            {"upper_bound":2,"interval":1,"cumulative":1}]}]}]})
    );
    let v: serde_json::Value = serde_json::from_str(
        &s.render(&q("format=json&filter=h1&histogram_buckets=detailed"))
            .body,
    )?;
    assert_eq!(
        v["stats"][0]["histograms"]["details"][0]["totals"],
        serde_json::json!([{"lower_bound":0,"width":1,"count":1}])
    );
    Ok(())
}

#[test]
fn scope_prefixes_names() {
    let s = Store::new();
    let l = s.scope("listener.0.0.0.0_9000.");
    l.scope("ssl.").counter("handshake").inc();
    l.histogram("downstream_cx_length_ms", DEFAULT_BUCKETS)
        .record(1.0);
    assert_eq!(
        s.counter_value("listener.0.0.0.0_9000.ssl.handshake"),
        Some(1)
    );
    assert!(s
        .find_histogram("listener.0.0.0.0_9000.downstream_cx_length_ms")
        .is_some());
}

#[test]
fn concurrent_updates_are_not_lost() {
    let s = Store::new();
    let c = s.counter("c");
    let h = s.histogram("h", DEFAULT_BUCKETS);
    std::thread::scope(|t| {
        for _ in 0..4 {
            let (c, h) = (c.clone(), h.clone());
            t.spawn(move || {
                for i in 0..10_000 {
                    c.inc();
                    h.record((i % 7) as f64);
                }
            });
        }
    });
    assert_eq!(c.value(), 40_000);
    assert_eq!(h.count(), 40_000);
    assert_eq!(h.snapshot().cumulative.iter().sum::<u64>(), 40_000);
}
