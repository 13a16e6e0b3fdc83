//! The load itself: TLS client setup, one request per new connection (or keep-alive),
//! closed and open loops, the timed window, snapshots of CPU and server counters.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use boring::ex_data::Index;
use boring::ssl::{
    Ssl, SslConnector, SslMethod, SslOptions, SslSession, SslSessionCacheMode,
    SslSignatureAlgorithm, SslVerifyMode, SslVersion,
};
use hdrhistogram::Histogram;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tokio_boring::SslStream;

use crate::cpu;
use crate::h2::{H2Conn, H2Error};
use crate::http::{self, Framing, Url};
use crate::report::{
    new_histogram, ErrorCounts, ErrorKind, Negotiated, OpenLoopReport, RunData, ServerReport,
};
use crate::schedule::{late_threshold, Punctuality, Schedule};
use crate::stats_client::{self, ServerCounters};

/// TLS protocol version pinned with `--tls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    V12,
    V13,
}

/// ALPN offered with `--alpn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    H1,
    H2,
}

/// Everything about the TLS client.
#[derive(Debug, Clone)]
pub struct TlsOptions {
    pub version: Option<TlsVersion>,
    pub cacert: Option<PathBuf>,
    pub insecure: bool,
    /// Colon- or comma-separated group names, e.g. `X25519`, `P-256`, `X25519MLKEM768`.
    pub groups: String,
    /// Comma- or colon-separated IANA names, e.g. `rsa_pss_rsae_sha256`.
    pub sigalgs: Option<String>,
    /// TLS 1.2 cipher list (BoringSSL does not configure TLS 1.3 suites).
    pub cipher: Option<String>,
    pub alpn: Option<Alpn>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// A whole run's configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub url: Url,
    pub addr: SocketAddr,
    /// Name for SNI and certificate verification (defaults to the URL host).
    pub server_name: String,
    /// Closed loop: connections in flight. Open loop: cap on outstanding requests.
    pub connections: usize,
    pub rate: Option<f64>,
    /// `None`: until `max_requests` or Ctrl-C.
    pub duration: Option<Duration>,
    pub max_requests: Option<u64>,
    pub warmup: Duration,
    pub keepalive: bool,
    pub allow_resumption: bool,
    /// Offer sessions (needed to see resumption) even without allowing it.
    pub offer_sessions: bool,
    pub timeout: Duration,
    pub threads: usize,
    pub progress: bool,
    pub server_stats: Option<Url>,
    pub server_cpu: Option<usize>,
    pub tls: TlsOptions,
}

impl Config {
    fn offers_sessions(&self) -> bool {
        self.allow_resumption || self.offer_sessions
    }
}

type SessionSlot = Arc<Mutex<Option<SslSession>>>;

fn sigalg_by_name(name: &str) -> Option<SslSignatureAlgorithm> {
    Some(match name.trim().to_ascii_lowercase().as_str() {
        "rsa_pkcs1_sha1" => SslSignatureAlgorithm::RSA_PKCS1_SHA1,
        "rsa_pkcs1_sha256" => SslSignatureAlgorithm::RSA_PKCS1_SHA256,
        "rsa_pkcs1_sha384" => SslSignatureAlgorithm::RSA_PKCS1_SHA384,
        "rsa_pkcs1_sha512" => SslSignatureAlgorithm::RSA_PKCS1_SHA512,
        "ecdsa_sha1" => SslSignatureAlgorithm::ECDSA_SHA1,
        "ecdsa_secp256r1_sha256" => SslSignatureAlgorithm::ECDSA_SECP256R1_SHA256,
        "ecdsa_secp384r1_sha384" => SslSignatureAlgorithm::ECDSA_SECP384R1_SHA384,
        "ecdsa_secp521r1_sha512" => SslSignatureAlgorithm::ECDSA_SECP521R1_SHA512,
        "rsa_pss_rsae_sha256" => SslSignatureAlgorithm::RSA_PSS_RSAE_SHA256,
        "rsa_pss_rsae_sha384" => SslSignatureAlgorithm::RSA_PSS_RSAE_SHA384,
        "rsa_pss_rsae_sha512" => SslSignatureAlgorithm::RSA_PSS_RSAE_SHA512,
        "ed25519" => SslSignatureAlgorithm::ED25519,
        _ => return None,
    })
}

