//! The latency budget of `quickshake.batching` (`batching: budget`): whether a partial batch
//! waits for more operations, free of I/O and clocks (every function takes `now`) so it is
//! unit-tested directly.
//!
//! An operator states what a handshake may lose (`max_batch_delay`); the provider spends as
//! little CPU as it can within that. A partial batch, once the worker has nothing else to run,
//! waits only while both hold:
//! - waiting lowers the CPU per operation on this engine: the batch is below the engine's
//!   lanes, and the operations it expects would take it to at least the engine's measured
//!   crossover (`*_min_batch`: below it the scalar path costs less per operation than the
//!   engine, so a batch of 1 that can only grow to 1 is not worth a microsecond);
//! - the observed arrival rate says those operations arrive within what is left of the
//!   budget: with arrivals as a Poisson process at that rate, at least even odds that the
//!   operations needed come before the budget ends (at 2 ms and one operation needed, from
//!   ~350 operations/s up).
//!
//! Then it waits until the budget's end or a full batch, whichever comes first, deciding again
//! at each arrival: past the crossover the operation needed is the next one, so a batch that
//! has just grown flushes at once when the next arrival has less than even odds of coming
//! before the budget's end, and otherwise waits on. The wait is not cut short before that: the
//! operator's objective is the least CPU within the budget, and latency under the budget is
//! what they agreed to spend (an earlier rule that ended every wait `ln 2 / rate` before the
//! deadline lost ~0.7 operations per batch: batches of 5.0 against the 10 ms timer's 7.1 at
//! 600/s). The budget
//! belongs to the handshake, not to the operation: the waits its operations are *made* to make
//! (its key exchange's, then its signature's) add up to at most the budget. Time an operation
//! spends queued while the worker still has other work ready (a burst being read, the
//! handshakes a batch just resumed) is not a wait batching chose: it is spent the same way
//! with an inline key, and it is not counted against the budget.
//!
//! The arrival rate is the one that matters to a wait: arrivals *while a batch waits*
//! ([`ArrivalRate`]). A closed-loop client sends its next handshake only after this one ends,
//! so however fast it is, nothing arrives while its operation waits; the rate taken from the
//! gaps between arrivals (a naive estimator) would see a high rate and make every one of its
//! handshakes wait for nothing. So the gap rate is used unless the recent waits found next to
//! nothing where it predicts several arrivals (for one fast closed-loop client: after two or
//! three empty waits); then the rate they found, and its handshakes stop waiting. Old observations decay (`TAU`), so a change of load
//! is noticed within a second, at the cost of an occasional wasted wait.

use std::time::{Duration, Instant};

/// How fast old observations fade: an arrival or a waited second counts `e^(-age/TAU)`.
pub const TAU: Duration = Duration::from_secs(1);

/// Arrival-rate estimate of one queue: every arrival (the prior) and the arrivals seen while a
/// batch waited, with the time spent waiting, all exponentially decayed.
#[derive(Debug, Clone, Default)]
pub struct ArrivalRate {
    first: Option<Instant>,
    last: Option<Instant>,
    /// Decayed count of every arrival.
    arrivals: f64,
    /// Decayed count of the arrivals that joined a waiting batch.
    during_waits: f64,
    /// Decayed seconds spent waiting.
    waited: f64,
}

impl ArrivalRate {
    fn decay_to(&mut self, now: Instant) {
        let Some(last) = self.last else {
            self.first = Some(now);
            self.last = Some(now);
            return;
        };
        let age = now.saturating_duration_since(last).as_secs_f64();
        if age > 0.0 {
            let f = (-age / TAU.as_secs_f64()).exp();
            self.arrivals *= f;
            self.during_waits *= f;
            self.waited *= f;
            self.last = Some(now);
        }
    }

    /// An operation arrived; `while_waiting`: it joined a batch that was waiting for it.
    pub fn arrival(&mut self, now: Instant, while_waiting: bool) {
        self.decay_to(now);
        self.arrivals += 1.0;
        if while_waiting {
            self.during_waits += 1.0;
        }
    }

    /// A batch waited `waited` (ended at `now`).
    pub fn waited(&mut self, now: Instant, waited: Duration) {
        self.decay_to(now);
        self.waited += waited.as_secs_f64();
    }

