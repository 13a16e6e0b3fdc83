//! `Cluster::connect`: raw streams for TCP proxying.

use quickshake_stats::Store;
use quickshake_upstream::{ClusterManager, UpstreamError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::*;

#[tokio::test]
async fn echo_through_raw_stream() {
    let addr = echo().await;
    let store = Store::new();
    let cm = ClusterManager::new(vec![static_spec("tcp", &[addr])], &store).expect("manager");
    let c = cm.cluster("tcp").expect("cluster");
    let mut s = tokio::time::timeout(BOUND, c.connect())
        .await
        .expect("bound")
        .expect("stream");
    assert!(!s.is_tls());
    assert_eq!(s.peer_addr(), addr);
    assert_eq!(store.gauge_value("cluster.tcp.upstream_cx_active"), Some(1));
    let msg = b"hello through the cluster";
    s.write_all(msg).await.expect("write");
    let mut buf = vec![0u8; msg.len()];
    tokio::time::timeout(BOUND, s.read_exact(&mut buf))
        .await
        .expect("bound")
        .expect("read");
    assert_eq!(&buf, msg);
    drop(s);
    assert_eq!(store.gauge_value("cluster.tcp.upstream_cx_active"), Some(0));
    assert_eq!(
        store.counter_value("cluster.tcp.upstream_cx_total"),
        Some(1)
    );
    assert_eq!(
        store.counter_value("cluster.tcp.upstream_cx_destroy"),
        Some(1)
    );
}

#[tokio::test]
async fn raw_connect_failure() {
    let store = Store::new();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], closed_port()));
    let cm = ClusterManager::new(vec![static_spec("gone", &[addr])], &store).expect("manager");
    let err = tokio::time::timeout(BOUND, cm.cluster("gone").expect("cluster").connect())
        .await
        .expect("bound")
        .expect_err("refused");
    assert!(
        matches!(err, UpstreamError::ConnectFailed { .. }),
        "{err:?}"
    );
    assert_eq!(
        store.counter_value("cluster.gone.upstream_cx_connect_fail"),
        Some(1)
    );
}
