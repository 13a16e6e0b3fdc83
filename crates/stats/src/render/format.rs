//! Formatting shared by the renderers: numbers as Envoy prints them (`%g`, `fmt::format("{}")`,
//! JSON numbers) and the non-empty buckets of a histogram's detailed view.

use crate::metrics::HistogramSnapshot;

/// Splits Rust's shortest/precision scientific output (`1.8e6`) into
/// mantissa and exponent.
fn split_exp(s: &str) -> (&str, i32) {
    match s.split_once('e') {
        Some((m, e)) => (m, e.parse().unwrap_or(0)),
        None => (s, 0),
    }
}

fn non_finite(v: f64) -> Option<String> {
    if v.is_nan() {
        Some("nan".to_owned())
    } else if v.is_infinite() {
        Some(if v > 0.0 { "inf" } else { "-inf" }.to_owned())
    } else {
        None
    }
}

fn sci(mantissa: &str, exp: i32) -> String {
    let m = if mantissa.contains('.') {
        mantissa.trim_end_matches('0').trim_end_matches('.')
    } else {
        mantissa
    };
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{m}e{sign}{:02}", exp.unsigned_abs())
}

/// C's `%.{precision}g` (what `fmt::format("{:g}")` gives with precision 6):
/// `1` → `1`, `0.5` → `0.5`, `1800000` → `1.8e+06`.
pub fn fmt_g(v: f64, precision: usize) -> String {
    if let Some(s) = non_finite(v) {
        return s;
    }
    let p = precision.max(1);
    let s = format!("{:.*e}", p - 1, v);
    let (mantissa, exp) = split_exp(&s);
    if exp < -4 || exp >= p as i32 {
        return sci(mantissa, exp);
    }
    let decimals = (p as i32 - 1 - exp).max(0) as usize;
    let fixed = format!("{:.*}", decimals, v);
    if fixed.contains('.') {
        fixed.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        fixed
    }
}

/// `fmt::format("{}", double)`: shortest round-trip digits, exponent form
/// outside `[1e-4, 1e16)`, `nan` for NaN.
pub fn fmt_num(v: f64) -> String {
    if let Some(s) = non_finite(v) {
        return s;
    }
    let s = format!("{v:e}");
    let (mantissa, exp) = split_exp(&s);
    if v != 0.0 && !(-4..16).contains(&exp) {
        return sci(mantissa, exp);
    }
    format!("{v}")
}

/// A JSON number, `null` for NaN/inf (Envoy's `Json::Streamer::number`).
pub(super) fn json_num(v: f64) -> String {
    if v.is_finite() {
        fmt_num(v)
    } else {
        "null".to_owned()
    }
}

/// `(lower_bound, width, count)` of each non-empty disjoint bucket.
pub(super) fn detailed_buckets(snap: &HistogramSnapshot, disjoint: &[u64]) -> Vec<(f64, f64, u64)> {
    disjoint
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(i, c)| {
            let lower = if i == 0 {
                0f64.min(snap.min)
            } else {
                snap.bounds[i - 1]
            };
            let upper = snap.bounds.get(i).copied().unwrap_or(snap.max.max(lower));
            (lower, upper - lower, *c)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_format_matches_envoy_bucket_labels() {
        let got: Vec<String> = crate::DEFAULT_BUCKETS
            .iter()
            .map(|b| fmt_g(*b, 6))
            .collect();
        assert_eq!(
            got.join(" "),
            "0.5 1 5 10 25 50 100 250 500 1000 2500 5000 10000 30000 60000 300000 600000 \
             1.8e+06 3.6e+06"
        );
        assert_eq!(fmt_g(0.0001, 6), "0.0001");
        assert_eq!(fmt_g(0.00001, 6), "1e-05");
        assert_eq!(fmt_g(2.5, 6), "2.5");
    }

    #[test]
    fn num_format() {
        assert_eq!(fmt_num(200.0), "200");
        assert_eq!(fmt_num(202.5), "202.5");
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(f64::NAN), "nan");
        assert_eq!(fmt_num(1e16), "1e+16");
        assert_eq!(fmt_num(3600000.0), "3600000");
    }
}
