//! One `ClusterManager` shared by several current-thread workers: each worker
//! keeps its own pooled connections.

use std::sync::atomic::Ordering;

use quickshake_stats::Store;
use quickshake_upstream::ClusterManager;

use crate::common::*;

#[test]
fn pool_per_worker() {
    // The upstream runs on its own runtime thread, apart from the workers.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("server runtime");
    let (addr, seen) = server_rt.block_on(upstream(Kind::H1));
    let store = Store::new();
    let cm = ClusterManager::new(vec![static_spec("w", &[addr])], &store).expect("manager");
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let cm = cm.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("worker runtime");
                rt.block_on(async {
                    let c = cm.cluster("w").expect("cluster");
                    for _ in 0..5 {
                        let (status, _) = fetch(&c, "/").await.expect("response");
                        assert_eq!(status, 200);
                    }
                });
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    assert_eq!(store.counter_value("cluster.w.upstream_cx_total"), Some(2));
    assert_eq!(seen.connections.load(Ordering::SeqCst), 2);
    assert_eq!(seen.requests.load(Ordering::SeqCst), 10);
}
