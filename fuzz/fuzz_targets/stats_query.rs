//! The admin `/stats` query parser and renderers: `StatsQuery::from_query_string` on arbitrary
//! text, then `Store::render` in whatever format/bucket mode/type the query selected, over a
//! small store of Envoy-named counters, gauges and histograms.
//!
//! Input layout: the query string is the input up to the first NUL byte (must be UTF-8); the
//! bytes after it, 8 at a time, are f64 values (any bit pattern: NaN, ±inf, subnormals, huge)
//! recorded into the histograms, with a `merge_histograms` between the two halves so that
//! interval and cumulative views differ. So the renderers are fuzzed on the values too, not
//! only the query.
//!
//! Properties: neither the parser nor any renderer panics; a query that parses renders a body
//! whose content type matches its format; JSON output is valid JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use quickshake_stats::{Format, StatsQuery, Store, CONTENT_TYPE_JSON, CONTENT_TYPE_TEXT};

fn store(values: &[f64]) -> Store {
    let s = Store::new();
    s.counter("listener.0.0.0.0_9000.ssl.handshake").add(42);
    s.counter("listener.0.0.0.0_9000.ssl.ciphers.ECDHE-RSA-AES128-GCM-SHA256").inc();
    s.counter("listener.[__1]_9000.ssl.versions.TLSv1.3").inc();
    s.counter("http.ingress_http.downstream_rq_2xx").add(7);
    s.counter("cluster.x.upstream_rq_200").add(3);
    s.counter("server.unused"); // never written: hidden by `usedonly`
    s.gauge("listener.0.0.0.0_9000.downstream_cx_active").set(5);
    s.gauge("server.memory_allocated").set(-1);
    s.gauge("cryptomb.rsa_queue_sizes");
    let bounds = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
    let hs = [
        s.histogram("listener.0.0.0.0_9000.downstream_cx_length_ms", &bounds),
        s.histogram("http.ingress_http.downstream_rq_time", quickshake_stats::DEFAULT_BUCKETS),
        // Unsorted, duplicated and non-finite bounds are normalised by the store.
        s.histogram("cluster.x.upstream_rq_time", &[8.0, f64::NAN, 1.0, 1.0, f64::INFINITY]),
        s.histogram("empty.histogram", &[]),
        s.histogram("unused.histogram", &bounds),
    ];
    let (first, second) = values.split_at(values.len() / 2);
    for (i, v) in first.iter().enumerate() {
        hs[i % 4].record(*v);
    }
    s.merge_histograms();
    for (i, v) in second.iter().enumerate() {
        hs[(i + 1) % 4].record(*v);
    }
    s
}

fuzz_target!(|data: &[u8]| {
    let (qs, rest) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(qs) = std::str::from_utf8(qs) else {
        return;
    };
    let query = match StatsQuery::from_query_string(qs) {
        Ok(q) => q,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let values: Vec<f64> = rest
        .chunks_exact(8)
        .take(64)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect();
    let out = store(&values).render(&query);
    match query.format {
        Format::Json => {
            assert_eq!(out.content_type, CONTENT_TYPE_JSON);
            if let Err(e) = serde_json::from_str::<serde_json::Value>(&out.body) {
                panic!("invalid JSON ({e}): {}", out.body);
            }
        }
        Format::Text | Format::Prometheus => assert_eq!(out.content_type, CONTENT_TYPE_TEXT),
    }
});
