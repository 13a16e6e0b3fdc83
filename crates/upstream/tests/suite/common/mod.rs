//! Loopback upstream servers for the integration tests.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use boring::ssl::{NameType, SslAcceptor, SslFiletype, SslMethod, SslVerifyMode};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use quickshake_upstream::{ClusterSpec, Discovery, RequestBody, UpstreamBody, UpstreamError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Bound on every awaited operation of a test.
pub const BOUND: Duration = Duration::from_secs(10);

pub use quickshake_test_support::paths::{certs_dir as certs, read_cert};

/// What the test upstreams saw.
#[derive(Default)]
pub struct Seen {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub sni: Mutex<Vec<Option<String>>>,
    pub alpn: Mutex<Vec<Option<Vec<u8>>>>,
    pub client_subject: Mutex<Vec<Option<String>>>,
}

/// Answers `port=<port> path=<path> host=<host>`; `/slow` waits 1 s first.
async fn handle(port: u16, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.uri().path() == "/slow" {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let host = req
        .headers()
        .get("host")
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
        .unwrap_or_default();
    let body = format!(
        "port={port} path={} host={host} version={:?}",
        req.uri().path(),
        req.version()
    );
    Ok(Response::builder()
        .status(if req.uri().path() == "/missing" {
            404
        } else {
            200
        })
        .body(Full::new(Bytes::from(body)))
        .expect("response"))
}

pub enum Kind {
    H1,
    H2c,
    /// HTTP/1.1 over TLS with the rsa2048 test certificate.
    TlsH1,
    /// TLS selecting ALPN `h2` (HTTP/2 when selected, else HTTP/1.1).
    TlsAlpnH2,
    /// TLS requiring a client certificate issued by the test client CA.
    Mtls,
    /// Accepts TCP and never answers (a TLS handshake that hangs).
    Silent,
}

/// Starts an upstream on 127.0.0.1:0 on the current runtime.
pub async fn upstream(kind: Kind) -> (SocketAddr, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(Seen::default());
    let acceptor = match kind {
        Kind::TlsH1 => Some(Arc::new(acceptor(false, false))),
        Kind::TlsAlpnH2 => Some(Arc::new(acceptor(true, false))),
        Kind::Mtls => Some(Arc::new(acceptor(false, true))),
        _ => None,
    };
    let silent = matches!(kind, Kind::Silent);
    let s = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            s.connections.fetch_add(1, Ordering::SeqCst);
            if silent {
                tokio::spawn(async move {
                    tokio::time::sleep(BOUND).await;
                    drop(tcp);
                });
                continue;
            }
            let s = s.clone();
            let s2 = s.clone();
            let port = addr.port();
            let svc = service_fn(move |req| {
                s.requests.fetch_add(1, Ordering::SeqCst);
                handle(port, req)
            });
            let acceptor = acceptor.clone();
            let h2 = matches!(kind, Kind::H2c);
            tokio::spawn(async move {
                if let Some(acc) = acceptor {
                    let Ok(tls) = tokio_boring::accept(&acc, tcp).await else {
                        return;
                    };
                    let sni = tls.ssl().servername(NameType::HOST_NAME).map(str::to_owned);
                    s2.sni.lock().expect("sni").push(sni);
                    let alpn = tls.ssl().selected_alpn_protocol().map(<[u8]>::to_vec);
                    let subject = tls.ssl().peer_certificate().and_then(|c| {
                        c.subject_name()
                            .entries()
                            .next()
                            .and_then(|e| e.data().as_utf8().ok().map(|s| s.to_string()))
                    });
                    s2.client_subject.lock().expect("subject").push(subject);
                    let h2 = alpn.as_deref() == Some(b"h2");
                    s2.alpn.lock().expect("alpn").push(alpn);
                    if h2 {
                        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                            .serve_connection(TokioIo::new(tls), svc)
                            .await;
                    } else {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(tls), svc)
                            .await;
                    }
                } else if h2 {
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                } else {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                }
            });
        }
    });
    (addr, seen)
}

fn acceptor(h2: bool, mtls: bool) -> SslAcceptor {
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).expect("acceptor");
    if h2 {
        b.set_alpn_select_callback(|_, client| {
            boring::ssl::select_next_proto(b"\x02h2", client).ok_or(boring::ssl::AlpnError::NOACK)
        });
    }
    if mtls {
        b.set_ca_file(certs().join("client-ca.cert.pem"))
            .expect("client CA");
        b.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
    }
    b.set_certificate_chain_file(certs().join("rsa2048.cert.pem"))
        .expect("cert");
    b.set_private_key_file(certs().join("rsa2048.key.pem"), SslFiletype::PEM)
        .expect("key");
    b.build()
}

/// A TCP echo server on 127.0.0.1:0.
pub async fn echo() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                loop {
                    match tcp.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if tcp.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

/// A port nothing listens on (bound, then released).
pub use quickshake_test_support::net::free_port as closed_port;

pub fn static_spec(name: &str, addrs: &[SocketAddr]) -> ClusterSpec {
    let eps = addrs
        .iter()
        .map(|a| (a.ip().to_string(), a.port()))
        .collect();
    let mut s = ClusterSpec::new(name, Discovery::Static, eps);
    s.connect_timeout = Duration::from_secs(2);
    s
}

pub fn get(path: &str) -> Request<RequestBody> {
    Request::builder()
        .uri(path)
        .header("host", "upstream.test")
        .body(
            http_body_util::Empty::<Bytes>::new()
                .map_err(|never| match never {})
                .boxed(),
        )
        .expect("request")
}

/// Sends `GET path` and reads the whole body, within [`BOUND`].
pub async fn fetch(
    cluster: &quickshake_upstream::Cluster,
    path: &str,
) -> Result<(u16, String), UpstreamError> {
    let resp = tokio::time::timeout(BOUND, cluster.send(get(path)))
        .await
        .expect("send within bound")?;
    let status = resp.status().as_u16();
    let body = read(resp.into_body()).await;
    Ok((status, body))
}

pub async fn read(body: UpstreamBody) -> String {
    let bytes = tokio::time::timeout(BOUND, body.collect())
        .await
        .expect("body within bound")
        .expect("body")
        .to_bytes();
    String::from_utf8_lossy(&bytes).into_owned()
}
