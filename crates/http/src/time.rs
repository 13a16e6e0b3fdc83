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

/// `%START_TIME(format)%`: strftime over UTC as Envoy prints it, with Envoy's `%s` (seconds
/// since the epoch), `%f` / `%1f`..`%9f` (fractional seconds, nine digits by default) and `%%`.
/// An unknown specifier is printed as written (`%Ef` stays `%Ef`, as in Envoy).
pub fn strftime(format: &str, since_epoch: std::time::Duration) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const LONG_DAYS: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let secs = i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX);
    let nanos = since_epoch.subsec_nanos();
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let (hh, mm, ss) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    let weekday = days.rem_euclid(7) as usize;
    let month = MONTHS[(m as usize).saturating_sub(1) % 12];
    let yday = days - days_from_civil(y, 1, 1) + 1;
    let mut out = String::with_capacity(format.len() + 16);
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let digits = chars.peek().and_then(|c| c.to_digit(10)).filter(|d| *d > 0);
        if let Some(n) = digits {
            chars.next();
            if chars.peek() == Some(&'f') {
                chars.next();
                out.push_str(&format!("{nanos:09}")[..n as usize]);
            } else {
                out.push('%');
                out.push(char::from_digit(n, 10).unwrap_or('0'));
            }
            continue;
        }
        let Some(spec) = chars.next() else {
            out.push('%');
            break;
        };
        let s = match spec {
            'Y' => y.to_string(),
            'y' => format!("{:02}", y.rem_euclid(100)),
            'C' => format!("{:02}", y.div_euclid(100)),
            'm' => format!("{m:02}"),
            'd' => format!("{d:02}"),
            'e' => format!("{d:>2}"),
            'H' => format!("{hh:02}"),
            'I' => format!("{:02}", if hh % 12 == 0 { 12 } else { hh % 12 }),
            'p' => (if hh < 12 { "AM" } else { "PM" }).to_owned(),
            'M' => format!("{mm:02}"),
            'S' => format!("{ss:02}"),
            'j' => format!("{yday:03}"),
            'a' => DAYS[weekday].to_owned(),
            'A' => LONG_DAYS[weekday].to_owned(),
            'b' | 'h' => month[..3].to_owned(),
            'B' => month.to_owned(),
            'z' => "+0000".to_owned(),
            'Z' => "UTC".to_owned(),
            's' => secs.to_string(),
            'f' => format!("{nanos:09}"),
            'T' => format!("{hh:02}:{mm:02}:{ss:02}"),
            'R' => format!("{hh:02}:{mm:02}"),
            'F' => format!("{y}-{m:02}-{d:02}"),
            'D' => format!("{m:02}/{d:02}/{:02}", y.rem_euclid(100)),
            'n' => "\n".to_owned(),
            't' => "\t".to_owned(),
            '%' => "%".to_owned(),
            other => format!("%{other}"),
        };
        out.push_str(&s);
    }
    out
}

/// Days since the epoch of a civil date (Howard Hinnant's days-from-civil).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
        // What Envoy 1.39.3 printed for the same format at 2026-11-24T05:11:03.293392Z.
        let t = std::time::Duration::new(1_795_497_063, 293_392_000);
        assert_eq!(
            super::strftime(
                "%Y/%m/%dT%H:%M:%S%z %s %3f %6f %9f %Ef %f %j %a %b %e %Z %T %F %%",
                t
            ),
            "2026/11/24T05:11:03+0000 1795497063 293 293392 293392000 %Ef 293392000 328 Tue Nov 24 UTC 05:11:03 2026-11-24 %"
        );
        assert_eq!(
            super::strftime("%A %B %I%p %y %D %R", t),
            "Tuesday November 05AM 26 11/24/26 05:11"
        );
        assert_eq!(super::days_from_civil(2000, 3, 1), 11_017);
    }
}
