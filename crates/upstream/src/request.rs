//! The request path of [`crate::Cluster::send`]: pick an endpoint, take a
//! pooled connection of this worker (or open one), send, and hand back the
//! response with a body that keeps the request counted until it ends.
//!
//! HTTP/1.1: a connection goes back to the pool when the response body has
//! been read to its end (a body dropped early closes the connection). HTTP/2:
//! the endpoint's shared connection, replaced when it closes.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

use crate::breaker::Permit;
use crate::connect::UpstreamStream;
use crate::error::{OverflowKind, UpstreamError};
use crate::form::{to_h1_form, to_h2_form};
use crate::hosts::Host;
use crate::pool::{Endpoint, Pooled, RequestBody, H1, H2};
use crate::shared::Shared;
use crate::spec::Protocol;
use crate::stats::ClusterStats;

/// Response extension: the endpoint that answered (for the access log's `%UPSTREAM_HOST%`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamHost(pub std::net::SocketAddr);

/// Request extension: the hosts a request's attempts went to, shared by its attempts.
/// [`crate::Cluster::send`] records the host it picks here; with `avoid` (Envoy's
/// `previous_hosts` retry host predicate) it picks again, up to `max_attempts` times, while the
/// pick is one of them, then takes the last pick.
#[derive(Debug, Clone, Default)]
pub struct PreviousHosts {
    pub tried: Arc<std::sync::Mutex<Vec<std::net::SocketAddr>>>,
    pub avoid: bool,
    pub max_attempts: u32,
}

impl PreviousHosts {
    fn contains(&self, addr: std::net::SocketAddr) -> bool {
        self.tried.lock().is_ok_and(|t| t.contains(&addr))
    }

    fn record(&self, addr: std::net::SocketAddr) {
        if let Ok(mut t) = self.tried.lock() {
            t.push(addr);
        }
    }
}

/// Request extension: the hash of the route's `hash_policy` for this request, which the
/// consistent-hash policies (ring hash, Maglev) look up; without it they pick a random host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHash(pub u64);

/// Response extension: the local address of the connection that carried the request (for the
/// access log's `%UPSTREAM_LOCAL_ADDRESS%`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamLocalAddress(pub std::net::SocketAddr);

/// A request in flight: un-counted when dropped.
struct RequestGuard {
    stats: ClusterStats,
    host: Arc<Host>,
    start: Instant,
    _permit: Permit,
    /// HTTP/1.1 connection to give back once the response is complete.
    reuse: Option<(Arc<Endpoint>, Pooled<H1>)>,
    dispatched: bool,
}

impl RequestGuard {
    fn new(stats: &ClusterStats, host: Arc<Host>, permit: Permit) -> Self {
        host.active_rq.fetch_add(1, Ordering::Relaxed);
        stats.rq_active.inc();
        RequestGuard {
            stats: stats.clone(),
            host,
            start: Instant::now(),
            _permit: permit,
            reuse: None,
            dispatched: false,
        }
    }

    /// Counts `upstream_rq_total` once, when the request is handed to a
    /// connection (as Envoy does; a request failing to connect is not counted).
    fn dispatch(&mut self) {
        if !self.dispatched {
            self.dispatched = true;
            self.stats.rq_total.inc();
            self.host.health.rq_total.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn finish(mut self, complete: bool) {
        self.stats
            .rq_time
            .record(self.start.elapsed().as_secs_f64() * 1000.0);
        if let (true, Some((ep, s))) = (complete, self.reuse.take()) {
            ep.push_idle(s);
        }
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.host.active_rq.fetch_sub(1, Ordering::Relaxed);
        self.stats.rq_active.dec();
    }
}

/// Counts a request waiting for a new connection.
struct PendingGuard<'a> {
    stats: &'a ClusterStats,
    _permit: Permit,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.stats.rq_pending_active.dec();
    }
}

