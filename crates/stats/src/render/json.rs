//! Envoy's `/stats?format=json` shape (`StatsJsonRender`):
//! `{"stats":[{"name":..,"value":..},...,{"histograms":...}]}`.

use std::fmt::Write as _;

use super::format::{detailed_buckets, fmt_g, json_num};
use super::selection::Selection;
use crate::metrics::{HistogramSnapshot, QUANTILES};
use crate::query::HistogramBuckets;

/// A JSON string literal.
pub(crate) fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn supported_quantiles() -> String {
    let v: Vec<String> = QUANTILES.iter().map(|q| fmt_g(q * 100.0, 6)).collect();
    format!("[{}]", v.join(","))
}

fn percentiles(snap: &HistogramSnapshot) -> String {
    let cu = snap.quantiles(&snap.cumulative);
    let iv = snap.quantiles(&snap.interval);
    let v: Vec<String> = cu
        .iter()
        .zip(iv.iter())
        .map(|(c, i)| {
            format!(
                "{{\"cumulative\":{},\"interval\":{}}}",
                json_num(*c),
                json_num(*i)
            )
        })
        .collect();
    format!("[{}]", v.join(","))
}

fn buckets(snap: &HistogramSnapshot, interval: &[u64], cumulative: &[u64]) -> String {
    let v: Vec<String> = snap
        .bounds
        .iter()
        .zip(interval.iter().zip(cumulative.iter()))
        .map(|(b, (i, c))| {
            format!(
                "{{\"upper_bound\":{},\"interval\":{i},\"cumulative\":{c}}}",
                json_num(*b)
            )
        })
        .collect();
    format!("[{}]", v.join(","))
}

fn verbose(snap: &HistogramSnapshot, disjoint: &[u64]) -> String {
    let v: Vec<String> = detailed_buckets(snap, disjoint)
        .into_iter()
        .map(|(l, w, c)| {
            format!(
                "{{\"lower_bound\":{},\"width\":{},\"count\":{c}}}",
                json_num(l),
                json_num(w)
            )
        })
        .collect();
    format!("[{}]", v.join(","))
}

pub(super) fn render(sel: &Selection, mode: HistogramBuckets) -> String {
    let mut entries: Vec<(&str, String)> = sel
        .counters
        .iter()
        .map(|c| (c.name(), c.value().to_string()))
        .chain(sel.gauges.iter().map(|g| (g.name(), g.value().to_string())))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let mut items: Vec<String> = entries
        .into_iter()
        .map(|(n, v)| format!("{{\"name\":{},\"value\":{v}}}", json_str(n)))
        .collect();

    if !sel.histograms.is_empty() {
        let hs: Vec<String> = sel
            .histograms
            .iter()
            .map(|h| {
                let snap = h.snapshot();
                let name = json_str(h.name());
                match mode {
                    HistogramBuckets::Summary => {
                        format!("{{\"name\":{name},\"values\":{}}}", percentiles(&snap))
                    }
                    HistogramBuckets::Cumulative => {
                        let n = snap.bounds.len();
                        let i = HistogramSnapshot::running(&snap.interval, n);
                        let c = HistogramSnapshot::running(&snap.cumulative, n);
                        format!("{{\"name\":{name},\"buckets\":{}}}", buckets(&snap, &i, &c))
                    }
                    HistogramBuckets::Disjoint => format!(
                        "{{\"name\":{name},\"buckets\":{}}}",
                        buckets(&snap, &snap.interval, &snap.cumulative)
                    ),
                    HistogramBuckets::Detailed => format!(
                        "{{\"name\":{name},\"totals\":{},\"intervals\":{},\"percentiles\":{}}}",
                        verbose(&snap, &snap.cumulative),
                        verbose(&snap, &snap.interval),
                        percentiles(&snap)
                    ),
                }
            })
            .collect();
        let list = hs.join(",");
        items.push(match mode {
            HistogramBuckets::Summary => format!(
                "{{\"histograms\":{{\"supported_quantiles\":{},\"computed_quantiles\":[{list}]}}}}",
                supported_quantiles()
            ),
            HistogramBuckets::Detailed => format!(
                "{{\"histograms\":{{\"supported_percentiles\":{},\"details\":[{list}]}}}}",
                supported_quantiles()
            ),
            HistogramBuckets::Cumulative | HistogramBuckets::Disjoint => {
                format!("{{\"histograms\":[{list}]}}")
            }
        });
    }
    format!("{{\"stats\":[{}]}}", items.join(","))
}
