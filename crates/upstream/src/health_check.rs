//! Active health checks, with Envoy's semantics (`health_checker_base_impl.cc`).
//!
//! One background task per cluster ([`run`], spawned by `cluster` on the runtime the caller
//! gave [`crate::ClusterManager::start_background`]) keeps a session per host and runs each
//! host's check in a task of its own, bounded by the check's `timeout`; the workers' request
//! path only reads the resulting flag. A host of a health-checked cluster starts unhealthy; its
//! first result decides at once; afterwards `healthy_threshold` consecutive passes make it
//! healthy, and `unhealthy_threshold` consecutive network failures (connect error, timeout) —
//! or a single failing answer (unexpected HTTP status, TCP payload mismatch) — unhealthy.
//! Checks repeat every `interval` (plus jitter) once the cluster has had traffic
//! (`upstream_cx_total` > 0), every `no_traffic_interval` before.
//!
//! HTTP checks send `GET path` over HTTP/1.1 on a new connection each time (`Connection:
//! close`), with the cluster's TLS if it has any; TCP checks connect, write `send` and wait for
//! every `receive` payload in order. Health-check connections are not charged to the cluster's
//! circuit breakers or `upstream_cx_*` stats (Envoy's are not pooled either).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Request;
use http_body_util::Empty;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::health::HostHealth;
use crate::hosts::{random, Host};
use crate::shared::Shared;
use crate::spec::{HealthCheckKind, HealthCheckSpec};
use crate::stats::HealthCheckStats;

/// How one check ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Pass,
    /// The host answered, wrongly: unhealthy at once.
    Fail,
    /// Connect failure, reset or timeout: counts towards `unhealthy_threshold`.
    NetworkFail,
}

/// Whether a result changed the host's health.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transition {
    Unchanged,
    Changed,
    ChangePending,
}

/// The per-host state machine (Envoy's `ActiveHealthCheckSession` counters).
#[derive(Debug)]
pub(crate) struct Session {
    first_check: bool,
    num_healthy: u32,
    num_unhealthy: u32,
}

impl Default for Session {
    fn default() -> Self {
        Session {
            first_check: true,
            num_healthy: 0,
            num_unhealthy: 0,
        }
    }
}

impl Session {
    /// Applies one result to `health`'s `FAILED_ACTIVE_HC` flag.
    pub(crate) fn apply(
        &mut self,
        health: &HostHealth,
        outcome: Outcome,
        spec: &HealthCheckSpec,
    ) -> Transition {
        let first = std::mem::replace(&mut self.first_check, false);
        if outcome == Outcome::Pass {
            self.num_unhealthy = 0;
            if !health.failed_active_hc() {
                return Transition::Unchanged;
            }
            self.num_healthy += 1;
            if first || self.num_healthy >= spec.healthy_threshold {
                health.set_failed_active_hc(false);
                return Transition::Changed;
            }
            return Transition::ChangePending;
        }
        self.num_healthy = 0;
        if health.failed_active_hc() {
            return Transition::Unchanged;
        }
        self.num_unhealthy += 1;
        if outcome == Outcome::Fail || self.num_unhealthy >= spec.unhealthy_threshold {
            health.set_failed_active_hc(true);
            return Transition::Changed;
        }
        Transition::ChangePending
    }
}

/// A session of the background task: the host, its state, when it is next due.
struct Slot {
    host: Arc<Host>,
    session: Session,
    next: Instant,
    in_flight: bool,
}

/// `base` plus a random share of `jitter`.
fn jittered(base: Duration, jitter: Duration) -> Duration {
    let j = jitter.as_millis() as u64;
    if j == 0 {
        base
    } else {
        base + Duration::from_millis(random() % j)
    }
}