async fn open_for_request(sh: &Shared, host: &Arc<Host>) -> Result<UpstreamStream, UpstreamError> {
    let permit = sh
        .breakers
        .acquire(OverflowKind::PendingRequests, &sh.stats)?;
    sh.stats.rq_pending_total.inc();
    sh.stats.rq_pending_active.inc();
    let _pending = PendingGuard {
        stats: &sh.stats,
        _permit: permit,
    };
    let r = sh.connector.open(host).await;
    if r.is_err() {
        sh.stats.rq_pending_failure_eject.inc();
        // Envoy charges a failed connect to outlier detection as a 503.
        if let Some(d) = &sh.outlier {
            d.report(&sh.hosts, host, 503);
        }
    }
    r
}

/// The whole request path of [`crate::Cluster::send`].
pub(crate) async fn send(
    sh: &Shared,
    mut req: Request<RequestBody>,
) -> Result<Response<UpstreamBody>, UpstreamError> {
    sh.hosts.ensure_resolved().await;
    let permit = sh.breakers.acquire(OverflowKind::Requests, &sh.stats)?;
    let hash = req.extensions().get::<RequestHash>().map(|h| h.0);
    let mut host = sh
        .hosts
        .pick(sh.lb, hash)
        .ok_or(UpstreamError::NoHealthyEndpoint)?;
    if let Some(prev) = req.extensions().get::<PreviousHosts>() {
        if prev.avoid {
            for _ in 0..prev.max_attempts {
                if !prev.contains(host.addr) {
                    break;
                }
                // A consistent hash would give the same host again: pick at random.
                host = sh
                    .hosts
                    .pick(sh.lb, None)
                    .ok_or(UpstreamError::NoHealthyEndpoint)?;
            }
        }
        prev.record(host.addr);
    }
    let addr = host.addr;
    let mut guard = RequestGuard::new(&sh.stats, host.clone(), permit);
    let ep = sh.pools.endpoint(&sh.hosts, addr);
    let mut local = None;
    let resp = match sh.protocol {
        Protocol::Http1 => {
            to_h1_form(&mut req, addr)?;
            let got = match send_on_idle(&ep, req, &mut guard).await? {
                Reuse::Sent(resp, s) => {
                    local = s.1;
                    guard.reuse = Some((ep.clone(), s));
                    Ok(resp)
                }
                Reuse::Unsent(req) => Err(req),
            };
            match got {
                Ok(resp) => resp,
                Err(req) => {
                    let stream = open_for_request(sh, &host).await?;
                    local = stream.local_addr();
                    let io = TokioIo::new(stream);
                    let (mut s, conn) = http1::Builder::new()
                        .handshake(io)
                        .await
                        .map_err(UpstreamError::from_hyper)?;
                    sh.stats.cx_http1_total.inc();
                    tokio::spawn(async move {
                        if let Err(e) = conn.with_upgrades().await {
                            tracing::debug!(error = %e, "upstream HTTP/1.1 connection ended");
                        }
                    });
                    guard.dispatch();
                    let resp = s
                        .send_request(req)
                        .await
                        .map_err(UpstreamError::from_hyper)?;
                    guard.reuse = Some((ep.clone(), (s, local, 1)));
                    resp
                }
            }
        }
        Protocol::Http2 => {
            to_h2_form(&mut req, sh.connector.tls_for(addr).is_some(), addr)?;
            // A shared connection that closed (GOAWAY, idle close) under us
            // gets one fresh replacement if it never took the request.
            let mut fresh_tried = false;
            loop {
                let (mut s, l, _) = h2_sender(sh, &ep, &host).await?;
                local = l;
                let unsent = match s.ready().await {
                    Err(e) => (Some(req), e),
                    Ok(()) => {
                        guard.dispatch();
                        match s.try_send_request(req).await {
                            Ok(resp) => break resp,
                            Err(mut e) => (e.take_message(), e.into_error()),
                        }
                    }
                };
                match unsent {
                    (Some(r), _) if !fresh_tried && s.is_closed() => {
                        fresh_tried = true;
                        req = r;
                    }
                    (_, e) => return Err(UpstreamError::from_hyper(e)),
                }
            }
        }
    };
    let status = resp.status().as_u16();
    sh.stats.record_response(status);
    host.health.charge_response(status);
    if let Some(d) = &sh.outlier {
        d.report(&sh.hosts, &host, status);
    }
    let mut resp = resp.map(|inner| UpstreamBody::new(inner, guard));
    resp.extensions_mut().insert(UpstreamHost(addr));
    if let Some(l) = local {
        resp.extensions_mut().insert(UpstreamLocalAddress(l));
    }
    Ok(resp)
}