const SIGALG_NAMES: [&str; 12] = [
    "rsa_pkcs1_sha1",
    "rsa_pkcs1_sha256",
    "rsa_pkcs1_sha384",
    "rsa_pkcs1_sha512",
    "ecdsa_sha1",
    "ecdsa_secp256r1_sha256",
    "ecdsa_secp384r1_sha384",
    "ecdsa_secp521r1_sha512",
    "rsa_pss_rsae_sha256",
    "rsa_pss_rsae_sha384",
    "rsa_pss_rsae_sha512",
    "ed25519",
];

fn sigalg_name(alg: SslSignatureAlgorithm) -> String {
    SIGALG_NAMES
        .iter()
        .find(|n| sigalg_by_name(n) == Some(alg))
        .map(|n| n.to_string())
        .unwrap_or_else(|| format!("{alg:?}"))
}

/// Builds the one `SslConnector` every connection uses.
///
/// Without session offering: no tickets (`NO_TICKET`) and session cache `OFF`, so no
/// handshake can be anything but full. With it: the client cache mode hands each new
/// session to the slot stored in the connection's ex-data.
pub fn build_connector(
    tls: &TlsOptions,
    offer_sessions: bool,
) -> Result<(SslConnector, Index<Ssl, SessionSlot>), String> {
    let e = |what: &str, err: boring::error::ErrorStack| format!("TLS setup, {what}: {err}");
    let mut b = SslConnector::builder(SslMethod::tls()).map_err(|x| e("builder", x))?;
    let (min, max) = match tls.version {
        Some(TlsVersion::V12) => (SslVersion::TLS1_2, SslVersion::TLS1_2),
        Some(TlsVersion::V13) => (SslVersion::TLS1_3, SslVersion::TLS1_3),
        None => (SslVersion::TLS1_2, SslVersion::TLS1_3),
    };
    b.set_min_proto_version(Some(min))
        .map_err(|x| e("min version", x))?;
    b.set_max_proto_version(Some(max))
        .map_err(|x| e("max version", x))?;
    let groups = tls.groups.replace(',', ":");
    b.set_curves_list(&groups)
        .map_err(|x| e(&format!("groups {groups:?}"), x))?;
    if let Some(list) = &tls.sigalgs {
        let mut algs = Vec::new();
        for name in list.split([',', ':']).filter(|s| !s.trim().is_empty()) {
            algs.push(sigalg_by_name(name).ok_or_else(|| {
                format!(
                    "unknown signature algorithm {name:?} (known: {})",
                    SIGALG_NAMES.join(", ")
                )
            })?);
        }
        b.set_verify_algorithm_prefs(&algs)
            .map_err(|x| e("sigalgs", x))?;
    }
    if let Some(c) = &tls.cipher {
        b.set_cipher_list(c)
            .map_err(|x| e(&format!("cipher list {c:?}"), x))?;
    }
    if let Some(alpn) = tls.alpn {
        let wire: &[u8] = match alpn {
            Alpn::H1 => b"\x08http/1.1",
            Alpn::H2 => b"\x02h2",
        };
        b.set_alpn_protos(wire).map_err(|x| e("alpn", x))?;
    }
    if tls.insecure {
        b.set_verify(SslVerifyMode::NONE);
    } else if let Some(ca) = &tls.cacert {
        b.set_ca_file(ca)
            .map_err(|x| e(&format!("--cacert {}", ca.display()), x))?;
    }
    match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => {
            b.set_certificate_chain_file(cert)
                .map_err(|x| e(&format!("--cert {}", cert.display()), x))?;
            b.set_private_key_file(key, boring::ssl::SslFiletype::PEM)
                .map_err(|x| e(&format!("--key {}", key.display()), x))?;
            b.check_private_key()
                .map_err(|x| e("--cert/--key mismatch", x))?;
        }
        (None, None) => {}
        _ => return Err("--cert and --key go together".to_string()),
    }
    let idx = Ssl::new_ex_index::<SessionSlot>().map_err(|x| e("ex index", x))?;
    if offer_sessions {
        b.set_session_cache_mode(SslSessionCacheMode::CLIENT);
        b.set_new_session_callback(move |ssl, session| {
            if let Some(slot) = ssl.ex_data(idx) {
                if let Ok(mut s) = slot.lock() {
                    *s = Some(session);
                }
            }
        });
    } else {
        b.set_options(SslOptions::NO_TICKET);
        b.set_session_cache_mode(SslSessionCacheMode::OFF);
    }
    Ok((b.build(), idx))
}

