//! Real upstream servers for the proxy tests: each runs on its own thread with its own tokio
//! runtime, listens on `127.0.0.1:0`, records what it saw in a shared [`State`], and stops
//! (closing its listener and every connection) when the [`Upstream`] is dropped.
//!
//! - [`Upstream::http`]: HTTP/1.1 (hyper), answers a JSON echo of the request, with an
//!   optional delay and an optional sequence of statuses for the first requests;
//! - [`Upstream::h2c`]: the same over HTTP/2 with prior knowledge;
//! - [`Upstream::grpc`]: a unary "gRPC" echo over h2c (length-prefixed message in and out,
//!   `grpc-status: 0` in the trailers);
//! - [`Upstream::websocket`]: an HTTP/1.1 WebSocket handshake, then a raw byte echo;
//! - [`Upstream::tcp_echo`]: a TCP echo;
//! - [`Upstream::tls_http`]: HTTP/1.1 over TLS (BoringSSL, `rsa2048` test certificate),
//!   recording the SNI and ALPN each connection offered.
//!
//! Also: a builder for gateway configs with one TLS listener, an HTTP connection manager,
//! routes and clusters ([`proxy_config`], [`cluster`]), one for `tcp_proxy` ([`tcp_proxy_config`]), and a curl wrapper returning
//! status, headers and body ([`fetch`]).

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use boring::ssl::{NameType, SslAcceptor, SslFiletype, SslMethod};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The GUID RFC 6455 appends to `Sec-WebSocket-Key`.
pub const WS_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// `Sec-WebSocket-Accept` for a key: base64(sha1(key + GUID)).
pub fn websocket_accept(key: &str) -> String {
    boring::base64::encode_block(&boring::sha::sha1(format!("{key}{WS_GUID}").as_bytes()))
}

/// A gRPC length-prefixed message (uncompressed).
pub fn grpc_frame(msg: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(5 + msg.len());
    v.push(0);
    v.extend_from_slice(
        &u32::try_from(msg.len())
            .expect("small message")
            .to_be_bytes(),
    );
    v.extend_from_slice(msg);
    v
}

/// The messages of a gRPC length-prefixed stream (`None` if it is truncated).
pub fn grpc_messages(mut data: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    while !data.is_empty() {
        if data.len() < 5 {
            return None;
        }
        let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
        let rest = &data[5..];
        if rest.len() < len {
            return None;
        }
        out.push(rest[..len].to_vec());
        data = &rest[len..];
    }
    Some(out)
}

/// One request as an upstream saw it.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    pub method: String,
    /// Path and query.
    pub path: String,
    /// The request target as received: origin-form (`/path?query`), or absolute-form
    /// (`https://host/path`) for an HTTP/1.1 absolute-form target or an HTTP/2 request.
    pub target: String,
    /// `HTTP/1.1`, `HTTP/2.0`.
    pub version: String,
    /// Lower-case name → values joined with `", "`.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// What an upstream observed, shared with the test.
#[derive(Default, Debug)]
pub struct State {
    /// TCP connections accepted.
    pub connections: AtomicU64,
    /// HTTP requests received (responses are chosen by this index).
    pub requests: AtomicU64,
    pub seen: Mutex<Vec<Seen>>,
    /// The SNI of each TLS connection (`None`: no SNI sent).
    pub sni: Mutex<Vec<Option<String>>>,
    /// The ALPN protocol selected on each TLS connection.
    pub alpn: Mutex<Vec<Option<String>>>,
    /// TLS handshakes that failed on this upstream.
    pub tls_failures: AtomicU64,
    /// Bytes a TCP / WebSocket echo sent back.
    pub echoed: AtomicU64,
}

impl State {
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen lock").clone()
    }
    pub fn last(&self) -> Seen {
        self.seen().pop().expect("the upstream saw a request")
    }
    pub fn request_count(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
    pub fn connection_count(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }
    pub fn snis(&self) -> Vec<Option<String>> {
        self.sni.lock().expect("sni lock").clone()
    }
}

