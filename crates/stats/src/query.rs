//! `/stats` query-string parameters, parsed like Envoy's `StatsParams::parse`.

use regex::Regex;
use thiserror::Error;

/// Output format (`format=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    #[default]
    Text,
    Json,
    Prometheus,
}

/// How histograms are shown (`histogram_buckets=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HistogramBuckets {
    /// Envoy's quantile line `P0(i,c) P25(i,c) ...` (`summary` or `none`).
    #[default]
    Summary,
    /// `B<bound>(interval,cumulative)` with running totals.
    Cumulative,
    /// `B<bound>(interval,cumulative)` with per-bucket counts.
    Disjoint,
    /// Envoy's `totals=` / `intervals=` / `summary=` block.
    Detailed,
}

/// Which stat kinds to show (`type=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StatsType {
    #[default]
    All,
    Counters,
    Gauges,
    Histograms,
}

/// A rejected `/stats` query. `Display` is the body Envoy answers with 400.
#[derive(Debug, Error)]
pub enum QueryError {
    #[error("Invalid re2 regex: {0}")]
    InvalidRegex(#[from] regex::Error),
    #[error("usage: /stats?format=(json|prometheus|text)\n\n")]
    InvalidFormat(String),
    #[error("usage: /stats?histogram_buckets=(cumulative|disjoint|detailed|summary)\n")]
    InvalidHistogramBuckets(String),
    #[error("invalid &type= param")]
    InvalidType(String),
    #[error("filter regex longer than {0} bytes")]
    FilterTooLong(usize),
}

/// Parsed `/stats` parameters.
#[derive(Clone, Debug, Default)]
pub struct StatsQuery {
    pub format: Format,
    /// Regex searched (unanchored) in the full Envoy stat name.
    pub filter: Option<Regex>,
    /// Only stats that were ever written (`usedonly`).
    pub used_only: bool,
    pub histogram_buckets: HistogramBuckets,
    pub stat_type: StatsType,
}

/// Longest `filter` regex accepted, in bytes.
pub const MAX_FILTER_LEN: usize = 256;
/// Compiled-size limit of a `filter` regex.
const FILTER_SIZE_LIMIT: usize = 64 * 1024;

impl StatsQuery {
    /// Parses a query string (with or without the leading `?`, or a whole
    /// `path?query`). Keys without `=` are flags; the first occurrence of a key
    /// wins; values are percent-decoded (`+` is kept literally so regexes like
    /// `ssl.+handshake` work unencoded).
    pub fn from_query_string(qs: &str) -> Result<StatsQuery, QueryError> {
        // Strip a leading path (`/stats?...`) or `?`; a `?` inside a value (a regex such as
        // `(?i)ssl`) is kept, as Envoy keeps it.
        let qs = if qs.starts_with('/') {
            qs.split_once('?').map_or("", |(_, q)| q)
        } else {
            qs.strip_prefix('?').unwrap_or(qs)
        };
        let pairs: Vec<(String, String)> = qs
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (percent_decode(k), percent_decode(v)),
                None => (percent_decode(p), String::new()),
            })
            .collect();
        let first = |key: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        let mut q = StatsQuery {
            used_only: first("usedonly").is_some(),
            ..StatsQuery::default()
        };
        if let Some(f) = first("filter").filter(|f| !f.is_empty()) {
            // Bounded: admin requests share one event loop, so a filter must not be able to
            // build a huge automaton (found by the stats_query fuzz target).
            if f.len() > MAX_FILTER_LEN {
                return Err(QueryError::FilterTooLong(MAX_FILTER_LEN));
            }
            q.filter = Some(
                regex::RegexBuilder::new(f)
                    .size_limit(FILTER_SIZE_LIMIT)
                    .dfa_size_limit(FILTER_SIZE_LIMIT)
                    .build()?,
            );
        }
        if let Some(hb) = first("histogram_buckets").filter(|v| !v.is_empty()) {
            q.histogram_buckets = match hb {
                "cumulative" => HistogramBuckets::Cumulative,
                "disjoint" => HistogramBuckets::Disjoint,
                "detailed" => HistogramBuckets::Detailed,
                "summary" | "none" => HistogramBuckets::Summary,
                other => return Err(QueryError::InvalidHistogramBuckets(other.to_owned())),
            };
        }
        if let Some(t) = first("type").filter(|v| !v.is_empty()) {
            q.stat_type = match t {
                "All" => StatsType::All,
                "Counters" => StatsType::Counters,
                "Gauges" => StatsType::Gauges,
                "Histograms" => StatsType::Histograms,
                other => return Err(QueryError::InvalidType(other.to_owned())),
            };
        }
        if let Some(f) = first("format").filter(|v| !v.is_empty()) {
            q.format = match f {
                "text" => Format::Text,
                "json" => Format::Json,
                "prometheus" => Format::Prometheus,
                other => return Err(QueryError::InvalidFormat(other.to_owned())),
            };
        }
        Ok(q)
    }

    /// Whether a stat with this full name passes `filter`.
    pub fn matches(&self, name: &str) -> bool {
        self.filter.as_ref().is_none_or(|r| r.is_match(name))
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes `%XX`; malformed escapes are kept as-is (like Envoy).
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let q = StatsQuery::from_query_string("").unwrap_or_default();
        assert_eq!(q.format, Format::Text);
        assert_eq!(q.histogram_buckets, HistogramBuckets::Summary);
        assert!(!q.used_only && q.filter.is_none());
    }

    #[test]
    fn parses_all() -> Result<(), QueryError> {
        let q = StatsQuery::from_query_string(
            "/stats?format=prometheus&usedonly&filter=ssl%5C.handshake&histogram_buckets=disjoint&type=Counters",
        )?;
        assert_eq!(q.format, Format::Prometheus);
        assert!(q.used_only);
        assert_eq!(q.histogram_buckets, HistogramBuckets::Disjoint);
        assert_eq!(q.stat_type, StatsType::Counters);
        assert!(q.matches("listener.0.0.0.0_9000.ssl.handshake"));
        assert!(!q.matches("listener.0.0.0.0_9000.ssl_handshake"));
        Ok(())
    }

    #[test]
    fn errors_carry_envoy_messages() {
        let e = StatsQuery::from_query_string("filter=(").err();
        assert!(matches!(e, Some(QueryError::InvalidRegex(_))));
        assert!(e
            .map(|e| e.to_string())
            .unwrap_or_default()
            .starts_with("Invalid re2 regex"));
        let e = StatsQuery::from_query_string("histogram_buckets=x").err();
        assert_eq!(
            e.map(|e| e.to_string()).as_deref(),
            Some("usage: /stats?histogram_buckets=(cumulative|disjoint|detailed|summary)\n")
        );
        assert!(matches!(
            StatsQuery::from_query_string("format=xml"),
            Err(QueryError::InvalidFormat(_))
        ));
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%2Eb"), "a.b");
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("a+b"), "a+b");
    }
}
