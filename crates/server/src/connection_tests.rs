//! In-process tests of the connection state machine: a BoringSSL client and the server's own
//! connection code over `tokio::io::duplex` (single filter chain, driving [`serve_chain`]) or a
//! loopback TCP pair on port 0 (driving [`serve_connection`] where `run` needs a real socket:
//! PROXY protocol and ClientHello-based chain selection). No binary is started.
//!
//! Listeners are built as production builds them: a YAML bootstrap parsed by
//! `quickshake_config`, an empty cluster manager and [`build_listeners`], with
//! certificates from `testdata/certs` and keys held by a `quickshake.batching` provider
//! (`engine: software`, or `engine: fault` to inject errors, wrong results and panics: the
//! tests' engine from `quickshake-test-support`, registered here as `quickshake-test` does).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use boring::nid::Nid;
use boring::ssl::{SslConnector, SslMethod, SslVerifyMode};
use boring::x509::X509;
use quickshake_keyprovider::{ProviderOptions, Providers};
use quickshake_stats::Store;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{serve_chain, serve_connection, ConnGuard};
use crate::gateway::build_listeners;
use crate::handoff::Movable;
use quickshake_listener::{ListenerShared, ServerShared};
use quickshake_upstream::ClusterManager;

/// Each step of a test is bounded by this: a hang fails the test instead of stalling it.
/// Generous, so that a loaded machine does not fail a test; a passing step takes milliseconds.
const STEP: Duration = Duration::from_secs(5);

/// The peer address a duplex connection claims.
const PEER: &str = "192.0.2.7:40000";

/// Duplex streams have no socket to move between event loops; nothing in these tests hands a
/// connection off (`handoff::hands_off()` is false on a test thread).
impl Movable for DuplexStream {
    fn detach(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn attach(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn certs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/certs")
        .canonicalize()
        .expect("testdata/certs")
}

fn cert_path(file: &str) -> String {
    certs_dir().join(file).display().to_string()
}

/// A `tls_certificates` entry for `testdata/certs/<name>` whose key a `quickshake.batching`
/// provider holds; `typed` is extra `typed_config` fields in YAML flow style.
fn provider_cert(name: &str, fallback: bool, typed: &str) -> String {
    format!(
        r#"{{ certificate_chain: {{ filename: "{chain}" }}, private_key_provider: {{ provider_name: quickshake.batching, fallback: {fallback}, typed_config: {{ "@type": type.googleapis.com/quickshake.private_key_providers.v1.BatchingConfig, private_key: {{ filename: "{key}" }}, {typed} }} }} }}"#,
        chain = cert_path(&format!("{name}.cert.pem")),
        key = cert_path(&format!("{name}.key.pem")),
    )
}

/// A `tls_certificates` entry with the key in-process.
fn plain_cert(name: &str) -> String {
    format!(
        r#"{{ certificate_chain: {{ filename: "{}" }}, private_key: {{ filename: "{}" }} }}"#,
        cert_path(&format!("{name}.cert.pem")),
        cert_path(&format!("{name}.key.pem")),
    )
}

/// A software-engine provider key.
fn software_cert(name: &str) -> String {
    provider_cert(name, false, "engine: software")
}

/// One filter chain: TLS with `cert`, the given handshake timeout, and a connection manager
/// answering every request with 200 and `body`. `server_names` adds a `filter_chain_match`;
/// `access_log` a file log of the peer address and SNI.
struct Chain<'a> {
    cert: String,
    server_names: Option<&'a str>,
    handshake_timeout: &'a str,
    body: &'a str,
    access_log: Option<&'a str>,
}

impl<'a> Chain<'a> {
    fn new(cert: String) -> Self {
        Chain {
            cert,
            server_names: None,
            handshake_timeout: "1s",
            body: "hello from quickshake",
            access_log: None,
        }
    }

