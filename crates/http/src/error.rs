//! The HTTP connection manager's error type: each variant names the config field at fault.

/// Errors building a connection manager or a route table from the configuration.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
}
