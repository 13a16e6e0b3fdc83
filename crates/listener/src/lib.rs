//! `quickshake-listener` owns what TCP and QUIC listeners share: a listener's state as every
//! worker sees it (`ListenerShared`: its filter chains, admission filters, stats, swapped whole
//! on certificate rotation or a listener update), filter chains and their selection by SNI
//! (`chain`: TLS context, handshake timeout, rate limits, and the network filter, the HTTP
//! connection manager of `quickshake-http` or `tcp_proxy`), admission before any TLS work
//! (`admission`: Envoy's local rate limits, on `quickshake-http`'s token bucket, the per-source handshake limit in
//! `handshake_limit`), the global connection limit (`ServerShared`), binding one SO_REUSEPORT
//! socket per worker, and the data path's error type.
//!
//! It must not run event loops, accept connections or drive handshakes (that is
//! `quickshake-server` for TCP, `quickshake-quic` for QUIC), serve HTTP (`quickshake-http`), or
//! parse configuration (`quickshake-config`).
#![forbid(unsafe_code)]

mod admission;
mod chain;
mod error;
mod handshake_limit;
mod listener;
mod shared;
mod tcp_proxy;

pub use admission::Stage;
pub use chain::{select_chain, ChainRuntime, Network};
pub use error::ServerError;
pub use handshake_limit::HandshakeSlot;
pub use listener::{
    bind_reuseport, bind_reuseport_socket, probe_port_free, ListenerShared, ListenerStats,
    ListenerUpdate,
};
pub use shared::{ServerShared, StoppedListeners};
pub use tcp_proxy::{serve as serve_tcp_proxy, TcpProxyRuntime};