const PHASE_WARMUP: u8 = 0;
const PHASE_MEASURE: u8 = 1;
const PHASE_DONE: u8 = 2;
const MAX_ERROR_SAMPLES: usize = 8;

struct Tally {
    handshakes: u64,
    requests: u64,
    resumed: u64,
    errors: ErrorCounts,
    samples: Vec<String>,
    connect: Histogram<u64>,
    handshake: Histogram<u64>,
    request: Histogram<u64>,
}

struct Shared {
    cfg: Config,
    connector: SslConnector,
    slot_index: Index<Ssl, SessionSlot>,
    slots: Vec<SessionSlot>,
    request_bytes: Vec<u8>,
    authority: String,
    phase: AtomicU8,
    tally: Mutex<Tally>,
    negotiated: OnceLock<Negotiated>,
    /// Requests left to start in the window (`-n`), `u64::MAX` when unlimited.
    budget: AtomicU64,
    in_flight: AtomicU64,
    finished: Notify,
    idle: Mutex<Vec<Conn>>,
    punctuality: Mutex<Punctuality>,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

impl Shared {
    fn measuring(&self) -> bool {
        self.phase.load(Ordering::Relaxed) == PHASE_MEASURE
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record_handshake(&self, connect: Duration, handshake: Duration, resumed: bool) {
        if !self.measuring() {
            return;
        }
        let mut t = self.tally();
        t.handshakes += 1;
        if resumed {
            t.resumed += 1;
        }
        t.connect.saturating_record(micros(connect));
        t.handshake.saturating_record(micros(handshake));
    }

    fn record_request(&self, latency: Duration) {
        if !self.measuring() {
            return;
        }
        let mut t = self.tally();
        t.requests += 1;
        t.request.saturating_record(micros(latency));
    }

    fn record_error(&self, kind: ErrorKind, msg: impl FnOnce() -> String) {
        if !self.measuring() {
            return;
        }
        let mut t = self.tally();
        t.errors.add(kind);
        if t.samples.len() < MAX_ERROR_SAMPLES {
            let m = format!("{}: {}", kind.name(), msg());
            if !t.samples.contains(&m) {
                t.samples.push(m);
            }
        }
    }

    /// Takes one request from the `-n` budget (only counted once measuring).
    fn take_budget(&self) -> bool {
        if !self.measuring() {
            return self.phase.load(Ordering::Relaxed) == PHASE_WARMUP;
        }
        self.budget
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| match b {
                u64::MAX => Some(u64::MAX),
                0 => None,
                n => Some(n - 1),
            })
            .is_ok()
    }

    fn request_done(&self) {
        let left = self.in_flight.fetch_sub(1, Ordering::AcqRel) - 1;
        if left == 0 && self.budget.load(Ordering::Acquire) == 0 && self.measuring() {
            self.finished.notify_one();
        }
    }
}

enum Proto {
    H1,
    H2(H2Conn),
}

struct Conn {
    stream: SslStream<TcpStream>,
    proto: Proto,
}

struct Failure(ErrorKind, String);

async fn establish(sh: &Shared, slot: usize) -> Result<Conn, Failure> {
    let t0 = Instant::now();
    let tcp = TcpStream::connect(sh.cfg.addr)
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
        let _ = sh.negotiated.set(Negotiated {
            version: ssl.version_str().to_string(),
            cipher: ssl.current_cipher().map(|c| c.name().to_string()),
            group: ssl.curve_name().map(str::to_string),
            signature_algorithm: ssl.peer_signature_algorithm().map(sigalg_name),
            alpn: ssl
                .selected_alpn_protocol()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
        });
    }
    let proto = match ssl.selected_alpn_protocol() {
        Some(b"h2") => Proto::H2(H2Conn::default()),
        _ => Proto::H1,
    };
    sh.record_handshake(t1 - t0, t2 - t1, resumed);
    Ok(Conn { stream, proto })
}

