//! Why crypto_mb cannot be used in this process: a leaf the loader and the engine both name.

use std::path::PathBuf;

/// Why crypto_mb cannot be used in this process.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoMbUnavailable {
    #[error(
        "crypto_mb is not installed (looked in {} and the system library path; run scripts/install-crypto-mb)",
        show_paths(.looked)
    )]
    NotInstalled { looked: Vec<PathBuf> },
    #[error("crypto_mb failed to load from {path}: {reason}")]
    LoadFailed { path: PathBuf, reason: String },
    #[error("crypto_mb is not applicable on this CPU: needs AVX-512 IFMA")]
    NotApplicable,
    #[error("crypto_mb is hidden by QUICKSHAKE_HIDE_ENGINES (--hide-engines)")]
    Hidden,
}

impl CryptoMbUnavailable {
    /// The human reason, as shown by `quickshake doctor`.
    pub fn reason(&self) -> String {
        self.to_string()
    }
}

fn show_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "no directory".to_string();
    }
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
