//! One downstream connection: connection limit, admission (rate limits, handshakes in progress
//! per source: [`crate::admission`]), filter-chain selection by SNI, the TLS handshake (bounded
//! by `transport_socket_connect_timeout`), then HTTP until done, idle or drained. Every failure
//! ends this connection only and moves a counter.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use quickshake_config::CodecType;
use quickshake_tls::client_hello::{match_rank, peek_sni, Peek, MAX_RECORD};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::admission::Stage;
use crate::handoff::{self, Movable, Socket};
use crate::handshake_limit::HandshakeSlot;
use crate::http::handle_request;
use crate::http_runtime::{ConnInfo, HttpRuntime};
use crate::listener::{ChainRuntime, ListenerShared, Network};
use crate::prefixed::Prefixed;
use crate::shared::ServerShared;
use crate::tcp_proxy;
use quickshake_wire::proxy_protocol;

/// Entry point for an accepted socket. Accounting (active gauges, destroy counters, length
/// histogram) happens when the connection's [`ConnGuard`] drops, whatever the outcome and
/// whichever thread served it.
pub async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    listener: Arc<ListenerShared>,
    server: Arc<ServerShared>,
    drain: watch::Receiver<bool>,
) {
    let stats = &listener.stats;
    let limited = !listener.ignore_global_conn_limit;
    if !server.admit(limited) {
        stats.downstream_cx_total.inc();
        stats.downstream_cx_overflow.inc();
        stats.downstream_global_cx_overflow.inc();
        drop(stream);
        return;
    }
    // Listener filters that need no byte of the socket: one they refuse is closed before it
    // becomes a connection (not in downstream_cx_total), as Envoy's listener filters close it.
    let admitted = listener
        .admission
        .load()
        .admit(Stage::Accept, peer.ip(), None);
    let Ok(handshake_slot) = admitted else {
        server.leave(limited);
        return;
    };
    stats.downstream_cx_total.inc();
    stats.downstream_cx_active.inc();
    let _ = stream.set_nodelay(true);
    let local = stream
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let guard = ConnGuard {
        listener,
        server,
        started: Instant::now(),
        handshake_slot,
    };
    run(Socket::Live(stream), peer, local, drain, guard).await;
}

/// One admitted connection's accounting, done on drop.
struct ConnGuard {
    listener: Arc<ListenerShared>,
    server: Arc<ServerShared>,
    started: Instant,
    /// Its place among its source's handshakes in progress (`handshake_limit`), given back
    /// when the handshake ends ([`ConnGuard::handshake_done`]) or the connection does.
    handshake_slot: Option<HandshakeSlot>,
}

impl ConnGuard {
    fn handshake_done(&mut self) {
        self.handshake_slot = None;
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let stats = &self.listener.stats;
        stats.downstream_cx_active.dec();
        stats.downstream_cx_destroy.inc();
        stats
            .downstream_cx_length_ms
            .record(self.started.elapsed().as_secs_f64() * 1000.0);
        self.server.leave(!self.listener.ignore_global_conn_limit);
    }
}

async fn run(
    stream: Socket,
    mut peer: SocketAddr,
    local: String,
    drain: watch::Receiver<bool>,
    mut guard: ConnGuard,
) {
    let listener = guard.listener.clone();
    let chains = listener.chains.load_full();
    let mut stream = Prefixed::new(Vec::new(), stream);
    if listener.proxy_protocol {
        let timeout = chains
            .iter()
            .map(|c| c.handshake_timeout)
            .max()
            .unwrap_or(Duration::from_secs(10));
        match tokio::time::timeout(timeout, read_proxy_header(stream.get_mut())).await {
            Ok(Ok((source, rest))) => {
                if let Some(src) = source {
                    peer = src;
                }
                stream = Prefixed::new(rest, stream.into_inner());
            }
            Ok(Err(reason)) => {
                listener.stats.downstream_cx_proxy_proto_error.inc();
                tracing::debug!(%peer, reason, "malformed PROXY protocol header");
                return;
            }
            Err(_) => {
                listener.stats.downstream_pre_cx_timeout.inc();
                return;
            }
        }
        // The listener filters after proxy_protocol, on the client's address.
        let slot = guard.handshake_slot.take();
        match listener
            .admission
            .load()
            .admit(Stage::AfterProxyHeader, peer.ip(), slot)
        {
            Ok(slot) => guard.handshake_slot = slot,
            Err(_) => return,
        }
    }
    if chains.len() == 1 {
        let Some(chain) = chains.first().cloned() else {
            return;
        };
        let deadline = Instant::now() + chain.handshake_timeout;
        return serve_chain(stream, chain, deadline, peer, local, drain, guard).await;
    }
    // Several chains: read the ClientHello's SNI first (as Envoy's tls_inspector does), within
    // the handshake timeout, then hand the bytes read to the TLS stack.
    let timeout = chains
        .iter()
        .map(|c| c.handshake_timeout)
        .max()
        .unwrap_or(Duration::from_secs(10));
    let deadline = Instant::now() + timeout;
    let (hello, sni) = match tokio::time::timeout(timeout, read_client_hello(&mut stream)).await {
        Ok(Some(read)) => read,
        Ok(None) => {
            // Closed or failed before a ClientHello: nothing to serve.
            listener.stats.ssl.connection_error.inc();
            return;
        }
        Err(_) => {
            listener.stats.downstream_pre_cx_timeout.inc();
            return;
        }
    };
    let Some(chain) = select_chain(&chains, sni.as_deref()) else {
        listener.stats.no_filter_chain_match.inc();
        return;
    };
    let stream = Prefixed::new(hello, stream);
    serve_chain(stream, chain, deadline, peer, local, drain, guard).await;
}