    fn yaml(&self) -> String {
        let names = self.server_names.map_or(String::new(), |n| {
            format!("filter_chain_match: {{ server_names: [{n}] }}\n      ")
        });
        let log = self.access_log.map_or(String::new(), |path| {
            format!(
                r#"
          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: "{path}"
              log_format: {{ text_format: "%DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME%\n" }}"#
            )
        });
        format!(
            r#"
    - {names}transport_socket_connect_timeout: {timeout}
      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            alpn_protocols: [h2, http/1.1]
            tls_certificates:
            - {cert}
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress_http{log}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: / }}
                direct_response: {{ status: 200, body: {{ inline_string: "{body}" }} }}
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {{ "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }}"#,
            timeout = self.handshake_timeout,
            cert = self.cert,
            body = self.body,
        )
    }
}

/// A bootstrap with one listener (never bound: its address only names the stat scope).
fn bootstrap(chains: &[Chain<'_>], proxy_protocol: bool) -> String {
    let filters = if proxy_protocol {
        "\n    listener_filters:\n    - name: envoy.filters.listener.proxy_protocol"
    } else {
        ""
    };
    let chains: String = chains.iter().map(Chain::yaml).collect();
    format!(
        r#"
static_resources:
  listeners:
  - name: test
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}{filters}
    filter_chains:{chains}
"#
    )
}

/// One listener as production builds it, its stats, and the server-wide state a connection
/// needs.
struct Harness {
    store: Store,
    listener: Arc<ListenerShared>,
    server: Arc<ServerShared>,
    drain_tx: watch::Sender<bool>,
}

impl Harness {
    fn new(yaml: &str) -> Self {
        let cfg = quickshake_config::parse_str(yaml).expect("config parses");
        let store = Store::new();
        // `engine: fault` is the tests' engine, added as the test-only binary adds it.
        let options = ProviderOptions {
            extra_engines: quickshake_test_support::fault::engines(),
            ..ProviderOptions::default()
        };
        let providers = Providers::new(store.clone(), options);
        // These bootstraps name no cluster (the control crate's `cluster_manager` is above
        // this one): the cluster manager it would build is an empty one.
        assert!(cfg.clusters.is_empty());
        let clusters = ClusterManager::new(Vec::new(), &store).expect("cluster manager");
        let mut listeners =
            build_listeners(&cfg, &store, &providers, &clusters).expect("listeners build");
        assert_eq!(listeners.len(), 1);
        let listener = listeners.remove(0);
        let server = Arc::new(ServerShared::new(
            &store,
            cfg.global_downstream_max_connections,
        ));
        let (drain_tx, _) = watch::channel(false);
        Harness {
            store,
            listener,
            server,
            drain_tx,
        }
    }

    /// A listener with one chain.
    fn single(chain: Chain<'_>) -> Self {
        Self::new(&bootstrap(&[chain], false))
    }

    /// `listener.<scope>.<name>`.
    fn listener_counter(&self, name: &str) -> u64 {
        self.counter(&format!("{}{name}", self.listener.scope))
    }

    /// `listener.<scope>.cryptomb.<name>`: the provider's stats.
    fn provider_counter(&self, name: &str) -> u64 {
        self.listener_counter(&format!("cryptomb.{name}"))
    }

    fn counter(&self, full: &str) -> u64 {
        self.store.counter_value(full).unwrap_or(0)
    }

    /// Serve one connection over a duplex stream through the listener's only chain, as `run`
    /// does after admission: [`serve_chain`] with a [`ConnGuard`] and the chain's handshake
    /// deadline. Returns the client's end and the serving task.
    fn serve_duplex(&self) -> (DuplexStream, JoinHandle<()>) {
        let (client, server_end) = tokio::io::duplex(64 * 1024);
        let chains = self.listener.chains.load_full();
        assert_eq!(
            chains.len(),
            1,
            "serve_duplex drives a single-chain listener"
        );
        let chain = chains[0].clone();
        // What serve_connection does before `run`.
        let stats = &self.listener.stats;
        stats.downstream_cx_total.inc();
        assert!(self.server.try_admit());
        stats.downstream_cx_active.inc();
        let guard = ConnGuard {
            listener: self.listener.clone(),
            server: self.server.clone(),
            started: Instant::now(),
            handshake_slot: None,
        };
        let deadline = Instant::now() + chain.handshake_timeout;
        let peer: SocketAddr = PEER.parse().expect("peer");
        let task = tokio::spawn(serve_chain(
            server_end,
            chain,
            deadline,
            peer,
            "127.0.0.1:443".to_string(),
            self.drain_tx.subscribe(),
            guard,
        ));
        (client, task)
    }

