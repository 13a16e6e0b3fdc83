//! Envoy's plain-text `/stats` format (`StatsTextRender`).

use std::fmt::Write as _;

use super::format::{detailed_buckets, fmt_g, fmt_num};
use super::selection::Selection;
use crate::metrics::{HistogramSnapshot, QUANTILES};
use crate::query::HistogramBuckets;

pub(super) fn render(sel: &Selection, mode: HistogramBuckets) -> String {
    let mut out = String::new();
    // Counters and gauges are interleaved in name order, like Envoy.
    let mut numeric: Vec<(&str, String)> = sel
        .counters
        .iter()
        .map(|c| (c.name(), c.value().to_string()))
        .chain(sel.gauges.iter().map(|g| (g.name(), g.value().to_string())))
        .collect();
    numeric.sort_by(|a, b| a.0.cmp(b.0));
    for (name, value) in numeric {
        let _ = writeln!(out, "{name}: {value}");
    }
    for h in &sel.histograms {
        let name = h.name();
        if !h.used() {
            let _ = writeln!(out, "{name}: No recorded values");
            continue;
        }
        let snap = h.snapshot();
        match mode {
            HistogramBuckets::Summary => {
                let _ = writeln!(out, "{name}: {}", quantile_summary(&snap));
            }
            HistogramBuckets::Cumulative => {
                let n = snap.bounds.len();
                let i = HistogramSnapshot::running(&snap.interval, n);
                let c = HistogramSnapshot::running(&snap.cumulative, n);
                let _ = writeln!(out, "{name}: {}", bucket_line(&snap.bounds, &i, &c));
            }
            HistogramBuckets::Disjoint => {
                let _ = writeln!(
                    out,
                    "{name}: {}",
                    bucket_line(&snap.bounds, &snap.interval, &snap.cumulative)
                );
            }
            HistogramBuckets::Detailed => {
                let _ = write!(out, "{name}:\n  totals=");
                detail(&mut out, &snap, &snap.cumulative);
                out.push_str("\n  intervals=");
                detail(&mut out, &snap, &snap.interval);
                let _ = writeln!(out, "\n  summary={}", quantile_summary(&snap));
            }
        }
    }
    out
}

/// `P0(interval,cumulative) P25(...) ... P100(...)` (Envoy's `quantileSummary`).
pub(super) fn quantile_summary(snap: &HistogramSnapshot) -> String {
    let iv = snap.quantiles(&snap.interval);
    let cu = snap.quantiles(&snap.cumulative);
    QUANTILES
        .iter()
        .zip(iv.iter().zip(cu.iter()))
        .map(|(q, (i, c))| format!("P{}({},{})", fmt_g(100.0 * q, 6), fmt_num(*i), fmt_num(*c)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `B<bound>(interval,cumulative) ...` over the finite bounds.
fn bucket_line(bounds: &[f64], interval: &[u64], cumulative: &[u64]) -> String {
    bounds
        .iter()
        .zip(interval.iter().zip(cumulative.iter()))
        .map(|(b, (i, c))| format!("B{}({i},{c})", fmt_g(*b, 6)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Non-empty buckets as `lower,width:count` (Envoy's detailed view).
fn detail(out: &mut String, snap: &HistogramSnapshot, disjoint: &[u64]) {
    let mut delim = "";
    for (lower, width, count) in detailed_buckets(snap, disjoint) {
        let _ = write!(out, "{delim}{},{}:{count}", fmt_num(lower), fmt_num(width));
        delim = ", ";
    }
}