/// The chain's rate limits, then TLS (if the chain has it) then HTTP on one connection.
/// `deadline` bounds the handshake.
async fn serve_chain<S>(
    stream: S,
    chain: Arc<ChainRuntime>,
    deadline: Instant,
    peer: SocketAddr,
    local: String,
    drain: watch::Receiver<bool>,
    mut guard: ConnGuard,
) where
    S: AsyncRead + AsyncWrite + Movable + Unpin + Send + 'static,
{
    // Network local_ratelimit filters: closed as the connection is created, before any TLS.
    if chain.rate_limits.admit().is_err() {
        return;
    }
    let Some(tls) = chain.tls.clone() else {
        guard.handshake_done();
        let info = conn_info(peer, local, None, None);
        serve_network(stream, chain, info, None, drain, guard).await;
        return;
    };
    let listener = guard.listener.clone();
    let stats = &listener.stats;
    let started = Instant::now();
    let ssl = match tls.new_ssl() {
        Ok(s) => s,
        Err(_) => {
            stats.ssl.connection_error.inc();
            return;
        }
    };
    let handshake = tokio_boring::SslStreamBuilder::new(ssl, stream).accept();
    let handshake = tokio::time::timeout_at(deadline.into(), handshake).await;
    guard.handshake_done();
    let tls_stream = match handshake {
        Err(_) => {
            stats.downstream_cx_transport_socket_connect_timeout.inc();
            return;
        }
        Ok(Err(e)) => {
            stats.ssl.record_failure(&e);
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            return;
        }
        Ok(Ok(s)) => s,
    };
    stats
        .handshake_ms
        .record(started.elapsed().as_secs_f64() * 1000.0);
    let ssl = tls_stream.ssl();
    stats.ssl.record_success(ssl);
    let sni = ssl
        .servername(boring::ssl::NameType::HOST_NAME)
        .map(str::to_string);
    let alpn_h2 = ssl.selected_alpn_protocol() == Some(b"h2");
    let info = conn_info(peer, local, sni, Some(ssl.version_str().to_string()));
    serve_network(tls_stream, chain, info, Some(alpn_h2), drain, guard).await;
}

/// Serve an established connection here, or hand it to this worker's serving thread when
/// handshakes run on their own thread (see [`handoff`]).
async fn serve_network<S>(
    mut stream: S,
    chain: Arc<ChainRuntime>,
    info: Arc<ConnInfo>,
    alpn_h2: Option<bool>,
    drain: watch::Receiver<bool>,
    guard: ConnGuard,
) where
    S: AsyncRead + AsyncWrite + Movable + Unpin + Send + 'static,
{
    if !handoff::hands_off() {
        serve_filter(stream, &chain, info, alpn_h2, drain).await;
        drop(guard);
        return;
    }
    if let Err(e) = stream.detach() {
        tracing::debug!(peer = %info.peer, error = %e, "cannot move connection to serving thread");
        return;
    }
    let job: handoff::ServeJob = Box::pin(async move {
        match stream.attach() {
            Ok(()) => serve_filter(stream, &chain, info, alpn_h2, drain).await,
            Err(e) => tracing::debug!(peer = %info.peer, error = %e, "cannot register connection"),
        }
        drop(guard);
    });
    // The serving thread stopped (drain): serve it here instead.
    if let Err(job) = handoff::hand_off(job) {
        job.await;
    }
}

