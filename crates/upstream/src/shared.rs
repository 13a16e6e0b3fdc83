//! What every handle to one cluster shares: its name, load-balancing policy
//! and protocol, the endpoints, the connector, the circuit breakers, the stats
//! and the per-worker pools, and its health checking: the active check's spec and stats (run
//! by `health_check`) and the outlier detector. Built by `cluster`, read by the request path.

use std::sync::Arc;

use crate::breaker::Breakers;
use crate::connect::Connector;
use crate::hosts::HostSet;
use crate::outlier::Detector;
use crate::pool::Pools;
use crate::spec::{HealthCheckSpec, LbPolicy, Limits, Protocol};
use crate::stats::{ClusterStats, HealthCheckStats};

pub(crate) struct Shared {
    pub(crate) name: String,
    pub(crate) lb: LbPolicy,
    pub(crate) protocol: Protocol,
    /// `ClusterSpec::http2_windows`.
    pub(crate) http2_windows: (Option<u32>, Option<u32>),
    pub(crate) hosts: Arc<HostSet>,
    pub(crate) connector: Connector,
    pub(crate) breakers: Arc<Breakers>,
    pub(crate) stats: ClusterStats,
    pub(crate) pools: Pools,
    pub(crate) limits: Limits,
    pub(crate) health_check: Option<(HealthCheckSpec, HealthCheckStats)>,
    pub(crate) outlier: Option<Detector>,
    /// Added by a control plane (CDS) rather than the bootstrap.
    pub(crate) added_via_api: bool,
}
