//! Where the test material lives: the one `testdata/` root of the workspace (certificates made
//! by `testdata/gen-certs.sh`, configs, NIST vectors, rendered bootstraps, OCSP responses, the
//! multi-buffer key corpus) and the workspace's `target/`.

use std::path::{Path, PathBuf};

/// The workspace root (this crate sits at `crates/test-support`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `testdata/<rel>`.
pub fn testdata(rel: &str) -> PathBuf {
    workspace_root().join("testdata").join(rel)
}

/// The committed test certificates (`testdata/certs`, made by `testdata/gen-certs.sh`).
pub fn certs_dir() -> PathBuf {
    testdata("certs")
}

/// The path of `testdata/certs/<name>`, as a string (for configs and command lines).
pub fn cert(name: &str) -> String {
    certs_dir().join(name).display().to_string()
}

/// The bytes of `testdata/certs/<name>`; panics naming the file when it cannot be read.
pub fn read_cert(name: &str) -> Vec<u8> {
    let path = certs_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text of `testdata/certs/<name>`.
pub fn read_cert_text(name: &str) -> String {
    String::from_utf8(read_cert(name)).unwrap_or_else(|e| panic!("{name}: not UTF-8: {e}"))
}

/// The workspace's `target/` (or `CARGO_TARGET_DIR`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// A scratch directory under `target/tmp` (what `CARGO_TARGET_TMPDIR` names for integration
/// tests), created if missing.
pub fn target_tmp() -> PathBuf {
    let dir = target_dir().join("tmp");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// Where the tests find crypto_mb: `QUICKSHAKE_CRYPTO_MB_DIR` (which `scripts/test` exports),
/// else the development install of `scripts/install-crypto-mb` (`.deps/crypto_mb`). The tests
/// pass it explicitly: the engine looks nowhere else.
pub fn crypto_mb_dir() -> PathBuf {
    std::env::var_os("QUICKSHAKE_CRYPTO_MB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".deps/crypto_mb"))
}