/// How an HTTP upstream answers.
#[derive(Clone, Debug, Default)]
pub struct HttpOpts {
    /// Wait this long before answering each request.
    pub delay: Duration,
    /// Statuses of the first requests, in order; 200 after them.
    pub statuses: Vec<u16>,
    /// HTTP/1.1: answer `connection: close` and close after each response.
    pub no_keep_alive: bool,
    /// HTTP/1.1: close a kept-alive connection idle this long (hyper's header read timeout).
    pub idle_close: Option<Duration>,
    /// Extra response headers (e.g. `server`), on every answer of the JSON echo.
    pub headers: Vec<(&'static str, &'static str)>,
}

impl HttpOpts {
    pub fn delay(d: Duration) -> Self {
        HttpOpts {
            delay: d,
            ..Default::default()
        }
    }
    pub fn statuses(s: &[u16]) -> Self {
        HttpOpts {
            statuses: s.to_vec(),
            ..Default::default()
        }
    }
}

/// A running upstream server; stopped on drop.
pub struct Upstream {
    pub port: u16,
    pub state: Arc<State>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

type BoxFut = Pin<Box<dyn Future<Output = ()> + Send>>;

impl Upstream {
    /// Accept on 127.0.0.1:0 in a thread of its own; `serve` handles each connection.
    fn spawn<F>(kind: &str, serve: F) -> Upstream
    where
        F: Fn(TcpStream, Arc<State>) -> BoxFut + Send + Sync + 'static,
    {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind upstream");
        std_listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let port = std_listener.local_addr().expect("local addr").port();
        let state = Arc::new(State::default());
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let st = state.clone();
        let thread = std::thread::Builder::new()
            .name(format!("upstream-{kind}-{port}"))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("upstream runtime");
                rt.block_on(async move {
                    let listener = TcpListener::from_std(std_listener).expect("tokio listener");
                    loop {
                        tokio::select! {
                            _ = &mut stopped => break,
                            accepted = listener.accept() => {
                                if let Ok((s, _)) = accepted {
                                    st.connections.fetch_add(1, Ordering::SeqCst);
                                    let _ = s.set_nodelay(true);
                                    tokio::spawn(serve(s, st.clone()));
                                }
                            }
                        }
                    }
                });
                // Dropping the runtime cancels every connection task and closes its socket.
                rt.shutdown_timeout(Duration::from_millis(100));
            })
            .expect("spawn upstream thread");
        Upstream {
            port,
            state,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// HTTP/1.1 (keep-alive) JSON echo.
    pub fn http(opts: HttpOpts) -> Upstream {
        let opts = Arc::new(opts);
        Self::spawn("http1", move |s, st| {
            let opts = opts.clone();
            Box::pin(async move {
                let mut b = hyper::server::conn::http1::Builder::new();
                b.keep_alive(!opts.no_keep_alive);
                if let Some(idle) = opts.idle_close {
                    b.timer(hyper_util::rt::TokioTimer::new())
                        .header_read_timeout(idle);
                }
                let svc = service_fn(move |req| echo(req, st.clone(), opts.clone()));
                let _ = b.serve_connection(TokioIo::new(s), svc).await;
            })
        })
    }

    /// HTTP/2 with prior knowledge (h2c) JSON echo.
    pub fn h2c(opts: HttpOpts) -> Upstream {
        let opts = Arc::new(opts);
        Self::spawn("h2c", move |s, st| {
            let opts = opts.clone();
            Box::pin(async move {
                let svc = service_fn(move |req| echo(req, st.clone(), opts.clone()));
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            })
        })
    }

    /// Unary gRPC echo over h2c: answers each message `m` with `reply:m`, then trailers
    /// `grpc-status: 0`. Requests without `content-type: application/grpc` get 415.
    pub fn grpc() -> Upstream {
        Self::spawn("grpc", move |s, st| {
            Box::pin(async move {
                let svc = service_fn(move |req| grpc_echo(req, st.clone()));
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            })
        })
    }

    /// WebSocket handshake (101 with the right `Sec-WebSocket-Accept`), then a raw byte echo.
    pub fn websocket() -> Upstream {
        Self::spawn("ws", move |s, st| {
            Box::pin(async move {
                let svc = service_fn(move |req| ws_handshake(req, st.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .with_upgrades()
                    .await;
            })
        })
    }

    /// TCP echo until the peer closes.
    pub fn tcp_echo() -> Upstream {
        Self::spawn("tcp-echo", move |mut s, st| {
            Box::pin(async move {
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                            st.echoed.fetch_add(n as u64, Ordering::SeqCst);
                        }
                    }
                }
            })
        })
    }