    /// Serve one connection over loopback TCP (port 0) through [`serve_connection`], the
    /// worker's entry point: admission, PROXY header, chain selection by SNI, then the chain.
    async fn serve_tcp(&self) -> (TcpStream, JoinHandle<()>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = l.local_addr().expect("addr");
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), l.accept());
        let (stream, peer) = accepted.expect("accept");
        let task = tokio::spawn(serve_connection(
            stream,
            peer,
            self.listener.clone(),
            self.server.clone(),
            self.drain_tx.subscribe(),
        ));
        (client.expect("connect"), task)
    }

    /// The connection's accounting is done (its guard dropped) and nothing is left open.
    fn assert_closed(&self, connections: u64) {
        assert_eq!(
            self.listener_counter("downstream_cx_destroy"),
            connections,
            "every connection's guard dropped"
        );
        assert_eq!(
            self.store
                .gauge_value(&format!("{}downstream_cx_active", self.listener.scope)),
            Some(0)
        );
        assert_eq!(self.server.active(), 0);
    }
}

/// Wait for a serving task; it must end, and without a panic.
async fn finished(task: JoinHandle<()>) {
    tokio::time::timeout(STEP, task)
        .await
        .expect("the serving task ends")
        .expect("the serving task does not panic");
}

/// A client trusting the test certificates (self-signed leaves), offering HTTP/1.1 only.
fn client_config() -> boring::ssl::ConnectConfiguration {
    let mut b = SslConnector::builder(SslMethod::tls()).expect("connector");
    for name in ["rsa2048", "other"] {
        let pem = std::fs::read(cert_path(&format!("{name}.cert.pem"))).expect("read cert");
        let x509 = X509::from_pem(&pem).expect("parse cert");
        b.cert_store_mut().add_cert(x509).expect("trust cert");
    }
    b.set_verify(SslVerifyMode::PEER);
    b.set_alpn_protos(b"\x08http/1.1").expect("alpn");
    let mut cfg = b.build().configure().expect("configure");
    cfg.set_verify_hostname(true);
    cfg
}

async fn tls_connect<S>(stream: S, sni: &str) -> Result<tokio_boring::SslStream<S>, String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let connect = tokio_boring::connect(client_config(), sni, stream);
    tokio::time::timeout(STEP, connect)
        .await
        .expect("the client's handshake ends")
        .map_err(|e| e.to_string())
}

/// The leaf certificate's common name, as the client saw it.
fn peer_cn<S>(s: &tokio_boring::SslStream<S>) -> String {
    let cert = s.ssl().peer_certificate().expect("server certificate");
    let cn = cert
        .subject_name()
        .entries_by_nid(Nid::COMMONNAME)
        .next()
        .expect("CN")
        .data()
        .as_utf8()
        .expect("utf8");
    cn.to_string()
}

/// One HTTP/1.1 request on an established stream: status code and body. With `close`, the
/// server ends the connection after answering; without, it stays open (keep-alive).
async fn get<S>(s: &mut S, close: bool) -> (u16, String)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let conn = if close { "close" } else { "keep-alive" };
    let req = format!("GET / HTTP/1.1\r\nHost: localhost\r\nConnection: {conn}\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write request");
    let mut buf = Vec::new();
    let read = async {
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(resp) = parse_response(&buf) {
                return resp;
            }
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => panic!(
                    "connection ended before a complete response: {:?}",
                    String::from_utf8_lossy(&buf)
                ),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::time::timeout(STEP, read).await.expect("a response")
}

/// A complete `content-length` response, if `buf` holds one.
fn parse_response(buf: &[u8]) -> Option<(u16, String)> {
    let text = std::str::from_utf8(buf).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let len = quickshake_test_support::http::content_length(head);
    (body.len() >= len).then(|| (status, body[..len].to_string()))
}

/// Read until the server closes; how long that took.
async fn closed_by_server<S: AsyncRead + Unpin>(s: &mut S) -> Duration {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    let read = async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(STEP, read)
        .await
        .expect("the server closes the connection");
    started.elapsed()
}

