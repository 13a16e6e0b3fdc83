//! State every worker shares: the global connection limit (Envoy's overload manager
//! `global_downstream_max_connections`), the server gauges, and which listeners admin
//! `/drain_listeners` has stopped.

use std::sync::atomic::{AtomicU64, Ordering};

use quickshake_stats::{Gauge, Store};
use tokio::sync::watch;

/// Which listeners admin `/drain_listeners` has stopped (Envoy's `StopListenersType`): a
/// stopped listener accepts no new connection; those it accepted go on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum StoppedListeners {
    #[default]
    None,
    /// `inboundonly`: the listeners with `traffic_direction: INBOUND`.
    InboundOnly,
    All,
}

impl StoppedListeners {
    /// Whether a listener (`inbound`: its `traffic_direction` is INBOUND) is stopped.
    pub fn covers(self, inbound: bool) -> bool {
        match self {
            StoppedListeners::None => false,
            StoppedListeners::InboundOnly => inbound,
            StoppedListeners::All => true,
        }
    }
}

/// State every worker shares: the global connection limit and the server gauges.
pub struct ServerShared {
    active: AtomicU64,
    /// Connections of listeners outside the limit (`ignore_global_conn_limit`).
    unlimited: AtomicU64,
    limit: Option<u64>,
    total_connections: Gauge,
    stopped: watch::Sender<StoppedListeners>,
}

impl ServerShared {
    pub fn new(store: &Store, limit: Option<u64>) -> Self {
        ServerShared {
            active: AtomicU64::new(0),
            unlimited: AtomicU64::new(0),
            limit,
            total_connections: store.gauge("server.total_connections"),
            stopped: watch::Sender::new(StoppedListeners::None),
        }
    }

    /// Stop `which` listeners (widening only: `All` stays `All`); their accept loops end.
    pub fn stop_listeners(&self, which: StoppedListeners) {
        self.stopped.send_if_modified(|s| {
            let widen = which > *s;
            if widen {
                *s = which;
            }
            widen
        });
    }

    /// Which listeners are stopped, watched by every accept loop.
    pub fn stopped_listeners(&self) -> watch::Receiver<StoppedListeners> {
        self.stopped.subscribe()
    }

    /// Count a new connection in, unless the overload manager's limit is reached.
    pub fn try_admit(&self) -> bool {
        self.admit(true)
    }

    /// Admit a connection; `limited: false` (a listener with `ignore_global_conn_limit`) admits
    /// it whatever the limit, and it does not count toward the limit (it still counts as open,
    /// for drain).
    pub fn admit(&self, limited: bool) -> bool {
        if !limited {
            self.unlimited.fetch_add(1, Ordering::AcqRel);
            return true;
        }
        let prev = self.active.fetch_add(1, Ordering::AcqRel);
        if self.limit.is_some_and(|l| prev >= l) {
            self.active.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        self.total_connections.inc();
        true
    }

    pub fn release(&self) {
        self.active.fetch_sub(1, Ordering::AcqRel);
        self.total_connections.dec();
    }

    /// The end of a connection admitted with `admit(false)`.
    pub fn release_unlimited(&self) {
        self.unlimited.fetch_sub(1, Ordering::AcqRel);
    }

    /// The end of a connection admitted with `admit(limited)`.
    pub fn leave(&self, limited: bool) {
        if limited {
            self.release();
        } else {
            self.release_unlimited();
        }
    }

    /// Open connections, limited or not.
    pub fn active(&self) -> u64 {
        self.active.load(Ordering::Acquire) + self.unlimited.load(Ordering::Acquire)
    }
}
