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
    /// A key providers do not take (its type, size or exponent), or one BoringSSL cannot split.
    #[error("{field}: {file}: {source}")]
    KeyCheck {
        field: String,
        file: String,
        #[source]
        source: KeyError,
    },
    /// A `pkcs11` provider that cannot start.
    #[error("{field}: {source}")]
    Pkcs11 {
        field: String,
        #[source]
        source: crate::pkcs11::Pkcs11Error,
    },
    #[error(transparent)]
    Config(#[from] quickshake_config::ConfigError),
}

pub use crate::key_error::KeyError;
