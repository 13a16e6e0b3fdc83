//! The error of building server TLS contexts (a leaf: every module may use it).

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
