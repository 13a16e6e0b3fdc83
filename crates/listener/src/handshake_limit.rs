//! TLS handshakes in progress, counted per client source and shared by every worker
//! (SO_REUSEPORT spreads one client's connections over all of them): the table behind
//! `quickshake.filters.listener.handshake_limit`. A connection takes a [`HandshakeSlot`] before
//! any TLS work and holds it until its handshake ends, however it ends (done, failed, timed
//! out, closed): the slot gives its place back when dropped.
//!
//! A source is an IPv4 address, or an IPv6 /64: one subscriber or host usually holds a whole
//! /64, and could otherwise spread a flood over 2^64 addresses. An IPv4-mapped IPv6 address
//! (`::ffff:a.b.c.d`, a dual-stack socket's view of an IPv4 client) is that IPv4 address.
//!
//! Entries exist only while a source has a handshake in progress, so the table is bounded by
//! the connections being served. It is split into shards, each behind its own lock, so that
//! workers admitting different sources rarely wait on each other.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

const SHARDS: usize = 16;

/// Whom a handshake is counted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Source {
    V4(u32),
    /// The upper 64 bits of an IPv6 address.
    V6Prefix(u64),
}

impl Source {
    pub(crate) fn of(ip: IpAddr) -> Source {
        match ip {
            IpAddr::V4(a) => Source::V4(u32::from(a)),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => Source::V4(u32::from(v4)),
                None => Source::V6Prefix((u128::from(a) >> 64) as u64),
            },
        }
    }
}

/// Handshakes in progress per source.
pub struct HandshakeTable {
    shards: Vec<Mutex<HashMap<Source, u32>>>,
    hasher: RandomState,
}

impl HandshakeTable {
    pub fn new() -> Arc<Self> {
        Arc::new(HandshakeTable {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
        })
    }

    fn shard(&self, source: &Source) -> &Mutex<HashMap<Source, u32>> {
        let i = (self.hasher.hash_one(source) as usize) % self.shards.len();
        &self.shards[i]
    }

    /// A place among `ip`'s handshakes in progress, unless it already has `max`.
    pub fn try_acquire(self: &Arc<Self>, ip: IpAddr, max: u32) -> Option<HandshakeSlot> {
        let source = Source::of(ip);
        let mut shard = self
            .shard(&source)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let n = shard.entry(source).or_insert(0);
        if *n >= max {
            if *n == 0 {
                shard.remove(&source);
            }
            return None;
        }
        *n += 1;
        Some(HandshakeSlot {
            table: self.clone(),
            source,
        })
    }

    /// Handshakes in progress for `ip`'s source.
    pub fn in_progress(&self, ip: IpAddr) -> u32 {
        let source = Source::of(ip);
        let shard = self
            .shard(&source)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        shard.get(&source).copied().unwrap_or(0)
    }

    /// Sources with a handshake in progress.
    pub fn sources(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }

    fn release(&self, source: Source) {
        let mut shard = self
            .shard(&source)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = shard.get_mut(&source) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                shard.remove(&source);
            }
        }
    }
}

/// One handshake in progress; its place is given back on drop.
pub struct HandshakeSlot {
    table: Arc<HandshakeTable>,
    source: Source,
}

impl Drop for HandshakeSlot {
    fn drop(&mut self) {
        self.table.release(self.source);
    }
}

impl std::fmt::Debug for HandshakeSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandshakeSlot")
            .field("source", &self.source)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn limits_one_source_and_not_the_others() {
        let t = HandshakeTable::new();
        let a = ip("127.0.0.2");
        let mut held: Vec<_> = (0..3).map(|_| t.try_acquire(a, 3).unwrap()).collect();
        assert!(t.try_acquire(a, 3).is_none());
        assert_eq!(t.in_progress(a), 3);
        // Another source is unaffected.
        let other = t.try_acquire(ip("127.0.0.1"), 3);
        assert!(other.is_some());
        // One handshake ends: one place again.
        held.pop();
        let again = t.try_acquire(a, 3);
        assert!(again.is_some());
        assert!(t.try_acquire(a, 3).is_none());
    }

    #[test]
    fn entries_go_when_the_last_handshake_ends() {
        let t = HandshakeTable::new();
        let slots: Vec<_> = ["10.0.0.1", "10.0.0.2", "2001:db8::1"]
            .iter()
            .map(|s| t.try_acquire(ip(s), 1).unwrap())
            .collect();
        assert_eq!(t.sources(), 3);
        drop(slots);
        assert_eq!(t.sources(), 0);
        assert_eq!(t.in_progress(ip("10.0.0.1")), 0);
        // A refusal leaves nothing behind either.
        assert!(t.try_acquire(ip("10.0.0.9"), 0).is_none());
        assert_eq!(t.sources(), 0);
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        assert_eq!(
            Source::of(ip("2001:db8:1:2::1")),
            Source::of(ip("2001:db8:1:2:ffff:eeee:dddd:cccc"))
        );
        assert_ne!(
            Source::of(ip("2001:db8:1:2::1")),
            Source::of(ip("2001:db8:1:3::1"))
        );
        assert_eq!(
            Source::of(ip("::ffff:192.0.2.7")),
            Source::of(ip("192.0.2.7"))
        );
        let t = HandshakeTable::new();
        let _a = t.try_acquire(ip("2001:db8::1"), 2).unwrap();
        let _b = t.try_acquire(ip("2001:db8::2"), 2).unwrap();
        assert!(t.try_acquire(ip("2001:db8::3"), 2).is_none());
        assert!(t.try_acquire(ip("2001:db8:0:1::3"), 2).is_some());
    }

    #[test]
    fn workers_share_the_count() {
        let t = HandshakeTable::new();
        let a = ip("192.0.2.1");
        let held: Vec<HandshakeSlot> = (0..8)
            .map(|_| {
                let t = t.clone();
                std::thread::spawn(move || {
                    (0..100)
                        .filter_map(|_| t.try_acquire(a, 50))
                        .collect::<Vec<_>>()
                })
            })
            .flat_map(|h| h.join().unwrap())
            .collect();
        assert_eq!(held.len(), 50);
        drop(held);
        assert_eq!(t.sources(), 0);
    }
}
