//! Connection reuse limits (Envoy's upstream `common_http_protocol_options`, as Istio's
//! DestinationRule `connectionPool.http` renders them): `max_requests_per_connection` and
//! `idle_timeout`, over HTTP/1.1 and h2c.

use std::sync::atomic::Ordering;
use std::time::Duration;

use quickshake_stats::Store;
use quickshake_upstream::{ClusterManager, Protocol};

use crate::common::*;

#[tokio::test]
async fn max_requests_per_connection_opens_a_new_connection() {
    for (kind, protocol) in [(Kind::H1, Protocol::Http1), (Kind::H2c, Protocol::Http2)] {
        let (a, seen) = upstream(kind).await;
        let store = Store::new();
        let mut spec = static_spec("web", &[a]);
        spec.protocol = protocol;
        spec.max_requests_per_connection = Some(2);
        let cm = ClusterManager::new(vec![spec], &store).expect("manager");
        let c = cm.cluster("web").expect("cluster");
        for _ in 0..5 {
            let (status, _) = fetch(&c, "/x").await.expect("response");
            assert_eq!(status, 200);
        }
        assert_eq!(seen.requests.load(Ordering::SeqCst), 5);
        assert_eq!(
            seen.connections.load(Ordering::SeqCst),
            3,
            "{protocol:?}: 2 + 2 + 1 requests"
        );
    }
}

#[tokio::test]
async fn an_idle_connection_past_idle_timeout_is_not_reused() {
    let (a, seen) = upstream(Kind::H1).await;
    let store = Store::new();
    let mut spec = static_spec("web", &[a]);
    spec.idle_timeout = Some(Duration::from_millis(200));
    let cm = ClusterManager::new(vec![spec], &store).expect("manager");
    let c = cm.cluster("web").expect("cluster");
    fetch(&c, "/x").await.expect("response");
    fetch(&c, "/x").await.expect("response");
    assert_eq!(
        seen.connections.load(Ordering::SeqCst),
        1,
        "reused while fresh"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    fetch(&c, "/x").await.expect("response");
    assert_eq!(
        seen.connections.load(Ordering::SeqCst),
        2,
        "closed when idle"
    );
}
