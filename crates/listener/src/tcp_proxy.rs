//! Envoy's `tcp_proxy` network filter: after the (TLS) handshake, bytes are copied between the
//! downstream connection and a connection to the cluster, until either side closes or the
//! connection idles out. Stats under `tcp.<stat_prefix>.`; `access_log` writes one line a
//! connection when it closes, as Envoy's filter does.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use quickshake_http::{AccessLogger, ConnInfo, LogRecord};
use quickshake_stats::{Counter, Store};
use quickshake_upstream::Cluster;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// One `tcp_proxy` filter, shared by its connections.
pub struct TcpProxyRuntime {
    pub cluster: Cluster,
    pub idle_timeout: Option<Duration>,
    pub access_logs: Vec<AccessLogger>,
    pub downstream_cx_total: Counter,
    pub downstream_cx_rx_bytes_total: Counter,
    pub downstream_cx_tx_bytes_total: Counter,
    pub upstream_connect_fail: Counter,
    pub idle_timeout_count: Counter,
}

impl TcpProxyRuntime {
    pub fn new(
        stat_prefix: &str,
        cluster: Cluster,
        idle_timeout: Option<Duration>,
        access_logs: Vec<AccessLogger>,
        store: &Store,
    ) -> Self {
        let c = |n: &str| store.counter(&format!("tcp.{stat_prefix}.{n}"));
        TcpProxyRuntime {
            cluster,
            idle_timeout,
            access_logs,
            downstream_cx_total: c("downstream_cx_total"),
            downstream_cx_rx_bytes_total: c("downstream_cx_rx_bytes_total"),
            downstream_cx_tx_bytes_total: c("downstream_cx_tx_bytes_total"),
            upstream_connect_fail: c("upstream_connect_fail"),
            idle_timeout_count: c("idle_timeout"),
        }
    }
}

/// Counts bytes and remembers the last activity of a stream.
struct Metered<S> {
    inner: S,
    bytes: Arc<AtomicU64>,
    last: Arc<AtomicU64>,
    epoch: Instant,
}

impl<S> Metered<S> {
    fn touch(&self, n: usize) {
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Relaxed);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            self.touch(n);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Proxy one downstream connection to the cluster.
pub async fn serve<S>(downstream: S, rt: &TcpProxyRuntime, info: &ConnInfo)
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    rt.downstream_cx_total.inc();
    let started = SystemTime::now();
    let upstream = match rt.cluster.connect().await {
        Ok(u) => u,
        Err(e) => {
            rt.upstream_connect_fail.inc();
            tracing::debug!(cluster = rt.cluster.name(), error = %e, "tcp_proxy: upstream connect failed");
            log(rt, info, started, (0, 0), Some("UF"));
            return;
        }
    };
    let epoch = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let (rx, tx) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut down = Metered {
        inner: downstream,
        bytes: rx.clone(),
        last: last.clone(),
        epoch,
    };
    let mut up = Metered {
        inner: upstream,
        bytes: tx.clone(),
        last: last.clone(),
        epoch,
    };
    let copy = tokio::io::copy_bidirectional(&mut down, &mut up);
    match rt.idle_timeout {
        None => {
            let _ = copy.await;
        }
        Some(idle) => {
            tokio::pin!(copy);
            loop {
                let since = Duration::from_millis(last.load(Ordering::Relaxed));
                let wait = (since + idle).saturating_sub(epoch.elapsed());
                tokio::select! {
                    _ = &mut copy => break,
                    _ = tokio::time::sleep(wait.max(Duration::from_millis(1))) => {
                        let quiet = epoch.elapsed().saturating_sub(Duration::from_millis(last.load(Ordering::Relaxed)));
                        if quiet >= idle {
                            rt.idle_timeout_count.inc();
                            break;
                        }
                    }
                }
            }
        }
    }
    let bytes = (rx.load(Ordering::Relaxed), tx.load(Ordering::Relaxed));
    rt.downstream_cx_rx_bytes_total.add(bytes.0);
    rt.downstream_cx_tx_bytes_total.add(bytes.1);
    log(rt, info, started, bytes, None);
}

/// The connection's access log line: addresses, SNI, bytes (received, sent), duration, cluster.
fn log(
    rt: &TcpProxyRuntime,
    info: &ConnInfo,
    started: SystemTime,
    (received, sent): (u64, u64),
    flags: Option<&'static str>,
) {
    if rt.access_logs.is_empty() {
        return;
    }
    let r = LogRecord {
        start: started
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default(),
        duration_ms: started
            .elapsed()
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        bytes_received: received,
        bytes_sent: sent,
        downstream_remote_address: info.peer.clone(),
        downstream_local_address: info.local.clone(),
        requested_server_name: info.sni.clone(),
        tls_version: info.tls_version.clone(),
        upstream_cluster: Some(rt.cluster.name().to_owned()),
        response_flags: flags,
        ..Default::default()
    };
    for l in &rt.access_logs {
        l.log(&r);
    }
}