/// Case 1: a full handshake through a provider-held key (software engine), then one HTTP/1.1
/// request answered by the direct response.
#[tokio::test]
async fn handshake_through_provider_then_http_request() {
    let h = Harness::single(Chain::new(software_cert("rsa2048")));
    let (client, task) = h.serve_duplex();
    let mut tls = tls_connect(client, "localhost").await.expect("handshake");
    assert_eq!(peer_cn(&tls), "localhost");
    assert_eq!(
        get(&mut tls, true).await,
        (200, "hello from quickshake".to_string())
    );
    drop(tls);
    finished(task).await;

    assert_eq!(h.listener_counter("ssl.handshake"), 1);
    assert_eq!(h.listener_counter("ssl.connection_error"), 0);
    assert_eq!(h.provider_counter("rsa_sign"), 1, "the key's one signature");
    assert_eq!(h.provider_counter("failed"), 0);
    assert_eq!(h.counter("http.ingress_http.downstream_rq_2xx"), 1);
    assert_eq!(h.counter("http.ingress_http.downstream_cx_ssl_total"), 1);
    assert_eq!(h.counter("http.ingress_http.downstream_cx_http1_total"), 1);
    h.assert_closed(1);
}

/// Case 2: every engine operation fails and there is no fallback: the handshake fails, the
/// failure is counted by the listener and the provider, and the serving task ends.
#[tokio::test]
async fn engine_errors_without_fallback_fail_the_handshake() {
    let h = Harness::single(Chain::new(provider_cert(
        "rsa2048",
        false,
        "engine: fault, fault: { error_every: 1 }",
    )));
    let (client, task) = h.serve_duplex();
    let outcome = tls_connect(client, "localhost").await;
    assert!(outcome.is_err(), "the handshake must fail");
    finished(task).await;

    assert_eq!(h.listener_counter("ssl.connection_error"), 1);
    assert_eq!(h.listener_counter("ssl.handshake"), 0);
    assert_eq!(h.provider_counter("engine_error"), 1);
    assert_eq!(h.provider_counter("failed"), 1);
    assert_eq!(h.provider_counter("software_retry"), 0);
    assert_eq!(h.counter("http.ingress_http.downstream_cx_total"), 0);
    h.assert_closed(1);
}

/// Case 3: every engine result is wrong: the public-key check catches it, the software redo
/// succeeds and the handshake completes.
#[tokio::test]
async fn corrupt_results_are_caught_and_redone() {
    let h = Harness::single(Chain::new(provider_cert(
        "rsa2048",
        false,
        "engine: fault, fault: { corrupt_every: 1 }",
    )));
    let (client, task) = h.serve_duplex();
    let mut tls = tls_connect(client, "localhost").await.expect("handshake");
    assert_eq!(get(&mut tls, true).await.0, 200);
    drop(tls);
    finished(task).await;

    assert_eq!(h.listener_counter("ssl.handshake"), 1);
    assert_eq!(h.provider_counter("verify_failed"), 1);
    assert_eq!(h.provider_counter("software_retry"), 1);
    assert_eq!(h.provider_counter("failed"), 0);
    h.assert_closed(1);
}

/// Case 4: the engine panics in every batch, with `fallback: true`: the panic is contained,
/// counted as an engine error, the operation is redone in software and the handshake
/// completes; the worker (this test's runtime) goes on serving the next connection.
#[tokio::test]
async fn engine_panics_are_contained_and_fall_back() {
    let h = Harness::single(Chain::new(provider_cert(
        "rsa2048",
        true,
        "engine: fault, fault: { panic_every: 1 }",
    )));
    for n in 1..=2 {
        let (client, task) = h.serve_duplex();
        let mut tls = tls_connect(client, "localhost").await.expect("handshake");
        assert_eq!(get(&mut tls, true).await.0, 200);
        drop(tls);
        finished(task).await;
        assert_eq!(h.listener_counter("ssl.handshake"), n);
        assert_eq!(h.provider_counter("engine_error"), n);
        assert_eq!(h.provider_counter("software_retry"), n);
    }
    assert_eq!(h.provider_counter("failed"), 0);
    h.assert_closed(2);
}

