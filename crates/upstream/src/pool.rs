//! Per-worker connection pools.
//!
//! Pools are keyed by `std::thread::current().id()`: each worker thread (one
//! current-thread runtime each) gets its own map `endpoint → pool`, so a pooled
//! connection is only ever used on the thread whose runtime drives it. The map
//! lives in the cluster (not in a `thread_local!`), so dropping the cluster
//! drops its idle connections. Entries of threads that exit are kept until the
//! cluster is dropped (workers live as long as the process).
//!
//! HTTP/1.1: a LIFO list of idle keep-alive connections per endpoint. HTTP/2:
//! one shared connection per endpoint. The request path (`request`) decides
//! when a connection is opened, taken and given back.
//!
//! Reuse limits (Envoy's upstream `common_http_protocol_options`): an HTTP/1.1
//! connection idle in the list for `idle_timeout` is closed (a timer per
//! connection given back prunes the list); one that has carried
//! `max_requests_per_connection` requests is closed instead of given back; the
//! shared HTTP/2 connection is replaced after that many streams.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::client::conn::{http1, http2};

use crate::hosts::HostSet;

/// The request body type [`crate::Cluster::send`] takes.
pub type RequestBody = BoxBody<Bytes, hyper::Error>;

pub(crate) type H1 = http1::SendRequest<RequestBody>;
pub(crate) type H2 = http2::SendRequest<RequestBody>;

#[derive(Default)]
pub(crate) struct Pools {
    workers: RwLock<HashMap<ThreadId, Arc<WorkerPool>>>,
    limits: Reuse,
}

/// How long and how often a connection is reused (`ClusterSpec::idle_timeout`,
/// `max_requests_per_connection`).
#[derive(Default, Clone, Copy)]
struct Reuse {
    idle_timeout: Option<Duration>,
    max_requests: Option<u32>,
}

#[derive(Default)]
struct WorkerPool {
    /// (host-set generation seen, endpoint pools).
    state: Mutex<(u64, HashMap<SocketAddr, Arc<Endpoint>>)>,
}

/// A connection's sender, the connection's local address (`%UPSTREAM_LOCAL_ADDRESS%`) and
/// how many requests it has been given (HTTP/1.1; 0 for the shared HTTP/2 one).
pub(crate) type Pooled<S> = (S, Option<SocketAddr>, u32);

#[derive(Default)]
pub(crate) struct Endpoint {
    /// Idle HTTP/1.1 connections and when each was given back.
    idle: Mutex<Vec<(Pooled<H1>, Instant)>>,
    pub(crate) h2: tokio::sync::Mutex<Option<Pooled<H2>>>,
    /// Streams the shared HTTP/2 connection has been given.
    h2_streams: AtomicU32,
    limits: Reuse,
}

impl Endpoint {
    fn new(limits: Reuse) -> Self {
        Endpoint {
            limits,
            ..Default::default()
        }
    }

    /// The most recently given back idle connection that has not timed out.
    pub(crate) fn pop_idle(&self) -> Option<Pooled<H1>> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some((s, since)) = idle.pop() {
            if self.limits.idle_timeout.is_none_or(|t| since.elapsed() < t) {
                return Some(s);
            }
        }
        None
    }

    /// Give a connection back after a complete exchange: kept for reuse unless it is
    /// closed or has carried `max_requests_per_connection` requests (then it is dropped,
    /// which closes it); with an `idle_timeout`, a timer closes it if it is still idle then.
    pub(crate) fn push_idle(self: &Arc<Self>, s: Pooled<H1>) {
        if s.0.is_closed() || self.limits.max_requests.is_some_and(|m| s.2 >= m) {
            return;
        }
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((s, Instant::now()));
        if let (Some(t), Ok(rt)) = (
            self.limits.idle_timeout,
            tokio::runtime::Handle::try_current(),
        ) {
            let ep = Arc::downgrade(self);
            rt.spawn(async move {
                tokio::time::sleep(t).await;
                if let Some(ep) = ep.upgrade() {
                    ep.idle
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .retain(|(_, since)| since.elapsed() < t);
                }
            });
        }
    }

    /// Count a stream on the shared HTTP/2 connection; true when it is the last one that
    /// connection takes (`max_requests_per_connection`), so the next opens a new one.
    pub(crate) fn h2_stream_is_last(&self) -> bool {
        let n = self.h2_streams.fetch_add(1, Ordering::Relaxed) + 1;
        self.limits.max_requests.is_some_and(|m| n >= m)
    }

    /// A new shared HTTP/2 connection: its stream count starts again.
    pub(crate) fn h2_opened(&self) {
        self.h2_streams.store(0, Ordering::Relaxed);
    }
}

impl Pools {
    pub(crate) fn new(idle_timeout: Option<Duration>, max_requests: Option<u32>) -> Self {
        Pools {
            workers: RwLock::default(),
            limits: Reuse {
                idle_timeout: idle_timeout.filter(|t| !t.is_zero()),
                max_requests,
            },
        }
    }

    /// This thread's pool for `addr`, pruning endpoints that left the cluster.
    pub(crate) fn endpoint(&self, hosts: &HostSet, addr: SocketAddr) -> Arc<Endpoint> {
        let id = std::thread::current().id();
        let found = self
            .workers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned();
        let worker = found.unwrap_or_else(|| {
            let mut w = self.workers.write().unwrap_or_else(PoisonError::into_inner);
            w.entry(id).or_default().clone()
        });
        let mut st = worker.state.lock().unwrap_or_else(PoisonError::into_inner);
        let generation = hosts.generation();
        if st.0 != generation {
            let live = hosts.snapshot();
            st.1.retain(|a, _| live.iter().any(|h| h.addr == *a));
            st.0 = generation;
        }
        let limits = self.limits;
        st.1.entry(addr)
            .or_insert_with(|| Arc::new(Endpoint::new(limits)))
            .clone()
    }
}
