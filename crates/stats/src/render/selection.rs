//! What a query selected for rendering.

use crate::metrics::{Counter, Gauge, Histogram};

/// The stats selected by a query, each list sorted by full name.
pub(crate) struct Selection {
    pub(crate) counters: Vec<Counter>,
    pub(crate) gauges: Vec<Gauge>,
    pub(crate) histograms: Vec<Histogram>,
}
