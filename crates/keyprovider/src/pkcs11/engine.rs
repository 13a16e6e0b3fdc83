//! The PKCS#11 engine: raw operations on a token key, run on the engine's own bounded pool of
//! threads, each holding its own logged-in session (opened on first use, dropped when the
//! token fails, reopened on the next operation). The provider hands it whole batches through
//! [`Executor`], enforces the deadline on the worker and checks every result with the public
//! key, as for every engine.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cryptoki::context::Pkcs11;
use quickshake_stats::{Counter, Gauge, Histogram, Store};

use super::config::{Pin, Pkcs11Config};
use super::error::Pkcs11Error;
use super::token::{RsaMechanisms, RsaSignMechanism, TokenError, TokenSession};
use crate::engine::{
    Capabilities, EcdsaLane, Engine, Executor, LaneError, LaneResult, PoolJob, RsaLane,
};
use crate::key::RSA_BITS;
use crate::padding::SignView;
use crate::stats::WAIT_BUCKETS;

/// `pkcs11.` stats of one provider (under the listener scope).
#[derive(Clone)]
pub struct Pkcs11Stats {
    /// Operations waiting for a pool thread.
    pub queue_depth: Gauge,
    /// Operations at the token now.
    pub in_flight: Gauge,
    /// Time of each token call, ms.
    pub op_latency_ms: Histogram,
    /// Wait from queueing to a pool thread taking the operation, ms.
    pub queue_wait_ms: Histogram,
    pub rsa_sign: Counter,
    /// RSA signatures by the mechanism that made them: the token's PSS, its PKCS#1 v1.5, or
    /// raw RSA on quickshake's padded block (the fallback).
    pub rsa_sign_pss: Counter,
    pub rsa_sign_pkcs1: Counter,
    pub rsa_sign_raw: Counter,
    pub rsa_decrypt: Counter,
    pub ecdsa_sign: Counter,
    /// Token calls that failed (module error, device removed, session closed...).
    pub token_error: Counter,
    /// Sessions opened (the pool's first, and each reopen after a failure).
    pub session_opened: Counter,
    pub session_open_failed: Counter,
    /// Operations refused because `max_pending` were already waiting.
    pub queue_full: Counter,
}

impl Pkcs11Stats {
    pub fn new(store: &Store, scope: &str) -> Self {
        let p = format!("{scope}pkcs11.");
        let c = |n: &str| store.counter(&format!("{p}{n}"));
        Pkcs11Stats {
            queue_depth: store.gauge(&format!("{p}queue_depth")),
            in_flight: store.gauge(&format!("{p}in_flight")),
            op_latency_ms: store.histogram(&format!("{p}op_latency_ms"), &WAIT_BUCKETS),
            queue_wait_ms: store.histogram(&format!("{p}queue_wait_ms"), &WAIT_BUCKETS),
            rsa_sign: c("rsa_sign"),
            rsa_sign_pss: c("rsa_sign_pss"),
            rsa_sign_pkcs1: c("rsa_sign_pkcs1"),
            rsa_sign_raw: c("rsa_sign_raw"),
            rsa_decrypt: c("rsa_decrypt"),
            ecdsa_sign: c("ecdsa_sign"),
            token_error: c("token_error"),
            session_opened: c("session_opened"),
            session_open_failed: c("session_open_failed"),
            queue_full: c("queue_full"),
        }
    }
}

/// What every pool thread shares.
struct Shared {
    ctx: Pkcs11,
    cfg: Pkcs11Config,
    pin: Pin,
    stats: Pkcs11Stats,
    /// The token failed and has not come back yet (logs the return once).
    lost: AtomicBool,
}

thread_local! {
    /// This pool thread's session (pool threads serve one engine each).
    static SESSION: RefCell<Option<TokenSession>> = const { RefCell::new(None) };
}

impl Shared {
    /// Run `f` on this thread's session, opening it first if needed; a failure that loses the
    /// session drops it, so the next operation reopens it.
    fn with_session<T>(
        &self,
        f: impl FnOnce(&TokenSession) -> Result<T, TokenError>,
    ) -> Result<T, LaneError> {
        SESSION.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                match TokenSession::open(&self.ctx, &self.cfg, &self.pin) {
                    Ok(s) => {
                        self.stats.session_opened.inc();
                        if self.lost.swap(false, Ordering::AcqRel) {
                            tracing::info!(
                                token = %self.cfg.token_name(),
                                "PKCS#11 token is back: sessions reopen"
                            );
                        }
                        *slot = Some(s);
                    }
                    Err(e) => {
                        self.stats.session_open_failed.inc();
                        self.lost.store(true, Ordering::Release);
                        return Err(LaneError::Failed(format!("token unavailable: {e}")));
                    }
                }
            }
            let session = slot.as_ref().ok_or(LaneError::Unsupported)?;
            let started = Instant::now();
            self.stats.in_flight.inc();
            let r = f(session);
            self.stats.in_flight.dec();
            self.stats
                .op_latency_ms
                .record(started.elapsed().as_secs_f64() * 1000.0);
            r.map_err(|e| {
                self.stats.token_error.inc();
                if e.session_lost {
                    self.lost.store(true, Ordering::Release);
                    *slot = None;
                }
                LaneError::Failed(e.message)
            })
        })
    }
}

/// A bounded pool: `threads` threads, at most `max_pending` jobs waiting.
struct Pool {
    tx: SyncSender<(Instant, PoolJob)>,
    stats: Pkcs11Stats,
    deadline: Duration,
}

