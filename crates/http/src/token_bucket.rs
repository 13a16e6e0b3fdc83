//! Envoy's local rate limit token bucket, shared by every worker: it starts full
//! (`max_tokens`) and refills continuously at `tokens_per_fill` per `fill_interval`, as Envoy
//! 1.39's `AtomicTokenBucketImpl` does (no periodic timer: half a fill interval after a token
//! was taken, half a token is back). Each admitted socket (listener and network filters) or
//! request (HTTP filter) takes one token; none left, refused.
//!
//! The state is one atomic: the bucket's "theoretical arrival time" (GCRA), the instant at
//! which it would be full again. A token costs `fill_interval / tokens_per_fill`; taking one
//! moves that instant by one cost, and is refused when it would move it more than the bucket's
//! capacity (`max_tokens` costs) past now. The decision ([`TokenBucket::try_take_at`]) is pure
//! in the time it is given.
//!
//! [`BucketRegistry`] hands out buckets by filter: the same filter (or `share_key`) with the same
//! settings gets the same bucket while one is alive, so rebuilding filter chains (certificate
//! rotation, an xDS update of another field) does not refill them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Instant;

use quickshake_config::TokenBucket as Settings;

/// A token bucket, shared by every worker.
#[derive(Debug)]
pub struct TokenBucket {
    /// Nanoseconds of refill per token (`fill_interval / tokens_per_fill`, at least 1).
    cost_ns: u64,
    /// The capacity in nanoseconds of refill: `max_tokens` costs.
    capacity_ns: u64,
    /// When the bucket is full again, in nanoseconds since `epoch` (0: full from the start).
    full_at: AtomicU64,
    epoch: Instant,
}

impl TokenBucket {
    pub fn new(s: &Settings) -> Self {
        let per_token = s.fill_interval.as_nanos() / u128::from(s.tokens_per_fill.max(1));
        let cost_ns = u64::try_from(per_token).unwrap_or(u64::MAX).max(1);
        // Both stay far below u64::MAX / 2, so `full_at + cost` cannot overflow in practice;
        // the sums saturate anyway.
        let cost_ns = cost_ns.min(u64::MAX / 4);
        let capacity_ns = cost_ns
            .saturating_mul(u64::from(s.max_tokens))
            .min(u64::MAX / 4);
        TokenBucket {
            cost_ns,
            capacity_ns,
            full_at: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// Take a token now, if there is one.
    pub fn try_take(&self) -> bool {
        let now = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX / 4);
        self.try_take_at(now)
    }

    /// Tokens left now and the time until the bucket is full again (the HTTP filter's
    /// `x-ratelimit-remaining` and `x-ratelimit-reset`).
    pub fn remaining(&self) -> (u32, std::time::Duration) {
        let now = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX / 4);
        self.remaining_at(now)
    }

    /// [`TokenBucket::remaining`] at `now` (nanoseconds since the bucket was made).
    pub fn remaining_at(&self, now: u64) -> (u32, std::time::Duration) {
        let until_full = self.full_at.load(Ordering::Relaxed).saturating_sub(now);
        let free = self.capacity_ns.saturating_sub(until_full) / self.cost_ns;
        (
            u32::try_from(free).unwrap_or(u32::MAX),
            std::time::Duration::from_nanos(until_full),
        )
    }

    /// Take a token at `now` (nanoseconds since the bucket was made), if there is one.
    pub fn try_take_at(&self, now: u64) -> bool {
        let mut full_at = self.full_at.load(Ordering::Relaxed);
        loop {
            let next = full_at.max(now).saturating_add(self.cost_ns);
            if next - now > self.capacity_ns {
                return false;
            }
            match self.full_at.compare_exchange_weak(
                full_at,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(current) => full_at = current,
            }
        }
    }
}

/// Buckets by (name, settings): a filter's path within its listener, or a `share_key`.
#[derive(Default)]
pub struct BucketRegistry {
    live: Mutex<HashMap<(String, Settings), Weak<TokenBucket>>>,
}

impl BucketRegistry {
    /// The bucket of `name` with `settings`: the one alive, else a new (full) one.
    pub fn bucket(&self, name: &str, settings: &Settings) -> Arc<TokenBucket> {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        live.retain(|_, b| b.strong_count() > 0);
        let key = (name.to_owned(), *settings);
        if let Some(b) = live.get(&key).and_then(Weak::upgrade) {
            return b;
        }
        let b = Arc::new(TokenBucket::new(settings));
        live.insert(key, Arc::downgrade(&b));
        b
    }