/// Case 5 (one chain): bytes that are not TLS end only that connection, as a connection error.
#[tokio::test]
async fn garbage_instead_of_client_hello_is_a_connection_error() {
    let h = Harness::single(Chain::new(software_cert("rsa2048")));
    let (mut client, task) = h.serve_duplex();
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .expect("write");
    closed_by_server(&mut client).await;
    finished(task).await;

    assert_eq!(h.listener_counter("ssl.connection_error"), 1);
    assert_eq!(h.listener_counter("ssl.handshake"), 0);
    assert_eq!(h.provider_counter("rsa_sign"), 0);
    h.assert_closed(1);

    // The next client is served as usual.
    let (client, task) = h.serve_duplex();
    let mut tls = tls_connect(client, "localhost").await.expect("handshake");
    assert_eq!(get(&mut tls, true).await.0, 200);
    drop(tls);
    finished(task).await;
    assert_eq!(h.listener_counter("ssl.handshake"), 1);
    assert_eq!(h.listener_counter("ssl.connection_error"), 1);
}

/// Two chains: `other.test` by name (in-process key), the rest by default (provider key).
fn sni_harness(handshake_timeout: &str, proxy_protocol: bool, log: Option<&str>) -> Harness {
    let mut by_name = Chain::new(plain_cert("other"));
    by_name.server_names = Some("other.test");
    by_name.body = "chain other.test";
    by_name.handshake_timeout = handshake_timeout;
    by_name.access_log = log;
    let mut default = Chain::new(software_cert("rsa2048"));
    default.body = "default chain";
    default.handshake_timeout = handshake_timeout;
    default.access_log = log;
    Harness::new(&bootstrap(&[by_name, default], proxy_protocol))
}

/// Case 5 (several chains): garbage read while looking for the SNI goes to the default chain,
/// whose handshake rejects it; a client closing before any byte is a connection error too.
#[tokio::test]
async fn sni_listener_garbage_and_early_close_are_connection_errors() {
    let h = sni_harness("1s", false, None);
    let (mut client, task) = h.serve_tcp().await;
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .expect("write");
    closed_by_server(&mut client).await;
    finished(task).await;
    assert_eq!(h.listener_counter("ssl.connection_error"), 1);

    let (client, task) = h.serve_tcp().await;
    drop(client);
    finished(task).await;
    assert_eq!(h.listener_counter("ssl.connection_error"), 2);
    assert_eq!(h.listener_counter("ssl.handshake"), 0);
    assert_eq!(h.listener_counter("no_filter_chain_match"), 0);
    h.assert_closed(2);
}

/// Case 6: the ClientHello's SNI selects the filter chain: its certificate and its routes.
#[tokio::test]
async fn sni_selects_the_filter_chain() {
    let h = sni_harness("1s", false, None);
    for (sni, cn, body, provider_signs) in [
        ("other.test", "other.test", "chain other.test", 0),
        ("localhost", "localhost", "default chain", 1),
        ("sub.other.test", "other.test", "default chain", 2),
    ] {
        let (client, task) = h.serve_tcp().await;
        let verify = sni != "sub.other.test";
        let mut tls = if verify {
            tls_connect(client, sni).await.expect("handshake")
        } else {
            // `*.other.test` is in other's certificate, not in the chain's server_names:
            // the default chain answers, with a certificate that does not name the host.
            let mut cfg = client_config();
            cfg.set_verify(SslVerifyMode::NONE);
            tokio_boring::connect(cfg, sni, client)
                .await
                .expect("handshake")
        };
        let expected_cn = if verify { cn } else { "localhost" };
        assert_eq!(peer_cn(&tls), expected_cn, "certificate for SNI {sni}");
        assert_eq!(get(&mut tls, true).await, (200, body.to_string()), "{sni}");
        drop(tls);
        finished(task).await;
        assert_eq!(h.provider_counter("rsa_sign"), provider_signs, "{sni}");
    }
    assert_eq!(h.listener_counter("ssl.handshake"), 3);
    assert_eq!(h.listener_counter("no_filter_chain_match"), 0);
    h.assert_closed(3);
}

/// A listener whose only chain names a server: a ClientHello for another name matches nothing.
#[tokio::test]
async fn no_matching_chain_is_counted() {
    let mut only = Chain::new(plain_cert("other"));
    only.server_names = Some("other.test");
    // Two chains are what makes `run` read the SNI; both name servers here.
    let mut second = Chain::new(plain_cert("rsa2048"));
    second.server_names = Some("localhost");
    let h = Harness::new(&bootstrap(&[only, second], false));
    let (client, task) = h.serve_tcp().await;
    assert!(tls_connect(client, "unknown.test").await.is_err());
    finished(task).await;
    assert_eq!(h.listener_counter("no_filter_chain_match"), 1);
    assert_eq!(h.listener_counter("ssl.connection_error"), 0);
    h.assert_closed(1);
}

