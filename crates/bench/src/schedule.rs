//! Open-loop timetable: request `i` is due at `t0 + i / rate`.
//!
//! Times are offsets from `t0` so the logic is testable without clocks. Offsets are computed
//! from `i` directly (never by adding intervals), so the timetable does not drift.

use std::time::Duration;

/// A fixed-rate timetable.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    rate: f64,
}

impl Schedule {
    /// `rate`: new requests per second; must be finite and > 0.
    pub fn new(rate: f64) -> Result<Schedule, String> {
        if rate.is_finite() && rate > 0.0 {
            Ok(Schedule { rate })
        } else {
            Err(format!("rate must be a positive number, got {rate}"))
        }
    }

    /// Requests per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Intended start of request `i`, as an offset from `t0`.
    pub fn offset(&self, i: u64) -> Duration {
        Duration::from_secs_f64(i as f64 / self.rate)
    }

    /// How many requests are due by `elapsed` (those with `offset(i) <= elapsed`).
    pub fn due_by(&self, elapsed: Duration) -> u64 {
        let n = (elapsed.as_secs_f64() * self.rate).floor() as u64 + 1;
        // Guard against float rounding at exact boundaries.
        if n > 0 && self.offset(n - 1) > elapsed {
            n - 1
        } else if self.offset(n) <= elapsed {
            n + 1
        } else {
            n
        }
    }

    /// How many requests fall in `[0, window)`.
    pub fn count_in(&self, window: Duration) -> u64 {
        let mut n = (window.as_secs_f64() * self.rate).ceil() as u64;
        while n > 0 && self.offset(n - 1) >= window {
            n -= 1;
        }
        while self.offset(n) < window {
            n += 1;
        }
        n
    }
}

/// Lag after which a start counts as late: the larger of 2 ms (timer granularity)
/// and a tenth of the interval.
pub fn late_threshold(rate: f64) -> Duration {
    let tenth = Duration::from_secs_f64(0.1 / rate.max(1e-9));
    tenth.max(Duration::from_millis(2))
}

/// Tally of how well the open loop kept its timetable.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Punctuality {
    /// Requests started (on time or late).
    pub started: u64,
    /// Started later than the threshold.
    pub late: u64,
    /// Had to wait because the outstanding cap was reached.
    pub capped: u64,
    /// Largest start lag seen.
    pub max_lag: Duration,
}

impl Punctuality {
    /// Records one start, `lag` after its intended time, `capped` if it waited for the cap.
    pub fn record(&mut self, lag: Duration, threshold: Duration, capped: bool) {
        self.started += 1;
        if lag > threshold {
            self.late += 1;
        }
        if capped {
            self.capped += 1;
        }
        self.max_lag = self.max_lag.max(lag);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_do_not_drift() {
        let s = Schedule::new(3.0).unwrap();
        assert_eq!(s.offset(0), Duration::ZERO);
        assert_eq!(s.offset(3), Duration::from_secs(1));
        assert_eq!(s.offset(3_000_000), Duration::from_secs(1_000_000));
        let s = Schedule::new(20.0).unwrap();
        assert_eq!(s.offset(1), Duration::from_millis(50));
        assert_eq!(s.offset(40), Duration::from_secs(2));
    }

    #[test]
    fn due_and_counts() {
        let s = Schedule::new(20.0).unwrap();
        assert_eq!(s.due_by(Duration::ZERO), 1);
        assert_eq!(s.due_by(Duration::from_millis(49)), 1);
        assert_eq!(s.due_by(Duration::from_millis(50)), 2);
        assert_eq!(s.due_by(Duration::from_secs(2)), 41);
        assert_eq!(s.count_in(Duration::from_secs(2)), 40);
        assert_eq!(s.count_in(Duration::from_millis(1)), 1);
        assert_eq!(s.count_in(Duration::ZERO), 0);
        let s = Schedule::new(0.5).unwrap();
        assert_eq!(s.count_in(Duration::from_secs(3)), 2);
        assert_eq!(s.due_by(Duration::from_secs(2)), 2);
    }

    #[test]
    fn bad_rates() {
        assert!(Schedule::new(0.0).is_err());
        assert!(Schedule::new(-1.0).is_err());
        assert!(Schedule::new(f64::NAN).is_err());
        assert!(Schedule::new(f64::INFINITY).is_err());
    }

    #[test]
    fn punctuality() {
        let th = late_threshold(20.0);
        assert_eq!(th, Duration::from_millis(5));
        assert_eq!(late_threshold(10_000.0), Duration::from_millis(2));
        let mut p = Punctuality::default();
        p.record(Duration::from_millis(1), th, false);
        p.record(Duration::from_millis(30), th, true);
        assert_eq!((p.started, p.late, p.capped), (2, 1, 1));
        assert_eq!(p.max_lag, Duration::from_millis(30));
    }
}
