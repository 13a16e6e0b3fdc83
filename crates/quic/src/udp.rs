//! A QUIC listener's worker socket with the kernel's segmentation offloads, through
//! `quinn-udp` (the quinn project's UDP layer, so this crate keeps no `unsafe` of its own):
//! GSO sends several same-size datagrams to one peer in one `sendmsg` ([`QuicIo::send`], the
//! batches planned by [`crate::gso::plan`]); GRO hands up several datagrams of one peer in one
//! buffer, which [`QuicIo::recv`]'s caller splits by stride; `recvmmsg` reads several buffers
//! per call. Where the kernel has neither, `quinn-udp` reports one segment each way and every
//! datagram is its own system call; a GSO send the kernel or the device refuses (EIO, EINVAL)
//! turns GSO off for the socket and is sent again one datagram at a time.
//!
//! Counted in `listener.<address>.http3.*`: `datagrams_received`, `datagrams_sent`,
//! `gro_batches` (received buffers holding more than one datagram) and `gso_sends` (sends
//! carrying more than one).

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;

use quickshake_tls::quic::MAX_UDP_PAYLOAD;
use quinn_udp::{RecvMeta, Transmit, UdpSocketState};
use tokio::io::Interest;
use tokio::net::UdpSocket;

use crate::gso::MAX_GSO_BYTES;
use crate::shared::QuicStats;

/// Buffers one receive call may fill (`recvmmsg`).
pub(crate) const RECV_BATCH: usize = 8;

/// A worker's UDP socket and what `quinn-udp` found the kernel offers on it.
pub(crate) struct QuicIo {
    socket: UdpSocket,
    state: UdpSocketState,
    stats: QuicStats,
}

impl QuicIo {
    /// Register `socket` with the runtime and turn on what the kernel offers (GRO, packet
    /// info); `quinn-udp` probes GSO.
    pub(crate) fn new(socket: std::net::UdpSocket, stats: QuicStats) -> io::Result<QuicIo> {
        let state = UdpSocketState::new((&socket).into())?;
        let socket = UdpSocket::from_std(socket)?;
        Ok(QuicIo {
            socket,
            state,
            stats,
        })
    }

    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Most datagrams one send carries: the kernel's GSO limit (1 without GSO), within
    /// [`MAX_GSO_BYTES`] of full-size packets.
    pub(crate) fn max_segments(&self) -> usize {
        self.state
            .max_gso_segments()
            .clamp(1, MAX_GSO_BYTES / MAX_UDP_PAYLOAD)
    }

    /// Datagrams the kernel may hand up in one buffer (1 without GRO).
    pub(crate) fn gro_segments(&self) -> usize {
        self.state.gro_segments()
    }

    /// Size of each receive buffer: a whole GRO batch, or the largest datagram.
    pub(crate) fn recv_buffer_len(&self) -> usize {
        (self.gro_segments() * MAX_UDP_PAYLOAD).max(u16::MAX as usize)
    }

    /// Fill up to [`RECV_BATCH`] buffers; `meta[i]` says who sent `bufs[i]`, its length and
    /// its stride (the size of each datagram in it).
    pub(crate) async fn recv(
        &self,
        bufs: &mut [Vec<u8>; RECV_BATCH],
        meta: &mut [RecvMeta; RECV_BATCH],
    ) -> io::Result<usize> {
        let n = self
            .socket
            .async_io(Interest::READABLE, || {
                let mut slices = bufs.each_mut().map(|b| IoSliceMut::new(b.as_mut_slice()));
                self.state.recv((&self.socket).into(), &mut slices, meta)
            })
            .await?;
        for m in meta.iter().take(n) {
            let count = m.len.div_ceil(m.stride.max(1)).max(1);
            self.stats.datagrams_received.add(count as u64);
            if count > 1 {
                self.stats.gro_batches.inc();
            }
        }
        Ok(n)
    }

    /// Send `contents` to `to`: datagrams of `segment` bytes (the last possibly shorter), in
    /// one GSO send when there are several. UDP errors are not the connection's: quiche
    /// retransmits what is lost, so they are logged (debug) and dropped.
    pub(crate) async fn send(&self, contents: &[u8], to: SocketAddr, segment: usize) {
        let segment = segment.max(1);
        let count = contents.len().div_ceil(segment).max(1);
        let sent = self
            .transmit(contents, to, (count > 1).then_some(segment))
            .await;
        match sent {
            Ok(()) => {
                self.stats.datagrams_sent.add(count as u64);
                if count > 1 {
                    self.stats.gso_sends.inc();
                }
            }
            // quinn-udp turned GSO off after the kernel refused this send: one at a time.
            Err(_) if count > 1 && self.state.max_gso_segments() == 1 => {
                for d in contents.chunks(segment) {
                    if self.transmit(d, to, None).await.is_ok() {
                        self.stats.datagrams_sent.inc();
                    }
                }
            }
            Err(e) => tracing::debug!(peer = %to, error = %e, "QUIC send failed"),
        }
    }

    async fn transmit(
        &self,
        contents: &[u8],
        to: SocketAddr,
        segment_size: Option<usize>,
    ) -> io::Result<()> {
        let t = Transmit {
            destination: to,
            ecn: None,
            contents,
            segment_size,
            src_ip: None,
        };
        self.socket
            .async_io(Interest::WRITABLE, || {
                self.state.try_send((&self.socket).into(), &t)
            })
            .await
    }
}
