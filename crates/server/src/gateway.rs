//! Starting the data path: build every listener, bind it once per worker, start the workers;
//! and the drain handle that stops them.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use quickshake_config::{Bootstrap, Listener};
use quickshake_keyprovider::Providers;
use quickshake_stats::Store;
use quickshake_upstream::ClusterManager;
use tokio::sync::{mpsc, watch};

use quickshake_listener::{
    bind_reuseport, probe_port_free, ListenerShared, ServerError, ServerShared, StoppedListeners,
};

use crate::options::GatewayOptions;
use crate::worker::{self, Bound, WorkerCmd};

/// A started gateway: listeners bound, workers running.
pub struct Gateway {
    pub store: Store,
    pub listeners: Vec<Arc<ListenerShared>>,
    pub shared: Arc<ServerShared>,
    drain_tx: watch::Sender<bool>,
    drain_time: Duration,
    workers: Vec<JoinHandle<()>>,
    cmds: Workers,
}

/// The command side of every worker: how listeners are added while the gateway runs.
#[derive(Clone)]
pub struct Workers(Vec<mpsc::UnboundedSender<WorkerCmd>>);

/// Stops a listener added with [`Workers::listen`] when told to, or when dropped; for a QUIC
/// listener, also how its `quic_options` change in place.
pub struct ListenerStop {
    stop: watch::Sender<bool>,
    quic: Option<Arc<quickshake_quic::QuicShared>>,
}

impl ListenerStop {
    /// New `quic_options` for a running QUIC listener: new connections get them.
    pub fn set_quic_options(&self, opts: &quickshake_config::QuicOptions) {
        if let Some(q) = &self.quic {
            q.set_options(opts.clone());
        }
    }
}

impl Drop for ListenerStop {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

impl Workers {
    /// Bind `cfg`'s address once per worker and have each worker accept on it (a QUIC
    /// listener: serve it, with its `http3.*` counters in `store`).
    pub fn listen(
        &self,
        cfg: &Listener,
        shared: Arc<ListenerShared>,
        store: &Store,
    ) -> Result<ListenerStop, ServerError> {
        let (tx, rx) = watch::channel(false);
        let mut quic = None;
        let cmds: Vec<WorkerCmd> = match &cfg.quic {
            Some(q) => {
                let sockets =
                    quickshake_quic::bind_workers(&shared, q, &cfg.path, self.0.len(), store)?;
                quic = sockets.first().map(|s| s.shared.clone());
                sockets
                    .into_iter()
                    .map(|socket| WorkerCmd::ListenQuic {
                        shared: shared.clone(),
                        socket,
                        stop: rx.clone(),
                    })
                    .collect()
            }
            None => self
                .0
                .iter()
                .map(|_| {
                    Ok(WorkerCmd::Listen {
                        shared: shared.clone(),
                        socket: bind_reuseport(cfg.address, &cfg.path)?,
                        stop: rx.clone(),
                    })
                })
                .collect::<Result<_, ServerError>>()?,
        };
        for (worker, cmd) in self.0.iter().zip(cmds) {
            if worker.send(cmd).is_err() {
                tracing::warn!(listener = %cfg.name, "a worker has stopped; it does not take the new listener");
            }
        }
        Ok(ListenerStop { stop: tx, quic })
    }
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
            match l.quic {
                Some(_) => quickshake_quic::probe_udp_port_free(l.address, &l.path)?,
                None => probe_port_free(l.address, &l.path)?,
            }
        }
        let concurrency = opts.concurrency.max(1);
        let mut per_worker: Vec<Vec<(Arc<ListenerShared>, Bound)>> =
            (0..concurrency).map(|_| Vec::new()).collect();
        for (shared, l) in listeners.iter().zip(&cfg.listeners) {
            match &l.quic {
                Some(q) => {
                    let socks =
                        quickshake_quic::bind_workers(shared, q, &l.path, concurrency, &store)?;
                    for (sockets, s) in per_worker.iter_mut().zip(socks) {
                        sockets.push((shared.clone(), Bound::Quic(s)));
                    }
                }
                None => {
                    for sockets in &mut per_worker {
                        sockets.push((
                            shared.clone(),
                            Bound::Tcp(bind_reuseport(l.address, &l.path)?),
                        ));
                    }
                }
            }
        }
        let shared = Arc::new(ServerShared::new(
            &store,
            cfg.global_downstream_max_connections,
        ));
        store.gauge("server.concurrency").set(concurrency as i64);
        let (drain_tx, drain_rx) = watch::channel(false);
        let mut workers = Vec::new();
        let mut cmds = Vec::new();
        for (i, sockets) in per_worker.into_iter().enumerate() {
            let (server, drain) = (shared.clone(), drain_rx.clone());
            let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
            cmds.push(cmd_tx);
            let run = worker::WorkerRun {
                index: i,
                drain_timeout: opts.drain_time,
                handshake_priority: opts.handshake_priority,
            };
            let handle = std::thread::Builder::new()
                .name(format!("wrk:{i}"))
                .spawn(move || worker::run_worker(run, sockets, cmd_rx, server, drain))
                .map_err(ServerError::Thread)?;
            workers.push(handle);
        }
        Ok(Gateway {
            store,
            listeners,
            shared,
            drain_tx,
            drain_time: opts.drain_time,
            workers,
            cmds: Workers(cmds),
        })
    }

    /// How listeners are added to the running workers.
    pub fn workers(&self) -> Workers {
        self.cmds.clone()
    }

    /// A handle that starts a graceful drain when called.
    pub fn drain_handle(&self) -> DrainHandle {
        DrainHandle {
            drain: self.drain_tx.clone(),
            server: self.shared.clone(),
            drain_time: self.drain_time,
        }
    }

    /// Wait for every worker to stop (after a drain).
    pub fn join(self) {
        for w in self.workers {
            let _ = w.join();
        }
    }
}

/// Starts a graceful drain: listeners stop accepting, open connections finish their requests.
/// Also stops listeners alone, the process running on (admin `/drain_listeners`).
#[derive(Clone)]
pub struct DrainHandle {
    drain: watch::Sender<bool>,
    server: Arc<ServerShared>,
    drain_time: Duration,
}

impl DrainHandle {
    pub fn drain(&self) {
        let _ = self.drain.send(true);
    }
    pub fn is_draining(&self) -> bool {
        *self.drain.borrow()
    }
    /// Stop accepting on `which` listeners; their open connections go on, and so does the
    /// process.
    pub fn stop_listeners(&self, which: StoppedListeners) {
        self.server.stop_listeners(which);
    }
    /// `--drain-time-s`.
    pub fn drain_time(&self) -> Duration {
        self.drain_time
    }
}