    /// HTTP/1.1 JSON echo over TLS with the `rsa2048` test certificate (CN/SAN localhost);
    /// records each connection's SNI and negotiated ALPN.
    pub fn tls_http(opts: HttpOpts) -> Upstream {
        let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).expect("acceptor");
        b.set_certificate_chain_file(super::cert("rsa2048.cert.pem"))
            .expect("upstream certificate");
        b.set_private_key_file(super::cert("rsa2048.key.pem"), SslFiletype::PEM)
            .expect("upstream key");
        b.set_alpn_select_callback(|_, client| {
            boring::ssl::select_next_proto(b"\x08http/1.1", client)
                .ok_or(boring::ssl::AlpnError::NOACK)
        });
        let acceptor = Arc::new(b.build());
        let opts = Arc::new(opts);
        Self::spawn("tls", move |s, st| {
            let (acceptor, opts) = (acceptor.clone(), opts.clone());
            Box::pin(async move {
                let tls = match tokio_boring::accept(&acceptor, s).await {
                    Ok(t) => t,
                    Err(_) => {
                        st.tls_failures.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                };
                let sni = tls
                    .ssl()
                    .servername(NameType::HOST_NAME)
                    .map(str::to_string);
                let alpn = tls
                    .ssl()
                    .selected_alpn_protocol()
                    .map(|p| String::from_utf8_lossy(p).to_string());
                st.sni.lock().expect("sni lock").push(sni);
                st.alpn.lock().expect("alpn lock").push(alpn);
                let svc = service_fn(move |req| echo(req, st.clone(), opts.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            })
        })
    }
}

fn header_map(h: &HeaderMap) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in h {
        let v = String::from_utf8_lossy(v.as_bytes()).to_string();
        out.entry(k.as_str().to_string())
            .and_modify(|e| {
                e.push_str(", ");
                e.push_str(&v);
            })
            .or_insert(v);
    }
    out
}

/// Record a request (consuming its body); returns its index.
async fn record(req: Request<Incoming>, st: &State) -> (u64, Seen) {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    let mut headers = header_map(&parts.headers);
    // HTTP/2 carries the host as :authority.
    if let (false, Some(a)) = (headers.contains_key("host"), parts.uri.authority()) {
        headers.insert("host".into(), a.as_str().to_string());
    }
    let seen = Seen {
        method: parts.method.as_str().to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| "/".to_string(), |p| p.as_str().to_string()),
        target: parts.uri.to_string(),
        version: format!("{:?}", parts.version),
        headers,
        body,
    };
    let n = st.requests.fetch_add(1, Ordering::SeqCst);
    st.seen.lock().expect("seen lock").push(seen.clone());
    (n, seen)
}

async fn echo(
    req: Request<Incoming>,
    st: Arc<State>,
    opts: Arc<HttpOpts>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (n, seen) = record(req, &st).await;
    if !opts.delay.is_zero() {
        tokio::time::sleep(opts.delay).await;
    }
    let status = usize::try_from(n)
        .ok()
        .and_then(|i| opts.statuses.get(i).copied())
        .unwrap_or(200);
    let json = serde_json::json!({
        "n": n,
        "method": seen.method,
        "path": seen.path,
        "version": seen.version,
        "headers": seen.headers,
        "body_len": seen.body.len(),
    });
    let mut resp = Response::new(Full::new(Bytes::from(json.to_string())));
    *resp.status_mut() = StatusCode::from_u16(status).expect("valid status");
    let h = resp.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    h.insert("x-upstream-n", HeaderValue::from(n));
    for (name, value) in &opts.headers {
        h.insert(*name, HeaderValue::from_static(value));
    }
    Ok(resp)
}

/// A body made of a fixed list of frames (data and trailers), which `Full` cannot express.
pub struct Frames(VecDeque<Frame<Bytes>>);

impl Frames {
    pub fn new(frames: Vec<Frame<Bytes>>) -> Self {
        Frames(frames.into())
    }
}

impl Body for Frames {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(Ok))
    }
    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }
}