impl Pool {
    fn start(
        shared: &Arc<Shared>,
        threads: usize,
        max_pending: usize,
    ) -> Result<Pool, Pkcs11Error> {
        let (tx, rx) = sync_channel::<(Instant, PoolJob)>(max_pending);
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads {
            let rx = rx.clone();
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("qs-pkcs11-{i}"))
                .spawn(move || pool_thread(&rx, &shared))
                .map_err(Pkcs11Error::PoolThread)?;
        }
        Ok(Pool {
            tx,
            stats: shared.stats.clone(),
            deadline: shared.cfg.deadline,
        })
    }
}

fn pool_thread(rx: &Mutex<Receiver<(Instant, PoolJob)>>, shared: &Shared) {
    loop {
        let next = match rx.lock() {
            Ok(r) => r.recv(),
            Err(_) => return,
        };
        let Ok((queued, job)) = next else {
            // The engine is gone: close this thread's session and end.
            SESSION.with(|s| s.borrow_mut().take());
            return;
        };
        shared.stats.queue_depth.dec();
        shared
            .stats
            .queue_wait_ms
            .record(queued.elapsed().as_secs_f64() * 1000.0);
        job(true);
    }
}

impl Executor for Pool {
    fn execute(&self, job: PoolJob) {
        self.stats.queue_depth.inc();
        match self.tx.try_send((Instant::now(), job)) {
            Ok(()) => {}
            Err(TrySendError::Full((_, job)) | TrySendError::Disconnected((_, job))) => {
                self.stats.queue_depth.dec();
                self.stats.queue_full.inc();
                job(false);
            }
        }
    }

    fn deadline(&self) -> Duration {
        self.deadline
    }
}

/// The engine of one `pkcs11` provider.
pub struct Pkcs11Engine {
    caps: Capabilities,
    shared: Arc<Shared>,
    pool: Pool,
    /// The token offers raw RSA decryption (`CKM_RSA_X_509`): RSA key exchange works.
    decrypt: bool,
    /// The RSA signing mechanisms the token offers.
    mechs: RsaMechanisms,
}

impl Pkcs11Engine {
    pub fn start(
        ctx: Pkcs11,
        cfg: Pkcs11Config,
        pin: Pin,
        stats: Pkcs11Stats,
        decrypt: bool,
        mechs: RsaMechanisms,
    ) -> Result<Pkcs11Engine, Pkcs11Error> {
        let (threads, max_pending) = (cfg.pool_size, cfg.max_pending);
        let shared = Arc::new(Shared {
            ctx,
            cfg,
            pin,
            stats,
            lost: AtomicBool::new(false),
        });
        let pool = Pool::start(&shared, threads, max_pending)?;
        Ok(Pkcs11Engine {
            caps: Capabilities {
                name: "pkcs11".into(),
                accelerated: false,
                lanes: 1,
                rsa_bits: RSA_BITS.to_vec(),
                ecdsa_p256: true,
                rsa_min_batch: 1,
                ecdsa_min_batch: 1,
                x25519_min_batch: usize::MAX,
                offload: true,
            },
            shared,
            pool,
            decrypt,
            mechs,
        })
    }
}

impl Engine for Pkcs11Engine {
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    /// Raw RSA on the padded block: signatures that came without a view (none from the key
    /// method). Refused when the token offers no raw RSA signing.
    fn rsa_private(&self, lanes: &[RsaLane<'_>]) -> Vec<LaneResult> {
        let stats = &self.shared.stats;
        lanes
            .iter()
            .map(|l| {
                stats.rsa_sign.inc();
                if !self.mechs.raw {
                    return Err(LaneError::Failed(
                        "the token offers no raw RSA signing (CKM_RSA_X_509)".into(),
                    ));
                }
                stats.rsa_sign_raw.inc();
                self.shared.with_session(|s| s.rsa_sign_raw(l.input))
            })
            .collect()
    }

    /// With the token's own PSS or PKCS#1 v1.5 mechanism where it offers one, else raw RSA.
    fn rsa_sign(&self, lanes: &[RsaLane<'_>], views: &[&SignView]) -> Vec<LaneResult> {
        let stats = &self.shared.stats;
        lanes
            .iter()
            .zip(views)
            .map(|(l, view)| {
                stats.rsa_sign.inc();
                let (sig, used) = self
                    .shared
                    .with_session(|s| s.rsa_sign(self.mechs, view, l.input))?;
                match used {
                    RsaSignMechanism::Pss => stats.rsa_sign_pss.inc(),
                    RsaSignMechanism::Pkcs1 => stats.rsa_sign_pkcs1.inc(),
                    RsaSignMechanism::Raw => stats.rsa_sign_raw.inc(),
                }
                Ok(sig)
            })
            .collect()
    }

    fn rsa_decrypt(&self, lanes: &[RsaLane<'_>]) -> Vec<LaneResult> {
        lanes
            .iter()
            .map(|l| {
                if !self.decrypt {
                    return Err(LaneError::Failed(
                        "the token offers no raw RSA decryption (CKM_RSA_X_509)".into(),
                    ));
                }
                self.shared.stats.rsa_decrypt.inc();
                self.shared.with_session(|s| s.rsa_decrypt_raw(l.input))
            })
            .collect()
    }

    fn ecdsa_sign(&self, lanes: &[EcdsaLane<'_>]) -> Vec<LaneResult> {
        lanes
            .iter()
            .map(|l| {
                self.shared.stats.ecdsa_sign.inc();
                self.shared.with_session(|s| s.ecdsa_sign(l.digest))
            })
            .collect()
    }

    fn rsa_decrypt_supported(&self) -> bool {
        self.decrypt
    }

    fn executor(&self) -> Option<&dyn Executor> {
        Some(&self.pool)
    }
}
