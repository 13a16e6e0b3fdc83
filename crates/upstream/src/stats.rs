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
    /// `membership_healthy`: hosts neither failing their active health check nor ejected.
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
    /// `lb_healthy_panic`: hosts picked in panic mode (too few healthy hosts, all are used).
    pub lb_healthy_panic: Counter,
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
            lb_healthy_panic: s.counter("lb_healthy_panic"),
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

/// `cluster.<name>.health_check.*` (registered only for clusters with health checks).
#[derive(Clone, Debug)]
pub(crate) struct HealthCheckStats {
    pub(crate) attempt: Counter,
    pub(crate) success: Counter,
    /// Every failure, network ones included.
    pub(crate) failure: Counter,
    /// Connect failures and timeouts.
    pub(crate) network_failure: Counter,
    /// Hosts passing now.
    pub(crate) healthy: Gauge,
}

impl HealthCheckStats {
    pub(crate) fn new(cluster: &Scope) -> Self {
        let c = |n: &str| cluster.counter(&format!("health_check.{n}"));
        // Registered for Envoy's names; quickshake has no passive health checks, cluster
        // verification or degraded hosts, so these stay 0.
        for n in ["passive_failure", "verify_cluster"] {
            c(n);
        }
        cluster.gauge("health_check.degraded");
        HealthCheckStats {
            attempt: c("attempt"),
            success: c("success"),
            failure: c("failure"),
            network_failure: c("network_failure"),
            healthy: cluster.gauge("health_check.healthy"),
        }
    }
}

/// `cluster.<name>.outlier_detection.*` (registered only for clusters with outlier detection).
#[derive(Clone, Debug)]
pub(crate) struct OutlierStats {
    pub(crate) ejections_active: Gauge,
    /// Deprecated in Envoy, still counted: consecutive-5xx (and success-rate) ejections allowed
    /// by `max_ejection_percent`, enforced or not.
    pub(crate) ejections_total: Counter,
    pub(crate) ejections_overflow: Counter,
    pub(crate) ejections_enforced_total: Counter,
    pub(crate) ejections_consecutive_5xx: Counter,
    pub(crate) detected_5xx: Counter,
    pub(crate) enforced_5xx: Counter,
    pub(crate) detected_gateway: Counter,
    pub(crate) enforced_gateway: Counter,
}

impl OutlierStats {
    pub(crate) fn new(cluster: &Scope) -> Self {
        let c = |n: &str| cluster.counter(&format!("outlier_detection.{n}"));
        // Envoy's other detectors (success rate, failure percentage, local origin) are not
        // implemented: their counters exist, at 0.
        for kind in [
            "consecutive_local_origin_failure",
            "failure_percentage",
            "local_origin_failure_percentage",
            "local_origin_success_rate",
            "success_rate",
        ] {
            c(&format!("ejections_detected_{kind}"));
            c(&format!("ejections_enforced_{kind}"));
        }
        c("ejections_detected_degradation");
        c("ejections_success_rate");
        OutlierStats {
            ejections_active: cluster.gauge("outlier_detection.ejections_active"),
            ejections_total: c("ejections_total"),
            ejections_overflow: c("ejections_overflow"),
            ejections_enforced_total: c("ejections_enforced_total"),
            ejections_consecutive_5xx: c("ejections_consecutive_5xx"),
            detected_5xx: c("ejections_detected_consecutive_5xx"),
            enforced_5xx: c("ejections_enforced_consecutive_5xx"),
            detected_gateway: c("ejections_detected_consecutive_gateway_failure"),
            enforced_gateway: c("ejections_enforced_consecutive_gateway_failure"),
        }
    }
}