async fn grpc_echo(req: Request<Incoming>, st: Arc<State>) -> Result<Response<Frames>, Infallible> {
    let is_grpc = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"));
    let (_, seen) = record(req, &st).await;
    if !is_grpc {
        let mut r = Response::new(Frames::new(vec![]));
        *r.status_mut() = StatusCode::UNSUPPORTED_MEDIA_TYPE;
        return Ok(r);
    }
    let mut trailers = HeaderMap::new();
    let mut frames = Vec::new();
    match grpc_messages(&seen.body) {
        Some(msgs) => {
            let mut out = Vec::new();
            for m in msgs {
                let mut reply = b"reply:".to_vec();
                reply.extend_from_slice(&m);
                out.extend_from_slice(&grpc_frame(&reply));
            }
            frames.push(Frame::data(Bytes::from(out)));
            trailers.insert("grpc-status", HeaderValue::from_static("0"));
        }
        None => {
            // INTERNAL: the message was truncated on the way.
            trailers.insert("grpc-status", HeaderValue::from_static("13"));
            trailers.insert("grpc-message", HeaderValue::from_static("truncated"));
        }
    }
    frames.push(Frame::trailers(trailers));
    let mut r = Response::new(Frames::new(frames));
    r.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("application/grpc+proto"),
    );
    Ok(r)
}

async fn ws_handshake(
    mut req: Request<Incoming>,
    st: Arc<State>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let h = req.headers();
    let get = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
    let is_ws = get("upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
        && get("connection").is_some_and(|c| c.to_ascii_lowercase().contains("upgrade"));
    let key = get("sec-websocket-key");
    let on_upgrade = hyper::upgrade::on(&mut req);
    {
        let seen = Seen {
            method: req.method().as_str().to_string(),
            path: req.uri().to_string(),
            target: req.uri().to_string(),
            version: format!("{:?}", req.version()),
            headers: header_map(req.headers()),
            body: Vec::new(),
        };
        st.requests.fetch_add(1, Ordering::SeqCst);
        st.seen.lock().expect("seen lock").push(seen);
    }
    let (true, Some(key)) = (is_ws, key) else {
        let mut r = Response::new(Full::new(Bytes::from_static(b"not a websocket upgrade")));
        *r.status_mut() = StatusCode::BAD_REQUEST;
        return Ok(r);
    };
    tokio::spawn(async move {
        let Ok(up) = on_upgrade.await else { return };
        let mut io = TokioIo::new(up);
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if io.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    st.echoed.fetch_add(n as u64, Ordering::SeqCst);
                }
            }
        }
    });
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let hm = r.headers_mut();
    hm.insert("upgrade", HeaderValue::from_static("websocket"));
    hm.insert("connection", HeaderValue::from_static("Upgrade"));
    hm.insert(
        "sec-websocket-accept",
        HeaderValue::from_str(&websocket_accept(&key)).expect("header value"),
    );
    Ok(r)
}

// ---------------------------------------------------------------------------------------------
// Gateway configs for the proxy tests.

/// A gateway config: one TLS listener (`rsa2048`, ALPN h2 + http/1.1) on `{{PORT}}` with an
/// HTTP connection manager (`stat_prefix: ingress_http`) whose single virtual host (`*`) has
/// `routes`; `hcm_extra` goes into the connection manager, `listener_extra` into the listener
/// (e.g. `listener_filters`), `extra_listeners` after it, `clusters` under
/// `static_resources.clusters`. Indentation: routes at 14 spaces (`- match:`), HCM fields at
/// 10, listener fields at 4, list items of listeners/clusters at 2.
pub fn proxy_config(
    listener_extra: &str,
    hcm_extra: &str,
    routes: &str,
    extra_listeners: &str,
    clusters: &str,
) -> String {
    const T: &str = r#"
static_resources:
  listeners:
  - name: main
    address: { socket_address: { address: 127.0.0.1, port_value: {{PORT}} } }
@LISTENER_EXTRA@
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            alpn_protocols: [h2, http/1.1]
            tls_certificates:
            - certificate_chain: { filename: {{CERTS}}/rsa2048.cert.pem }
              private_key: { filename: {{CERTS}}/rsa2048.key.pem }
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress_http
@HCM_EXTRA@
          route_config:
            name: local_route
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
@ROUTES@
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
@EXTRA_LISTENERS@
  clusters:
@CLUSTERS@
admin:
  address: { socket_address: { address: 127.0.0.1, port_value: {{ADMIN}} } }
"#;
    T.replace("@LISTENER_EXTRA@", listener_extra)
        .replace("@HCM_EXTRA@", hcm_extra)
        .replace("@ROUTES@", routes)
        .replace("@EXTRA_LISTENERS@", extra_listeners)
        .replace("@CLUSTERS@", clusters)
}