/// The chain's network filter: the HTTP connection manager or `tcp_proxy`.
async fn serve_filter<S>(
    stream: S,
    chain: &ChainRuntime,
    info: Arc<ConnInfo>,
    alpn_h2: Option<bool>,
    drain: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    match &chain.network {
        Network::Http(http) => {
            if info.tls_version.is_some() {
                http.stats.downstream_cx_ssl_total.inc();
            }
            serve_http(stream, http.clone(), info, alpn_h2, drain).await;
        }
        Network::TcpProxy(tp) => tcp_proxy::serve(stream, tp).await,
    }
}

/// Poll a connection until the client is done, it idles out, or the server drains.
async fn drive<C, F>(
    mut conn: std::pin::Pin<&mut C>,
    shutdown: F,
    rt: &HttpRuntime,
    info: &ConnInfo,
    mut drain: watch::Receiver<bool>,
) where
    C: std::future::Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>>,
    F: Fn(std::pin::Pin<&mut C>),
{
    let idle = rt.idle_timeout;
    let mut draining = *drain.borrow();
    if draining {
        shutdown(conn.as_mut());
    }
    loop {
        let wait = info
            .idle_for()
            .map_or(idle, |spent| idle.saturating_sub(spent));
        tokio::select! {
            done = conn.as_mut() => {
                if let Err(e) = done {
                    count_protocol_error(rt, e.as_ref());
                }
                break;
            }
            _ = tokio::time::sleep(wait.max(Duration::from_millis(1))) => {
                if info.idle_for().is_some_and(|spent| spent >= idle) {
                    rt.stats.downstream_cx_idle_timeout.inc();
                    shutdown(conn.as_mut());
                    // Give the protocol a moment to say goodbye, then drop the socket.
                    let _ = tokio::time::timeout(Duration::from_secs(1), conn.as_mut()).await;
                    break;
                }
            }
            changed = drain.changed(), if !draining => {
                if changed.is_err() || *drain.borrow() {
                    draining = true;
                    shutdown(conn.as_mut());
                }
            }
        }
    }
}

/// hyper answered a malformed request itself (400, or 431 for oversized headers) before any
/// handler ran: count it as Envoy does (`downstream_cx_protocol_error`, and the 4xx reply).
fn count_protocol_error(rt: &HttpRuntime, e: &(dyn std::error::Error + 'static)) {
    let Some(h) = e.downcast_ref::<hyper::Error>() else {
        return;
    };
    if h.is_parse() || h.is_parse_too_large() {
        rt.stats.downstream_cx_protocol_error.inc();
        rt.stats.downstream_rq_xx[3].inc();
    }
}

/// Read a PROXY protocol header (v1 or v2) and nothing more than needed: the client address
/// it carries (none for LOCAL/UNKNOWN) and the bytes read past it.
async fn read_proxy_header<R: AsyncRead + Unpin>(
    stream: &mut R,
) -> Result<(Option<SocketAddr>, Vec<u8>), &'static str> {
    let mut buf = Vec::with_capacity(256);
    loop {
        let mut chunk = [0u8; 512];
        let n = stream.read(&mut chunk).await.map_err(|_| "read failed")?;
        if n == 0 {
            return Err("closed before a complete PROXY header");
        }
        buf.extend_from_slice(&chunk[..n]);
        match proxy_protocol::parse(&buf) {
            proxy_protocol::Parse::NeedMore if buf.len() <= proxy_protocol::MAX_V2_LEN => {}
            proxy_protocol::Parse::NeedMore => return Err("PROXY header too long"),
            proxy_protocol::Parse::Invalid(reason) => return Err(reason),
            proxy_protocol::Parse::Done(h) => {
                let rest = buf.split_off(h.consumed().min(buf.len()));
                let source = match h {
                    proxy_protocol::ProxyHeader::Proxied { source, .. } => Some(source),
                    proxy_protocol::ProxyHeader::Local { .. } => None,
                };
                return Ok((source, rest));
            }
        }
    }
}

