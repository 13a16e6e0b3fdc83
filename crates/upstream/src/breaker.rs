//! Circuit breakers (Envoy's default-priority thresholds), simplified.
//!
//! Envoy queues a request that needs a connection while `max_connections` is
//! reached, and fails it only when the pending queue is full. quickshake does
//! not queue: every limit is checked when it is about to be exceeded and the
//! request fails at once with [`UpstreamError::Overflow`]:
//!
//! - `max_requests`: requests in flight on the cluster (all workers) → counts
//!   `upstream_rq_pending_overflow`;
//! - `max_pending_requests`: requests waiting for a new connection to be
//!   established → `upstream_rq_pending_overflow`;
//! - `max_connections`: open connections, pooled or raw ([`crate::Cluster::connect`])
//!   → `upstream_cx_overflow`;
//! - `max_retries`: retries in flight, see [`crate::Cluster::try_retry`] →
//!   `upstream_rq_retry_overflow`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{OverflowKind, UpstreamError};
use crate::spec::Limits;
use crate::stats::ClusterStats;

/// The cluster-wide counts the limits apply to.
#[derive(Debug, Default)]
pub(crate) struct Breakers {
    limits: Limits,
    counts: [AtomicU64; 4],
}

impl Breakers {
    pub(crate) fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Breakers {
            limits,
            counts: Default::default(),
        })
    }

    fn slot(kind: OverflowKind) -> usize {
        match kind {
            OverflowKind::Connections => 0,
            OverflowKind::PendingRequests => 1,
            OverflowKind::Requests => 2,
            OverflowKind::Retries => 3,
        }
    }

    fn max(&self, kind: OverflowKind) -> u64 {
        u64::from(match kind {
            OverflowKind::Connections => self.limits.max_connections,
            OverflowKind::PendingRequests => self.limits.max_pending_requests,
            OverflowKind::Requests => self.limits.max_requests,
            OverflowKind::Retries => self.limits.max_retries,
        })
    }

    /// How many of `kind` are held now.
    #[cfg(test)]
    pub(crate) fn current(&self, kind: OverflowKind) -> u64 {
        self.counts[Self::slot(kind)].load(Ordering::Relaxed)
    }

    /// Takes one unit of `kind`, or counts the overflow stat and fails.
    pub(crate) fn acquire(
        self: &Arc<Self>,
        kind: OverflowKind,
        stats: &ClusterStats,
    ) -> Result<Permit, UpstreamError> {
        let c = &self.counts[Self::slot(kind)];
        if c.fetch_add(1, Ordering::AcqRel) >= self.max(kind) {
            c.fetch_sub(1, Ordering::AcqRel);
            match kind {
                OverflowKind::Connections => stats.cx_overflow.inc(),
                OverflowKind::PendingRequests | OverflowKind::Requests => {
                    stats.rq_pending_overflow.inc()
                }
                OverflowKind::Retries => stats.rq_retry_overflow.inc(),
            }
            return Err(UpstreamError::Overflow(kind));
        }
        Ok(Permit {
            breakers: self.clone(),
            kind,
        })
    }
}

/// One unit of a circuit-breaker resource, given back on drop.
#[derive(Debug)]
#[must_use = "the resource is released when the permit is dropped"]
pub struct Permit {
    breakers: Arc<Breakers>,
    kind: OverflowKind,
}

impl Permit {
    /// Which resource this permit holds.
    pub fn kind(&self) -> OverflowKind {
        self.kind
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.breakers.counts[Breakers::slot(self.kind)].fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_and_release() {
        let stats = ClusterStats::new(&quickshake_stats::Store::new(), "b");
        let b = Breakers::new(Limits {
            max_connections: 1,
            max_pending_requests: 1,
            max_requests: 2,
            max_retries: 0,
        });
        let p1 = b.acquire(OverflowKind::Requests, &stats).expect("first");
        let _p2 = b.acquire(OverflowKind::Requests, &stats).expect("second");
        assert!(b.acquire(OverflowKind::Requests, &stats).is_err());
        assert_eq!(stats.rq_pending_overflow.value(), 1);
        drop(p1);
        assert!(b.acquire(OverflowKind::Requests, &stats).is_ok());
        assert!(b.acquire(OverflowKind::Retries, &stats).is_err());
        assert_eq!(stats.rq_retry_overflow.value(), 1);
        let _c = b.acquire(OverflowKind::Connections, &stats).expect("cx");
        assert!(b.acquire(OverflowKind::Connections, &stats).is_err());
        assert_eq!(stats.cx_overflow.value(), 1);
        assert_eq!(b.current(OverflowKind::Connections), 1);
    }
}
