//! Starting the data path: build every listener, bind it once per worker, start the workers;
//! and the drain handle that stops them.

use std::sync::Arc;
use std::thread::JoinHandle;

use quickshake_config::Bootstrap;
use quickshake_keyprovider::Providers;
use quickshake_stats::Store;
use quickshake_upstream::ClusterManager;
use tokio::sync::watch;

use crate::error::ServerError;
use crate::listener::{self, ListenerShared};
use crate::options::GatewayOptions;
use crate::shared::ServerShared;
use crate::worker;

/// A started gateway: listeners bound, workers running.
pub struct Gateway {
    pub store: Store,
    pub listeners: Vec<Arc<ListenerShared>>,
    pub shared: Arc<ServerShared>,
    drain_tx: watch::Sender<bool>,
    workers: Vec<JoinHandle<()>>,
}

/// Build every listener (loading certificates and keys) without binding anything: what
/// `--mode validate` checks.
pub fn build_listeners(
    cfg: &Bootstrap,
    store: &Store,
    providers: &Providers,
    clusters: &ClusterManager,
) -> Result<Vec<Arc<ListenerShared>>, ServerError> {
    cfg.listeners
        .iter()
        .map(|l| ListenerShared::build(l, store, providers, clusters).map(Arc::new))
        .collect()
}

impl Gateway {
    /// Bind every listener once per worker and start the workers.
    pub fn start(
        cfg: &Bootstrap,
        opts: &GatewayOptions,
        store: Store,
        providers: &Providers,
        clusters: &ClusterManager,
    ) -> Result<Gateway, ServerError> {
        let listeners = build_listeners(cfg, &store, providers, clusters)?;
        for l in &cfg.listeners {
            listener::probe_port_free(l.address, &l.path)?;
        }
        let concurrency = opts.concurrency.max(1);
        let mut per_worker = Vec::with_capacity(concurrency);
        for _ in 0..concurrency {
            let mut sockets = Vec::new();
            for (shared, l) in listeners.iter().zip(&cfg.listeners) {
                sockets.push((
                    shared.clone(),
                    listener::bind_reuseport(l.address, &l.path)?,
                ));
            }
            per_worker.push(sockets);
        }
        let shared = Arc::new(ServerShared::new(
            &store,
            cfg.global_downstream_max_connections,
        ));
        store.gauge("server.concurrency").set(concurrency as i64);
        let (drain_tx, drain_rx) = watch::channel(false);
        let mut workers = Vec::new();
        for (i, sockets) in per_worker.into_iter().enumerate() {
            let (server, drain) = (shared.clone(), drain_rx.clone());
            let run = worker::WorkerRun {
                index: i,
                drain_timeout: opts.drain_time,
                handshake_priority: opts.handshake_priority,
            };
            let handle = std::thread::Builder::new()
                .name(format!("wrk:{i}"))
                .spawn(move || worker::run_worker(run, sockets, server, drain))
                .map_err(ServerError::Thread)?;
            workers.push(handle);
        }
        Ok(Gateway {
            store,
            listeners,
            shared,
            drain_tx,
            workers,
        })
    }

    /// A handle that starts a graceful drain when called.
    pub fn drain_handle(&self) -> DrainHandle {
        DrainHandle(self.drain_tx.clone())
    }

    /// Wait for every worker to stop (after a drain).
    pub fn join(self) {
        for w in self.workers {
            let _ = w.join();
        }
    }
}

/// Starts a graceful drain: listeners stop accepting, open connections finish their requests.
#[derive(Clone)]
pub struct DrainHandle(watch::Sender<bool>);

impl DrainHandle {
    pub fn drain(&self) {
        let _ = self.0.send(true);
    }
    pub fn is_draining(&self) -> bool {
        *self.0.borrow()
    }
}
