//! Prometheus text exposition 0.0.4, as Envoy's `/stats/prometheus` writes it
//! (`prometheus_stats.cc`): families keyed by the tag-extracted name, one
//! `# TYPE` line each, counters then gauges then histograms, a blank line
//! after every family, and `{}` even for untagged series. Bucket bounds and
//! sums are printed with `%.32g`, as Envoy does.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::format::fmt_g;
use super::selection::Selection;
use crate::metrics::{HistogramSnapshot, Meta};
use crate::tags::{prometheus_name, sanitize};

/// Orders names element by element on `.`, like Envoy's `StatNameLessThan`.
#[derive(PartialEq, Eq)]
struct ElementOrder<'a>(&'a str);

impl Ord for ElementOrder<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.split('.').cmp(other.0.split('.'))
    }
}

impl PartialOrd for ElementOrder<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// `envoy_listener_address="0.0.0.0_9000",...` (no braces).
fn labels(meta: &Meta) -> String {
    meta.extracted
        .tags
        .iter()
        .map(|t| format!("{}=\"{}\"", sanitize(&t.name), escape_label(&t.value)))
        .collect::<Vec<_>>()
        .join(",")
}

/// Groups `items` by tag-extracted name (sorted), each group sorted by full name.
fn families<'a, T>(
    items: &'a [T],
    meta: impl Fn(&'a T) -> &'a Meta,
) -> BTreeMap<ElementOrder<'a>, Vec<&'a T>> {
    let mut groups: BTreeMap<ElementOrder<'a>, Vec<&'a T>> = BTreeMap::new();
    for item in items {
        groups
            .entry(ElementOrder(&meta(item).extracted.name))
            .or_default()
            .push(item);
    }
    for group in groups.values_mut() {
        group.sort_by(|a, b| ElementOrder(&meta(a).name).cmp(&ElementOrder(&meta(b).name)));
    }
    groups
}

fn numeric<'a, T>(
    out: &mut String,
    items: &'a [T],
    kind: &str,
    meta: impl Fn(&'a T) -> &'a Meta + Copy,
    value: impl Fn(&T) -> String,
) {
    for (family, members) in families(items, meta) {
        let name = prometheus_name(family.0);
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for m in members {
            let _ = writeln!(out, "{name}{{{}}} {}", labels(meta(m)), value(m));
        }
        out.push('\n');
    }
}

pub(super) fn render(sel: &Selection) -> String {
    let mut out = String::new();
    numeric(
        &mut out,
        &sel.counters,
        "counter",
        |c| &c.0.meta,
        |c| c.value().to_string(),
    );
    numeric(
        &mut out,
        &sel.gauges,
        "gauge",
        |g| &g.0.meta,
        |g| g.value().to_string(),
    );
    for (family, members) in families(&sel.histograms, |h| &h.0.meta) {
        let name = prometheus_name(family.0);
        let _ = writeln!(out, "# TYPE {name} histogram");
        for h in members {
            let tags = labels(&h.0.meta);
            let hist_tags = if tags.is_empty() {
                String::new()
            } else {
                format!("{tags},")
            };
            let snap = h.snapshot();
            let running = HistogramSnapshot::running(&snap.cumulative, snap.bounds.len());
            for (b, c) in snap.bounds.iter().zip(running.iter()) {
                let _ = writeln!(
                    out,
                    "{name}_bucket{{{hist_tags}le=\"{}\"}} {c}",
                    fmt_g(*b, 32)
                );
            }
            let _ = writeln!(
                out,
                "{name}_bucket{{{hist_tags}le=\"+Inf\"}} {}",
                snap.count
            );
            let _ = writeln!(out, "{name}_sum{{{tags}}} {}", fmt_g(snap.sum, 32));
            let _ = writeln!(out, "{name}_count{{{tags}}} {}", snap.count);
        }
        out.push('\n');
    }
    out
}
