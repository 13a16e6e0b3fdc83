//! Upstream health settings of a cluster: active health checks (`health_checks[]`), outlier
//! detection (`outlier_detection`) and the panic threshold (`common_lb_config`). Only the
//! validated settings: the upstream crate runs them.

use std::time::Duration;

/// One `health_checks[]` entry (Envoy's `HealthCheck`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    pub timeout: Duration,
    pub interval: Duration,
    /// `no_traffic_interval` (default 60 s, as Envoy's).
    pub no_traffic_interval: Duration,
    pub unhealthy_threshold: u32,
    pub healthy_threshold: u32,
    pub interval_jitter: Duration,
    pub initial_jitter: Duration,
    pub kind: HealthCheckKind,
}

/// `http_health_check` or `tcp_health_check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HealthCheckKind {
    Http {
        path: String,
        /// `host`; the cluster's name when empty (Envoy's default).
        host: Option<String>,
        /// `expected_statuses` as `[start, end)` ranges (default `[200, 201)`).
        expected_statuses: Vec<(u16, u16)>,
    },
    /// `send` and `receive[]` payloads (`text`, hex, or `binary`, base64), decoded.
    Tcp {
        send: Vec<u8>,
        receive: Vec<Vec<u8>>,
    },
}

/// `outlier_detection` (Envoy's `OutlierDetection`), Envoy's defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct OutlierDetection {
    pub consecutive_5xx: u32,
    pub consecutive_gateway_failure: u32,
    pub enforcing_consecutive_5xx: u32,
    pub enforcing_consecutive_gateway_failure: u32,
    pub interval: Duration,
    pub base_ejection_time: Duration,
    pub max_ejection_time: Duration,
    pub max_ejection_percent: u32,
}

impl Default for OutlierDetection {
    fn default() -> Self {
        OutlierDetection {
            consecutive_5xx: 5,
            consecutive_gateway_failure: 5,
            enforcing_consecutive_5xx: 100,
            enforcing_consecutive_gateway_failure: 0,
            interval: Duration::from_secs(10),
            base_ejection_time: Duration::from_secs(30),
            max_ejection_time: Duration::from_secs(300),
            max_ejection_percent: 10,
        }
    }
}
