//! The data path of the quickshake gateway: listeners and workers (`gateway`, `worker`, with
//! the idle-class handshake hand-off in `handoff`), per-connection PROXY protocol, filter-chain
//! selection by SNI and TLS handshakes (`connection`), HTTP/1.1 and HTTP/2 serving with Envoy's
//! route table (inline or installed by RDS through `HttpRuntime::set_routes`), direct responses
//! and redirects (`http`, `http_runtime`, `routing`), Envoy's path normalization
//! (`path_normalize`), the health-check and compressor HTTP filters (`filters`), forwarding
//! to upstream clusters with retries and WebSocket upgrades (`proxy`, `upgrade`), `tcp_proxy`,
//! access logs, certificate rotation (`reload`), configuration from a control plane applied
//! while serving (`dynamic`, the xDS client's sink), connection limits and graceful drain, and
//! admission before any TLS work (`admission`: Envoy's local rate limit filters on
//! `token_bucket`, quickshake's per-source handshake limit on `handshake_limit`).
//!
//! QUIC listeners serve HTTP/3 through the same connection manager (`quic`, on quiche, one UDP
//! socket per worker, connections routed to their worker by connection ID).
//!
//! It owns sockets and event loops. It must not parse configuration (that is
//! `quickshake-config`), touch BoringSSL beyond driving a handshake (`quickshake-tls`), or
//! compute with private keys (`quickshake-keyprovider`).
#![forbid(unsafe_code)]

pub mod access_log;
pub mod admin_state;
pub mod admission;
pub mod body;
pub mod clusters;
pub mod connection;
pub mod dynamic;
pub mod error;
pub mod filters;
pub mod gateway;
pub mod handoff;
pub mod handshake_limit;
pub mod header_mutation;
pub mod http;
pub mod http_runtime;
pub mod listener;
pub mod options;
pub mod path_normalize;
pub mod prefixed;
pub mod proxy;
pub mod quic;
pub mod reload;
pub mod routing;
pub mod shared;
pub mod tcp_proxy;
pub mod time;
pub mod token_bucket;
pub mod upgrade;
pub mod worker;

pub use dynamic::{DynamicConfig, ListenerView};
pub use error::ServerError;
pub use gateway::{build_listeners, DrainHandle, Gateway, Workers};
pub use listener::{ChainRuntime, ListenerShared};
pub use options::{GatewayOptions, HandshakePriority};
pub use shared::ServerShared;