/// A PROXY protocol v1 header before the ClientHello: the connection is served through the
/// chain its SNI selects, and the request is logged with the address the header carried. A
/// malformed header ends the connection, counted.
#[tokio::test]
async fn proxy_protocol_header_then_sni_selection() {
    let log = std::env::temp_dir().join(format!(
        "quickshake-connection-tests-{}-{:?}.log",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_file(&log);
    let log_str = log.display().to_string();
    let h = sni_harness("1s", true, Some(&log_str));

    let (mut client, task) = h.serve_tcp().await;
    client
        .write_all(b"PROXY TCP4 203.0.113.9 127.0.0.1 51000 443\r\n")
        .await
        .expect("write header");
    let mut tls = tls_connect(client, "other.test").await.expect("handshake");
    assert_eq!(peer_cn(&tls), "other.test");
    assert_eq!(
        get(&mut tls, true).await,
        (200, "chain other.test".to_string())
    );
    drop(tls);
    finished(task).await;
    let logged = std::fs::read_to_string(&log).expect("access log");
    let _ = std::fs::remove_file(&log);
    assert_eq!(logged.trim(), "203.0.113.9:51000 other.test");

    let (mut client, task) = h.serve_tcp().await;
    client
        .write_all(b"PROXY NONSENSE\r\n")
        .await
        .expect("write header");
    closed_by_server(&mut client).await;
    finished(task).await;
    assert_eq!(h.listener_counter("downstream_cx_proxy_proto_error"), 1);
    assert_eq!(h.listener_counter("ssl.handshake"), 1);
    assert_eq!(h.listener_counter("ssl.connection_error"), 0);
    h.assert_closed(2);
}

/// Case 7 (one chain): a client that sends nothing is closed when the chain's
/// `transport_socket_connect_timeout` passes.
#[tokio::test]
async fn silent_client_hits_the_handshake_timeout() {
    let mut chain = Chain::new(software_cert("rsa2048"));
    chain.handshake_timeout = "200ms";
    let h = Harness::single(chain);
    let (mut client, task) = h.serve_duplex();
    let waited = closed_by_server(&mut client).await;
    finished(task).await;
    // Not before the deadline (set just before `waited` started); `closed_by_server` bounds it
    // from above.
    assert!(
        waited >= Duration::from_millis(150),
        "closed after {waited:?}"
    );
    assert_eq!(
        h.listener_counter("downstream_cx_transport_socket_connect_timeout"),
        1
    );
    assert_eq!(h.listener_counter("ssl.connection_error"), 0);
    h.assert_closed(1);
}

/// Case 7 (several chains): the silent client times out while the SNI is read, before any
/// chain is chosen.
#[tokio::test]
async fn sni_listener_silent_client_times_out_before_a_chain() {
    let h = sni_harness("200ms", false, None);
    let (mut client, task) = h.serve_tcp().await;
    let waited = closed_by_server(&mut client).await;
    finished(task).await;
    // Not before the deadline (set just before `waited` started); `closed_by_server` bounds it
    // from above.
    assert!(
        waited >= Duration::from_millis(150),
        "closed after {waited:?}"
    );
    assert_eq!(h.listener_counter("downstream_pre_cx_timeout"), 1);
    assert_eq!(
        h.listener_counter("downstream_cx_transport_socket_connect_timeout"),
        0
    );
    assert_eq!(h.listener_counter("ssl.connection_error"), 0);
    h.assert_closed(1);
}

/// A drain ends an established keep-alive connection after its request; nothing else does.
#[tokio::test]
async fn drain_ends_an_idle_keep_alive_connection() {
    let h = Harness::single(Chain::new(software_cert("rsa2048")));
    let (client, mut task) = h.serve_duplex();
    let mut tls = tls_connect(client, "localhost").await.expect("handshake");
    assert_eq!(get(&mut tls, false).await.0, 200);
    // Keep-alive: the connection stays open.
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut task)
            .await
            .is_err(),
        "a keep-alive connection stays open"
    );
    h.drain_tx.send_replace(true);
    closed_by_server(&mut tls).await;
    finished(task).await;
    assert_eq!(h.counter("http.ingress_http.downstream_rq_2xx"), 1);
    h.assert_closed(1);
}
