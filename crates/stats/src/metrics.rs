//! The three stat kinds. Every handle is an `Arc` around atomics: cloning is a
//! reference-count bump, and every update on the hot path is a relaxed atomic
//! operation with no lock and no name lookup.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use crate::tags::Extracted;

/// Name and Envoy tag-extraction result, computed once at registration.
#[derive(Debug)]
pub(crate) struct Meta {
    pub(crate) name: String,
    pub(crate) extracted: Extracted,
}

impl Meta {
    pub(crate) fn new(name: &str) -> Self {
        Meta {
            name: name.to_owned(),
            extracted: crate::tags::extract(name),
        }
    }
}

/// Marks a stat as used. The load keeps the common case (already used) a
/// shared-cache-line read instead of a write.
#[inline]
fn mark_used(flag: &AtomicBool) {
    if !flag.load(Relaxed) {
        flag.store(true, Relaxed);
    }
}

#[derive(Debug)]
pub(crate) struct CounterCell {
    value: AtomicU64,
    used: AtomicBool,
    pub(crate) meta: Meta,
}

/// A monotonically increasing count (Envoy `Counter`).
#[derive(Clone, Debug)]
pub struct Counter(pub(crate) Arc<CounterCell>);

impl Counter {
    pub(crate) fn new(name: &str) -> Self {
        Counter(Arc::new(CounterCell {
            value: AtomicU64::new(0),
            used: AtomicBool::new(false),
            meta: Meta::new(name),
        }))
    }

    /// Adds one.
    #[inline]
    pub fn inc(&self) {
        self.add(1);
    }

    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.value.fetch_add(n, Relaxed);
        mark_used(&self.0.used);
    }

    /// Current value.
    pub fn value(&self) -> u64 {
        self.0.value.load(Relaxed)
    }

    /// Whether the counter was ever updated (Envoy's `usedonly`).
    pub fn used(&self) -> bool {
        self.0.used.load(Relaxed)
    }

    /// Full Envoy stat name.
    pub fn name(&self) -> &str {
        &self.0.meta.name
    }
}

#[derive(Debug)]
pub(crate) struct GaugeCell {
    value: AtomicI64,
    used: AtomicBool,
    pub(crate) meta: Meta,
}

/// A value that goes up and down (Envoy `Gauge`).
#[derive(Clone, Debug)]
pub struct Gauge(pub(crate) Arc<GaugeCell>);

impl Gauge {
    pub(crate) fn new(name: &str) -> Self {
        Gauge(Arc::new(GaugeCell {
            value: AtomicI64::new(0),
            used: AtomicBool::new(false),
            meta: Meta::new(name),
        }))
    }

    /// Sets the value.
    #[inline]
    pub fn set(&self, v: i64) {
        self.0.value.store(v, Relaxed);
        mark_used(&self.0.used);
    }

    /// Adds one.
    #[inline]
    pub fn inc(&self) {
        self.add(1);
    }

    /// Subtracts one.
    #[inline]
    pub fn dec(&self) {
        self.sub(1);
    }

    /// Adds `v`.
    #[inline]
    pub fn add(&self, v: i64) {
        self.0.value.fetch_add(v, Relaxed);
        mark_used(&self.0.used);
    }

    /// Subtracts `v`.
    #[inline]
    pub fn sub(&self, v: i64) {
        self.0.value.fetch_sub(v, Relaxed);
        mark_used(&self.0.used);
    }

    /// Current value.
    pub fn value(&self) -> i64 {
        self.0.value.load(Relaxed)
    }

    /// Whether the gauge was ever updated.
    pub fn used(&self) -> bool {
        self.0.used.load(Relaxed)
    }

    /// Full Envoy stat name.
    pub fn name(&self) -> &str {
        &self.0.meta.name
    }
}

/// Counts of the last completed interval (between the last two
/// [`crate::Store::merge_histograms`] calls), like Envoy's interval statistics.
#[derive(Debug, Default)]
struct IntervalState {
    merged: bool,
    last_cumulative: Vec<u64>,
    last_sum: f64,
    interval: Vec<u64>,
    interval_sum: f64,
}

#[derive(Debug)]
pub(crate) struct HistogramCell {
    /// Sorted, finite upper bucket bounds.
    bounds: Box<[f64]>,
    /// Disjoint counts: `counts[i]` holds values in `(bounds[i-1], bounds[i]]`;
    /// the last slot holds values above the last bound.
    counts: Box<[AtomicU64]>,
    count: AtomicU64,
    sum_bits: AtomicU64,
    min_bits: AtomicU64,
    max_bits: AtomicU64,
    interval: Mutex<IntervalState>,
    pub(crate) meta: Meta,
}

/// A distribution of recorded values over fixed upper bucket bounds
/// (Envoy `Histogram`, milliseconds by convention).
#[derive(Clone, Debug)]
pub struct Histogram(pub(crate) Arc<HistogramCell>);

/// Sanitises user bounds: finite, ascending, de-duplicated.
pub(crate) fn normalize_bounds(bounds: &[f64]) -> Vec<f64> {
    let mut b: Vec<f64> = bounds.iter().copied().filter(|v| v.is_finite()).collect();
    b.sort_by(f64::total_cmp);
    b.dedup();
    b
}

impl Histogram {
    pub(crate) fn new(name: &str, bounds: &[f64]) -> Self {
        let bounds = normalize_bounds(bounds).into_boxed_slice();
        let counts = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        Histogram(Arc::new(HistogramCell {
            bounds,
            counts,
            count: AtomicU64::new(0),
            sum_bits: AtomicU64::new(0f64.to_bits()),
            min_bits: AtomicU64::new(f64::INFINITY.to_bits()),
            max_bits: AtomicU64::new(f64::NEG_INFINITY.to_bits()),
            interval: Mutex::new(IntervalState::default()),
            meta: Meta::new(name),
        }))
    }

