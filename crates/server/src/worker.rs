//! Workers as Envoy runs them: N threads, each with its own current-thread event loop and its
//! own SO_REUSEPORT socket per listener, so a connection is accepted, handshaken and served on
//! one thread. (A provider's per-worker queue relies on this: an operation resumes on the
//! thread that queued it.)
//!
//! With [`HandshakePriority::Idle`] a worker is two threads: its handshake thread (idle class)
//! accepts and handshakes, its serving thread serves what the handshake thread hands over
//! ([`crate::handoff`]). Key operations still resume on the thread that queued them.

use std::sync::Arc;
use std::time::Duration;

use quickshake_listener::{ListenerShared, ServerShared};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio::sync::{mpsc, watch};

use crate::connection::serve_connection;
use crate::handoff::{self, ServeJob};
use crate::options::HandshakePriority;

/// What one worker is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WorkerRun {
    pub index: usize,
    /// How long a drain waits for open connections.
    pub drain_timeout: Duration,
    pub handshake_priority: HandshakePriority,
}

/// One worker's socket of a listener.
pub(crate) enum Bound {
    Tcp(std::net::TcpListener),
    /// A QUIC listener's UDP socket (served by [`quickshake_quic::run_endpoint`]).
    Quic(quickshake_quic::QuicSocket),
}

type Sockets = Vec<(Arc<ListenerShared>, Bound)>;

/// What a running worker is told after it started: listeners added by a control plane.
pub(crate) enum WorkerCmd {
    /// Accept on this worker's socket of a new listener until `stop` turns true (the listener
    /// was removed or replaced) or the gateway drains. Connections it accepted finish.
    Listen {
        shared: Arc<ListenerShared>,
        socket: std::net::TcpListener,
        stop: watch::Receiver<bool>,
    },
    /// Serve this worker's socket of a new QUIC listener until `stop` turns true or the gateway
    /// drains; either drains its connections (GOAWAY, then CONNECTION_CLOSE), as SIGTERM does.
    ListenQuic {
        shared: Arc<ListenerShared>,
        socket: quickshake_quic::QuicSocket,
        stop: watch::Receiver<bool>,
    },
}

/// Run one worker until drained: accept on every listener, then wait for connections to end.
pub(crate) fn run_worker(
    run: WorkerRun,
    sockets: Sockets,
    cmds: mpsc::UnboundedReceiver<WorkerCmd>,
    server: Arc<ServerShared>,
    drain: watch::Receiver<bool>,
) {
    match run.handshake_priority {
        HandshakePriority::Normal => {
            if let Some(rt) = runtime(run.index) {
                rt.block_on(accept_and_serve(run, sockets, cmds, server, drain));
            }
        }
        HandshakePriority::Idle => run_split(run, sockets, cmds, server, drain),
    }
    tracing::debug!(worker = run.index, "worker stopped");
}

fn runtime(index: usize) -> Option<Runtime> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) => {
            tracing::error!(worker = index, error = %e, "cannot start worker event loop");
            None
        }
    }
}

/// The handshake thread accepts and handshakes; this (serving) thread serves the established
/// connections it hands over, until the handshake thread stops.
fn run_split(
    run: WorkerRun,
    sockets: Sockets,
    cmds: mpsc::UnboundedReceiver<WorkerCmd>,
    server: Arc<ServerShared>,
    drain: watch::Receiver<bool>,
) {
    let Some(rt) = runtime(run.index) else {
        return;
    };
    // QUIC connections run here, at normal priority: a QUIC connection is one task from its
    // first packet to its last (quiche's state cannot move between threads mid-connection),
    // so `idle` does not apply to QUIC handshakes.
    let (quic, sockets): (Sockets, Sockets) = sockets
        .into_iter()
        .partition(|(_, b)| matches!(b, Bound::Quic(_)));
    let (quic_server, quic_drain) = (server.clone(), drain.clone());
    let (tx, mut rx) = mpsc::unbounded_channel::<ServeJob>();
    let handshakes = std::thread::Builder::new()
        .name(format!("hs:{}", run.index))
        .spawn(move || {
            if !quickshake_keyprovider::priority::idle_class_this_thread() {
                tracing::warn!(
                    worker = run.index,
                    "cannot put the handshake thread in SCHED_IDLE; it runs at normal priority"
                );
            }
            if let Some(hs_rt) = runtime(run.index) {
                handoff::set_serving_thread(tx);
                hs_rt.block_on(accept_and_serve(run, sockets, cmds, server, drain));
                handoff::clear_serving_thread();
            }
        });
    let handshakes = match handshakes {
        Ok(h) => h,
        Err(e) => {
            tracing::error!(worker = run.index, error = %e, "cannot start handshake thread");
            return;
        }
    };
    // Ends when the handshake thread has drained (it waits for every connection, served here
    // or not, within the drain time) and dropped its sender.
    rt.block_on(async move {
        for (shared, b) in quic {
            if let Bound::Quic(q) = b {
                tokio::spawn(quickshake_quic::run_endpoint(
                    q,
                    shared,
                    quic_server.clone(),
                    quic_drain.clone(),
                ));
            }
        }
        while let Some(job) = rx.recv().await {
            tokio::spawn(job);
        }
    });
    let _ = handshakes.join();
}

