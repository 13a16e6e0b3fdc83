//! How the gateway runs its workers: typed options the binary fills from its command line.

use std::time::Duration;

/// Where a worker runs its TLS handshakes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HandshakePriority {
    /// On the worker's own thread, like Envoy: the most handshakes per core.
    #[default]
    Normal,
    /// On a companion thread in the kernel's `SCHED_IDLE` class (see [`crate::handoff`]): requests on
    /// established connections never wait behind handshakes; handshakes get the CPU left over.
    Idle,
}

/// How to run the workers.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    pub concurrency: usize,
    pub handshake_priority: HandshakePriority,
    /// How long a drain waits for open connections before the process exits.
    pub drain_time: Duration,
}