    /// The process's buckets by `share_key`, as Envoy's `SharedRateLimitSingleton`: network
    /// filters with the same key and settings share one, whatever their listener.
    pub fn shared() -> &'static BucketRegistry {
        static SHARED: OnceLock<BucketRegistry> = OnceLock::new();
        SHARED.get_or_init(BucketRegistry::default)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const MS: u64 = 1_000_000;

    fn settings(max_tokens: u32, tokens_per_fill: u32, fill_ms: u64) -> Settings {
        Settings {
            max_tokens,
            tokens_per_fill,
            fill_interval: Duration::from_millis(fill_ms),
        }
    }

    fn take_all(b: &TokenBucket, now: u64) -> u32 {
        let mut n = 0;
        while b.try_take_at(now) {
            n += 1;
            assert!(n < 1000, "bucket never empties");
        }
        n
    }

    #[test]
    fn starts_full_and_empties() {
        let b = TokenBucket::new(&settings(3, 1, 60_000));
        assert_eq!(take_all(&b, 0), 3);
        assert!(!b.try_take_at(59_999 * MS));
        assert!(b.try_take_at(60_000 * MS));
        assert!(!b.try_take_at(60_000 * MS));
    }

    /// Envoy 1.39's bucket refills continuously, not a fill interval at a time: with 2 tokens
    /// per 2 s, one token is back after 1 s (measured against Envoy: 200 200 000 at 0 s, 200 000
    /// at 1.1 s, 200 000 at 2.1 s).
    #[test]
    fn refills_continuously_as_envoy_does() {
        let b = TokenBucket::new(&settings(2, 2, 2000));
        assert_eq!(take_all(&b, 0), 2);
        assert_eq!(take_all(&b, 1100 * MS), 1);
        assert_eq!(take_all(&b, 2100 * MS), 1);
        // Idle long enough, the bucket is full, never fuller.
        assert_eq!(take_all(&b, 60_000 * MS), 2);
    }

    #[test]
    fn remaining_counts_whole_tokens() {
        let b = TokenBucket::new(&settings(3, 1, 1000));
        assert_eq!(b.remaining_at(0), (3, Duration::ZERO));
        assert!(b.try_take_at(0));
        assert!(b.try_take_at(0));
        assert_eq!(b.remaining_at(0), (1, Duration::from_secs(2)));
        assert_eq!(b.remaining_at(1500 * MS), (2, Duration::from_millis(500)));
    }

    #[test]
    fn tokens_per_fill_above_max_is_capped() {
        let b = TokenBucket::new(&settings(3, 10, 100));
        assert_eq!(take_all(&b, 0), 3);
        assert_eq!(take_all(&b, 1000 * MS), 3);
    }

    #[test]
    fn zero_max_tokens_refuses_everything() {
        let b = TokenBucket::new(&settings(0, 1, 10));
        assert!(!b.try_take_at(0));
        assert!(!b.try_take_at(u64::MAX / 8));
    }

    #[test]
    fn threads_share_one_bucket() {
        let b = Arc::new(TokenBucket::new(&settings(1000, 1, 3_600_000)));
        let taken: u32 = (0..4)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || (0..500).filter(|_| b.try_take_at(0)).count() as u32)
            })
            .map(|t| t.join().unwrap())
            .sum();
        assert_eq!(taken, 1000);
    }

    #[test]
    fn registry_keeps_a_live_bucket_per_name_and_settings() {
        let r = BucketRegistry::default();
        let s = settings(1, 1, 60_000);
        let a = r.bucket("f[0]", &s);
        assert!(a.try_take_at(0));
        // Same filter, same settings: the same (empty) bucket.
        let again = r.bucket("f[0]", &s);
        assert!(Arc::ptr_eq(&a, &again));
        // Other settings or another filter: a bucket of its own.
        assert!(!Arc::ptr_eq(&a, &r.bucket("f[0]", &settings(2, 1, 60_000))));
        assert!(!Arc::ptr_eq(&a, &r.bucket("f[1]", &s)));
        // Once nothing holds it, it goes, and the next one starts full.
        drop((a, again));
        assert!(r.bucket("f[0]", &s).try_take_at(0));
    }
}