    /// Arrivals per second counting every arrival (the prior): the decayed count over the
    /// decayed time it covers.
    pub fn gap_rate(&self, now: Instant) -> f64 {
        let (Some(first), Some(last)) = (self.first, self.last) else {
            return 0.0;
        };
        let tau = TAU.as_secs_f64();
        let since_last = now.saturating_duration_since(last).as_secs_f64();
        let arrivals = self.arrivals * (-since_last / tau).exp();
        let span = now.saturating_duration_since(first).as_secs_f64();
        // The integral of e^(-age/tau) over the time observed.
        let window = tau * (1.0 - (-span / tau).exp());
        if window <= 0.0 {
            return 0.0;
        }
        arrivals / window
    }

    /// Arrivals per second to expect while a batch waits: the rate between arrivals, unless the
    /// recent waits found next to nothing (under one arrival, after decay) where that rate
    /// predicts at least three (a Poisson process at that rate finds none with under 5%
    /// odds), as a closed-loop client's waits do; then the rate those waits found.
    ///
    /// Only that extreme counts: an open-loop wait always finds fewer arrivals than the
    /// offered rate predicts (an arrival in its last fraction of a millisecond is still being
    /// read when it ends; measured: about half at 600/s and 2 ms), and a rate taken from such
    /// waits would talk the budget out of every wait.
    pub fn rate(&self, now: Instant) -> f64 {
        let tau = TAU.as_secs_f64();
        let since_last = self
            .last
            .map_or(0.0, |l| now.saturating_duration_since(l).as_secs_f64());
        let f = (-since_last / tau).exp();
        let gap = self.gap_rate(now);
        let (found, waited) = (self.during_waits * f, self.waited * f);
        if found < 1.0 && gap * waited >= NOTHING_FOUND {
            found / waited
        } else {
            gap
        }
    }
}

/// Arrivals the gap rate must predict for the waits' finding none to say "closed loop":
/// `e^-3 < 5%`.
const NOTHING_FOUND: f64 = 3.0;

/// What a waiting batch's flush does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Process the batch now.
    Flush,
    /// Wait for more operations until this instant (the budget's end), or a full batch.
    WaitUntil(Instant),
}

/// One partial batch, as the decision sees it.
#[derive(Debug, Clone, Copy)]
pub struct Partial {
    /// Operations in it.
    pub len: usize,
    /// The engine's lanes: a batch this size is processed at once.
    pub lanes: usize,
    /// The engine's crossover for this operation class (`usize::MAX`: the engine does not
    /// batch it, waiting gains nothing).
    pub min_batch: usize,
    /// The earliest budget deadline of the operations in it.
    pub deadline: Instant,
}

/// Whether a partial batch should wait for more operations (see the module's rule), decided
/// again at each arrival: it waits to the deadline while the operations it needs (to the
/// crossover, or the next one past it) have even odds of coming by then, and flushes now
/// otherwise.
pub fn decide(batch: &Partial, rate: f64, now: Instant) -> Decision {
    if batch.len >= batch.lanes || now >= batch.deadline {
        return Decision::Flush;
    }
    if batch.min_batch > batch.lanes {
        // The engine's batch call never beats the scalar path at any size it takes.
        return Decision::Flush;
    }
    let needed = batch.min_batch.saturating_sub(batch.len).max(1);
    let remaining = batch.deadline.saturating_duration_since(now).as_secs_f64();
    if poisson_at_least(rate * remaining, needed) < 0.5 {
        return Decision::Flush;
    }
    Decision::WaitUntil(batch.deadline)
}

/// `P(N >= k)` for `N` Poisson with mean `mean`.
fn poisson_at_least(mean: f64, k: usize) -> f64 {
    if k == 0 {
        return 1.0;
    }
    (1.0 - poisson_at_most(mean, k - 1)).max(0.0)
}

