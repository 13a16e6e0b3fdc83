//! `quickshake-bench`: a handshake load generator that cannot be fooled into measuring
//! anything but full TLS handshakes. It owns the client side of a benchmark: opening a new
//! TCP+TLS connection per request (or keep-alive on request; or, with `--h3`, a new QUIC
//! connection per HTTP/3 request, 0-RTT off), refusing session resumption
//! unless asked (it checks `SSL_session_reused` on every handshake and the server's own
//! `ssl.session_reused` counter), keeping an open-loop timetable without coordinated
//! omission, and accounting for its own CPU and the server core's CPU per handshake. It must
//! not touch the server it measures beyond HTTP requests and reading the stats page, must
//! not share TLS state between connections unless resumption is requested, and keeps pure
//! logic (`schedule`, `report`, `stats_client` parsing, `cpu` parsing, `http`, `h2` framing,
//! the `h3` QUIC exchange) free of sockets so it is unit-tested; socket I/O lives in `client`.
//!
//! It is also the benchmark's one reader of the server's side: `observe` reads the same
//! counters and CPU ticks around another load generator (or an idle window) and reports them
//! the same way, and `machine` prints the CPU model keyprovider's `cpu_info()` parsed, so
//! bench/bench.py and the shell scripts do not parse `/proc/stat` or `/stats`, nor
//! `/proc/cpuinfo` for the model and flags.
#![deny(unsafe_code)]

pub mod client;
pub mod cpu;
pub mod h2;
pub mod h3;
pub mod http;
pub mod machine;
pub mod observe;
pub mod report;
pub mod schedule;
pub mod stats_client;

use std::time::Duration;

/// Parses `10s`, `500ms`, `2m`, `1.5s`, `100us` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("bad duration {s:?} (use e.g. 10s, 500ms, 2m)"))?;
    let secs = match unit.trim() {
        "" | "s" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        u => return Err(format!("bad duration unit {u:?} in {s:?}")),
    };
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(format!("duration {s:?} out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("abc").is_err());
        assert!(parse_duration("5d").is_err());
        assert!(parse_duration("").is_err());
    }
}