/// Reads one HTTP/1.x response; returns (status, connection reusable).
async fn h1_exchange<S>(s: &mut S, req: &[u8], buf: &mut Vec<u8>) -> Result<(u16, bool), Failure>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let io = |what: &str, e: std::io::Error| Failure(ErrorKind::Io, format!("{what}: {e}"));
    s.write_all(req).await.map_err(|e| io("write", e))?;
    buf.clear();
    let mut chunk = [0u8; 16 * 1024];
    let head = loop {
        if let Some(h) = http::parse_head(buf).map_err(|e| Failure(ErrorKind::Http, e.0))? {
            if (100..200).contains(&h.status) && h.status != 101 {
                buf.drain(..h.head_len);
                continue;
            }
            break h;
        }
        let n = s.read(&mut chunk).await.map_err(|e| io("read", e))?;
        if n == 0 {
            return Err(Failure(
                ErrorKind::Io,
                "connection closed before the response head".into(),
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    match head.framing {
        Framing::Length(len) => {
            let mut have = (buf.len() - head.head_len) as u64;
            while have < len {
                let n = s.read(&mut chunk).await.map_err(|e| io("read body", e))?;
                if n == 0 {
                    return Err(Failure(
                        ErrorKind::Io,
                        format!("connection closed after {have} of {len} body bytes"),
                    ));
                }
                have += n as u64;
            }
        }
        Framing::Chunked => {
            buf.drain(..head.head_len);
            while http::chunked_len(buf)
                .map_err(|e| Failure(ErrorKind::Http, e.0))?
                .is_none()
            {
                if buf.len() > 64 * 1024 * 1024 {
                    return Err(Failure(ErrorKind::Http, "chunked body over 64 MiB".into()));
                }
                let n = s.read(&mut chunk).await.map_err(|e| io("read body", e))?;
                if n == 0 {
                    return Err(Failure(
                        ErrorKind::Io,
                        "connection closed inside a chunked body".into(),
                    ));
                }
                buf.extend_from_slice(&chunk[..n]);
            }
        }
        Framing::Eof => loop {
            let n = s.read(&mut chunk).await.map_err(|e| io("read body", e))?;
            if n == 0 {
                break;
            }
        },
    }
    Ok((head.status, head.keep_alive))
}

/// One request: reuse `conn` or open a new connection, exchange, record.
/// Returns the error kind when the request failed.
async fn one_request(
    sh: &Shared,
    conn: &mut Option<Conn>,
    slot: usize,
    start: Instant,
) -> Option<ErrorKind> {
    let mut buf = Vec::new();
    let work = async {
        if conn.is_none() {
            *conn = Some(establish(sh, slot).await?);
        }
        let Some(c) = conn.as_mut() else {
            return Err(Failure(ErrorKind::Io, "no connection".into()));
        };
        match &mut c.proto {
            Proto::H1 => h1_exchange(&mut c.stream, &sh.request_bytes, &mut buf).await,
            Proto::H2(h2) => h2
                .exchange(&mut c.stream, &sh.cfg.url.path, &sh.authority)
                .await
                .map_err(|e| match e {
                    H2Error::Io(e) => Failure(ErrorKind::Io, format!("h2: {e}")),
                    H2Error::Protocol(m) => Failure(ErrorKind::Http, m),
                }),
        }
    };
    let result = tokio::time::timeout(sh.cfg.timeout, work).await;
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

async fn closed_worker(sh: Arc<Shared>, slot: usize) {
    let mut conn = None;
    loop {
        if sh.phase.load(Ordering::Relaxed) == PHASE_DONE || !sh.take_budget() {
            break;
        }
        sh.in_flight.fetch_add(1, Ordering::AcqRel);
        let failed = one_request(&sh, &mut conn, slot, Instant::now()).await;
        sh.request_done();
        // Back off a little on connect/TLS failures so a dead server does not spin the CPU.
        if matches!(failed, Some(ErrorKind::Connect | ErrorKind::Tls)) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn open_dispatcher(
    sh: Arc<Shared>,
    schedule: Schedule,
    t0: Instant,
    tasks: Arc<Mutex<JoinSet<()>>>,
) {
    let cap = Arc::new(Semaphore::new(sh.cfg.connections.max(1)));
    let threshold = late_threshold(schedule.rate());
    for i in 0u64.. {
        let intended = t0 + schedule.offset(i);
        tokio::time::sleep_until(intended.into()).await;
        if sh.phase.load(Ordering::Relaxed) == PHASE_DONE || !sh.take_budget() {
            break;
        }
        let (permit, capped) = match cap.clone().try_acquire_owned() {
            Ok(p) => (p, false),
            Err(_) => match cap.clone().acquire_owned().await {
                Ok(p) => (p, true),
                Err(_) => break,
            },
        };
        let lag = Instant::now().saturating_duration_since(intended);
        if sh.measuring() {
            if let Ok(mut p) = sh.punctuality.lock() {
                p.record(lag, threshold, capped);
            }
        }
        sh.in_flight.fetch_add(1, Ordering::AcqRel);
        let sh2 = sh.clone();
        let slot = (i % sh.cfg.connections.max(1) as u64) as usize;
        let task = async move {
            let mut conn = if sh2.cfg.keepalive {
                sh2.idle.lock().ok().and_then(|mut v| v.pop())
            } else {
                None
            };
            one_request(&sh2, &mut conn, slot, intended).await;
            if let Some(c) = conn {
                if let Ok(mut v) = sh2.idle.lock() {
                    v.push(c);
                }
            }
            sh2.request_done();
            drop(permit);
        };
        if let Ok(mut t) = tasks.lock() {
            t.spawn(task);
            // Reap finished tasks so the set does not grow with the run.
            while t.try_join_next().is_some() {}
        }
    }
}

struct Snapshot {
    at: Instant,
    cpu: Duration,
    server_cpu: Option<cpu::CpuTicks>,
}

fn snapshot(cfg: &Config, notes: &mut Vec<String>) -> Snapshot {
    let server_cpu = cfg.server_cpu.and_then(|n| match cpu::read_cpu_ticks(n) {
        Ok(t) => Some(t),
        Err(e) => {
            notes.push(e);
            None
        }
    });
    Snapshot {
        at: Instant::now(),
        cpu: cpu::self_cpu_time(),
        server_cpu,
    }
}

async fn server_counters(cfg: &Config, notes: &mut Vec<String>) -> Option<ServerCounters> {
    let url = cfg.server_stats.as_ref()?;
    match stats_client::fetch(url, Duration::from_secs(5)).await {
        Ok(c) => Some(c),
        Err(e) => {
            notes.push(e);
            None
        }
    }
}

fn progress_line(sh: &Shared, since: Instant, last: &mut (u64, u64, Instant)) -> String {
    let t = sh.tally();
    let now = Instant::now();
    let dt = now.duration_since(last.2).as_secs_f64().max(1e-6);
    let line = format!(
        "[{:>5.0}s] handshakes {} ({:.0}/s)  requests {} ({:.0}/s)  resumed {}  errors {}  in flight {}",
        now.duration_since(since).as_secs_f64(),
        t.handshakes,
        (t.handshakes - last.0) as f64 / dt,
        t.requests,
        (t.requests - last.1) as f64 / dt,
        t.resumed,
        t.errors.total,
        sh.in_flight.load(Ordering::Relaxed),
    );
    *last = (t.handshakes, t.requests, now);
    line
}

/// Runs the load and returns raw measurements. Errors are setup failures only.
pub async fn run(cfg: Config) -> Result<RunData, String> {
    let offer = cfg.offers_sessions();
    let (connector, slot_index) = build_connector(&cfg.tls, offer)?;
    let schedule = cfg.rate.map(Schedule::new).transpose()?;
    let slots = if offer {
        (0..cfg.connections.max(1))
            .map(|_| Arc::new(Mutex::new(None)))
            .collect()
    } else {
        Vec::new()
    };
    let authority = cfg.url.host_header();
    let sh = Arc::new(Shared {
        request_bytes: http::get_request(&cfg.url.path, &authority, !cfg.keepalive),
        authority,
        connector,
        slot_index,
        slots,
        phase: AtomicU8::new(if cfg.warmup.is_zero() {
            PHASE_MEASURE
        } else {
            PHASE_WARMUP
        }),
        tally: Mutex::new(Tally {
            handshakes: 0,
            requests: 0,
            resumed: 0,
            errors: ErrorCounts::default(),
            samples: Vec::new(),
            connect: new_histogram(),
            handshake: new_histogram(),
            request: new_histogram(),
        }),
        negotiated: OnceLock::new(),
        budget: AtomicU64::new(cfg.max_requests.unwrap_or(u64::MAX)),
        in_flight: AtomicU64::new(0),
        finished: Notify::new(),
        idle: Mutex::new(Vec::new()),
        punctuality: Mutex::new(Punctuality::default()),
        cfg,
    });
    let cfg = &sh.cfg;
    let mut notes = Vec::new();
    let mut interrupted = false;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);

    // Before the load: a warm-up run needs the "before" snapshots after it, otherwise now.
    let mut before_server = None;
    let mut before = None;
    if cfg.warmup.is_zero() {
        // Phase is already MEASURE; take snapshots before any load starts.
        before_server = server_counters(cfg, &mut notes).await;
        before = Some(snapshot(cfg, &mut notes));
    }

    let t_load = Instant::now();
    let tasks = Arc::new(Mutex::new(JoinSet::new()));
    if let Ok(mut t) = tasks.lock() {
        match schedule {
            None => {
                for slot in 0..cfg.connections.max(1) {
                    t.spawn(closed_worker(sh.clone(), slot));
                }
            }
            Some(s) => {
                t.spawn(open_dispatcher(sh.clone(), s, t_load, tasks.clone()));
            }
        }
    }

    if !cfg.warmup.is_zero() {
        tokio::select! {
            _ = tokio::time::sleep(cfg.warmup) => {}
            _ = &mut ctrl_c => { interrupted = true; }
        }
        before_server = server_counters(cfg, &mut notes).await;
        before = Some(snapshot(cfg, &mut notes));
        if let Ok(mut p) = sh.punctuality.lock() {
            *p = Punctuality::default();
        }
        sh.phase.store(PHASE_MEASURE, Ordering::Release);
    }
    let before = match before {
        Some(b) => b,
        None => snapshot(cfg, &mut notes),
    };

    let show_progress = cfg.progress && cfg.duration.is_none_or(|d| d >= Duration::from_secs(3));
    let deadline = cfg.duration.map(|d| before.at + d);
    if !interrupted {
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(sleep);
        let mut tick = tokio::time::interval_at(
            (before.at + Duration::from_secs(1)).into(),
            Duration::from_secs(1),
        );
        let mut last = (0u64, 0u64, before.at);
        loop {
            tokio::select! {
                _ = &mut sleep => break,
                _ = sh.finished.notified() => break,
                _ = &mut ctrl_c => { interrupted = true; break; }
                _ = tick.tick(), if show_progress => {
                    eprint!("\r{}\x1b[K", progress_line(&sh, before.at, &mut last));
                }
            }
        }
        if show_progress {
            eprintln!();
        }
    }
    sh.phase.store(PHASE_DONE, Ordering::Release);
    let after = snapshot(cfg, &mut notes);
    let unfinished = sh.in_flight.load(Ordering::Acquire);
    // Stop the load: abort every task (closes their sockets) before asking the server.
    // Twice: the open-loop dispatcher may spawn one last task while the first set stops.
    for _ in 0..2 {
        let set = tasks.lock().ok().map(|mut t| std::mem::take(&mut *t));
        if let Some(mut set) = set {
            set.shutdown().await;
        }
    }
    if let Ok(mut idle) = sh.idle.lock() {
        idle.clear();
    }
    let after_server = server_counters(cfg, &mut notes).await;

    let wall = after.at.duration_since(before.at);
    let t = sh.tally();
    let handshakes = t.handshakes;
    let server = if cfg.server_stats.is_some() || cfg.server_cpu.is_some() {
        let mut s = ServerReport::default();
        if let (Some(a), Some(b)) = (after_server, before_server) {
            let d = a.since(&b);
            s.handshakes = Some(d.handshakes);
            s.session_reused = Some(d.session_reused);
            s.listeners = Some(d.listeners);
            s.handshakes_per_sec = Some(d.handshakes as f64 / wall.as_secs_f64().max(1e-9));
        }
        if let Some(n) = cfg.server_cpu {
            s.cpu = Some(n);
            if let (Some(a), Some(b)) = (after.server_cpu, before.server_cpu) {
                let d = a.since(&b);
                let busy = cpu::ticks_to_duration(d.busy, cpu::clock_ticks_per_sec());
                s.cpu_busy_seconds = Some(busy.as_secs_f64());
                s.cpu_utilization = Some(if d.total > 0 {
                    d.busy as f64 / d.total as f64
                } else {
                    0.0
                });
                s.cpu_us_per_handshake = cpu::us_per(busy, s.handshakes.unwrap_or(handshakes));
            }
        }
        Some(s)
    } else {
        None
    };
    let open_loop = schedule.map(|s| {
        let p = sh.punctuality.lock().map(|p| p.clone()).unwrap_or_default();
        OpenLoopReport {
            rate: s.rate(),
            started: p.started,
            started_late: p.late,
            capped: p.capped,
            max_start_lag_ms: p.max_lag.as_secs_f64() * 1000.0,
            late_threshold_ms: late_threshold(s.rate()).as_secs_f64() * 1000.0,
            unfinished,
            max_outstanding: cfg.connections,
        }
    });
    Ok(RunData {
        url: format!(
            "{}://{}{}",
            cfg.url.scheme,
            cfg.url.host_header(),
            cfg.url.path
        ),
        mode: if schedule.is_some() { "open" } else { "closed" },
        connections: cfg.connections,
        threads: cfg.threads,
        keepalive: cfg.keepalive,
        allow_resumption: cfg.allow_resumption,
        offer_sessions: offer,
        wall,
        handshakes,
        requests: t.requests,
        resumed: t.resumed,
        errors: t.errors,
        error_samples: t.samples.clone(),
        connect: t.connect.clone(),
        handshake: t.handshake.clone(),
        request: t.request.clone(),
        client_cpu: after.cpu.saturating_sub(before.cpu),
        negotiated: sh.negotiated.get().cloned(),
        open_loop,
        server,
        interrupted,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> TlsOptions {
        TlsOptions {
            version: Some(TlsVersion::V13),
            cacert: None,
            insecure: true,
            groups: "X25519".into(),
            sigalgs: Some("rsa_pss_rsae_sha256,ecdsa_secp256r1_sha256".into()),
            cipher: None,
            alpn: Some(Alpn::H1),
            cert: None,
            key: None,
        }
    }

    #[test]
    fn connector_accepts_good_options() {
        assert!(build_connector(&opts(), false).is_ok());
        let mut o = opts();
        o.groups = "X25519MLKEM768,P-256".into();
        assert!(build_connector(&o, true).is_ok());
    }

    #[test]
    fn connector_rejects_bad_options() {
        let mut o = opts();
        o.groups = "NoSuchGroup".into();
        assert!(build_connector(&o, false).is_err());
        let mut o = opts();
        o.sigalgs = Some("rsa_md5".into());
        let e = build_connector(&o, false).err().unwrap_or_default();
        assert!(e.contains("rsa_md5"), "{e}");
        let mut o = opts();
        o.cert = Some("/nonexistent".into());
        assert!(build_connector(&o, false).is_err());
    }

    #[test]
    fn sigalg_names_round_trip() {
        for n in SIGALG_NAMES {
            let a = sigalg_by_name(n).unwrap();
            assert_eq!(sigalg_name(a), n);
        }
    }
}
