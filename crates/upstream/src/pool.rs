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

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::ThreadId;

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
}

#[derive(Default)]
struct WorkerPool {
    /// (host-set generation seen, endpoint pools).
    state: Mutex<(u64, HashMap<SocketAddr, Arc<Endpoint>>)>,
}

/// A connection's sender and the connection's local address (`%UPSTREAM_LOCAL_ADDRESS%`).
pub(crate) type Pooled<S> = (S, Option<SocketAddr>);

#[derive(Default)]
pub(crate) struct Endpoint {
    idle: Mutex<Vec<Pooled<H1>>>,
    pub(crate) h2: tokio::sync::Mutex<Option<Pooled<H2>>>,
}

impl Endpoint {
    pub(crate) fn pop_idle(&self) -> Option<Pooled<H1>> {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
    }

    pub(crate) fn push_idle(&self, s: Pooled<H1>) {
        if !s.0.is_closed() {
            self.idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(s);
        }
    }
}

impl Pools {
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
        st.1.entry(addr).or_default().clone()
    }
}
