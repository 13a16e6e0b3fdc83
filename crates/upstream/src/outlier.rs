//! Outlier detection: Envoy's consecutive-5xx and consecutive-gateway-failure detectors.
//!
//! The request path charges every answer to its host ([`Detector::report`], a connect
//! failure as 503, as Envoy does without `split_external_local_origin_errors`); the counter
//! reaching its threshold ejects the host there and then (Envoy posts to its main thread, same
//! effect). An ejection must keep `100 × (ejected + 1) / hosts ≤ max_ejection_percent`
//! (otherwise `ejections_overflow`), and is enforced with the `enforcing_*` percent chance. An
//! ejected host returns at the first [`Detector::on_interval`] after
//! `min(base_ejection_time × backoff, max_ejection_time)`, where the backoff grows by one per
//! ejection and shrinks by one per interval spent healthy.

use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use quickshake_stats::Scope;

use crate::hosts::{Host, HostSet};
use crate::spec::OutlierSpec;
use crate::stats::OutlierStats;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Consecutive5xx,
    ConsecutiveGatewayFailure,
}

/// One cluster's outlier detector.
pub(crate) struct Detector {
    pub(crate) spec: OutlierSpec,
    stats: OutlierStats,
    /// Serialises ejection decisions (the ejected share must be counted once per decision).
    decide: Mutex<()>,
}

impl Detector {
    pub(crate) fn new(spec: OutlierSpec, cluster: &Scope) -> Self {
        Detector {
            spec,
            stats: OutlierStats::new(cluster),
            decide: Mutex::new(()),
        }
    }

    /// Charges one answer from `host` (503 for a failed connect).
    pub(crate) fn report(&self, hosts: &HostSet, host: &Host, status: u16) {
        let h = &host.health;
        if !(500..600).contains(&status) {
            h.consecutive_5xx.store(0, Ordering::Relaxed);
            h.consecutive_gateway.store(0, Ordering::Relaxed);
            return;
        }
        if matches!(status, 502..=504) {
            let n = h.consecutive_gateway.fetch_add(1, Ordering::Relaxed) + 1;
            if n == self.spec.consecutive_gateway_failure {
                self.detected(hosts, host, Kind::ConsecutiveGatewayFailure);
            }
        } else {
            h.consecutive_gateway.store(0, Ordering::Relaxed);
        }
        let n = h.consecutive_5xx.fetch_add(1, Ordering::Relaxed) + 1;
        if n == self.spec.consecutive_5xx {
            self.detected(hosts, host, Kind::Consecutive5xx);
        }
    }

    fn detected(&self, hosts: &HostSet, host: &Host, kind: Kind) {
        let _one = self.decide.lock().unwrap_or_else(PoisonError::into_inner);
        if host.health.failed_outlier() {
            return;
        }
        match kind {
            Kind::Consecutive5xx => self.stats.detected_5xx.inc(),
            Kind::ConsecutiveGatewayFailure => self.stats.detected_gateway.inc(),
        }
        self.eject(hosts, host, kind);
        match kind {
            Kind::Consecutive5xx => {
                self.stats.ejections_consecutive_5xx.inc();
                host.health.consecutive_5xx.store(0, Ordering::Relaxed);
            }
            Kind::ConsecutiveGatewayFailure => {
                host.health.consecutive_gateway.store(0, Ordering::Relaxed);
            }
        }
    }

    fn eject(&self, hosts: &HostSet, host: &Host, kind: Kind) {
        let all = hosts.snapshot();
        let active = all.iter().filter(|h| h.health.failed_outlier()).count();
        let percent = 100.0 * (active + 1) as f64 / all.len().max(1) as f64;
        if percent > f64::from(self.spec.max_ejection_percent.min(100)) {
            self.stats.ejections_overflow.inc();
            return;
        }
        if kind == Kind::Consecutive5xx {
            self.stats.ejections_total.inc();
        }
        let enforcing = match kind {
            Kind::Consecutive5xx => self.spec.enforcing_consecutive_5xx,
            Kind::ConsecutiveGatewayFailure => self.spec.enforcing_consecutive_gateway_failure,
        };
        if crate::hosts::random() % 100 >= u64::from(enforcing) {
            return;
        }
        host.health.set_failed_outlier(true);
        self.stats.ejections_active.inc();
        self.stats.ejections_enforced_total.inc();
        match kind {
            Kind::Consecutive5xx => self.stats.enforced_5xx.inc(),
            Kind::ConsecutiveGatewayFailure => self.stats.enforced_gateway.inc(),
        }
        {
            let mut e = host.health.ejection();
            e.last_ejection = Some(Instant::now());
            let base = self.spec.base_ejection_time;
            if base * e.backoff < self.spec.max_ejection_time + base {
                e.backoff += 1;
            }
        }
        tracing::info!(host = %host.addr, ?kind, "outlier detection ejected an upstream host");
        hosts.health_changed();
    }

    /// The periodic pass: returns hosts whose ejection time is over, and lowers the backoff of
    /// hosts that stayed in for a whole interval.
    pub(crate) fn on_interval(&self, hosts: &HostSet, now: Instant) {
        let _one = self.decide.lock().unwrap_or_else(PoisonError::into_inner);
        let mut changed = false;
        for host in hosts.snapshot().iter() {
            let h = &host.health;
            let mut e = h.ejection();
            if h.failed_outlier() {
                let out_for =
                    (self.spec.base_ejection_time * e.backoff).min(self.spec.max_ejection_time);
                if e.last_ejection
                    .is_some_and(|t| now.duration_since(t) >= out_for)
                {
                    h.set_failed_outlier(false);
                    h.consecutive_5xx.store(0, Ordering::Relaxed);
                    h.consecutive_gateway.store(0, Ordering::Relaxed);
                    e.last_unejection = Some(now);
                    self.stats.ejections_active.dec();
                    changed = true;
                    tracing::info!(host = %host.addr, "outlier detection returned an upstream host");
                }
            } else if e.backoff > 0
                && e.last_unejection
                    .is_some_and(|t| now.duration_since(t) >= self.spec.interval)
            {
                e.backoff -= 1;
            }
        }
        if changed {
            hosts.health_changed();
        }
    }
}
