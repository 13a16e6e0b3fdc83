//! The state every task of a run shares: the phase (warm-up, measuring, done), the `-n`
//! budget and requests in flight, the tallies and histograms (recorded only while
//! measuring), what the first handshake negotiated, idle keep-alive connections and the
//! open loop's punctuality.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use boring::ex_data::Index;
use boring::ssl::{Ssl, SslConnector};
use hdrhistogram::Histogram;
use tokio::sync::Notify;

use super::config::Config;
use super::conn::Conn;
use super::tls::SessionSlot;
use crate::h3::H3Client;
use crate::report::{ErrorCounts, ErrorKind, Negotiated};
use crate::schedule::Punctuality;

pub(super) const PHASE_WARMUP: u8 = 0;
pub(super) const PHASE_MEASURE: u8 = 1;
pub(super) const PHASE_DONE: u8 = 2;
const MAX_ERROR_SAMPLES: usize = 8;

pub(super) struct Tally {
    pub(super) handshakes: u64,
    pub(super) requests: u64,
    pub(super) resumed: u64,
    pub(super) errors: ErrorCounts,
    pub(super) samples: Vec<String>,
    pub(super) connect: Histogram<u64>,
    pub(super) handshake: Histogram<u64>,
    pub(super) request: Histogram<u64>,
}

pub(super) struct Shared {
    pub(super) cfg: Config,
    pub(super) connector: SslConnector,
    pub(super) slot_index: Index<Ssl, SessionSlot>,
    pub(super) slots: Vec<SessionSlot>,
    pub(super) request_bytes: Vec<u8>,
    pub(super) authority: String,
    pub(super) phase: AtomicU8,
    pub(super) tally: Mutex<Tally>,
    /// Shared with the QUIC client's info callback, which fills it.
    pub(super) negotiated: Arc<OnceLock<Negotiated>>,
    /// `--h3`: the QUIC client; requests then go over HTTP/3, one connection each.
    pub(super) quic: Option<H3Client>,
    /// Requests left to start in the window (`-n`), `u64::MAX` when unlimited.
    pub(super) budget: AtomicU64,
    pub(super) in_flight: AtomicU64,
    pub(super) finished: Notify,
    pub(super) idle: Mutex<Vec<Conn>>,
    pub(super) punctuality: Mutex<Punctuality>,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

impl Shared {
    pub(super) fn measuring(&self) -> bool {
        self.phase.load(Ordering::Relaxed) == PHASE_MEASURE
    }

    pub(super) fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn record_handshake(&self, connect: Duration, handshake: Duration, resumed: bool) {
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

    pub(super) fn record_request(&self, latency: Duration) {
        if !self.measuring() {
            return;
        }
        let mut t = self.tally();
        t.requests += 1;
        t.request.saturating_record(micros(latency));
    }

    pub(super) fn record_error(&self, kind: ErrorKind, msg: impl FnOnce() -> String) {
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
    pub(super) fn take_budget(&self) -> bool {
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

    pub(super) fn request_done(&self) {
        let left = self.in_flight.fetch_sub(1, Ordering::AcqRel) - 1;
        if left == 0 && self.budget.load(Ordering::Acquire) == 0 && self.measuring() {
            self.finished.notify_one();
        }
    }
}
