//! One downstream TCP connection: connection limit, admission (rate limits, handshakes in
//! progress per source: `quickshake-listener`'s admission), the PROXY protocol header,
//! filter-chain selection by SNI, the TLS handshake (bounded by
//! `transport_socket_connect_timeout`), then the chain's network filter (HTTP through
//! `quickshake-http`'s `serve_http`, or `tcp_proxy`) until done, idle or drained. Every
//! failure ends this connection only and moves a counter.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quickshake_http::{serve_http, ConnInfo};
use quickshake_listener::{
    select_chain, serve_tcp_proxy, ChainRuntime, HandshakeSlot, ListenerShared, Network,
    ServerShared, Stage,
};
use quickshake_tls::client_hello::{peek_sni, Peek, MAX_RECORD};
use quickshake_wire::proxy_protocol;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::handoff::{self, Movable, Socket};
use crate::prefixed::Prefixed;

/// Entry point for an accepted socket. Accounting (active gauges, destroy counters, length
/// histogram) happens when the connection's [`ConnGuard`] drops, whatever the outcome and
/// whichever thread served it.
pub(crate) async fn serve_connection(
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
    // For the listener's access logs of a connection it does not serve.
    let accepted = std::time::SystemTime::now();
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
                listener.log_unserved(accepted, peer, &local, None, false);
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
            listener.log_unserved(accepted, peer, &local, None, false);
            return;
        }
    };
    let Some(chain) = select_chain(&chains, sni.as_deref()) else {
        listener.stats.no_filter_chain_match.inc();
        listener.log_unserved(accepted, peer, &local, sni.as_deref(), true);
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
        let info = ConnInfo::new(peer, local, None, None);
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
    let info = ConnInfo::with_tls_peer(
        peer,
        local,
        sni,
        Some(ssl.version_str().to_string()),
        quickshake_http::TlsPeer::from_ssl(ssl),
    );
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
        Network::TcpProxy(tp) => serve_tcp_proxy(stream, tp, &info).await,
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

#[cfg(test)]
#[path = "connection_tests.rs"]
mod tests;
