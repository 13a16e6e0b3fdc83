//! The crate's error type: each variant names the config field and, for keys, the file.

/// Provider errors: each names the config field and, for keys, the file.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    #[error("{field}: {file}: {reason}")]
    Key {
        field: String,
        file: String,
        reason: String,
    },
    #[error(transparent)]
    Config(#[from] quickshake_config::ConfigError),
}
