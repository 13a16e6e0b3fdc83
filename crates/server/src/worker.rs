//! Workers as Envoy runs them: N threads, each with its own current-thread event loop and its
//! own SO_REUSEPORT socket per listener, so a connection is accepted, handshaken and served on
//! one thread. (A provider's per-worker queue relies on this: an operation resumes on the
//! thread that queued it.)

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::connection::serve_connection;
use crate::listener::ListenerShared;
use crate::ServerShared;

/// Run one worker until drained: accept on every listener, then wait for connections to end.
pub fn run_worker(
    index: usize,
    sockets: Vec<(Arc<ListenerShared>, std::net::TcpListener)>,
    server: Arc<ServerShared>,
    drain: watch::Receiver<bool>,
    drain_timeout: Duration,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(worker = index, error = %e, "cannot start worker event loop");
            return;
        }
    };
    rt.block_on(async move {
        let mut accepts = Vec::new();
        for (shared, std_listener) in sockets {
            match TcpListener::from_std(std_listener) {
                Ok(l) => accepts.push(tokio::spawn(accept_loop(
                    l,
                    shared,
                    server.clone(),
                    drain.clone(),
                ))),
                Err(e) => tracing::error!(worker = index, error = %e, "cannot register listener"),
            }
        }
        for a in accepts {
            let _ = a.await;
        }
        // Drained: wait for this process's connections to finish, bounded.
        let deadline = tokio::time::Instant::now() + drain_timeout;
        while server.active() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    tracing::debug!(worker = index, "worker stopped");
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<ListenerShared>,
    server: Arc<ServerShared>,
    mut drain: watch::Receiver<bool>,
) {
    if *drain.borrow() {
        return;
    }
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    tokio::spawn(serve_connection(stream, peer, shared.clone(), server.clone(), drain.clone()));
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
        }
    }
}
