//! One host's health as the load balancer sees it: the active health check's verdict
//! (`FAILED_ACTIVE_HC`), the outlier detector's (`FAILED_OUTLIER_CHECK`), and the per-host
//! counters `/clusters` shows. Plain atomics: the request path reads and charges them without
//! locks; the background checks (`health_check`, `outlier`) write the flags. Knows no other
//! module of the crate.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// Health flags and counters of one host.
#[derive(Debug, Default)]
pub(crate) struct HostHealth {
    failed_active_hc: AtomicBool,
    failed_outlier: AtomicBool,
    /// `cx_total`, `cx_connect_fail`, `cx_active` (connections of the request path).
    pub(crate) cx_total: AtomicU64,
    pub(crate) cx_connect_fail: AtomicU64,
    pub(crate) cx_active: AtomicU64,
    /// `rq_total`, `rq_success` (non-5xx answers), `rq_error` (5xx answers and connect
    /// failures), `rq_timeout`.
    pub(crate) rq_total: AtomicU64,
    pub(crate) rq_success: AtomicU64,
    pub(crate) rq_error: AtomicU64,
    pub(crate) rq_timeout: AtomicU64,
    /// Outlier detection: consecutive 5xx and gateway failures (502, 503, 504) seen.
    pub(crate) consecutive_5xx: AtomicU32,
    pub(crate) consecutive_gateway: AtomicU32,
    /// Outlier detection's bookkeeping of ejections (rarely touched).
    pub(crate) ejection: Mutex<Ejection>,
}

/// When and how often a host was ejected.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Ejection {
    /// Envoy's `ejectTimeBackoff`: the multiplier of `base_ejection_time` for the next return.
    pub(crate) backoff: u32,
    pub(crate) last_ejection: Option<Instant>,
    pub(crate) last_unejection: Option<Instant>,
}

impl HostHealth {
    /// A host of a cluster with active health checks starts as failed (Envoy marks new hosts
    /// `FAILED_ACTIVE_HC` until their first check passes).
    pub(crate) fn new(failed_active_hc: bool) -> Self {
        let h = HostHealth::default();
        h.failed_active_hc
            .store(failed_active_hc, Ordering::Relaxed);
        h
    }

    /// Neither health check nor outlier detection excludes the host.
    pub(crate) fn is_healthy(&self) -> bool {
        !self.failed_active_hc() && !self.failed_outlier()
    }

    pub(crate) fn failed_active_hc(&self) -> bool {
        self.failed_active_hc.load(Ordering::Relaxed)
    }

    pub(crate) fn failed_outlier(&self) -> bool {
        self.failed_outlier.load(Ordering::Relaxed)
    }

    pub(crate) fn set_failed_active_hc(&self, failed: bool) {
        self.failed_active_hc.store(failed, Ordering::Relaxed);
    }

    pub(crate) fn set_failed_outlier(&self, failed: bool) {
        self.failed_outlier.store(failed, Ordering::Relaxed);
    }

    pub(crate) fn ejection(&self) -> std::sync::MutexGuard<'_, Ejection> {
        self.ejection.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Charges one answer (`status`) to the per-host counters.
    pub(crate) fn charge_response(&self, status: u16) {
        if status >= 500 {
            self.rq_error.fetch_add(1, Ordering::Relaxed);
        } else {
            self.rq_success.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A host as `/clusters` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostStatus {
    pub addr: std::net::SocketAddr,
    /// Envoy's `health_flags` bit `/failed_active_hc`.
    pub failed_active_hc: bool,
    /// Envoy's `/failed_outlier_check`.
    pub failed_outlier_check: bool,
    pub cx_active: u64,
    pub cx_connect_fail: u64,
    pub cx_total: u64,
    pub rq_active: u64,
    pub rq_error: u64,
    pub rq_success: u64,
    pub rq_timeout: u64,
    pub rq_total: u64,
}

impl HostStatus {
    pub(crate) fn of(addr: std::net::SocketAddr, h: &HostHealth, rq_active: u64) -> Self {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        HostStatus {
            addr,
            failed_active_hc: h.failed_active_hc(),
            failed_outlier_check: h.failed_outlier(),
            cx_active: get(&h.cx_active),
            cx_connect_fail: get(&h.cx_connect_fail),
            cx_total: get(&h.cx_total),
            rq_active,
            rq_error: get(&h.rq_error),
            rq_success: get(&h.rq_success),
            rq_timeout: get(&h.rq_timeout),
            rq_total: get(&h.rq_total),
        }
    }
}
