//! Where the tests find crypto_mb: the engine looks only where it is told, so the tests tell it.

use std::path::PathBuf;

use quickshake_keyprovider::EngineOptions;

/// `QUICKSHAKE_CRYPTO_MB_DIR` (which `scripts/test` exports), else the development install of
/// `scripts/install-crypto-mb` (`<repo>/.deps/crypto_mb`).
pub fn dev_dir() -> PathBuf {
    quickshake_test_support::paths::crypto_mb_dir()
}

/// Engine options naming [`dev_dir`] as crypto_mb's directory.
pub fn dev_options() -> EngineOptions {
    EngineOptions {
        crypto_mb_dir: Some(dev_dir()),
        ..EngineOptions::default()
    }
}
