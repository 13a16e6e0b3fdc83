//! Wall-clock formatting for access logs (RFC 3339, UTC, milliseconds) and admin JSON (protobuf
//! `Timestamp`s) without a date crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, as Envoy's `%START_TIME%` prints it: `2026-11-22T20:00:00.123Z`.
pub fn rfc3339_now() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(d.as_secs() as i64, d.subsec_millis())
}

/// Format seconds since the epoch and milliseconds.
pub fn rfc3339(secs: i64, millis: u32) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// A protobuf `Timestamp` of whole seconds as Envoy's JSON prints it: RFC 3339 without a
/// fraction (`2026-11-24T04:03:04Z`).
pub fn timestamp_json(secs: i64) -> String {
    let full = rfc3339(secs, 0);
    match full.strip_suffix(".000Z") {
        Some(head) => format!("{head}Z"),
        None => full,
    }
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_known_instants() {
        assert_eq!(super::rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(super::rfc3339(1_795_377_600, 5), "2026-11-22T20:00:00.005Z");
        assert_eq!(super::rfc3339(951_782_400, 0), "2000-02-29T00:00:00.000Z");
        assert_eq!(super::timestamp_json(1_795_492_984), "2026-11-24T04:03:04Z");
    }
}
