//! Serving [`crate::handle`] over HTTP/1.1 with hyper.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::handlers::handle;
use crate::state::AdminState;

/// How long in-flight admin requests may take to finish after shutdown.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

fn respond(state: &dyn AdminState, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let target = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().path(), |pq| pq.as_str());
    let r = handle(state, req.method(), target);
    tracing::debug!(method = %req.method(), path = target, status = r.status, "admin request");
    let mut resp = Response::new(Full::new(Bytes::from(r.body)));
    *resp.status_mut() =
        StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(r.content_type));
    // Envoy's admin defaults: no caching, no content sniffing.
    h.insert(
        CACHE_CONTROL,
        HeaderValue::from_static("no-cache, max-age=0"),
    );
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    resp
}

/// Serves the admin endpoint on `listener` until `shutdown` resolves, then
/// stops accepting and gives in-flight requests a short grace period (so a
/// `/quitquitquit` answer still reaches its client).
pub async fn serve(
    listener: TcpListener,
    state: Arc<dyn AdminState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        tracing::warn!(error = %e, "admin accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let state = Arc::clone(&state);
                let svc = service_fn(move |req: Request<Incoming>| {
                    let resp = respond(state.as_ref(), &req);
                    async move { Ok::<_, Infallible>(resp) }
                });
                let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(%peer, error = %e, "admin connection ended with error");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(DRAIN_GRACE) => {
            tracing::debug!("admin connections still open after grace period");
        }
    }
    Ok(())
}
