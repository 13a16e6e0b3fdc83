//! Envoy durations: the protobuf JSON form `"<decimal>s"` (e.g. `"0.01s"`), for convenience also
//! `ns`, `us`, `ms`, `m` and `h` suffixes, and the mapping form `{seconds, nanos}`.

use std::time::Duration;

use serde_json::Value;

use crate::walk::{Node, Result};

/// Envoy's (protobuf's) largest duration: 10,000 years.
const MAX_SECONDS: u64 = 315_576_000_000;
const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Parse a duration value found at `field_path`.
pub fn parse_duration(v: &Value, field_path: &str) -> Result<Duration> {
    duration(&Node::new(v, field_path))
}

pub(crate) fn duration(node: &Node<'_>) -> Result<Duration> {
    let nanos = match node.v {
        Value::String(s) => from_text(node, s)?,
        Value::Object(_) => {
            let o = node.obj(&["seconds", "nanos"])?;
            let secs = o.get("seconds").map(|n| n.as_u64()).transpose()?;
            let nanos = o
                .get("nanos")
                .map(|n| n.as_u64_in(0, 999_999_999))
                .transpose()?;
            u128::from(secs.unwrap_or(0)) * NANOS_PER_SEC + u128::from(nanos.unwrap_or(0))
        }
        Value::Number(n) => {
            return Err(node.err(format!(
                "a duration needs a unit, e.g. \"{n}s\" (got the bare number {n})"
            )))
        }
        _ => return Err(node.err("expected a duration such as \"1.5s\" or \"200ms\"")),
    };
    let secs = nanos / NANOS_PER_SEC;
    if secs > u128::from(MAX_SECONDS) {
        return Err(node.err("duration is too long"));
    }
    // Both parts are in range now: secs <= MAX_SECONDS, sub-second part < 1e9.
    let secs = u64::try_from(secs).map_err(|_| node.err("duration is too long"))?;
    let sub = u32::try_from(nanos % NANOS_PER_SEC).map_err(|_| node.err("bad duration"))?;
    Ok(Duration::new(secs, sub))
}

fn from_text(node: &Node<'_>, text: &str) -> Result<u128> {
    let bad = || {
        node.err(format!(
            "invalid duration \"{text}\" (expected e.g. \"1.5s\", \"200ms\", \"1m\")"
        ))
    };
    let t = text.trim();
    if t.starts_with('-') {
        return Err(node.err(format!("duration must not be negative, got \"{text}\"")));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| {
            node.err(format!(
                "a duration needs a unit, e.g. \"{t}s\" (got \"{text}\")"
            ))
        })?;
    let (number, unit) = t.split_at(split);
    let unit_nanos: u128 = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => NANOS_PER_SEC,
        "m" => 60 * NANOS_PER_SEC,
        "h" => 3_600 * NANOS_PER_SEC,
        _ => return Err(bad()),
    };
    let (int, frac) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') || frac.len() > 18 {
        return Err(bad());
    }
    let int: u128 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| bad())?
    };
    let mut total = int.checked_mul(unit_nanos).ok_or_else(bad)?;
    if !frac.is_empty() {
        let digits: u128 = frac.parse().map_err(|_| bad())?;
        let scale = 10u128.pow(u32::try_from(frac.len()).map_err(|_| bad())?);
        total = total
            .checked_add(digits * unit_nanos / scale)
            .ok_or_else(bad)?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn d(v: Value) -> Result<Duration> {
        parse_duration(&v, "x.timeout")
    }

    #[test]
    fn text_forms() {
        assert_eq!(d(json!("0.01s")).unwrap(), Duration::from_millis(10));
        assert_eq!(d(json!("10ms")).unwrap(), Duration::from_millis(10));
        assert_eq!(d(json!("1.5s")).unwrap(), Duration::from_millis(1500));
        assert_eq!(d(json!("200ms")).unwrap(), Duration::from_millis(200));
        assert_eq!(d(json!("1m")).unwrap(), Duration::from_secs(60));
        assert_eq!(d(json!("2h")).unwrap(), Duration::from_secs(7200));
        assert_eq!(d(json!("250us")).unwrap(), Duration::from_micros(250));
        assert_eq!(d(json!("7ns")).unwrap(), Duration::from_nanos(7));
        assert_eq!(d(json!("0s")).unwrap(), Duration::ZERO);
        assert_eq!(d(json!(".5s")).unwrap(), Duration::from_millis(500));
        assert_eq!(d(json!("3.s")).unwrap(), Duration::from_secs(3));
        assert_eq!(d(json!("1.000000001s")).unwrap(), Duration::new(1, 1));
    }

    #[test]
    fn mapping_form() {
        assert_eq!(
            d(json!({"seconds": 2, "nanos": 500_000_000})).unwrap(),
            Duration::from_millis(2500)
        );
        assert_eq!(d(json!({"seconds": "3"})).unwrap(), Duration::from_secs(3));
        let e = d(json!({"seconds": 1, "millis": 3})).unwrap_err();
        assert_eq!(e.to_string(), "x.timeout.millis: unknown field");
        let e = d(json!({"nanos": 1_000_000_000u64})).unwrap_err();
        assert_eq!(e.path(), Some("x.timeout.nanos"));
    }

    #[test]
    fn rejects() {
        for bad in [
            json!("10"),
            json!("s"),
            json!("1.2.3s"),
            json!("-1s"),
            json!("1 sec"),
            json!("1d"),
            json!(5),
            json!(true),
            json!("999999999999999999999h"),
        ] {
            let e = d(bad.clone()).expect_err(&bad.to_string());
            assert_eq!(e.path(), Some("x.timeout"), "{bad}");
        }
        let e = d(json!(5)).unwrap_err();
        assert!(e.to_string().contains("\"5s\""), "{e}");
    }
}
