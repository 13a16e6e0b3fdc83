//! One downstream connection: connection limit, filter-chain selection by SNI, the TLS
//! handshake (bounded by `transport_socket_connect_timeout`), then HTTP until done, idle or
//! drained. Every failure ends this connection only and moves a counter.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use quickshake_config::CodecType;
use quickshake_tls::client_hello::{peek_sni, server_name_matches, Peek, MAX_RECORD};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::http::{handle_request, ConnInfo, HttpRuntime};
use crate::listener::{ChainRuntime, ListenerShared};
use crate::ServerShared;

/// Entry point for an accepted socket. Accounting (active gauges, destroy counters, length
/// histogram) happens here whatever the outcome.
pub async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    listener: Arc<ListenerShared>,
    server: Arc<ServerShared>,
    drain: watch::Receiver<bool>,
) {
    let stats = &listener.stats;
    stats.downstream_cx_total.inc();
    if !server.try_admit() {
        stats.downstream_cx_overflow.inc();
        stats.downstream_global_cx_overflow.inc();
        drop(stream);
        return;
    }
    stats.downstream_cx_active.inc();
    let started = Instant::now();
    let _ = stream.set_nodelay(true);
    run(stream, peer, &listener, drain).await;
    stats.downstream_cx_active.dec();
    stats.downstream_cx_destroy.inc();
    stats
        .downstream_cx_length_ms
        .record(started.elapsed().as_secs_f64() * 1000.0);
    server.release();
}

async fn run(
    stream: TcpStream,
    peer: SocketAddr,
    listener: &ListenerShared,
    drain: watch::Receiver<bool>,
) {
    let chains = listener.chains.load_full();
    let chain = match select_chain(&chains, &stream, listener).await {
        Some(c) => c,
        None => return,
    };
    let local = stream
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let Some(tls) = chain.tls.clone() else {
        let info = conn_info(peer, local, None, None);
        serve_http(stream, chain.http.clone(), info, None, drain).await;
        return;
    };
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
    let tls_stream = match tokio::time::timeout(chain.handshake_timeout, handshake).await {
        Err(_) => {
            stats.downstream_cx_transport_socket_connect_timeout.inc();
            return;
        }
        Ok(Err(e)) => {
            stats.ssl.connection_error.inc();
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
    chain.http.stats.downstream_cx_ssl_total.inc();
    serve_http(tls_stream, chain.http.clone(), info, Some(alpn_h2), drain).await;
}

fn conn_info(
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

/// Pick the filter chain. With one chain there is nothing to read; with several, peek at the
/// ClientHello's SNI (as Envoy's tls_inspector does) within the handshake timeout.
async fn select_chain(
    chains: &[Arc<ChainRuntime>],
    stream: &TcpStream,
    listener: &ListenerShared,
) -> Option<Arc<ChainRuntime>> {
    if chains.len() == 1 {
        return chains.first().cloned();
    }
    let timeout = chains
        .iter()
        .map(|c| c.handshake_timeout)
        .max()
        .unwrap_or(Duration::from_secs(10));
    let sni = match tokio::time::timeout(timeout, peek_client_hello(stream)).await {
        Ok(sni) => sni,
        Err(_) => {
            listener.stats.downstream_pre_cx_timeout.inc();
            return None;
        }
    };
    let by_name = sni.as_deref().and_then(|name| {
        chains
            .iter()
            .find(|c| c.server_names.iter().any(|p| server_name_matches(p, name)))
    });
    let chosen = by_name.or_else(|| chains.iter().find(|c| c.server_names.is_empty()));
    if chosen.is_none() {
        listener.stats.no_filter_chain_match.inc();
    }
    chosen.cloned()
}

/// Peek (without consuming) until the first TLS record is complete; its SNI, if any.
/// A peer that sends part of a ClientHello and stalls is polled with a growing back-off (the
/// socket stays readable while unread bytes sit in it, so waiting for readiness would spin).
async fn peek_client_hello(stream: &TcpStream) -> Option<String> {
    let mut buf = vec![0u8; MAX_RECORD];
    let mut backoff = Duration::from_millis(1);
    loop {
        let n = stream.peek(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        match peek_sni(&buf[..n]) {
            Peek::ClientHello { sni } => return sni,
            Peek::NotTls => return None,
            Peek::NeedMore => {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(50));
            }
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
    mut drain: watch::Receiver<bool>,
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
        CodecType::Auto => alpn_h2.unwrap_or(false),
    };
    match rt.codec {
        CodecType::Http1 => builder = builder.http1_only(),
        CodecType::Http2 => builder = builder.http2_only(),
        CodecType::Auto if alpn_h2 == Some(true) => builder = builder.http2_only(),
        CodecType::Auto => {}
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
    let service = service_fn(move |req| handle_request(req, svc_rt.clone(), svc_info.clone()));
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let idle = rt.idle_timeout;
    let mut draining = *drain.borrow();
    if draining {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        let wait = info
            .idle_for()
            .map_or(idle, |spent| idle.saturating_sub(spent));
        tokio::select! {
            _ = conn.as_mut() => break,
            _ = tokio::time::sleep(wait.max(Duration::from_millis(1))) => {
                if info.idle_for().is_some_and(|spent| spent >= idle) {
                    stats.downstream_cx_idle_timeout.inc();
                    conn.as_mut().graceful_shutdown();
                    // Give the protocol a moment to say goodbye, then drop the socket.
                    let _ = tokio::time::timeout(Duration::from_secs(1), conn.as_mut()).await;
                    break;
                }
            }
            changed = drain.changed(), if !draining => {
                if changed.is_err() || *drain.borrow() {
                    draining = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
    stats.downstream_cx_active.dec();
    stats.downstream_cx_destroy.inc();
}
