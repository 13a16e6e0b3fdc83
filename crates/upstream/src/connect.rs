//! Opening upstream connections: TCP (`TCP_NODELAY`), optional TLS (the
//! handshake is `quickshake-tls`'s [`ClientTls`]), the connect timeout,
//! connection stats, and the stream type handed out.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use quickshake_tls::ClientTls;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_boring::SslStream;

use crate::breaker::{Breakers, Permit};
use crate::error::{OverflowKind, UpstreamError};
use crate::hosts::Host;
use crate::spec::{Protocol, UpstreamTlsSpec};
use crate::stats::ClusterStats;

/// A cluster's client TLS context, built once by `quickshake-tls`. An HTTP/2 cluster that
/// lists no ALPN protocol offers `h2`.
pub(crate) fn client_tls(
    cluster: &str,
    spec: &UpstreamTlsSpec,
    protocol: Protocol,
) -> Result<ClientTls, UpstreamError> {
    let built = if spec.alpn.is_empty() && protocol == Protocol::Http2 {
        ClientTls::new(&UpstreamTlsSpec {
            alpn: vec!["h2".into()],
            ..spec.clone()
        })
    } else {
        ClientTls::new(spec)
    };
    built.map_err(|e| UpstreamError::Config {
        cluster: cluster.to_owned(),
        reason: e.to_string(),
    })
}

/// Everything a connection attempt needs, shared by the cluster.
pub(crate) struct Connector {
    pub(crate) timeout: Duration,
    /// The cluster's `transport_socket`.
    pub(crate) tls: Option<ClientTls>,
    /// `transport_socket_matches`' sockets (`None`: plaintext).
    pub(crate) matched: Vec<Option<ClientTls>>,
    /// The hosts that use `matched[i]` instead of `tls`.
    pub(crate) by_host: RwLock<HashMap<SocketAddr, usize>>,
    pub(crate) breakers: Arc<Breakers>,
    pub(crate) stats: ClusterStats,
}

impl Connector {
    /// The TLS context connections to `addr` use (`None`: plaintext).
    pub(crate) fn tls_for(&self, addr: SocketAddr) -> Option<&ClientTls> {
        let matched = self
            .by_host
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&addr)
            .copied();
        match matched {
            Some(i) => self.matched.get(i).and_then(Option::as_ref),
            None => self.tls.as_ref(),
        }
    }

    /// Replaces which hosts use which `matched` socket (out-of-range indexes are dropped).
    pub(crate) fn set_host_sockets(&self, hosts: impl IntoIterator<Item = (SocketAddr, usize)>) {
        let map = hosts
            .into_iter()
            .filter(|(_, i)| *i < self.matched.len())
            .collect();
        *self.by_host.write().unwrap_or_else(PoisonError::into_inner) = map;
    }

    /// Opens one connection to `addr`, charging `max_connections` and the
    /// `upstream_cx_*` stats. The connection counts as active until the
    /// returned stream is dropped.
    pub(crate) async fn open(&self, host: &Arc<Host>) -> Result<UpstreamStream, UpstreamError> {
        let addr = host.addr;
        let permit = self
            .breakers
            .acquire(OverflowKind::Connections, &self.stats)?;
        let stats = &self.stats;
        stats.cx_total.inc();
        host.health.cx_total.fetch_add(1, Ordering::Relaxed);
        let start = Instant::now();
        let attempt = self.dial(addr);
        let (io, local) = match tokio::time::timeout(self.timeout, attempt).await {
            Ok(Ok(io)) => io,
            Ok(Err(e)) => {
                stats.cx_connect_fail.inc();
                host.health.cx_connect_fail.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%addr, error = %e, "upstream connect failed");
                return Err(e);
            }
            Err(_) => {
                stats.cx_connect_timeout.inc();
                stats.cx_connect_fail.inc();
                host.health.cx_connect_fail.fetch_add(1, Ordering::Relaxed);
                return Err(UpstreamError::ConnectTimeout(addr));
            }
        };
        stats
            .cx_connect_ms
            .record(start.elapsed().as_secs_f64() * 1000.0);
        stats.cx_active.inc();
        host.health.cx_active.fetch_add(1, Ordering::Relaxed);
        Ok(UpstreamStream {
            io,
            addr,
            local,
            _guard: Some(CxGuard {
                stats: stats.clone(),
                host: host.clone(),
                _permit: permit,
            }),
        })
    }

    /// TCP connect (and the TLS handshake for a TLS cluster), unbounded and uncounted: the
    /// caller bounds it. Also the socket's local address.
    async fn dial(&self, addr: SocketAddr) -> Result<(Io, Option<SocketAddr>), UpstreamError> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|source| UpstreamError::ConnectFailed { addr, source })?;
        tcp.set_nodelay(true)
            .map_err(|source| UpstreamError::ConnectFailed { addr, source })?;
        let local = tcp.local_addr().ok();
        let io = match self.tls_for(addr) {
            Some(tls) => Io::Tls(Box::new(
                tls.connect(tcp).await.map_err(UpstreamError::Tls)?,
            )),
            None => Io::Tcp(tcp),
        };
        Ok((io, local))
    }

    /// A connection for an active health check: the cluster's TLS, but neither its circuit
    /// breakers nor its `upstream_cx_*` stats (the caller bounds it with the check's timeout).
    pub(crate) async fn open_for_health_check(
        &self,
        addr: SocketAddr,
    ) -> Result<UpstreamStream, UpstreamError> {
        let (io, local) = self.dial(addr).await?;
        Ok(UpstreamStream {
            io,
            addr,
            local,
            _guard: None,
        })
    }
}

/// Un-counts a connection when it closes.
struct CxGuard {
    stats: ClusterStats,
    host: Arc<Host>,
    _permit: Permit,
}

impl Drop for CxGuard {
    fn drop(&mut self) {
        self.stats.cx_active.dec();
        self.host.health.cx_active.fetch_sub(1, Ordering::Relaxed);
        self.stats.cx_destroy.inc();
    }
}

enum Io {
    Tcp(TcpStream),
    Tls(Box<SslStream<TcpStream>>),
}

/// A connected upstream stream, TLS when the cluster has a TLS context.
/// It counts in `upstream_cx_active` (and against `max_connections`) until dropped.
pub struct UpstreamStream {
    io: Io,
    addr: SocketAddr,
    /// The socket's local address.
    local: Option<SocketAddr>,
    _guard: Option<CxGuard>,
}

impl std::fmt::Debug for UpstreamStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamStream")
            .field("addr", &self.addr)
            .field("tls", &self.is_tls())
            .finish()
    }
}

impl UpstreamStream {
    /// The upstream address connected to.
    pub fn peer_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The socket's local address (`None` if the OS would not say).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local
    }

    pub fn is_tls(&self) -> bool {
        matches!(self.io, Io::Tls(_))
    }

    /// The ALPN protocol the upstream selected, if any.
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        match &self.io {
            Io::Tls(s) => s.ssl().selected_alpn_protocol(),
            Io::Tcp(_) => None,
        }
    }
}

impl AsyncRead for UpstreamStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for UpstreamStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Tcp(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Tcp(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
