//! Envoy's `tcp_proxy` network filter: after the (TLS) handshake, bytes are copied between the
//! downstream connection and a connection to the cluster, until either side closes or the
//! connection idles out. Stats under `tcp.<stat_prefix>.`.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use quickshake_stats::{Counter, Store};
use quickshake_upstream::Cluster;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// One `tcp_proxy` filter, shared by its connections.
pub struct TcpProxyRuntime {
    pub cluster: Cluster,
    pub idle_timeout: Option<Duration>,
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
        store: &Store,
    ) -> Self {
        let c = |n: &str| store.counter(&format!("tcp.{stat_prefix}.{n}"));
        TcpProxyRuntime {
            cluster,
            idle_timeout,
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
pub async fn serve<S>(downstream: S, rt: &TcpProxyRuntime)
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    rt.downstream_cx_total.inc();
    let upstream = match rt.cluster.connect().await {
        Ok(u) => u,
        Err(e) => {
            rt.upstream_connect_fail.inc();
            tracing::debug!(cluster = rt.cluster.name(), error = %e, "tcp_proxy: upstream connect failed");
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
    rt.downstream_cx_rx_bytes_total
        .add(rx.load(Ordering::Relaxed));
    rt.downstream_cx_tx_bytes_total
        .add(tx.load(Ordering::Relaxed));
}
