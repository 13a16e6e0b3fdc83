//! `quickshake-quic` owns QUIC listeners (HTTP/3) on quiche: one SO_REUSEPORT UDP socket per worker, each read by
//! that worker's endpoint task ([`run_endpoint`]), which routes datagrams to connections by
//! destination connection ID, accepts new ones (Initial packets), answers unknown versions
//! and sends stateless Retry packets under load; each connection is a task on the same
//! worker ([`conn`]) that drives quiche and quiche's HTTP/3 and sends every request through
//! the connection manager ([`quickshake_http::handle_request`]), as TCP connections do, and
//! streams each response back as its body comes ([`respond`]). The socket uses the kernel's
//! GSO and GRO where it has them ([`udp`], batches planned in [`gso`]).
//!
//! The TLS side is `quickshake-tls`'s ([`quickshake_tls::quic`]): the filter chain is chosen by
//! SNI in the handshake, and its certificate's key (in process or a provider's asynchronous
//! method) signs: provider operations join this worker's queues, beside TCP handshakes'.
//!
//! Address validation: quiche limits what is sent to an unvalidated address to three times
//! what it received (RFC 9000 section 8.1). Retry tokens ([`quickshake_tls::quic::RetryTokens`])
//! are asked for when a worker has [`RETRY_ABOVE_HANDSHAKES`] or more handshakes in progress
//! (a flood of Initials), as Envoy's QUIC stack does under load; below that, a connection
//! starts with its first Initial (no extra round trip).
//!
//! What it shares with TCP listeners it takes from where both belong: the listener state,
//! filter chains and their selection by SNI, and the global connection limit from
//! `quickshake-listener`; the connection manager and per-connection facts from
//! `quickshake-http`. It must not accept TCP connections or start workers (`quickshake-server`
//! starts the endpoints on its workers), parse configuration (`quickshake-config`), or touch
//! BoringSSL beyond what `quickshake-tls`'s QUIC side offers.
#![forbid(unsafe_code)]

mod cid;
mod conn;
mod endpoint;
mod gso;
mod h3;
mod respond;
mod shared;
mod udp;

pub use endpoint::{bind_workers, probe_udp_port_free, run_endpoint, RETRY_ABOVE_HANDSHAKES};
pub use shared::{QuicShared, QuicSocket};
