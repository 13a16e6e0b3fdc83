//! The data path of the quickshake gateway: listeners and workers, per-connection TLS
//! handshakes, HTTP/1.1 and HTTP/2 serving with Envoy's route table and direct responses,
//! access logs, connection limits and graceful drain.
//!
//! It owns sockets and event loops. It must not parse configuration (that is
//! `quickshake-config`), touch BoringSSL beyond driving a handshake (`quickshake-tls`), or
//! compute with private keys (`quickshake-keyprovider`).
#![forbid(unsafe_code)]

pub mod access_log;
pub mod admin_state;
pub mod clusters;
pub mod connection;
pub mod handoff;
pub mod http;
pub mod listener;
pub mod prefixed;
pub mod proxy;
pub mod reload;
pub mod routing;
pub mod tcp_proxy;
pub mod time;
pub mod upgrade;
pub mod worker;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use quickshake_config::Bootstrap;
use quickshake_keyprovider::Providers;
use quickshake_stats::{Gauge, Store};
use quickshake_upstream::ClusterManager;
use tokio::sync::watch;

pub use listener::{ChainRuntime, ListenerShared};

/// Errors starting the data path. Each names the config field, file or address at fault.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Tls(#[from] quickshake_tls::TlsError),
    #[error(transparent)]
    Config(#[from] quickshake_config::ConfigError),
    #[error("{field}: cannot listen on {address}: {source}")]
    Bind {
        field: String,
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    #[error("cannot start worker thread: {0}")]
    Thread(std::io::Error),
}

/// State every worker shares: the global connection limit and the server gauges.
pub struct ServerShared {
    active: AtomicU64,
    limit: Option<u64>,
    total_connections: Gauge,
}

impl ServerShared {
    pub fn new(store: &Store, limit: Option<u64>) -> Self {
        ServerShared {
            active: AtomicU64::new(0),
            limit,
            total_connections: store.gauge("server.total_connections"),
        }
    }

    /// Count a new connection in, unless the overload manager's limit is reached.
    pub fn try_admit(&self) -> bool {
        let prev = self.active.fetch_add(1, Ordering::AcqRel);
        if self.limit.is_some_and(|l| prev >= l) {
            self.active.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        self.total_connections.inc();
        true
    }

    pub fn release(&self) {
        self.active.fetch_sub(1, Ordering::AcqRel);
        self.total_connections.dec();
    }

    pub fn active(&self) -> u64 {
        self.active.load(Ordering::Acquire)
    }
}

/// Where a worker runs its TLS handshakes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HandshakePriority {
    /// On the worker's own thread, like Envoy: the most handshakes per core.
    #[default]
    Normal,
    /// On a companion thread in the kernel's `SCHED_IDLE` class (see [`handoff`]): requests on
    /// established connections never wait behind handshakes; handshakes get the CPU left over.
    Idle,
}

/// How to run the workers.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    pub concurrency: usize,
    pub handshake_priority: HandshakePriority,
    /// How long a drain waits for open connections before the process exits.
    pub drain_time: Duration,
}

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
