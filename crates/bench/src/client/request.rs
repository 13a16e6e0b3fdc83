//! One connection and one request on it: TCP connect, the TLS handshake (offering the slot's
//! session when sessions are offered, recording what was negotiated), then an HTTP/1.x or h2
//! exchange (or, with `--h3`, `quic`'s HTTP/3 exchange on a new QUIC connection) under the
//! request timeout, recorded as a success or an error of one kind.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

use super::conn::{Conn, Failure, Proto};
use super::h1::h1_exchange;
use super::quic::h3_request;
use super::shared::Shared;
use super::tls::negotiated_of;
use crate::h2::{H2Conn, H2Error};
use crate::report::ErrorKind;

/// A TCP connection to `addr`, from `bind` when given (its port chosen at connect time, as for
/// an unbound socket, so that one source address is not limited to one port per run).
async fn tcp_connect(addr: SocketAddr, bind: Option<IpAddr>) -> std::io::Result<TcpStream> {
    let Some(ip) = bind else {
        return TcpStream::connect(addr).await;
    };
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let on: libc::c_int = 1;
        // SAFETY: setsockopt on a socket this function owns, with a c_int option value whose
        // pointer and size are those of `on`, alive for the call. Best effort: without it,
        // bind picks the port.
        #[allow(unsafe_code)]
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_BIND_ADDRESS_NO_PORT,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
    socket.bind(SocketAddr::new(ip, 0))?;
    socket.connect(addr).await
}

async fn establish(sh: &Shared, slot: usize) -> Result<Conn, Failure> {
    let t0 = Instant::now();
    let tcp = tcp_connect(sh.cfg.addr, sh.cfg.bind)
        .await
        .map_err(|e| Failure(ErrorKind::Connect, format!("{}: {e}", sh.cfg.addr)))?;
    tcp.set_nodelay(true)
        .map_err(|e| Failure(ErrorKind::Connect, format!("TCP_NODELAY: {e}")))?;
    let t1 = Instant::now();
    let mut cfg = sh
        .connector
        .configure()
        .map_err(|e| Failure(ErrorKind::Tls, format!("SSL_new: {e}")))?;
    if sh.cfg.tls.insecure {
        cfg.set_verify_hostname(false);
    }
    if sh.cfg.offers_sessions() {
        if let Some(s) = sh.slots.get(slot % sh.slots.len().max(1)) {
            let offered = s.lock().ok().and_then(|g| g.clone());
            cfg.set_ex_data(sh.slot_index, s.clone());
            if let Some(sess) = offered {
                // SAFETY: every session in a slot came from this process's single
                // `SslConnector` context (the new-session callback), the one `cfg` belongs to.
                #[allow(unsafe_code)]
                let r = unsafe { cfg.set_session(&sess) };
                r.map_err(|e| Failure(ErrorKind::Tls, format!("SSL_set_session: {e}")))?;
            }
        }
    }
    let stream = tokio_boring::connect(cfg, &sh.cfg.server_name, tcp)
        .await
        .map_err(|e| Failure(ErrorKind::Tls, e.to_string()))?;
    let t2 = Instant::now();
    let ssl = stream.ssl();
    let resumed = ssl.session_reused();
    if sh.negotiated.get().is_none() {
        let _ = sh.negotiated.set(negotiated_of(ssl));
    }
    let proto = match ssl.selected_alpn_protocol() {
        Some(b"h2") => Proto::H2(H2Conn::default()),
        _ => Proto::H1,
    };
    sh.record_handshake(t1 - t0, t2 - t1, resumed);
    Ok(Conn { stream, proto })
}

/// One request over TCP: reuse `conn` or open a new connection, then the HTTP/1.x or h2
/// exchange; returns (status, connection reusable).
async fn tcp_exchange(
    sh: &Shared,
    conn: &mut Option<Conn>,
    slot: usize,
) -> Result<(u16, bool), Failure> {
    if conn.is_none() {
        *conn = Some(establish(sh, slot).await?);
    }
    let Some(c) = conn.as_mut() else {
        return Err(Failure(ErrorKind::Io, "no connection".into()));
    };
    match &mut c.proto {
        Proto::H1 => h1_exchange(&mut c.stream, &sh.request_bytes, &mut Vec::new()).await,
        Proto::H2(h2) => h2
            .exchange(&mut c.stream, &sh.cfg.url.path, &sh.authority)
            .await
            .map_err(|e| match e {
                H2Error::Io(e) => Failure(ErrorKind::Io, format!("h2: {e}")),
                H2Error::Protocol(m) => Failure(ErrorKind::Http, m),
            }),
    }
}

/// One request: reuse `conn` or open a new connection, exchange, record.
/// Returns the error kind when the request failed.
pub(super) async fn one_request(
    sh: &Shared,
    conn: &mut Option<Conn>,
    slot: usize,
    start: Instant,
) -> Option<ErrorKind> {
    let result = match &sh.quic {
        // HTTP/3: a new QUIC connection per request, never kept.
        Some(q) => tokio::time::timeout(sh.cfg.timeout, h3_request(sh, q))
            .await
            .map(|r| r.map(|status| (status, false))),
        None => tokio::time::timeout(sh.cfg.timeout, tcp_exchange(sh, conn, slot)).await,
    };
    let (failed, reusable) = match result {
        Err(_) => {
            sh.record_error(ErrorKind::Timeout, || {
                format!("no response within {:?}", sh.cfg.timeout)
            });
            (Some(ErrorKind::Timeout), false)
        }
        Ok(Err(Failure(kind, msg))) => {
            sh.record_error(kind, || msg);
            (Some(kind), false)
        }
        Ok(Ok((status, reusable))) => {
            if (200..300).contains(&status) {
                sh.record_request(start.elapsed());
                (None, reusable)
            } else {
                sh.record_error(ErrorKind::Http, || format!("HTTP status {status}"));
                (Some(ErrorKind::Http), reusable)
            }
        }
    };
    if !(sh.cfg.keepalive && reusable) {
        if let Some(mut c) = conn.take() {
            // Best effort close_notify + FIN; never waited on for long.
            let _ = tokio::time::timeout(Duration::from_millis(100), c.stream.shutdown()).await;
        }
    }
    failed
}
