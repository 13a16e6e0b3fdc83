//! Segmentation offload, the pure part: which of the packets quiche wrote one after another
//! go out together in one GSO send ([`plan`]), and the datagrams a GRO buffer holds
//! ([`datagrams`]). The socket calls are in [`crate::udp`].
//!
//! A GSO send is one buffer the kernel cuts into datagrams of `segment` bytes for one peer,
//! the last one possibly shorter (Linux `UDP_SEGMENT`); so a batch is consecutive packets to
//! one address, all the size of the first but the last, at most the socket's segment limit
//! and [`MAX_GSO_BYTES`] in all. A packet that does not fit starts the next batch.

use std::net::SocketAddr;

/// Most bytes one GSO send carries: an IPv4 datagram's largest UDP payload (the kernel builds
/// the whole send as one IP packet before it segments it).
pub(crate) const MAX_GSO_BYTES: usize = 65_507;

/// Packets sent together: `len` bytes from `start` of the write buffer, cut every `segment`
/// bytes, to `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Batch {
    pub start: usize,
    pub len: usize,
    pub segment: usize,
    pub count: usize,
    pub to: SocketAddr,
}

/// Group `packets` (their sizes and destinations, in the order they lie in the buffer) into
/// GSO sends of at most `max_segments` datagrams (1 where the kernel has no GSO: one send per
/// packet, as without offload).
pub(crate) fn plan(packets: &[(usize, SocketAddr)], max_segments: usize) -> Vec<Batch> {
    let mut out: Vec<Batch> = Vec::new();
    // Whether the last batch may take more packets (a short one closes it).
    let mut open = false;
    let mut start = 0;
    for &(n, to) in packets {
        let joined = match out.last_mut() {
            Some(b)
                if open
                    && b.to == to
                    && n <= b.segment
                    && b.count < max_segments
                    && b.len + n <= MAX_GSO_BYTES =>
            {
                b.len += n;
                b.count += 1;
                open = n == b.segment;
                true
            }
            _ => false,
        };
        if !joined {
            out.push(Batch {
                start,
                len: n,
                segment: n,
                count: 1,
                to,
            });
            open = n > 0;
        }
        start += n;
    }
    out
}

/// The datagrams of a received buffer: `stride` bytes each, the last possibly shorter (GRO);
/// the whole buffer when `stride` covers it (no GRO, or one datagram).
pub(crate) fn datagrams(buf: &[u8], stride: usize) -> std::slice::Chunks<'_, u8> {
    let stride = if stride == 0 {
        buf.len().max(1)
    } else {
        stride
    };
    buf.chunks(stride)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn same_size_packets_to_one_peer_go_together_the_last_may_be_shorter() {
        let a = addr(1);
        let packets = [
            (1350, a),
            (1350, a),
            (1350, a),
            (700, a),
            (1350, a),
            (90, a),
        ];
        let b = plan(&packets, 64);
        assert_eq!(b.len(), 2, "{b:?}");
        assert_eq!(
            (b[0].start, b[0].len, b[0].segment, b[0].count),
            (0, 4750, 1350, 4)
        );
        // The short packet closed the first batch; the next starts where it ended.
        assert_eq!(
            (b[1].start, b[1].len, b[1].segment, b[1].count),
            (4750, 1440, 1350, 2)
        );
    }

    #[test]
    fn a_larger_packet_another_peer_or_the_segment_limit_starts_a_new_batch() {
        let (a, c) = (addr(1), addr(2));
        let b = plan(&[(100, a), (1350, a), (1350, c), (1350, c), (1350, c)], 2);
        let shape: Vec<_> = b.iter().map(|b| (b.start, b.count, b.to)).collect();
        assert_eq!(shape, [(0, 1, a), (100, 1, a), (1450, 2, c), (4150, 1, c)]);
    }

    #[test]
    fn without_gso_every_packet_is_its_own_send() {
        let a = addr(1);
        let b = plan(&[(1350, a), (1350, a), (10, a)], 1);
        assert_eq!(b.iter().map(|b| b.count).sum::<usize>(), 3);
        assert_eq!(b.len(), 3);
    }

    #[test]
    fn a_batch_stays_under_the_largest_udp_payload() {
        let a = addr(1);
        let b = plan(&vec![(1350, a); 60], 64);
        assert!(b.iter().all(|b| b.len <= MAX_GSO_BYTES), "{b:?}");
        assert_eq!(b[0].count, MAX_GSO_BYTES / 1350);
        assert_eq!(b.iter().map(|b| b.count).sum::<usize>(), 60);
    }

    #[test]
    fn a_gro_buffer_splits_by_stride() {
        let buf: Vec<u8> = (0..250u8).collect();
        let parts: Vec<_> = datagrams(&buf, 100).map(<[u8]>::len).collect();
        assert_eq!(parts, [100, 100, 50]);
        assert_eq!(datagrams(&buf, 0).count(), 1);
        assert_eq!(datagrams(&buf, 1350).count(), 1);
    }
}
