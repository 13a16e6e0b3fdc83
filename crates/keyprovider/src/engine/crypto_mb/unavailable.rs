//! Why crypto_mb cannot be used in this process: a leaf the loader and the engine both name.

use std::path::PathBuf;

use super::source::{CryptoMbSource, DIR_OPTION};

/// Why crypto_mb cannot be used in this process.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoMbUnavailable {
    /// Not in the named directory (nor its `lib/`), or not on the system loader's path when
    /// none was named. The message names the option that sets the directory.
    #[error("crypto_mb is not installed {}", not_installed(.from))]
    NotInstalled { from: CryptoMbSource },
    /// The loader's or the library's own message (`dlerror`, a missing entry point); a string
    /// so that this reason stays comparable and cloneable.
    #[error("crypto_mb failed to load from {}: {reason}", path.display())]
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

/// Where it was looked for, and the option that says where to look.
fn not_installed(from: &CryptoMbSource) -> String {
    match from {
        CryptoMbSource::Directory(d) => format!(
            "in {} (looked in it and in its lib/); the directory is set by {DIR_OPTION}",
            d.display()
        ),
        CryptoMbSource::SystemLoader => format!(
            "on the system loader path (LD_LIBRARY_PATH, ld.so.conf); set {DIR_OPTION} to the \
             directory holding it (scripts/install-crypto-mb installs it into \
             <repo>/.deps/crypto_mb)"
        ),
    }
}
