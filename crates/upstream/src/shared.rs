//! What every handle to one cluster shares: its name, load-balancing policy
//! and protocol, the endpoints, the connector, the circuit breakers, the stats
//! and the per-worker pools. Built by `cluster`, read by the request path.

use std::sync::Arc;

use crate::breaker::Breakers;
use crate::connect::Connector;
use crate::hosts::HostSet;
use crate::pool::Pools;
use crate::spec::{LbPolicy, Protocol};
use crate::stats::ClusterStats;

pub(crate) struct Shared {
    pub(crate) name: String,
    pub(crate) lb: LbPolicy,
    pub(crate) protocol: Protocol,
    pub(crate) hosts: Arc<HostSet>,
    pub(crate) connector: Connector,
    pub(crate) breakers: Arc<Breakers>,
    pub(crate) stats: ClusterStats,
    pub(crate) pools: Pools,
}
