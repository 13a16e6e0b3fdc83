//! Where crypto_mb may come from: the one place the operator allowed. A leaf the loader, its
//! reasons for being unavailable and `doctor`'s probe all name.

use std::fmt;
use std::path::PathBuf;

use crate::options::EngineOptions;

/// The options that name the directory, for messages.
pub(super) const DIR_OPTION: &str = "--crypto-mb-dir (env QUICKSHAKE_CRYPTO_MB_DIR)";

/// Where crypto_mb is loaded from: the one place the operator allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CryptoMbSource {
    /// The directory named by [`EngineOptions::crypto_mb_dir`] (`--crypto-mb-dir`, env
    /// `QUICKSHAKE_CRYPTO_MB_DIR`): the libraries in it or in its `lib/`.
    Directory(PathBuf),
    /// No directory named: a plain `dlopen` of the SONAME (`LD_LIBRARY_PATH`, `ld.so.conf`).
    SystemLoader,
}

impl CryptoMbSource {
    /// The source `options` allow (an empty directory name counts as none).
    pub fn of(options: &EngineOptions) -> CryptoMbSource {
        match options.crypto_mb_dir.as_deref() {
            Some(d) if !d.as_os_str().is_empty() => CryptoMbSource::Directory(d.to_path_buf()),
            _ => CryptoMbSource::SystemLoader,
        }
    }
}

impl fmt::Display for CryptoMbSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CryptoMbSource::Directory(d) => write!(f, "{}", d.display()),
            CryptoMbSource::SystemLoader => f.write_str("system loader path"),
        }
    }
}
