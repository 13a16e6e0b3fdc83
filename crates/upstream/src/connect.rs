//! Opening upstream connections: TCP (`TCP_NODELAY`), optional TLS, the
//! connect timeout, connection stats, and the stream type handed out.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use boring::pkey::PKey;
use boring::ssl::{SslConnector, SslMethod, SslVerifyMode};
use boring::x509::store::X509StoreBuilder;
use boring::x509::X509;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_boring::SslStream;

use crate::breaker::{Breakers, Permit};
use crate::error::{OverflowKind, UpstreamError};
use crate::spec::{Protocol, UpstreamTlsSpec};
use crate::stats::ClusterStats;

/// A cluster's client TLS configuration, built once.
pub(crate) struct TlsConnector {
    connector: SslConnector,
    sni: Option<String>,
    verify: bool,
}

impl TlsConnector {
    pub(crate) fn new(
        cluster: &str,
        spec: &UpstreamTlsSpec,
        protocol: Protocol,
    ) -> Result<Self, UpstreamError> {
        let err = |what: &str, e: boring::error::ErrorStack| UpstreamError::Config {
            cluster: cluster.to_owned(),
            reason: format!("upstream TLS {what}: {e}"),
        };
        let mut b = SslConnector::builder(SslMethod::tls()).map_err(|e| err("context", e))?;
        let verify = match &spec.trusted_ca_pem {
            Some(pem) => {
                let cas = X509::stack_from_pem(pem).map_err(|e| err("trusted_ca", e))?;
                if cas.is_empty() {
                    return Err(UpstreamError::Config {
                        cluster: cluster.to_owned(),
                        reason: "upstream TLS trusted_ca holds no certificate".into(),
                    });
                }
                let mut store = X509StoreBuilder::new().map_err(|e| err("trust store", e))?;
                for ca in cas {
                    store.add_cert(ca).map_err(|e| err("trusted_ca", e))?;
                }
                // Replaces the default store: only the configured CAs are trusted.
                b.set_cert_store(store.build());
                b.set_verify(SslVerifyMode::PEER);
                true
            }
            None => {
                b.set_verify(SslVerifyMode::NONE);
                false
            }
        };
        let mut alpn = spec.alpn.clone();
        if alpn.is_empty() && protocol == Protocol::Http2 {
            alpn.push("h2".into());
        }
        if !alpn.is_empty() {
            let mut wire = Vec::new();
            for p in &alpn {
                let len = u8::try_from(p.len())
                    .ok()
                    .filter(|l| *l > 0)
                    .ok_or_else(|| UpstreamError::Config {
                        cluster: cluster.to_owned(),
                        reason: format!("bad ALPN protocol {p:?}"),
                    })?;
                wire.push(len);
                wire.extend_from_slice(p.as_bytes());
            }
            b.set_alpn_protos(&wire).map_err(|e| err("ALPN", e))?;
        }
        match (&spec.client_cert_pem, &spec.client_key_pem) {
            (Some(cert), Some(key)) => {
                let chain = X509::stack_from_pem(cert).map_err(|e| err("client certificate", e))?;
                let mut chain = chain.into_iter();
                let leaf = chain.next().ok_or_else(|| UpstreamError::Config {
                    cluster: cluster.to_owned(),
                    reason: "upstream TLS client certificate PEM holds no certificate".into(),
                })?;
                b.set_certificate(&leaf)
                    .map_err(|e| err("client certificate", e))?;
                for c in chain {
                    b.add_extra_chain_cert(c)
                        .map_err(|e| err("client chain", e))?;
                }
                let pkey = PKey::private_key_from_pem(key).map_err(|e| err("client key", e))?;
                b.set_private_key(&pkey).map_err(|e| err("client key", e))?;
                b.check_private_key()
                    .map_err(|e| err("client key mismatch", e))?;
            }
            (None, None) => {}
            _ => {
                return Err(UpstreamError::Config {
                    cluster: cluster.to_owned(),
                    reason: "upstream TLS client certificate and key go together".into(),
                })
            }
        }
        Ok(TlsConnector {
            connector: b.build(),
            sni: spec.sni.clone().filter(|s| !s.is_empty()),
            verify,
        })
    }

    async fn handshake(&self, tcp: TcpStream) -> Result<SslStream<TcpStream>, UpstreamError> {
        let mut cfg = self
            .connector
            .configure()
            .map_err(|e| UpstreamError::Tls(e.to_string()))?;
        cfg.set_use_server_name_indication(self.sni.is_some());
        cfg.set_verify_hostname(self.verify && self.sni.is_some());
        let domain = self.sni.as_deref().unwrap_or("");
        tokio_boring::connect(cfg, domain, tcp)
            .await
            .map_err(|e| UpstreamError::Tls(e.to_string()))
    }
}

/// Everything a connection attempt needs, shared by the cluster.
pub(crate) struct Connector {
    pub(crate) timeout: Duration,
    pub(crate) tls: Option<TlsConnector>,
    pub(crate) breakers: Arc<Breakers>,
    pub(crate) stats: ClusterStats,
}

impl Connector {
    /// Opens one connection to `addr`, charging `max_connections` and the
    /// `upstream_cx_*` stats. The connection counts as active until the
    /// returned stream is dropped.
    pub(crate) async fn open(&self, addr: SocketAddr) -> Result<UpstreamStream, UpstreamError> {
        let permit = self
            .breakers
            .acquire(OverflowKind::Connections, &self.stats)?;
        let stats = &self.stats;
        stats.cx_total.inc();
        let start = Instant::now();
        let attempt = async {
            let tcp = TcpStream::connect(addr)
                .await
                .map_err(|source| UpstreamError::ConnectFailed { addr, source })?;
            tcp.set_nodelay(true)
                .map_err(|source| UpstreamError::ConnectFailed { addr, source })?;
            Ok::<_, UpstreamError>(match &self.tls {
                Some(tls) => Io::Tls(Box::new(tls.handshake(tcp).await?)),
                None => Io::Tcp(tcp),
            })
        };
        let io = match tokio::time::timeout(self.timeout, attempt).await {
            Ok(Ok(io)) => io,
            Ok(Err(e)) => {
                stats.cx_connect_fail.inc();
                tracing::debug!(%addr, error = %e, "upstream connect failed");
                return Err(e);
            }
            Err(_) => {
                stats.cx_connect_timeout.inc();
                stats.cx_connect_fail.inc();
                return Err(UpstreamError::ConnectTimeout(addr));
            }
        };
        stats
            .cx_connect_ms
            .record(start.elapsed().as_secs_f64() * 1000.0);
        stats.cx_active.inc();
        Ok(UpstreamStream {
            io,
            addr,
            _guard: CxGuard {
                stats: stats.clone(),
                _permit: permit,
            },
        })
    }
}

/// Un-counts a connection when it closes.
struct CxGuard {
    stats: ClusterStats,
    _permit: Permit,
}

impl Drop for CxGuard {
    fn drop(&mut self) {
        self.stats.cx_active.dec();
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
    _guard: CxGuard,
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
