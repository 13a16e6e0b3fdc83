//! Active TCP health checks (`send`/`receive` payloads) steering `Cluster::connect`, on the
//! runtime given to `ClusterManager::start_background`.

use std::time::{Duration, Instant};

use quickshake_stats::Store;
use quickshake_upstream::{ClusterManager, HealthCheckKind, HealthCheckSpec};

use crate::common::*;

fn tcp_check(receive: &[u8]) -> HealthCheckSpec {
    HealthCheckSpec {
        interval: Duration::from_millis(50),
        timeout: Duration::from_millis(300),
        no_traffic_interval: Duration::from_millis(50),
        unhealthy_threshold: 1,
        healthy_threshold: 1,
        interval_jitter: Duration::ZERO,
        initial_jitter: Duration::ZERO,
        kind: HealthCheckKind::Tcp {
            send: b"PING".to_vec(),
            receive: vec![receive.to_vec()],
        },
    }
}

async fn until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn tcp_checks_steer_connections() {
    let good = echo().await;
    let closed: std::net::SocketAddr = format!("127.0.0.1:{}", closed_port())
        .parse()
        .expect("addr");
    let mut ok = static_spec("tcp", &[good, closed]);
    ok.health_check = Some(tcp_check(b"PING"));
    let mut wrong = static_spec("wrong", &[good]);
    wrong.health_check = Some(tcp_check(b"PONG"));
    wrong.healthy_panic_threshold = 0.0;
    let store = Store::new();
    let cm = ClusterManager::new(vec![ok, wrong], &store).expect("manager");
    cm.start_background(tokio::runtime::Handle::current());
    let c = cm.cluster("tcp").expect("cluster");
    until("the echo host passes, the closed one fails", || {
        let st = c.host_statuses();
        st.iter().any(|h| h.addr == good && !h.failed_active_hc)
            && st.iter().any(|h| h.addr == closed && h.failed_active_hc)
    })
    .await;
    assert_eq!(store.gauge_value("cluster.tcp.membership_healthy"), Some(1));
    assert_eq!(
        store.gauge_value("cluster.tcp.health_check.healthy"),
        Some(1)
    );
    assert!(store.counter_value("cluster.tcp.health_check.network_failure") >= Some(1));
    for _ in 0..4 {
        let s = tokio::time::timeout(BOUND, c.connect())
            .await
            .expect("bound")
            .expect("stream");
        assert_eq!(s.peer_addr(), good);
    }
    // The echo never sends PONG: each check times out, the host stays failed, and with panic
    // mode off (threshold 0) the cluster has no host to offer.
    let w = cm.cluster("wrong").expect("cluster");
    until("a failed check of the wrong payload", || {
        store.counter_value("cluster.wrong.health_check.failure") >= Some(1)
    })
    .await;
    assert!(w.host_statuses().iter().all(|h| h.failed_active_hc));
    assert!(w.connect().await.is_err());
}
