//! One HTTP/3 request on a new QUIC connection (`--h3`): a UDP socket of its own (from
//! `--bind` when given), connected to the target, shuttling datagrams and timeouts for
//! `crate::h3`'s [`Exchange`] until the response ends; the handshake is recorded (and whether
//! it resumed a session) when the connection is established, and the connection is closed
//! with `H3_NO_ERROR` at the end. The state machine itself is socket-free in `crate::h3`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;

use super::conn::Failure;
use super::shared::Shared;
use crate::h3::{Exchange, H3Client, H3Failure, Progress, MAX_DATAGRAM};
use crate::report::ErrorKind;

impl From<H3Failure> for Failure {
    fn from(f: H3Failure) -> Failure {
        Failure(f.kind, f.msg)
    }
}

async fn socket(addr: SocketAddr, bind: Option<IpAddr>) -> std::io::Result<UdpSocket> {
    let ip = bind.unwrap_or(if addr.is_ipv4() {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    } else {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    });
    let s = UdpSocket::bind(SocketAddr::new(ip, 0)).await?;
    s.connect(addr).await?;
    Ok(s)
}

async fn flush(sock: &UdpSocket, ex: &mut Exchange, out: &mut [u8]) -> Result<(), Failure> {
    while let Some(n) = ex.send(out)? {
        sock.send(&out[..n])
            .await
            .map_err(|e| Failure(ErrorKind::Io, format!("UDP send: {e}")))?;
    }
    Ok(())
}

/// Opens a QUIC connection, makes the run's request on it and returns the final status.
pub(super) async fn h3_request(sh: &Shared, client: &H3Client) -> Result<u16, Failure> {
    let t0 = Instant::now();
    let peer = sh.cfg.addr;
    let sock = socket(peer, sh.cfg.bind)
        .await
        .map_err(|e| Failure(ErrorKind::Connect, format!("UDP socket to {peer}: {e}")))?;
    let local = sock
        .local_addr()
        .map_err(|e| Failure(ErrorKind::Connect, format!("UDP socket: {e}")))?;
    let mut ex = client.connect(&sh.cfg.server_name, local, peer)?;
    let t1 = Instant::now();
    let mut out = vec![0u8; MAX_DATAGRAM];
    let result = drive(sh, client, (&sock, local), &mut ex, &mut out, (t0, t1)).await;
    // A clean close, unless quiche already closed with an error of its own (a TLS alert, say).
    ex.close();
    // Best effort: the CONNECTION_CLOSE, so the server frees the connection now rather than
    // at its idle timeout.
    let _ = flush(&sock, &mut ex, &mut out).await;
    result
}

/// Moves datagrams and timers until the response ends (its status) or the exchange fails;
/// records the handshake once the connection is established.
async fn drive(
    sh: &Shared,
    client: &H3Client,
    (sock, local): (&UdpSocket, SocketAddr),
    ex: &mut Exchange,
    out: &mut [u8],
    (t0, t1): (Instant, Instant),
) -> Result<u16, Failure> {
    let peer = sh.cfg.addr;
    let mut buf = vec![0u8; 64 * 1024];
    let mut recorded = false;
    loop {
        flush(sock, ex, out).await?;
        // quiche always has a timer while the connection is open (idle timeout at least).
        let wait = ex.timeout().unwrap_or(Duration::from_secs(3600));
        tokio::select! {
            r = sock.recv(&mut buf) => {
                let n = r.map_err(|e| {
                    // On a connected UDP socket an ICMP port unreachable shows here.
                    let kind = if recorded { ErrorKind::Io } else { ErrorKind::Connect };
                    Failure(kind, format!("UDP recv from {peer}: {e}"))
                })?;
                ex.recv(&mut buf[..n], peer, local)?;
                // Take what else has arrived before sending anything back.
                while let Ok(n) = sock.try_recv(&mut buf) {
                    ex.recv(&mut buf[..n], peer, local)?;
                }
            }
            _ = tokio::time::sleep(wait) => ex.on_timeout(),
        }
        if !recorded && ex.is_established() {
            recorded = true;
            sh.record_handshake(t1 - t0, t1.elapsed(), ex.resumed());
        }
        if let Progress::Done(status) = client.advance(ex)? {
            return Ok(status);
        }
    }
}
