//! The load itself: TLS client setup, one request per new connection (or keep-alive; or per
//! new QUIC connection with `--h3`),
//! closed and open loops, the timed window, snapshots of CPU and server counters.
//!
//! Split by seam: `config` is the run's [`Config`], `shared` the state every task of a run
//! shares (the phase: warm-up, measuring, done; the `-n` budget, the tallies and histograms,
//! idle keep-alive connections), `tls` builds the TLS client, `conn` is an open connection
//! and how a request on one fails, `request` opens a connection and makes one request on it,
//! `h1` reads an HTTP/1.x response, `quic` makes one HTTP/3 request on a new QUIC connection
//! (`--h3`, over `crate::h3`'s socket-free exchange), `loops` drives requests closed-loop or on an open-loop
//! timetable, `window` runs the whole measurement window and turns it into
//! [`RunData`](crate::report::RunData). This module only declares and re-exports.

mod config;
mod conn;
mod h1;
mod loops;
mod quic;
mod request;
mod shared;
mod tls;
mod window;

pub use config::Config;
pub use tls::{build_connector, build_quic_context, Alpn, TlsOptions, TlsVersion};
pub use window::run;