/// `P(N <= k)` for `N` Poisson with mean `mean`.
fn poisson_at_most(mean: f64, k: usize) -> f64 {
    if mean <= 0.0 {
        return 1.0;
    }
    // sum_{i<=k} e^-mean mean^i / i!, capped: past a few hundred terms it is 1 to f64 precision.
    let mut term = (-mean).exp();
    let mut sum = 0.0;
    for i in 0..=k.min(1000) {
        sum += term;
        term *= mean / (i + 1) as f64;
    }
    sum.min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const US: Duration = Duration::from_micros(1);

    fn partial(len: usize, min_batch: usize, deadline: Instant) -> Partial {
        Partial {
            len,
            lanes: 8,
            min_batch,
            deadline,
        }
    }

    /// Open-loop arrivals every `gap`, each joining the waiting batch when one waits.
    fn steady(rate: &mut ArrivalRate, t0: Instant, gap: Duration, n: u32) -> Instant {
        let mut t = t0;
        for _ in 0..n {
            t += gap;
            rate.arrival(t, false);
        }
        t
    }

    #[test]
    fn even_odds_of_the_arrivals_needed() {
        assert!((poisson_at_least(2f64.ln(), 1) - 0.5).abs() < 1e-12);
        assert!(poisson_at_least(1.2, 1) > 0.5);
        assert!(poisson_at_least(1.2, 2) < 0.5);
        assert!(poisson_at_least(1.7, 2) > 0.5);
        assert_eq!(poisson_at_least(0.0, 1), 0.0);
    }

    #[test]
    fn gap_rate_follows_a_steady_load() {
        let t0 = Instant::now();
        let mut r = ArrivalRate::default();
        let t = steady(&mut r, t0, Duration::from_micros(1667), 3000);
        let g = r.gap_rate(t);
        assert!((550.0..650.0).contains(&g), "600/s read as {g}");
        // Half a second of silence: the estimate falls.
        assert!(r.gap_rate(t + Duration::from_millis(500)) < 0.7 * g);
    }

    #[test]
    fn lone_operations_at_low_load_never_wait() {
        let t0 = Instant::now();
        let mut r = ArrivalRate::default();
        // 20 handshakes/s.
        let t = steady(&mut r, t0, Duration::from_millis(50), 100);
        let rate = r.rate(t);
        assert_eq!(
            decide(&partial(1, 2, t + 2 * MS), rate, t),
            Decision::Flush,
            "rate {rate}"
        );
    }

    #[test]
    fn a_partial_batch_at_600_per_second_waits_for_the_budget_only() {
        let t0 = Instant::now();
        let mut r = ArrivalRate::default();
        let t = steady(&mut r, t0, Duration::from_micros(1667), 600);
        let rate = r.rate(t);
        let deadline = t + 2 * MS;
        assert_eq!(
            decide(&partial(1, 2, deadline), rate, t),
            Decision::WaitUntil(deadline)
        );
        // Never past the deadline, whatever the rate.
        assert_eq!(
            decide(&partial(1, 2, deadline), 1e9, deadline),
            Decision::Flush
        );
        // Full: at once.
        assert_eq!(decide(&partial(8, 2, deadline), rate, t), Decision::Flush);
        // Past the crossover, to the deadline while the next arrival has even odds before it
        // (at 600/s: from ln 2 / 600 = 1.16 ms left up).
        assert_eq!(
            decide(&partial(2, 2, t + 10 * MS), rate, t),
            Decision::WaitUntil(t + 10 * MS)
        );
        assert_eq!(
            decide(&partial(2, 2, t + 1300 * US), rate, t),
            Decision::WaitUntil(t + 1300 * US)
        );
        assert_eq!(
            decide(&partial(2, 2, t + MS / 2), rate, t),
            Decision::Flush,
            "half a millisecond left at 600/s: less than even odds"
        );
        // An engine that does not batch this class gains nothing from a wait.
        assert_eq!(
            decide(&partial(1, usize::MAX, deadline), rate, t),
            Decision::Flush
        );
    }

    #[test]
    fn a_closed_loop_client_stops_waiting_after_its_first_waits() {
        // One client, a handshake every 1.2 ms, each waiting alone: the gap rate says ~830/s,
        // enough to wait at first; every wait finds nothing.
        let t0 = Instant::now();
        let mut r = ArrivalRate::default();
        let mut t = steady(&mut r, t0, Duration::from_micros(1200), 500);
        let budget = 2 * MS;
        let mut waits = 0;
        for _ in 0..1000 {
            t += Duration::from_micros(1200);
            r.arrival(t, false);
            if let Decision::WaitUntil(end) = decide(&partial(1, 2, t + budget), r.rate(t), t) {
                waits += 1;
                r.waited(end, end - t);
                t = end;
            }
        }
        assert!(waits <= 10, "{waits} of 1000 closed-loop handshakes waited");
    }

    #[test]
    fn waits_that_find_arrivals_keep_the_rate() {
        // Open loop at 600/s: about 1.2 arrivals per 2 ms wait.
        let t0 = Instant::now();
        let mut r = ArrivalRate::default();
        let mut t = steady(&mut r, t0, Duration::from_micros(1667), 600);
        for _ in 0..200 {
            t += 2 * MS;
            r.arrival(t - MS, true);
            r.arrival(t, false);
            r.waited(t, 2 * MS);
        }
        let rate = r.rate(t);
        assert!(rate > 450.0, "{rate}");
    }
}
