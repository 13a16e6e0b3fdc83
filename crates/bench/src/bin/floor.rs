//! `floor`: the reference "bare tokio-boring accept loop" that quickshake is measured against
//! (`bench/run`). One current-thread runtime, inline key, no session cache, no tickets; every
//! connection: TLS accept, read one HTTP/1.1 request head, answer `200 ok`, close.
//! A plain-HTTP `/stats` on `--admin-port` exposes `listener.floor.ssl.handshake` (and
//! `ssl.session_reused: 0`) so `quickshake-bench --server-stats` works against it.
//!
//! Usage: `floor --cert F --key F --port P --admin-port A`
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use boring::ssl::{SslAcceptor, SslFiletype, SslMethod, SslOptions, SslSessionCacheMode};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket};

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
const MAX_HEAD: usize = 16 * 1024;
const IO_LIMIT: Duration = Duration::from_secs(10);

struct Args {
    cert: String,
    key: String,
    port: u16,
    admin_port: u16,
}

fn parse_args() -> Result<Args, String> {
    let (mut cert, mut key, mut port, mut admin) = (None, None, None, None);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<u16>().map_err(|e| format!("{flag} {v:?}: {e}"));
        match flag.as_str() {
            "--cert" => cert = Some(value),
            "--key" => key = Some(value),
            "--port" => port = Some(num(&value)?),
            "--admin-port" => admin = Some(num(&value)?),
            _ => return Err(format!("unknown flag {flag:?}")),
        }
    }
    let usage = "usage: floor --cert F --key F --port P --admin-port A";
    Ok(Args {
        cert: cert.ok_or(usage)?,
        key: key.ok_or(usage)?,
        port: port.ok_or(usage)?,
        admin_port: admin.ok_or(usage)?,
    })
}

fn acceptor(a: &Args) -> Result<SslAcceptor, String> {
    let mut b =
        SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).map_err(|e| e.to_string())?;
    b.set_certificate_chain_file(&a.cert)
        .map_err(|e| format!("{}: {e}", a.cert))?;
    b.set_private_key_file(&a.key, SslFiletype::PEM)
        .map_err(|e| format!("{}: {e}", a.key))?;
    b.check_private_key()
        .map_err(|e| format!("key does not match cert: {e}"))?;
    b.set_session_cache_mode(SslSessionCacheMode::OFF);
    b.set_options(SslOptions::NO_TICKET);
    Ok(b.build())
}

fn listen(port: u16) -> Result<TcpListener, String> {
    let addr: SocketAddr = ([0, 0, 0, 0], port).into();
    let s = TcpSocket::new_v4().map_err(|e| e.to_string())?;
    s.set_reuseaddr(true).map_err(|e| e.to_string())?;
    s.bind(addr).map_err(|e| format!("bind {addr}: {e}"))?;
    s.listen(4096).map_err(|e| format!("listen {addr}: {e}"))
}

/// Reads until the end of an HTTP/1.1 request head; false on EOF, error or oversize head.
async fn read_head<S: AsyncRead + Unpin>(s: &mut S) -> bool {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            return true;
        }
        if buf.len() > MAX_HEAD {
            return false;
        }
    }
}

async fn serve_tls(acc: Arc<SslAcceptor>, tcp: tokio::net::TcpStream, count: Arc<AtomicU64>) {
    let _ = tcp.set_nodelay(true);
    let Ok(mut tls) = tokio_boring::accept(&acc, tcp).await else {
        return;
    };
    count.fetch_add(1, Ordering::Relaxed);
    if read_head(&mut tls).await {
        let _ = tls.write_all(RESPONSE).await;
        let _ = tls.shutdown().await;
    }
}

async fn serve_stats<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, count: Arc<AtomicU64>) {
    if !read_head(&mut s).await {
        return;
    }
    let body = format!(
        "listener.floor.ssl.handshake: {}\nlistener.floor.ssl.session_reused: 0\n",
        count.load(Ordering::Relaxed)
    );
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes()).await;
    let _ = s.write_all(body.as_bytes()).await;
    let _ = s.shutdown().await;
}

async fn run(a: Args) -> Result<(), String> {
    let acc = Arc::new(acceptor(&a)?);
    let tls = listen(a.port)?;
    let admin = listen(a.admin_port)?;
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    tokio::spawn(async move {
        loop {
            if let Ok((s, _)) = admin.accept().await {
                let _ = s.set_nodelay(true);
                tokio::spawn(tokio::time::timeout(IO_LIMIT, serve_stats(s, c.clone())));
            }
        }
    });
    eprintln!(
        "floor: https on :{}, stats on http://127.0.0.1:{}/stats",
        a.port, a.admin_port
    );
    loop {
        match tls.accept().await {
            Ok((tcp, _)) => {
                let conn = serve_tls(acc.clone(), tcp, count.clone());
                tokio::spawn(tokio::time::timeout(IO_LIMIT, conn));
            }
            // EMFILE and friends: back off briefly instead of spinning.
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

fn main() -> std::process::ExitCode {
    let result = parse_args().and_then(|a| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(run(a))
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floor: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
