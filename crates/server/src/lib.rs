//! `quickshake-server` owns the L4 runtime and the TCP handshake: starting the gateway (build
//! every listener, bind it once per worker with SO_REUSEPORT, more added while running, the
//! drain handle: `gateway`), the workers (a runtime per worker: `worker`, with the idle-class
//! handshake hand-off in `handoff`), and one TCP connection from accept to its network filter
//! (`connection`: the global and listener admission, the PROXY protocol header, filter-chain
//! selection by SNI, the TLS handshake, then HTTP or `tcp_proxy`). Workers also run the QUIC
//! endpoints (`quickshake-quic`) of their listeners.
//!
//! It must not serve HTTP itself (the connection manager is `quickshake-http`), speak QUIC
//! (`quickshake-quic`), define listener state, chain selection or admission
//! (`quickshake-listener`), apply configuration from a control plane (`quickshake-control`),
//! parse configuration (`quickshake-config`), touch BoringSSL beyond driving a handshake
//! (`quickshake-tls`), or compute with private keys (`quickshake-keyprovider`).
#![forbid(unsafe_code)]

mod connection;
mod gateway;
mod handoff;
mod options;
mod prefixed;
mod worker;

pub use gateway::{build_listeners, DrainHandle, Gateway, ListenerStop, Workers};
pub use options::{GatewayOptions, HandshakePriority};
pub use quickshake_listener::StoppedListeners;
