//! The one home of quickshake's BoringSSL glue, both directions.
//!
//! Server side: `SSL_CTX`s built from Envoy's `DownstreamTlsContext` (certificates, versions,
//! ciphers, groups, ALPN, mTLS, resumption), certificate selection per ClientHello, SNI reading
//! for filter-chain selection, OCSP stapling ([`ocsp`]), and Envoy's `ssl.*` handshake
//! statistics, failures classified here too ([`HandshakeStats::record_failure`]).
//!
//! Client side ([`client`]): the client context of an upstream connection (Envoy's
//! `UpstreamTlsContext`: trusted CAs and verification, SNI, ALPN offer, client certificate) and
//! the client handshake ([`ClientTls::connect`]); `quickshake-upstream` only dials and counts.
//!
//! What both directions need exists once: the trust store from PEM ([`ca_store_from_pem`]),
//! the SAN matchers' check in the verify callback ([`san`], `match_typed_subject_alt_names`),
//! the certificate chain parser ([`chain_from_pem`]) and ALPN's wire format ([`alpn`]).
//!
//! QUIC ([`quic`]): the quiche configuration of a QUIC listener, on the same BoringSSL contexts
//! (and so the same certificates and asynchronous key providers) as TLS over TCP.
//!
//! It must not own sockets, workers or HTTP, and it never computes with private keys itself:
//! an in-process key goes to BoringSSL, a provider-held key goes to `quickshake-keyprovider`.
//! `unsafe` is allowed in two places, each block marked `// SAFETY:`: `tickets.rs` (BoringSSL's
//! ticket key callback, which `boring` declares `unsafe`, and `OPENSSL_cleanse` for wiping
//! keys) and `key_share.rs` (`SSL_set_handshake_hints`, which `boring` does not wrap: the batched
//! key exchange's result handed to BoringSSL).
#![deny(unsafe_code)]

pub mod alpn;
pub mod certs;
pub mod client;
/// Re-exported from `quickshake-wire`, where the parser lives (no BoringSSL, fuzzed).
pub use quickshake_wire::client_hello;
pub mod context;
mod error;
pub mod handshake_stats;
mod key_share;
pub mod ocsp;
pub mod quic;
pub mod san;
pub mod session_id;
#[allow(unsafe_code)]
mod tickets;

pub use alpn::{encode_alpn, select_alpn, BadAlpnProtocol};
pub use certs::{ca_store_from_pem, chain_from_pem, CertInfo, KeyKind, PemChain, PemError};
pub use client::{ClientHandshakeError, ClientTls, ClientTlsError, ClientTlsOptions};
pub use context::{build_chain_tls, ChainTls, LoadedCert};
pub use error::TlsError;
pub use handshake_stats::HandshakeStats;
pub use ocsp::{OcspDetails, OcspStats};
pub use tickets::{ticket_outcome, TicketKeys, TicketOutcome};
