//! Consistent-hash balancing (Envoy's ring hash and Maglev): a table built from the candidate
//! hosts' addresses, looked up with the request's hash ([`crate::RequestHash`]). Tables are
//! cached per candidate list and rebuilt only when the list changes.
//!
//! Ring: each host contributes `ceil(scale)` points, `scale` being `minimum_ring_size / hosts`
//! capped by `maximum_ring_size / hosts`, each point the xxHash64 of `"<ip:port>_<i>"`; a hash
//! goes to the first point at or after it (wrapping). Maglev: Envoy's permutation table
//! (offset `xxHash64(addr, 0)`, skip `xxHash64(addr, 1)`), a hash goes to `table[hash % size]`.

use std::net::SocketAddr;

/// A built lookup table over hosts `0..n` (indices into the candidate list).
#[derive(Debug)]
pub(crate) enum HashTable {
    /// Sorted `(point, host index)`.
    Ring(Vec<(u64, usize)>),
    Maglev(Vec<usize>),
}

impl HashTable {
    /// Envoy's ring: `min_ring` points at least (each host the same share), `max_ring` at most.
    pub(crate) fn ring(hosts: &[SocketAddr], min_ring: u64, max_ring: u64) -> HashTable {
        let n = hosts.len().max(1) as u64;
        let per_host = min_ring.div_ceil(n).min((max_ring / n).max(1));
        let mut ring = Vec::with_capacity((per_host * n) as usize);
        for (i, h) in hosts.iter().enumerate() {
            let prefix = format!("{h}_");
            for k in 0..per_host {
                let key = format!("{prefix}{k}");
                ring.push((xxhash64(key.as_bytes(), 0), i));
            }
        }
        ring.sort_unstable();
        HashTable::Ring(ring)
    }

    /// Envoy's Maglev table of `size` entries (a prime).
    pub(crate) fn maglev(hosts: &[SocketAddr], size: u64) -> HashTable {
        let size = size.max(1) as usize;
        if hosts.is_empty() {
            return HashTable::Maglev(Vec::new());
        }
        let perms: Vec<(u64, u64)> = hosts
            .iter()
            .map(|h| {
                let key = h.to_string();
                let offset = xxhash64(key.as_bytes(), 0) % size as u64;
                let skip = xxhash64(key.as_bytes(), 1) % (size as u64 - 1).max(1) + 1;
                (offset, skip)
            })
            .collect();
        let mut table = vec![usize::MAX; size];
        let mut next = vec![0u64; hosts.len()];
        let mut filled = 0;
        'fill: loop {
            for (i, &(offset, skip)) in perms.iter().enumerate() {
                loop {
                    let c = ((offset + skip * next[i]) % size as u64) as usize;
                    next[i] += 1;
                    if table[c] == usize::MAX {
                        table[c] = i;
                        filled += 1;
                        break;
                    }
                }
                if filled == size {
                    break 'fill;
                }
            }
        }
        HashTable::Maglev(table)
    }

    /// The host index for `hash`.
    pub(crate) fn lookup(&self, hash: u64) -> Option<usize> {
        match self {
            HashTable::Ring(ring) => {
                let at = ring.partition_point(|&(p, _)| p < hash);
                ring.get(at).or_else(|| ring.first()).map(|&(_, i)| i)
            }
            HashTable::Maglev(t) if t.is_empty() => None,
            HashTable::Maglev(t) => t.get((hash % t.len() as u64) as usize).copied(),
        }
    }
}

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

fn read64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

fn read32(b: &[u8]) -> u64 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u64::from(u32::from_le_bytes(a))
}

fn round(acc: u64, lane: u64) -> u64 {
    acc.wrapping_add(lane.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

fn merge(acc: u64, v: u64) -> u64 {
    (acc ^ round(0, v)).wrapping_mul(P1).wrapping_add(P4)
}

/// xxHash64 (the hash Envoy's `HashUtil::xxHash64` uses for hash policies and its ring).
pub fn xxhash64(input: &[u8], seed: u64) -> u64 {
    let mut rest = input;
    let mut h = if input.len() >= 32 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        while rest.len() >= 32 {
            for (i, lane) in v.iter_mut().enumerate() {
                *lane = round(*lane, read64(&rest[i * 8..]));
            }
            rest = &rest[32..];
        }
        let mut h = v[0]
            .rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18));
        for lane in v {
            h = merge(h, lane);
        }
        h
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(input.len() as u64);
    while rest.len() >= 8 {
        h ^= round(0, read64(rest));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        rest = &rest[8..];
    }
    if rest.len() >= 4 {
        h ^= read32(rest).wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        rest = &rest[4..];
    }
    for &b in rest {
        h ^= u64::from(b).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xxhash64_reference_vectors() {
        // From the xxHash reference implementation (XXH64, seed 0 unless noted).
        assert_eq!(xxhash64(b"", 0), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxhash64(b"a", 0), 0xD24E_C4F1_A98C_6E5B);
        assert_eq!(xxhash64(b"abc", 0), 0x44BC_2CF5_AD77_0999);
        assert_eq!(
            xxhash64(b"Nobody inspects the spammish repetition", 0),
            0xFBCE_A83C_8A37_8BF1
        );
    }

    fn hosts(n: u16) -> Vec<SocketAddr> {
        (0..n)
            .map(|i| SocketAddr::from(([10, 0, 0, 1], 8000 + i)))
            .collect()
    }

    fn spread(t: &HashTable, n: usize) -> Vec<usize> {
        let mut counts = vec![0; n];
        for k in 0..10_000u32 {
            let h = xxhash64(format!("user-{k}").as_bytes(), 0);
            counts[t.lookup(h).unwrap_or(usize::MAX)] += 1;
        }
        counts
    }

    #[test]
    fn ring_and_maglev_spread_and_are_stable() {
        let hs = hosts(4);
        for t in [
            HashTable::ring(&hs, 1024, 8 * 1024 * 1024),
            HashTable::maglev(&hs, 65537),
        ] {
            let counts = spread(&t, 4);
            assert!(counts.iter().all(|&c| c > 1500), "{counts:?}");
            let h = xxhash64(b"alice", 0);
            assert_eq!(t.lookup(h), t.lookup(h));
        }
    }

    #[test]
    fn removing_a_host_moves_only_its_keys() {
        let all = hosts(4);
        let fewer = &all[..3];
        for (a, b) in [
            (
                HashTable::ring(&all, 1024, 1 << 23),
                HashTable::ring(fewer, 1024, 1 << 23),
            ),
            (
                HashTable::maglev(&all, 65537),
                HashTable::maglev(fewer, 65537),
            ),
        ] {
            let mut moved = 0;
            for k in 0..4000u32 {
                let h = xxhash64(format!("k{k}").as_bytes(), 0);
                let (x, y) = (a.lookup(h), b.lookup(h));
                if x != Some(3) && x != y {
                    moved += 1;
                }
            }
            // Maglev (and the ring, whose per-host points grow) move a few more than the
            // removed host's keys; nowhere near a rehash (3/4 of them).
            assert!(moved < 600, "{moved} keys moved");
        }
    }
}
