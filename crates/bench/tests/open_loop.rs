//! The open loop keeps its timetable and counts latency from the intended start, so a
//! server that falls behind shows up as growing latency (no coordinated omission).

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use boring::ssl::{SslAcceptor, SslFiletype, SslMethod};
use common::{bench, make_certs, Certs, Run};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const LIMIT: Duration = Duration::from_secs(30);

fn acceptor(certs: &Certs) -> Arc<SslAcceptor> {
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).expect("acceptor");
    b.set_certificate_chain_file(&certs.cert).expect("cert");
    b.set_private_key_file(&certs.key, SslFiletype::PEM)
        .expect("key");
    Arc::new(b.build())
}

/// Serves one request per connection: TLS handshake, read the request head, wait `delay`,
/// answer with a Content-Length response, then keep the connection open until the client
/// closes (like Envoy after `Connection: close`). `serial`: one connection at a time.
async fn slow_server(listener: TcpListener, acc: Arc<SslAcceptor>, delay: Duration, serial: bool) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let acc = acc.clone();
        let conn = async move {
            let _ = tcp.set_nodelay(true);
            let Ok(mut tls) = tokio_boring::accept(&acc, tcp).await else {
                return;
            };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match tls.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            tokio::time::sleep(delay).await;
            let _ = tls
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                .await;
            let _ = tls.flush().await;
            if serial {
                return; // Move on to the next connection.
            }
            // Hold the connection until the client closes it.
            let _ = tokio::time::timeout(Duration::from_secs(5), async {
                while let Ok(n) = tls.read(&mut chunk).await {
                    if n == 0 {
                        break;
                    }
                }
            })
            .await;
        };
        if serial {
            conn.await;
        } else {
            tokio::spawn(conn);
        }
    }
}

fn start_server(certs: &Certs, delay: Duration, serial: bool) -> SocketAddr {
    let acc = acceptor(certs);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            tx.send(l.local_addr().expect("addr")).expect("send addr");
            // The server thread lives until the test process exits.
            slow_server(l, acc, delay, serial).await;
        });
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("server addr")
}

fn pct(v: &serde_json::Value, which: &str) -> f64 {
    v["latency_ms"]["request"][which]
        .as_f64()
        .unwrap_or(f64::NAN)
}

/// `--rate 20` for 2 s (up to 1000 connections, 5 s timeout) against `url`.
fn open_loop_at_20_per_second(url: &str) -> Run {
    bench(
        &[
            "--rate",
            "20",
            "-d",
            "2s",
            "-c",
            "1000",
            "-k",
            "--json",
            "--timeout",
            "5s",
            url,
        ],
        LIMIT,
    )
}

#[test]
fn open_loop_keeps_schedule_and_counts_queueing() {
    let certs = make_certs();

    // 1. A server that answers every request after 50 ms, concurrently.
    let addr = start_server(&certs, Duration::from_millis(50), false);
    let url = format!("https://localhost:{}/", addr.port());
    let run = open_loop_at_20_per_second(&url);
    let v = run.success_json();
    let done = v["requests"].as_u64().unwrap_or(0);
    assert!((36..=41).contains(&done), "completed {done}: {v}");
    assert_eq!(v["errors"]["total"], 0, "{v}");
    let p50 = pct(&v, "p50");
    assert!((50.0..150.0).contains(&p50), "p50 {p50}: {v}");
    assert_eq!(v["mode"], "open");
    assert_eq!(v["open_loop"]["capped"], 0, "{v}");

    // 2. A server that handles one connection at a time, 100 ms each: it can serve 10/s of
    //    the 20/s asked, so latency counted from the intended start must keep growing.
    let addr = start_server(&certs, Duration::from_millis(100), true);
    let url = format!("https://localhost:{}/", addr.port());
    let run = open_loop_at_20_per_second(&url);
    let v = run.json();
    let done = v["requests"].as_u64().unwrap_or(0);
    assert!((10..=25).contains(&done), "completed {done}: {v}");
    let p99 = pct(&v, "p99");
    let p50 = pct(&v, "p50");
    assert!(p99 > 400.0, "p99 {p99} should be well above 100 ms: {v}");
    assert!(p50 > 200.0, "p50 {p50}: {v}");
    assert!(
        v["open_loop"]["unfinished"].as_u64().unwrap_or(0) > 5,
        "requests left waiting should be reported: {v}"
    );
}
