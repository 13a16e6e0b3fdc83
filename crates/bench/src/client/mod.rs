//! The load itself: TLS client setup, one request per new connection (or keep-alive),
//! closed and open loops, the timed window, snapshots of CPU and server counters.
//!
//! This module owns the run's configuration and the state every task of a run shares: the
//! phase (warm-up, measuring, done), the `-n` budget, the tallies and histograms, idle
//! keep-alive connections. The rest is split by seam: `tls` builds the TLS client, `conn`
//! opens a connection and makes one request on it, `h1` reads an HTTP/1.x response, `loops`
//! drives requests closed-loop or on an open-loop timetable, `window` runs the whole
//! measurement window and turns it into [`RunData`](crate::report::RunData).

mod conn;
mod h1;
mod loops;
mod tls;
mod window;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use boring::ex_data::Index;
use boring::ssl::{Ssl, SslConnector};
use hdrhistogram::Histogram;
use tokio::sync::Notify;

use crate::http::Url;
use crate::report::{ErrorCounts, ErrorKind, Negotiated};
use crate::schedule::Punctuality;
use conn::Conn;
use tls::SessionSlot;

pub use tls::{build_connector, Alpn, TlsOptions, TlsVersion};
pub use window::run;

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