/// The cluster's health-check loop; returns once the cluster is dropped.
pub(crate) async fn run(cluster: Weak<Shared>, spec: HealthCheckSpec, stats: HealthCheckStats) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Arc<Host>, Outcome)>();
    let mut slots: HashMap<SocketAddr, Slot> = HashMap::new();
    let mut results: Vec<(Arc<Host>, Outcome)> = Vec::new();
    loop {
        let Some(sh) = cluster.upgrade() else { return };
        let now = Instant::now();
        let traffic = sh.stats.cx_total.value() > 0;
        let mut changed = false;
        for (host, outcome) in results.drain(..) {
            let Some(slot) = slots
                .get_mut(&host.addr)
                .filter(|s| Arc::ptr_eq(&s.host, &host))
            else {
                continue;
            };
            slot.in_flight = false;
            match outcome {
                Outcome::Pass => stats.success.inc(),
                Outcome::Fail => stats.failure.inc(),
                Outcome::NetworkFail => {
                    stats.failure.inc();
                    stats.network_failure.inc();
                }
            }
            let t = slot.session.apply(&host.health, outcome, &spec);
            if t == Transition::Changed {
                changed = true;
                tracing::info!(
                    cluster = %sh.name,
                    host = %host.addr,
                    healthy = !host.health.failed_active_hc(),
                    "upstream host health changed"
                );
            }
            let base = if traffic {
                spec.interval
            } else {
                spec.no_traffic_interval
            };
            slot.next = now + jittered(base, spec.interval_jitter);
        }
        // Follow membership: new hosts get a session, departed ones lose theirs.
        let hosts = sh.hosts.snapshot();
        slots.retain(|_, s| hosts.iter().any(|h| Arc::ptr_eq(h, &s.host)));
        for h in hosts.iter() {
            slots.entry(h.addr).or_insert_with(|| Slot {
                host: h.clone(),
                session: Session::default(),
                next: now + jittered(Duration::ZERO, spec.initial_jitter),
                in_flight: false,
            });
        }
        if changed {
            sh.hosts.health_changed();
            sh.hosts.drop_failed_pending();
        }
        let healthy = slots
            .values()
            .filter(|s| !s.host.health.failed_active_hc())
            .count();
        stats
            .healthy
            .set(i64::try_from(healthy).unwrap_or(i64::MAX));
        for slot in slots.values_mut().filter(|s| !s.in_flight && s.next <= now) {
            slot.in_flight = true;
            stats.attempt.inc();
            let (sh, host, tx, spec) = (sh.clone(), slot.host.clone(), tx.clone(), spec.clone());
            tokio::spawn(async move {
                let outcome = tokio::time::timeout(spec.timeout, check(&sh, &spec, host.addr))
                    .await
                    .unwrap_or(Outcome::NetworkFail);
                let _ = tx.send((host, outcome));
            });
        }
        drop(sh);
        // Wake for the next due check, a result, or (at least every second) membership changes.
        let wake = slots
            .values()
            .filter(|s| !s.in_flight)
            .map(|s| s.next)
            .min()
            .unwrap_or(now + Duration::from_secs(1))
            .min(now + Duration::from_secs(1));
        tokio::select! {
            _ = tokio::time::sleep_until(wake.into()) => {}
            got = rx.recv() => {
                if let Some(r) = got {
                    results.push(r);
                }
            }
        }
        while let Ok(r) = rx.try_recv() {
            results.push(r);
        }
    }
}

/// One check of `addr` (unbounded: the caller applies the timeout).
async fn check(sh: &Shared, spec: &HealthCheckSpec, addr: SocketAddr) -> Outcome {
    let Ok(mut stream) = sh.connector.open_for_health_check(addr).await else {
        return Outcome::NetworkFail;
    };
    match &spec.kind {
        HealthCheckKind::Http {
            path,
            host,
            expected,
        } => {
            let Ok((mut send, conn)) = http1::handshake(TokioIo::new(stream)).await else {
                return Outcome::NetworkFail;
            };
            tokio::spawn(async move {
                let _ = conn.await;
            });
            let req = Request::get(path.as_str())
                .header(http::header::HOST, host.as_deref().unwrap_or(&sh.name))
                .header(http::header::USER_AGENT, "Envoy/HC")
                .header(http::header::CONNECTION, "close")
                .body(Empty::<Bytes>::new());
            let Ok(req) = req else {
                return Outcome::Fail;
            };
            match send.send_request(req).await {
                Ok(resp) => {
                    let code = resp.status().as_u16();
                    if expected.iter().any(|(lo, hi)| (*lo..*hi).contains(&code)) {
                        Outcome::Pass
                    } else {
                        Outcome::Fail
                    }
                }
                Err(_) => Outcome::NetworkFail,
            }
        }
        HealthCheckKind::Tcp { send, receive } => {
            if !send.is_empty() && stream.write_all(send).await.is_err() {
                return Outcome::NetworkFail;
            }
            if receive.is_empty() {
                return Outcome::Pass;
            }
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                if payloads_in_order(&buf, receive) {
                    return Outcome::Pass;
                }
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return Outcome::NetworkFail,
                    Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
                }
            }
        }
    }
}