async fn accept_and_serve(
    run: WorkerRun,
    sockets: Sockets,
    mut cmds: mpsc::UnboundedReceiver<WorkerCmd>,
    server: Arc<ServerShared>,
    drain: watch::Receiver<bool>,
) {
    let mut accepts = Vec::new();
    let mut endpoints = Vec::new();
    let mut watch_drain = drain.clone();
    let mut listen = |shared: Arc<ListenerShared>, socket, stop| match TcpListener::from_std(socket)
    {
        Ok(l) => accepts.push(tokio::spawn(accept_loop(
            l,
            shared,
            server.clone(),
            drain.clone(),
            stop,
        ))),
        Err(e) => tracing::error!(worker = run.index, error = %e, "cannot register listener"),
    };
    for (shared, bound) in sockets {
        match bound {
            Bound::Tcp(l) => listen(shared, l, None),
            Bound::Quic(q) => endpoints.push(tokio::spawn(quickshake_quic::run_endpoint(
                q,
                shared,
                server.clone(),
                drain.clone(),
            ))),
        }
    }
    // Listeners added later, until the gateway drains.
    while !*watch_drain.borrow() {
        tokio::select! {
            cmd = cmds.recv() => match cmd {
                Some(WorkerCmd::Listen { shared, socket, stop }) => listen(shared, socket, Some(stop)),
                Some(WorkerCmd::ListenQuic { shared, socket, stop }) => {
                    let drain = drain_or_stop(drain.clone(), stop);
                    let endpoint = Box::pin(quickshake_quic::run_endpoint(socket, shared, server.clone(), drain));
                    // With `--handshake-priority idle`, QUIC runs on the serving thread (see
                    // `run_split`); else here.
                    if let Err(endpoint) = handoff::hand_off(endpoint) {
                        tokio::spawn(endpoint);
                    }
                }
                None => {
                    let _ = watch_drain.changed().await;
                }
            },
            changed = watch_drain.changed() => {
                if changed.is_err() {
                    break;
                }
            }
        }
    }
    for a in accepts {
        let _ = a.await;
    }
    // QUIC endpoints end when their connections have closed (GOAWAY, then CONNECTION_CLOSE
    // once their requests are answered), within the drain time.
    let deadline = tokio::time::Instant::now() + run.drain_timeout;
    for e in endpoints {
        let _ = tokio::time::timeout_at(deadline, e).await;
    }
    // Drained: wait for this process's connections to finish, bounded.
    let deadline = tokio::time::Instant::now() + run.drain_timeout;
    while server.active() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What a QUIC endpoint of a listener added by a control plane drains on: the gateway's drain
/// or the listener's own stop (removed or replaced), whichever comes first.
fn drain_or_stop(
    mut drain: watch::Receiver<bool>,
    stop: watch::Receiver<bool>,
) -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(*drain.borrow() || *stop.borrow());
    tokio::spawn(async move {
        let mut stop = Some(stop);
        tokio::select! {
            () = async {
                while !*drain.borrow() {
                    if drain.changed().await.is_err() {
                        break;
                    }
                }
            } => {}
            () = stopped(&mut stop) => {}
        }
        // The endpoint and its connections read a closed channel as a drain too.
        let _ = tx.send(true);
    });
    rx
}

/// A listener's own stop signal (dynamic listeners only); `None` never fires.
async fn stopped(stop: &mut Option<watch::Receiver<bool>>) {
    match stop {
        Some(rx) => {
            while !*rx.borrow() {
                if rx.changed().await.is_err() {
                    // The manager went away without stopping it: keep accepting.
                    std::future::pending::<()>().await;
                }
            }
        }
        None => std::future::pending::<()>().await,
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<ListenerShared>,
    server: Arc<ServerShared>,
    mut drain: watch::Receiver<bool>,
    mut stop: Option<watch::Receiver<bool>>,
) {
    // Admin `/drain_listeners` stops listeners without draining the process; a listener added
    // after that (over xDS) and covered by it does not start.
    let mut admin_stop = server.stopped_listeners();
    if *drain.borrow() || admin_stop.borrow().covers(shared.inbound()) {
        return;
    }
    // Connections accepted since the loop last let the worker's other tasks run.
    let mut in_a_row = 0u32;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    tokio::spawn(serve_connection(stream, peer, shared.clone(), server.clone(), drain.clone()));
                    // `max_connections_to_accept_per_socket_event`: after N accepts, back to
                    // the event loop before the next (Envoy accepts the rest on a later event).
                    in_a_row += 1;
                    if shared.max_accept_per_event().is_some_and(|n| in_a_row >= n) {
                        in_a_row = 0;
                        tokio::task::yield_now().await;
                    }
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning; existing connections go on.
                    tracing::warn!(listener = %shared.name, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            changed = drain.changed() => {
                if changed.is_err() || *drain.borrow() {
                    break;
                }
            }
            () = stopped(&mut stop) => {
                tracing::info!(listener = %shared.name, "listener removed; its connections finish");
                break;
            }
            // (The sender lives in `server`, held here: it cannot close.)
            changed = admin_stop.changed() => {
                if changed.is_err() || admin_stop.borrow().covers(shared.inbound()) {
                    tracing::info!(listener = %shared.name, "listener stopped (admin /drain_listeners); its connections finish");
                    break;
                }
            }
        }
    }
}
