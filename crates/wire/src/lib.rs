//! Pure parsers of untrusted bytes from the network: the TLS ClientHello's server name (to pick
//! a filter chain before the handshake), the PROXY protocol header, and DER ([`der`]) with the
//! OCSP responses a server staples ([`ocsp`]; they come from a CA's responder through the
//! operator's files).
//!
//! This crate owns parsing only: it never reads from a socket, never allocates more than its
//! input, never panics on any input (fuzzed: `fuzz/`), and does not link BoringSSL, so fuzz
//! builds stay quick.
#![forbid(unsafe_code)]

pub mod client_hello;
pub mod der;
pub mod ocsp;
pub mod proxy_protocol;
