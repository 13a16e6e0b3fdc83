//! Test material: the repository's `testdata/certs`.

use std::path::PathBuf;

/// The bytes of a file of `testdata/certs`.
pub(crate) fn cert(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/certs")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
