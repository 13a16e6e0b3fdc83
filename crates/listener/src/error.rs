//! The data path's error type (building listeners, binding sockets, starting workers): each
//! variant names the config field, file or address at fault.

use std::net::SocketAddr;

/// Errors starting the data path. Each names the config field, file or address at fault.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Tls(#[from] quickshake_tls::TlsError),
    #[error(transparent)]
    Http(#[from] quickshake_http::HttpError),
    #[error(transparent)]
    Config(#[from] quickshake_config::ConfigError),
    #[error("{field}: cannot listen on {address}: {source}")]
    Bind {
        field: String,
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    #[error("cannot start worker thread: {0}")]
    Thread(std::io::Error),
}
