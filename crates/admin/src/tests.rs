use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use hyper::Method;
use quickshake_stats::Store;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

use super::*;

#[derive(Default)]
struct Fake {
    store: Store,
    live: AtomicBool,
    hc_failed: AtomicBool,
    quits: AtomicUsize,
    drains: AtomicUsize,
    last_drain: std::sync::Mutex<Option<DrainListeners>>,
    quit_signal: Arc<Notify>,
}

impl AdminState for Fake {
    fn stats(&self) -> &Store {
        &self.store
    }
    fn server_info(&self) -> serde_json::Value {
        let state = if self.live.load(Ordering::SeqCst) {
            "LIVE"
        } else {
            "PRE_INITIALIZING"
        };
        json!({"version": "quickshake/0.1.0", "state": state,
               "command_line_options": {"concurrency": 2}})
    }
    fn certs(&self) -> serde_json::Value {
        json!({"certificates": []})
    }
    fn config_dump(&self) -> serde_json::Value {
        json!({"configs": []})
    }
    fn is_live(&self) -> bool {
        self.live.load(Ordering::SeqCst)
    }
    fn set_health_check_failed(&self, failed: bool) {
        self.hc_failed.store(failed, Ordering::SeqCst);
    }
    fn quit(&self) {
        self.quits.fetch_add(1, Ordering::SeqCst);
        self.quit_signal.notify_one();
    }
    fn drain_listeners(&self, drain: DrainListeners) {
        self.drains.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut last) = self.last_drain.lock() {
            *last = Some(drain);
        }
    }
}

fn fake() -> Fake {
    let f = Fake::default();
    f.live.store(true, Ordering::SeqCst);
    f.store
        .counter("listener.0.0.0.0_9000.ssl.handshake")
        .add(2);
    f.store.gauge("server.live").set(1);
    f
}

#[test]
fn ready_reports_state() {
    let f = fake();
    let r = handle(&f, &Method::GET, "/ready");
    assert_eq!(
        (r.status, r.body.as_str(), r.content_type),
        (200, "LIVE\n", TEXT)
    );
    f.live.store(false, Ordering::SeqCst);
    let r = handle(&f, &Method::GET, "/ready");
    assert_eq!((r.status, r.body.as_str()), (503, "PRE_INITIALIZING\n"));
}

#[test]
fn stats_formats() {
    let f = fake();
    let r = handle(&f, &Method::GET, "/stats");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body,
        "listener.0.0.0.0_9000.ssl.handshake: 2\nserver.live: 1\n"
    );
    let expected_prom = "# TYPE envoy_listener_ssl_handshake counter\n\
        envoy_listener_ssl_handshake{envoy_listener_address=\"0.0.0.0_9000\"} 2\n\n\
        # TYPE envoy_server_live gauge\nenvoy_server_live{} 1\n\n";
    assert_eq!(
        handle(&f, &Method::GET, "/stats?format=prometheus").body,
        expected_prom
    );
    assert_eq!(
        handle(&f, &Method::GET, "/stats/prometheus").body,
        expected_prom
    );
    let r = handle(&f, &Method::GET, "/stats/prometheus?filter=server");
    assert_eq!(
        r.body,
        "# TYPE envoy_server_live gauge\nenvoy_server_live{} 1\n\n"
    );
    let r = handle(&f, &Method::GET, "/stats?format=json&filter=live");
    assert_eq!(r.content_type, JSON);
    assert_eq!(r.body, r#"{"stats":[{"name":"server.live","value":1}]}"#);
}

#[test]
fn bad_queries_are_400() {
    let f = fake();
    let r = handle(&f, &Method::GET, "/stats?filter=(");
    assert_eq!(r.status, 400);
    assert!(r.body.starts_with("Invalid re2 regex"), "{}", r.body);
    let r = handle(&f, &Method::GET, "/stats?histogram_buckets=bogus");
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body,
        "usage: /stats?histogram_buckets=(cumulative|disjoint|detailed|summary)\n"
    );
}

#[test]
fn mutating_endpoints_require_post() {
    let f = fake();
    for path in [
        "/healthcheck/fail",
        "/healthcheck/ok",
        "/quitquitquit",
        "/drain_listeners",
    ] {
        let r = handle(&f, &Method::GET, path);
        assert_eq!(r.status, 405, "{path}");
        assert_eq!(r.body, "Method GET not allowed, POST required.");
    }
    assert_eq!(f.quits.load(Ordering::SeqCst), 0);

    let r = handle(&f, &Method::POST, "/healthcheck/fail");
    assert_eq!((r.status, r.body.as_str()), (200, "OK\n"));
    assert!(f.hc_failed.load(Ordering::SeqCst));
    handle(&f, &Method::POST, "/healthcheck/ok");
    assert!(!f.hc_failed.load(Ordering::SeqCst));
    handle(&f, &Method::POST, "/drain_listeners");
    assert_eq!(f.drains.load(Ordering::SeqCst), 1);
    let r = handle(&f, &Method::POST, "/quitquitquit");
    assert_eq!((r.status, r.body.as_str()), (200, "OK\n"));
    assert_eq!(f.quits.load(Ordering::SeqCst), 1);
}