/// Whether every payload occurs in `buf`, each after the previous one (Envoy's
/// `TcpHealthCheckMatcher::match`).
fn payloads_in_order(buf: &[u8], payloads: &[Vec<u8>]) -> bool {
    let mut at = 0;
    for p in payloads {
        let rest = buf.get(at..).unwrap_or_default();
        match rest.windows(p.len().max(1)).position(|w| w == p.as_slice()) {
            Some(i) if !p.is_empty() => at += i + p.len(),
            _ if p.is_empty() => {}
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(unhealthy: u32, healthy: u32) -> HealthCheckSpec {
        HealthCheckSpec {
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            no_traffic_interval: Duration::from_secs(60),
            unhealthy_threshold: unhealthy,
            healthy_threshold: healthy,
            interval_jitter: Duration::ZERO,
            initial_jitter: Duration::ZERO,
            kind: HealthCheckKind::Tcp {
                send: vec![],
                receive: vec![],
            },
        }
    }

    #[test]
    fn first_pass_is_healthy_at_once_then_thresholds_apply() {
        let sp = spec(2, 3);
        let h = HostHealth::new(true);
        let mut s = Session::default();
        assert_eq!(s.apply(&h, Outcome::Pass, &sp), Transition::Changed);
        assert!(!h.failed_active_hc());
        // Network failures count up to the threshold.
        assert_eq!(
            s.apply(&h, Outcome::NetworkFail, &sp),
            Transition::ChangePending
        );
        assert_eq!(s.apply(&h, Outcome::Pass, &sp), Transition::Unchanged);
        assert_eq!(
            s.apply(&h, Outcome::NetworkFail, &sp),
            Transition::ChangePending
        );
        assert_eq!(s.apply(&h, Outcome::NetworkFail, &sp), Transition::Changed);
        assert!(h.failed_active_hc());
        // Back to healthy after three passes.
        assert_eq!(s.apply(&h, Outcome::Pass, &sp), Transition::ChangePending);
        assert_eq!(s.apply(&h, Outcome::Pass, &sp), Transition::ChangePending);
        assert_eq!(s.apply(&h, Outcome::Pass, &sp), Transition::Changed);
        // A wrong answer fails at once.
        assert_eq!(s.apply(&h, Outcome::Fail, &sp), Transition::Changed);
        assert!(h.failed_active_hc());
    }

    #[test]
    fn first_failure_keeps_unhealthy() {
        let sp = spec(3, 2);
        let h = HostHealth::new(true);
        let mut s = Session::default();
        assert_eq!(
            s.apply(&h, Outcome::NetworkFail, &sp),
            Transition::Unchanged
        );
        assert_eq!(s.apply(&h, Outcome::Pass, &sp), Transition::ChangePending);
        assert_eq!(s.apply(&h, Outcome::Pass, &sp), Transition::Changed);
    }

    #[test]
    fn tcp_payloads_match_in_order() {
        let p = vec![b"PO".to_vec(), b"NG".to_vec()];
        assert!(payloads_in_order(b"xxPOyyNG", &p));
        assert!(!payloads_in_order(b"NGPO", &p));
        assert!(payloads_in_order(b"", &[]));
    }
}
