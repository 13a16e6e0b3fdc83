//! `quickshake-admin` owns the Envoy-shaped admin HTTP endpoint: `/ready`,
//! `/stats` (text, JSON, Prometheus), `/stats/prometheus`, `/server_info`,
//! `/certs`, `/config_dump`, `/healthcheck/{fail,ok}`, `/drain_listeners`,
//! `/listeners`, `/logging`, `/runtime`, `/runtime_modify`, `/quitquitquit`, `/clusters` (text
//! and JSON, rendered by `clusters`) and `/help`, with Envoy's status codes and bodies. Routing
//! is the pure [`handle`] function; [`serve`] only carries it over HTTP/1.1.
//! It must not own server state or decide policy: everything it reports or
//! changes goes through [`AdminState`], which `quickshake-control` implements (and
//! which hands over config dumps already redacted). It must not render stats
//! itself — that is `quickshake-stats`.
#![forbid(unsafe_code)]

mod clusters;
mod handlers;
mod ops;
mod ops_types;
mod server;
mod state;

pub use clusters::{ClusterStatus, HostStatus, Thresholds};
pub use handlers::{handle, help_text, AdminError, AdminResponse, JSON, TEXT};
pub use ops_types::{ListenerInfo, LogControl, LogLevel, RuntimeLayer, UnknownLogger};
pub use server::serve;
pub use state::{AdminState, DrainListeners};

#[cfg(test)]
mod ops_tests;
#[cfg(test)]
mod tests;
