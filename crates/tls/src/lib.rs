//! The one home of quickshake's BoringSSL glue: server `SSL_CTX`s built from Envoy's
//! `DownstreamTlsContext` (certificates, versions, ciphers, groups, ALPN, mTLS, resumption),
//! certificate selection per ClientHello, SNI reading for filter-chain selection, and Envoy's
//! `ssl.*` handshake statistics.
//!
//! It must not own sockets, workers or HTTP, and it never computes with private keys itself:
//! an in-process key goes to BoringSSL, a provider-held key goes to `quickshake-keyprovider`.
//! `unsafe` is allowed in exactly one place (`tickets.rs`, a BoringSSL call `boring` does not
//! wrap), marked `// SAFETY:`.
#![deny(unsafe_code)]

pub mod certs;
/// Re-exported from `quickshake-wire`, where the parser lives (no BoringSSL, fuzzed).
pub use quickshake_wire::client_hello;
pub mod context;
pub mod handshake_stats;
#[allow(unsafe_code)]
mod tickets;

pub use certs::{CertInfo, KeyKind};
pub use context::{build_chain_tls, ChainTls, LoadedCert};
pub use handshake_stats::HandshakeStats;
pub use tickets::boringssl_ticket_key;

/// Errors building TLS contexts. Each names the config field and, for files, the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(transparent)]
    Config(#[from] quickshake_config::ConfigError),
    #[error("{field}: {file}: {reason}")]
    File {
        field: String,
        file: String,
        reason: String,
    },
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    #[error("{field}: BoringSSL error: {source}")]
    Ssl {
        field: String,
        source: boring::error::ErrorStack,
    },
    #[error(transparent)]
    Provider(#[from] quickshake_keyprovider::ProviderError),
}
