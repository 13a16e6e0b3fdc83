//! Envoy's xDS stats: `control_plane.connected_state` and each type's update counters.

use quickshake_stats::{Counter, Gauge, Store};

use crate::kind::Kind;

/// Envoy's update counters for one resource type.
#[derive(Clone)]
pub struct KindStats {
    pub update_attempt: Counter,
    pub update_success: Counter,
    pub update_rejected: Counter,
    pub version: Gauge,
}

/// `control_plane.connected_state` and the per-type update counters.
#[derive(Clone)]
pub struct XdsStats {
    pub connected_state: Gauge,
    kinds: Vec<(Kind, KindStats)>,
}

impl XdsStats {
    pub fn new(store: &Store) -> Self {
        let kinds = Kind::ALL
            .into_iter()
            .map(|k| {
                let scope = k.stat_scope();
                let c = |n: &str| store.counter(&format!("{scope}{n}"));
                let s = KindStats {
                    update_attempt: c("update_attempt"),
                    update_success: c("update_success"),
                    update_rejected: c("update_rejected"),
                    version: store.gauge(&format!("{scope}version")),
                };
                (k, s)
            })
            .collect();
        XdsStats {
            connected_state: store.gauge("control_plane.connected_state"),
            kinds,
        }
    }

    pub fn kind(&self, k: Kind) -> &KindStats {
        match self.kinds.iter().find(|(kk, _)| *kk == k) {
            Some((_, s)) => s,
            None => &self.kinds[0].1,
        }
    }
}