enum Reuse {
    Sent(Response<Incoming>, Pooled<H1>),
    Unsent(Request<RequestBody>),
}

/// Sends on an idle HTTP/1.1 connection of this worker. A request that a
/// connection never took (it closed meanwhile) moves on to the next one;
/// `Unsent` gives it back when none is left.
async fn send_on_idle(
    ep: &Endpoint,
    mut req: Request<RequestBody>,
    guard: &mut RequestGuard,
) -> Result<Reuse, UpstreamError> {
    while let Some((mut s, local, uses)) = ep.pop_idle() {
        if s.ready().await.is_err() {
            continue;
        }
        guard.dispatch();
        match s.try_send_request(req).await {
            Ok(resp) => return Ok(Reuse::Sent(resp, (s, local, uses + 1))),
            Err(mut e) => match e.take_message() {
                Some(r) => req = r,
                None => return Err(UpstreamError::from_hyper(e.into_error())),
            },
        }
    }
    Ok(Reuse::Unsent(req))
}

async fn h2_sender(
    sh: &Shared,
    ep: &Endpoint,
    host: &Arc<Host>,
) -> Result<Pooled<H2>, UpstreamError> {
    let mut slot = ep.h2.lock().await;
    if let Some(s) = slot.as_ref().filter(|s| !s.0.is_closed()).cloned() {
        if ep.h2_stream_is_last() {
            *slot = None; // max_requests_per_connection: the next request opens a new one
        }
        return Ok(s);
    }
    *slot = None;
    let stream = open_for_request(sh, host).await?;
    let local = stream.local_addr();
    let io = TokioIo::new(stream);
    let (s, conn) = http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .initial_stream_window_size(sh.http2_windows.0)
        .initial_connection_window_size(sh.http2_windows.1)
        .handshake(io)
        .await
        .map_err(UpstreamError::from_hyper)?;
    sh.stats.cx_http2_total.inc();
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "upstream HTTP/2 connection ended");
        }
    });
    ep.h2_opened();
    if !ep.h2_stream_is_last() {
        *slot = Some((s.clone(), local, 0));
    }
    Ok((s, local, 0))
}

/// The response body [`crate::Cluster::send`] returns: hyper's `Incoming`,
/// plus the bookkeeping that ends with it — the request stays counted in
/// `upstream_rq_active` (and against `max_requests`, and in least-request
/// weights) until the body ends or is dropped; `upstream_rq_time` is recorded
/// then; an HTTP/1.1 connection returns to the pool only when the body was
/// read to its end. Implements `hyper::body::Body<Data = Bytes, Error = hyper::Error>`;
/// box it with `http_body_util::BodyExt::boxed` if needed. `hyper::upgrade::on`
/// works on the response (its extensions are kept).
pub struct UpstreamBody {
    inner: Incoming,
    guard: Option<RequestGuard>,
}

impl std::fmt::Debug for UpstreamBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamBody")
            .field("inner", &self.inner)
            .finish()
    }
}

impl UpstreamBody {
    fn new(inner: Incoming, guard: RequestGuard) -> Self {
        UpstreamBody {
            inner,
            guard: Some(guard),
        }
    }

    fn finish(&mut self, complete: bool) {
        if let Some(g) = self.guard.take() {
            g.finish(complete);
        }
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_frame(cx);
        match &r {
            Poll::Ready(None) => this.finish(true),
            Poll::Ready(Some(Err(_))) => this.finish(false),
            _ => {}
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for UpstreamBody {
    fn drop(&mut self) {
        let complete = self.inner.is_end_stream();
        self.finish(complete);
    }
}
