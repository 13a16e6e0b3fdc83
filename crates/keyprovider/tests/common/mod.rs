//! Helpers shared by the engine test binaries: every engine this machine runs.

use quickshake_keyprovider::engine::crypto_mb::CryptoMbEngine;
use quickshake_keyprovider::engine::mbmath::MbMathEngine;
use quickshake_keyprovider::engine::software::SoftwareEngine;
use quickshake_keyprovider::engine::Engine;
use quickshake_mbmath::BackendKind;
use quickshake_test_support::skip;

#[path = "crypto_mb_dir.rs"]
mod crypto_mb_dir;

/// Software (BoringSSL), crypto_mb when installed (in [`crypto_mb_dir::dev_dir`]), and every multi-buffer backend the CPU has
/// (portable, avx2, fma, ifma); the ones missing are reported as skips ([`skip::missing`]), which
/// fail where `QUICKSHAKE_REQUIRE` names them.
pub fn engines() -> Vec<Box<dyn Engine>> {
    let mut all: Vec<Box<dyn Engine>> = vec![Box::new(SoftwareEngine::default())];
    match CryptoMbEngine::load(&crypto_mb_dir::dev_options()) {
        Ok(e) => all.push(Box::new(e)),
        Err(e) => skip::missing("crypto_mb", e.reason()),
    }
    for kind in BackendKind::ALL {
        match MbMathEngine::new(kind, 1) {
            Ok(e) => all.push(Box::new(e)),
            Err(e) => skip::missing(kind.name(), e),
        }
    }
    all
}
