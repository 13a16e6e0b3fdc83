//! `quickshake-control` owns configuration applied while the gateway serves, and what the
//! admin endpoint sees of it: configuration from a control plane (`dynamic`, the xDS client's
//! `Sink`: clusters, listeners and route tables reconciled with what runs, by fingerprint),
//! certificate rotation without restarts (`reload`), the configuration's clusters turned into
//! the upstream crate's cluster manager (`clusters`), and the running gateway as the admin
//! endpoint shows it (`admin_state`).
//!
//! It must not accept connections or run workers (`quickshake-server` does; this crate asks its
//! `Workers` to listen), serve HTTP (`quickshake-http`), speak xDS on the wire
//! (`quickshake-xds`), or parse configuration (`quickshake-config`).
#![forbid(unsafe_code)]

pub mod admin_state;
pub mod clusters;
mod dynamic;
pub mod reload;

pub use dynamic::{DynamicConfig, ListenerView};
