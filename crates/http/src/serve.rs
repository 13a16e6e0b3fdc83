//! One HTTP/1.1 or HTTP/2 connection (TCP's; HTTP/3 is `quickshake-quic`'s): hyper serves the
//! stream until the client is done, the connection idles out (`idle_timeout`) or the server
//! drains, each request through [`handle_request`]. The stream is whatever the L4 runtime
//! hands over (TLS or plain); nothing here touches a socket.

use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use quickshake_config::CodecType;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

use crate::header_policy::ResetStream;
use crate::request::handle_request;
use crate::runtime::{ConnInfo, HttpRuntime};

/// Run hyper on the stream until the client is done, the connection idles out, or the
/// server drains.
pub async fn serve_http<S>(
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
    let mut h2_builder = builder.http2();
    h2_builder
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(rt.max_request_headers_bytes).unwrap_or(u32::MAX));
    // `http2_protocol_options`; hyper's defaults where they are not set.
    if let Some(n) = rt.http2.max_concurrent_streams {
        h2_builder.max_concurrent_streams(n);
    }
    if let Some(n) = rt.http2.initial_stream_window_size {
        h2_builder.initial_stream_window_size(n);
    }
    if let Some(n) = rt.http2.initial_connection_window_size {
        h2_builder.initial_connection_window_size(n);
    }
    let svc_rt = rt.clone();
    let svc_info = info.clone();
    let svc_drain = drain.clone();
    let service = service_fn(move |req| {
        let draining = *svc_drain.borrow();
        let answer = handle_request(req, svc_rt.clone(), svc_info.clone(), draining);
        async move {
            let Ok(resp) = answer.await;
            // A service error makes hyper reset the HTTP/2 stream (INTERNAL_ERROR).
            match resp.extensions().get::<ResetStream>() {
                Some(_) => Err(StreamReset),
                None => Ok(resp),
            }
        }
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

/// A request whose stream is reset rather than answered (see [`ResetStream`]).
#[derive(Debug, thiserror::Error)]
#[error("request refused: stream reset")]
struct StreamReset;