pub(crate) fn conn_info(
    peer: SocketAddr,
    local: String,
    sni: Option<String>,
    tls_version: Option<String>,
) -> Arc<ConnInfo> {
    Arc::new(ConnInfo {
        started: Instant::now(),
        peer: peer.to_string(),
        local,
        sni,
        tls_version,
        active_requests: Default::default(),
        last_activity_ms: Default::default(),
    })
}

/// The chain for an SNI: a chain naming it, else the chain without names.
pub(crate) fn select_chain(
    chains: &[Arc<ChainRuntime>],
    sni: Option<&str>,
) -> Option<Arc<ChainRuntime>> {
    // The most specific name wins (exact, then the longest wildcard suffix), as in Envoy.
    let by_name = sni.and_then(|name| {
        chains
            .iter()
            .filter_map(|c| {
                c.server_names
                    .iter()
                    .filter_map(|p| match_rank(p, name))
                    .max()
                    .map(|r| (r, c))
            })
            .max_by_key(|(r, _)| *r)
            .map(|(_, c)| c)
    });
    by_name
        .or_else(|| chains.iter().find(|c| c.server_names.is_empty()))
        .cloned()
}

/// Read (consuming) until the first TLS record is complete. Returns the bytes read and the
/// SNI; `None` if the peer closed or failed first. Bytes that are not TLS are returned as they
/// are, for the handshake to reject.
async fn read_client_hello<R: AsyncRead + Unpin>(
    stream: &mut R,
) -> Option<(Vec<u8>, Option<String>)> {
    let mut buf = Vec::with_capacity(2048);
    loop {
        let mut chunk = [0u8; 4096];
        let room = MAX_RECORD.saturating_sub(buf.len()).clamp(1, chunk.len());
        let n = stream.read(&mut chunk[..room]).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        match peek_sni(&buf) {
            Peek::ClientHello { sni } => return Some((buf, sni)),
            Peek::NotTls => return Some((buf, None)),
            Peek::NeedMore if buf.len() >= MAX_RECORD => return Some((buf, None)),
            Peek::NeedMore => {}
        }
    }
}

/// Run hyper on the stream until the client is done, the connection idles out, or the
/// server drains.
async fn serve_http<S>(
    stream: S,
    rt: Arc<HttpRuntime>,
    info: Arc<ConnInfo>,
    alpn_h2: Option<bool>,
    drain: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let stats = &rt.stats;
    stats.downstream_cx_total.inc();
    stats.downstream_cx_active.inc();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    let h2 = match rt.codec {
        CodecType::Http1 => false,
        CodecType::Http2 => true,
        // HTTP3 is refused on TCP listeners by the configuration.
        CodecType::Auto | CodecType::Http3 => alpn_h2.unwrap_or(false),
    };
    match rt.codec {
        CodecType::Http1 => builder = builder.http1_only(),
        CodecType::Http2 => builder = builder.http2_only(),
        CodecType::Auto if alpn_h2 == Some(true) => builder = builder.http2_only(),
        CodecType::Auto | CodecType::Http3 => {}
    }
    if h2 {
        stats.downstream_cx_http2_total.inc();
    } else {
        stats.downstream_cx_http1_total.inc();
    }
    builder
        .http1()
        .timer(TokioTimer::new())
        .max_buf_size(rt.max_request_headers_bytes.max(8192))
        .header_read_timeout(Duration::from_secs(30));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(rt.max_request_headers_bytes).unwrap_or(u32::MAX));
    let svc_rt = rt.clone();
    let svc_info = info.clone();
    let svc_drain = drain.clone();
    let service = service_fn(move |req| {
        let draining = *svc_drain.borrow();
        handle_request(req, svc_rt.clone(), svc_info.clone(), draining)
    });
    // HTTP/2 (ALPN or codec): hyper's HTTP/2 server directly (the upgrade-capable path would
    // sniff the preface and answer a bad one in HTTP/1.1). Otherwise auto-detection with
    // HTTP/1.1 upgrades (WebSocket) enabled.
    if h2 {
        let conn = builder.serve_connection(TokioIo::new(stream), service);
        tokio::pin!(conn);
        drive(conn.as_mut(), |c| c.graceful_shutdown(), &rt, &info, drain).await;
    } else {
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
        tokio::pin!(conn);
        drive(conn.as_mut(), |c| c.graceful_shutdown(), &rt, &info, drain).await;
    }
    stats.downstream_cx_active.dec();
    stats.downstream_cx_destroy.inc();
}

#[cfg(test)]
#[path = "connection_tests.rs"]
mod tests;