/// A route at the indentation [`proxy_config`] expects: `prefix` → `cluster`, with extra
/// `route:` fields (each line indented 18 spaces, e.g. `"                  timeout: 0.2s"`).
pub fn route(prefix: &str, cluster: &str, route_extra: &str) -> String {
    format!(
        "              - match: {{ prefix: \"{prefix}\" }}\n                route:\n                  cluster: {cluster}\n{route_extra}"
    )
}

/// A TLS listener (rsa2048) whose only filter is `tcp_proxy` (stat prefix `echo`) to cluster
/// `echo` on `echo_port`; `listener_extra` goes after the listener's address (listener filters).
pub fn tcp_proxy_config(listener_extra: &str, echo_port: u16) -> String {
    let t = r#"
static_resources:
  listeners:
  - name: tcp
    address: { socket_address: { address: 127.0.0.1, port_value: {{PORT}} } }
@LISTENER_EXTRA@
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates:
            - certificate_chain: { filename: {{CERTS}}/rsa2048.cert.pem }
              private_key: { filename: {{CERTS}}/rsa2048.key.pem }
      filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: echo
          cluster: echo
          idle_timeout: 60s
  clusters:
@CLUSTERS@
admin:
  address: { socket_address: { address: 127.0.0.1, port_value: {{ADMIN}} } }
"#;
    t.replace("@LISTENER_EXTRA@", listener_extra).replace(
        "@CLUSTERS@",
        &cluster("echo", "STATIC", "127.0.0.1", echo_port, ""),
    )
}

/// A cluster entry (`type` STATIC, STRICT_DNS or LOGICAL_DNS) with one endpoint; `extra`
/// lines are cluster fields indented 4 spaces.
pub fn cluster(name: &str, kind: &str, host: &str, port: u16, extra: &str) -> String {
    cluster_of(name, kind, &[(host, port)], extra)
}

/// A cluster entry with several endpoints (see [`cluster`]).
pub fn cluster_of(name: &str, kind: &str, endpoints: &[(&str, u16)], extra: &str) -> String {
    let eps: String = endpoints
        .iter()
        .map(|(host, port)| {
            format!(
                "        - endpoint: {{ address: {{ socket_address: {{ address: {host}, port_value: {port} }} }} }}\n"
            )
        })
        .collect();
    format!(
        r#"  - name: {name}
    type: {kind}
    connect_timeout: 1s
{extra}
    load_assignment:
      cluster_name: {name}
      endpoints:
      - lb_endpoints:
{eps}"#
    )
}

/// Cluster fields making it speak HTTP/2 upstream (Envoy's `explicit_http_config`).
pub const HTTP2_UPSTREAM: &str = r#"    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config:
          http2_protocol_options: {}"#;

/// A curl reply: status, headers (lower-case names, in order), body, and curl's stderr.
#[derive(Debug, Default)]
pub struct Reply {
    pub status: u16,
    /// The status line, e.g. `HTTP/2 200`.
    pub status_line: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Read only through `Debug`: the failure messages print the whole reply (`{r:?}`).
    #[allow(dead_code)]
    pub stderr: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    /// The body as JSON (the echo upstreams' format).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {self:?}"))
    }
}

/// `curl -i` (with `--cacert rsa2048`) plus `args`, parsed.
pub fn fetch(args: &[&str], url: &str) -> Reply {
    let ca = super::cert("rsa2048.cert.pem");
    let mut all = vec!["-i", "--cacert", ca.as_str()];
    all.extend_from_slice(args);
    all.push(url);
    let out = super::curl(&all);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text.as_str(), ""));
    let mut lines = head.lines();
    let status_line = lines.next().unwrap_or("").trim().to_string();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Reply {
        status,
        status_line,
        headers,
        body: body.to_string(),
        stderr,
    }
}