#[test]
fn drain_listeners_reads_envoys_flags() {
    let f = fake();
    let last = |f: &Fake| *f.last_drain.lock().expect("lock");
    let r = handle(&f, &Method::POST, "/drain_listeners");
    assert_eq!((r.status, r.body.as_str()), (200, "OK\n"));
    assert_eq!(last(&f), Some(DrainListeners::default()));
    // Present counts, whatever the value.
    handle(
        &f,
        &Method::POST,
        "/drain_listeners?inboundonly&graceful=false&skip_exit=",
    );
    assert_eq!(
        last(&f),
        Some(DrainListeners {
            inbound_only: true,
            graceful: true,
            skip_exit: true,
        })
    );
    // skip_exit needs graceful: refused, nothing done.
    let r = handle(&f, &Method::POST, "/drain_listeners?skip_exit&inboundonly");
    assert_eq!(
        (r.status, r.body.as_str()),
        (400, "skip_exit requires graceful\n")
    );
    assert_eq!(f.drains.load(Ordering::SeqCst), 2);
}

#[test]
fn json_endpoints_and_help() -> Result<(), serde_json::Error> {
    let f = fake();
    let r = handle(&f, &Method::GET, "/server_info");
    assert_eq!(r.content_type, JSON);
    let v: serde_json::Value = serde_json::from_str(&r.body)?;
    assert_eq!(v["command_line_options"]["concurrency"], 2);
    let v: serde_json::Value = serde_json::from_str(&handle(&f, &Method::GET, "/certs").body)?;
    assert_eq!(v, json!({"certificates": []}));
    let v: serde_json::Value =
        serde_json::from_str(&handle(&f, &Method::GET, "/config_dump").body)?;
    assert_eq!(v, json!({"configs": []}));

    let help = handle(&f, &Method::GET, "/help");
    assert!(help
        .body
        .starts_with("admin commands are:\n  /: Admin home page\n"));
    assert!(help
        .body
        .contains("  /ready: print server state, return 200 if LIVE"));
    assert_eq!(handle(&f, &Method::GET, "/").body, help.body);

    let r = handle(&f, &Method::GET, "/nope?x=1");
    assert_eq!(r.status, 404);
    assert_eq!(r.body, format!("invalid path. {}", help.body));
    Ok(())
}

async fn raw(addr: std::net::SocketAddr, request: &str) -> std::io::Result<String> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(request.as_bytes()).await?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).await?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[tokio::test]
async fn serves_over_tcp_and_quits() -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let state = Arc::new(fake());
    let quit = Arc::clone(&state.quit_signal);
    let server = tokio::spawn(serve(listener, state.clone(), async move {
        quit.notified().await
    }));

    let resp = raw(
        addr,
        "GET /ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await?;
    assert!(resp.starts_with("HTTP/1.1 200 OK\r\n"), "{resp}");
    assert!(
        resp.contains("content-type: text/plain; charset=UTF-8\r\n"),
        "{resp}"
    );
    assert!(resp.ends_with("\r\n\r\nLIVE\n"), "{resp}");

    let resp = raw(
        addr,
        "GET /stats?format=prometheus HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await?;
    assert!(resp.starts_with("HTTP/1.1 200 OK\r\n"), "{resp}");
    assert!(
        resp.contains("envoy_listener_ssl_handshake{envoy_listener_address=\"0.0.0.0_9000\"} 2\n"),
        "{resp}"
    );

    let resp = raw(
        addr,
        "GET /quitquitquit HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await?;
    assert!(
        resp.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
        "{resp}"
    );

    let resp = raw(
        addr,
        "POST /quitquitquit HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await?;
    assert!(resp.starts_with("HTTP/1.1 200 OK\r\n"), "{resp}");
    assert!(resp.ends_with("OK\n"), "{resp}");

    let done = tokio::time::timeout(std::time::Duration::from_secs(10), server).await;
    assert!(
        matches!(done, Ok(Ok(Ok(())))),
        "server did not stop: {done:?}"
    );
    assert_eq!(state.quits.load(Ordering::SeqCst), 1);
    Ok(())
}
