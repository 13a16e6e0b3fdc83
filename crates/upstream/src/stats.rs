//! Cluster stats under Envoy's names (`cluster.<name>.<stat>`).

use quickshake_stats::{Counter, Gauge, Histogram, Scope, Store, DEFAULT_BUCKETS};

/// A cluster's stats. Fields are public so the router can charge the stats it
/// owns (`rq_retry`, `rq_timeout`, ...) on the same handles.
#[derive(Clone, Debug)]
pub struct ClusterStats {
    scope: Scope,
    /// `upstream_cx_total`: connections opened (successfully or not).
    pub cx_total: Counter,
    /// `upstream_cx_active`: connections open now.
    pub cx_active: Gauge,
    /// `upstream_cx_http1_total`.
    pub cx_http1_total: Counter,
    /// `upstream_cx_http2_total`.
    pub cx_http2_total: Counter,
    /// `upstream_cx_connect_fail`: connect failures, timeouts included (as in Envoy).
    pub cx_connect_fail: Counter,
    /// `upstream_cx_connect_timeout`.
    pub cx_connect_timeout: Counter,
    /// `upstream_cx_overflow`: `max_connections` tripped.
    pub cx_overflow: Counter,
    /// `upstream_cx_destroy`: connections closed.
    pub cx_destroy: Counter,
    /// `upstream_cx_connect_ms` (histogram, milliseconds).
    pub cx_connect_ms: Histogram,
    /// `upstream_rq_total`: requests handed to a connection (not those that
    /// failed to get one).
    pub rq_total: Counter,
    /// `upstream_rq_active`: requests from endpoint choice (waiting for a
    /// connection included) until the response body ends or is dropped.
    pub rq_active: Gauge,
    /// `upstream_rq_pending_total`: requests that had to wait for a new connection.
    pub rq_pending_total: Counter,
    /// `upstream_rq_pending_active`.
    pub rq_pending_active: Gauge,
    /// `upstream_rq_pending_overflow`: `max_requests` or `max_pending_requests` tripped.
    pub rq_pending_overflow: Counter,
    /// `upstream_rq_pending_failure_eject`: requests failed while waiting for a connection.
    pub rq_pending_failure_eject: Counter,
    /// `upstream_rq_completed`: responses received (headers).
    pub rq_completed: Counter,
    /// `upstream_rq_retry`: charged by the router.
    pub rq_retry: Counter,
    /// `upstream_rq_retry_overflow`: `max_retries` tripped (see [`crate::Cluster::try_retry`]).
    pub rq_retry_overflow: Counter,
    /// `upstream_rq_timeout`: charged by the router.
    pub rq_timeout: Counter,
    /// `upstream_rq_time` (histogram, milliseconds, until the response body ends).
    pub rq_time: Histogram,
    /// `membership_healthy`: hosts known now (no health checking: all are healthy).
    pub membership_healthy: Gauge,
    /// `membership_total`.
    pub membership_total: Gauge,
    /// `membership_change`.
    pub membership_change: Counter,
    /// `update_attempt`: DNS resolutions started.
    pub update_attempt: Counter,
    /// `update_success`.
    pub update_success: Counter,
    /// `update_failure`: resolution failed or returned nothing; the last good set is kept.
    pub update_failure: Counter,
    class: [Counter; 5],
}

impl ClusterStats {
    /// Registers (or finds) `cluster.<name>.*` in `store`.
    pub fn new(store: &Store, cluster: &str) -> Self {
        let s = store.scope(&format!("cluster.{cluster}."));
        let class =
            ["1xx", "2xx", "3xx", "4xx", "5xx"].map(|c| s.counter(&format!("upstream_rq_{c}")));
        ClusterStats {
            cx_total: s.counter("upstream_cx_total"),
            cx_active: s.gauge("upstream_cx_active"),
            cx_http1_total: s.counter("upstream_cx_http1_total"),
            cx_http2_total: s.counter("upstream_cx_http2_total"),
            cx_connect_fail: s.counter("upstream_cx_connect_fail"),
            cx_connect_timeout: s.counter("upstream_cx_connect_timeout"),
            cx_overflow: s.counter("upstream_cx_overflow"),
            cx_destroy: s.counter("upstream_cx_destroy"),
            cx_connect_ms: s.histogram("upstream_cx_connect_ms", DEFAULT_BUCKETS),
            rq_total: s.counter("upstream_rq_total"),
            rq_active: s.gauge("upstream_rq_active"),
            rq_pending_total: s.counter("upstream_rq_pending_total"),
            rq_pending_active: s.gauge("upstream_rq_pending_active"),
            rq_pending_overflow: s.counter("upstream_rq_pending_overflow"),
            rq_pending_failure_eject: s.counter("upstream_rq_pending_failure_eject"),
            rq_completed: s.counter("upstream_rq_completed"),
            rq_retry: s.counter("upstream_rq_retry"),
            rq_retry_overflow: s.counter("upstream_rq_retry_overflow"),
            rq_timeout: s.counter("upstream_rq_timeout"),
            rq_time: s.histogram("upstream_rq_time", DEFAULT_BUCKETS),
            membership_healthy: s.gauge("membership_healthy"),
            membership_total: s.gauge("membership_total"),
            membership_change: s.counter("membership_change"),
            update_attempt: s.counter("update_attempt"),
            update_success: s.counter("update_success"),
            update_failure: s.counter("update_failure"),
            class,
            scope: s,
        }
    }

    /// Charges `upstream_rq_<code>` and `upstream_rq_<N>xx` (and `upstream_rq_completed`).
    ///
    /// [`crate::Cluster::send`] already does this for every response it returns;
    /// call it only for responses the router makes up itself (504 on its
    /// timeout, 503 on a reset), as Envoy's router does.
    pub fn record_response(&self, status: u16) {
        self.rq_completed.inc();
        self.scope.counter(&format!("upstream_rq_{status}")).inc();
        if let Some(c) = (status / 100)
            .checked_sub(1)
            .and_then(|i| self.class.get(usize::from(i)))
        {
            c.inc();
        }
    }

    /// The `cluster.<name>.` scope, for stats this crate does not define.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }
}