    /// Records one value. NaN is ignored.
    #[inline]
    pub fn record(&self, v: f64) {
        if v.is_nan() {
            return;
        }
        let c = &self.0;
        let idx = c.bounds.partition_point(|b| *b < v);
        if let Some(slot) = c.counts.get(idx) {
            slot.fetch_add(1, Relaxed);
        }
        c.count.fetch_add(1, Relaxed);
        let _ = c.sum_bits.fetch_update(Relaxed, Relaxed, |s| {
            Some((f64::from_bits(s) + v).to_bits())
        });
        // min/max only write when they change, which is rare after warm-up.
        if v < f64::from_bits(c.min_bits.load(Relaxed)) {
            let _ = c.min_bits.fetch_update(Relaxed, Relaxed, |m| {
                (v < f64::from_bits(m)).then_some(v.to_bits())
            });
        }
        if v > f64::from_bits(c.max_bits.load(Relaxed)) {
            let _ = c.max_bits.fetch_update(Relaxed, Relaxed, |m| {
                (v > f64::from_bits(m)).then_some(v.to_bits())
            });
        }
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.0.count.load(Relaxed)
    }

    /// Sum of recorded values.
    pub fn sum(&self) -> f64 {
        f64::from_bits(self.0.sum_bits.load(Relaxed))
    }

    /// Whether anything was recorded.
    pub fn used(&self) -> bool {
        self.count() > 0
    }

    /// Upper bucket bounds (without the implicit `+Inf`).
    pub fn bounds(&self) -> &[f64] {
        &self.0.bounds
    }

    /// Full Envoy stat name.
    pub fn name(&self) -> &str {
        &self.0.meta.name
    }

    fn disjoint_now(&self) -> Vec<u64> {
        self.0.counts.iter().map(|c| c.load(Relaxed)).collect()
    }

    /// Closes the current interval (Envoy's `mergeHistograms`).
    pub(crate) fn merge(&self) {
        let now = self.disjoint_now();
        let sum = self.sum();
        let mut st = self
            .0
            .interval
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        st.interval = if st.merged {
            now.iter()
                .zip(st.last_cumulative.iter())
                .map(|(n, l)| n.saturating_sub(*l))
                .collect()
        } else {
            now.clone()
        };
        st.interval_sum = if st.merged { sum - st.last_sum } else { sum };
        st.last_cumulative = now;
        st.last_sum = sum;
        st.merged = true;
    }

    /// A consistent-enough copy for rendering.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let cumulative = self.disjoint_now();
        let count = cumulative.iter().sum();
        let st = self
            .0
            .interval
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (interval, interval_sum) = if st.merged {
            (st.interval.clone(), st.interval_sum)
        } else {
            (cumulative.clone(), self.sum())
        };
        drop(st);
        let min = f64::from_bits(self.0.min_bits.load(Relaxed));
        let max = f64::from_bits(self.0.max_bits.load(Relaxed));
        HistogramSnapshot {
            bounds: self.0.bounds.to_vec(),
            cumulative,
            interval,
            count,
            sum: self.sum(),
            interval_sum,
            min,
            max,
        }
    }
}

/// Point-in-time copy of a histogram. Bucket vectors are *disjoint* and have
/// `bounds.len() + 1` entries (the last one is the overflow bucket).
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramSnapshot {
    pub bounds: Vec<f64>,
    pub cumulative: Vec<u64>,
    pub interval: Vec<u64>,
    pub count: u64,
    pub sum: f64,
    pub interval_sum: f64,
    pub min: f64,
    pub max: f64,
}

/// Envoy's supported quantiles, as fractions.
pub const QUANTILES: [f64; 10] = [0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 1.0];

impl HistogramSnapshot {
    /// Running totals of `disjoint` at each bound (without overflow).
    pub fn running(disjoint: &[u64], n_bounds: usize) -> Vec<u64> {
        let mut acc = 0u64;
        disjoint
            .iter()
            .take(n_bounds)
            .map(|c| {
                acc += c;
                acc
            })
            .collect()
    }

    /// Quantiles estimated from `disjoint` bucket counts by linear
    /// interpolation inside the bucket, clamped to the observed min/max.
    /// NaN for an empty distribution (Envoy prints `nan`).
    pub fn quantiles(&self, disjoint: &[u64]) -> Vec<f64> {
        let total: u64 = disjoint.iter().sum();
        QUANTILES
            .iter()
            .map(|q| {
                if total == 0 {
                    return f64::NAN;
                }
                self.quantile(disjoint, total, *q)
            })
            .collect()
    }

    fn quantile(&self, disjoint: &[u64], total: u64, q: f64) -> f64 {
        let (min, max) = (self.min, self.max);
        if q <= 0.0 {
            return min;
        }
        if q >= 1.0 {
            return max;
        }
        let rank = q * total as f64;
        let mut seen = 0u64;
        for (i, c) in disjoint.iter().enumerate() {
            if *c == 0 {
                continue;
            }
            let next = seen + c;
            if (next as f64) >= rank {
                let lower = if i == 0 {
                    min
                } else {
                    self.bounds[i - 1].max(min)
                };
                let upper = self.bounds.get(i).copied().unwrap_or(max).min(max);
                let frac = (rank - seen as f64) / *c as f64;
                return (lower + (upper - lower) * frac).clamp(min, max);
            }
            seen = next;
        }
        max
    }
}
