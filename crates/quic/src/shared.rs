//! What a QUIC listener's workers share (its options, retry token key, each worker's inbox,
//! its `http3.*` counters) and what one worker is given (its socket and inbox).

use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;

use quickshake_config::QuicOptions;
use quickshake_stats::{Counter, Store};
use quickshake_tls::quic::RetryTokens;
use tokio::sync::mpsc;

/// A datagram for a connection: its bytes and addresses.
pub(crate) struct Datagram {
    pub(crate) data: Vec<u8>,
    pub(crate) from: SocketAddr,
    pub(crate) to: SocketAddr,
}

/// `listener.<address>.http3.*`: what QUIC adds to a listener's counters (quickshake's own
/// names: Envoy's QUIC stack counts these in QUICHE's internal stats only).
#[derive(Clone)]
pub(crate) struct QuicStats {
    /// Datagrams that are not a QUIC packet, an Initial in a datagram under 1200 bytes, or a
    /// first Initial that does not decrypt: dropped, no connection state kept.
    pub(crate) malformed_packets: Counter,
    /// Retry packets sent (address validation under load).
    pub(crate) retry_sent: Counter,
    /// Initials with a token that is not a valid, unexpired Retry token for their address.
    pub(crate) invalid_retry_token: Counter,
    /// Datagrams that reached another worker's socket and were passed to the connection's own.
    pub(crate) packets_forwarded: Counter,
    /// Connections closed by the idle timeout (`quic_options.idle_timeout`).
    pub(crate) idle_timeout: Counter,
    /// Datagrams read from the socket (each datagram of a GRO buffer counts).
    pub(crate) datagrams_received: Counter,
    /// Datagrams written to the socket (each segment of a GSO send counts).
    pub(crate) datagrams_sent: Counter,
    /// Received buffers that held more than one datagram (GRO).
    pub(crate) gro_batches: Counter,
    /// Sends that carried more than one datagram (GSO).
    pub(crate) gso_sends: Counter,
}

impl QuicStats {
    pub(crate) fn new(store: &Store, scope: &str) -> Self {
        let c = |n: &str| store.counter(&format!("{scope}http3.{n}"));
        QuicStats {
            malformed_packets: c("malformed_packets"),
            retry_sent: c("retry_sent"),
            invalid_retry_token: c("invalid_retry_token"),
            packets_forwarded: c("packets_forwarded"),
            idle_timeout: c("idle_timeout"),
            datagrams_received: c("datagrams_received"),
            datagrams_sent: c("datagrams_sent"),
            gro_batches: c("gro_batches"),
            gso_sends: c("gso_sends"),
        }
    }
}

/// What every worker shares about one QUIC listener.
pub struct QuicShared {
    /// `quic_options`: a control plane may change them while the listener runs (new
    /// connections get the new ones, see [`QuicShared::set_options`]).
    opts: ArcSwap<QuicOptions>,
    pub(crate) tokens: RetryTokens,
    /// Each worker's inbox, for datagrams another worker received for its connections.
    pub(crate) inboxes: Vec<mpsc::UnboundedSender<Datagram>>,
    pub(crate) stats: QuicStats,
}

impl QuicShared {
    pub(crate) fn new(
        opts: QuicOptions,
        tokens: RetryTokens,
        inboxes: Vec<mpsc::UnboundedSender<Datagram>>,
        stats: QuicStats,
    ) -> Self {
        QuicShared {
            opts: ArcSwap::from_pointee(opts),
            tokens,
            inboxes,
            stats,
        }
    }

    /// The options new connections are made with.
    pub fn options(&self) -> Arc<QuicOptions> {
        self.opts.load_full()
    }

    /// New `quic_options` from a control plane: each worker's endpoint rebuilds its quiche
    /// configuration before its next new connection; open connections keep theirs.
    pub fn set_options(&self, opts: QuicOptions) {
        self.opts.store(Arc::new(opts));
    }
}

/// One worker's socket of a QUIC listener.
pub struct QuicSocket {
    pub(crate) socket: std::net::UdpSocket,
    pub shared: Arc<QuicShared>,
    pub(crate) inbox: mpsc::UnboundedReceiver<Datagram>,
    pub(crate) worker: usize,
}
