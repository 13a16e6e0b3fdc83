//! `quickshake-stats` owns quickshake's stat registry: counters, gauges and
//! histograms named exactly as Envoy names them (`listener.<address>.ssl.handshake`,
//! `http.<stat_prefix>.downstream_rq_2xx`, ...), Envoy's default tag extraction
//! for Prometheus labels, and rendering in Envoy's `/stats` formats (text,
//! JSON, Prometheus). It is pure: it must not open sockets, spawn threads or
//! depend on an async runtime — the admin crate serves what this crate renders.
//! Hot-path cost matters: handles are cheap `Arc` clones, updates are relaxed
//! atomics, and names are looked up only when a stat is registered.
#![forbid(unsafe_code)]

mod metrics;
mod query;
mod render;
pub mod tags;

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

pub use metrics::{Counter, Gauge, Histogram, HistogramSnapshot, QUANTILES};
pub use query::{percent_decode, Format, HistogramBuckets, QueryError, StatsQuery, StatsType};
pub use render::{fmt_g, fmt_num, Rendered, CONTENT_TYPE_JSON, CONTENT_TYPE_TEXT};

/// Envoy's default histogram bucket bounds (`HistogramSettingsImpl::defaultBuckets`).
pub const DEFAULT_BUCKETS: &[f64] = &[
    0.5, 1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0,
    60000.0, 300000.0, 600000.0, 1800000.0, 3600000.0,
];

#[derive(Default)]
struct Registry {
    counters: RwLock<HashMap<String, Counter>>,
    gauges: RwLock<HashMap<String, Gauge>>,
    histograms: RwLock<HashMap<String, Histogram>>,
}

/// Get-or-create under a read lock first, a write lock only on a miss.
fn get_or_create<T: Clone>(
    map: &RwLock<HashMap<String, T>>,
    name: &str,
    make: impl FnOnce() -> T,
) -> T {
    if let Some(v) = map.read().unwrap_or_else(PoisonError::into_inner).get(name) {
        return v.clone();
    }
    map.write()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(name.to_owned())
        .or_insert_with(make)
        .clone()
}

fn sorted_values<T: Clone>(
    map: &RwLock<HashMap<String, T>>,
    keep: impl Fn(&T) -> bool,
    name: impl Fn(&T) -> &str,
) -> Vec<T> {
    let mut v: Vec<T> = map
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .values()
        .filter(|x| keep(x))
        .cloned()
        .collect();
    v.sort_by(|a, b| name(a).cmp(name(b)));
    v
}

/// The stat registry. Cloning shares it.
#[derive(Clone, Default)]
pub struct Store {
    inner: Arc<Registry>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

impl Store {
    pub fn new() -> Self {
        Self::default()
    }

    /// Gets or creates the counter `name`.
    pub fn counter(&self, name: &str) -> Counter {
        get_or_create(&self.inner.counters, name, || Counter::new(name))
    }

    /// Gets or creates the gauge `name`.
    pub fn gauge(&self, name: &str) -> Gauge {
        get_or_create(&self.inner.gauges, name, || Gauge::new(name))
    }

    /// Gets or creates the histogram `name` with upper bucket `bounds`
    /// (non-finite values are dropped, the rest sorted and de-duplicated).
    /// An existing histogram keeps the bounds it was created with.
    pub fn histogram(&self, name: &str, bounds: &[f64]) -> Histogram {
        get_or_create(&self.inner.histograms, name, || {
            Histogram::new(name, bounds)
        })
    }

    /// A view that prefixes every name with `prefix` (include the trailing `.`).
    pub fn scope(&self, prefix: &str) -> Scope {
        Scope {
            store: self.clone(),
            prefix: prefix.to_owned(),
        }
    }

    /// Value of an existing counter.
    pub fn counter_value(&self, name: &str) -> Option<u64> {
        self.find_counter(name).map(|c| c.value())
    }

    /// Value of an existing gauge.
    pub fn gauge_value(&self, name: &str) -> Option<i64> {
        self.find_gauge(name).map(|g| g.value())
    }

    /// An existing counter, without creating it.
    pub fn find_counter(&self, name: &str) -> Option<Counter> {
        let map = self.inner.counters.read();
        map.unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// An existing gauge, without creating it.
    pub fn find_gauge(&self, name: &str) -> Option<Gauge> {
        let map = self.inner.gauges.read();
        map.unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// An existing histogram, without creating it.
    pub fn find_histogram(&self, name: &str) -> Option<Histogram> {
        let map = self.inner.histograms.read();
        map.unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// Closes the current histogram interval, like Envoy's periodic stats
    /// flush (`mergeHistograms`): afterwards the `interval` half of each
    /// `(interval,cumulative)` pair shows what was recorded between the last
    /// two calls. Until the first call, intervals equal the cumulative values.
    pub fn merge_histograms(&self) {
        let map = self.inner.histograms.read();
        for h in map.unwrap_or_else(PoisonError::into_inner).values() {
            h.merge();
        }
    }

    /// Renders the stats selected by `q` in the format it asks for.
    pub fn render(&self, q: &StatsQuery) -> Rendered {
        let want = |t: StatsType| q.stat_type == StatsType::All || q.stat_type == t;
        let counters = if want(StatsType::Counters) {
            sorted_values(
                &self.inner.counters,
                |c: &Counter| (!q.used_only || c.used()) && q.matches(c.name()),
                |c| c.name(),
            )
        } else {
            Vec::new()
        };
        let gauges = if want(StatsType::Gauges) {
            sorted_values(
                &self.inner.gauges,
                |g: &Gauge| (!q.used_only || g.used()) && q.matches(g.name()),
                |g| g.name(),
            )
        } else {
            Vec::new()
        };
        let histograms = if want(StatsType::Histograms) {
            sorted_values(
                &self.inner.histograms,
                |h: &Histogram| (!q.used_only || h.used()) && q.matches(h.name()),
                |h| h.name(),
            )
        } else {
            Vec::new()
        };
        render::render(
            &render::Selection {
                counters,
                gauges,
                histograms,
            },
            q,
        )
    }
}

/// A name prefix over a [`Store`] (Envoy's `Scope`), e.g.
/// `store.scope("listener.0.0.0.0_9000.")`.
#[derive(Clone, Debug)]
pub struct Scope {
    store: Store,
    prefix: String,
}

impl Scope {
    fn full(&self, name: &str) -> String {
        let mut s = String::with_capacity(self.prefix.len() + name.len());
        s.push_str(&self.prefix);
        s.push_str(name);
        s
    }

    pub fn counter(&self, name: &str) -> Counter {
        self.store.counter(&self.full(name))
    }

    pub fn gauge(&self, name: &str) -> Gauge {
        self.store.gauge(&self.full(name))
    }

    pub fn histogram(&self, name: &str, bounds: &[f64]) -> Histogram {
        self.store.histogram(&self.full(name), bounds)
    }

    /// A nested scope: `prefix` is appended to this scope's prefix.
    pub fn scope(&self, prefix: &str) -> Scope {
        self.store.scope(&self.full(prefix))
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

#[cfg(test)]
mod tests;
