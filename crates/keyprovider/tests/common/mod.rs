//! Helpers shared by the engine test binaries: every engine this machine runs.

use quickshake_keyprovider::engine::crypto_mb::CryptoMbEngine;
use quickshake_keyprovider::engine::mbmath::MbMathEngine;
use quickshake_keyprovider::engine::software::SoftwareEngine;
use quickshake_keyprovider::engine::Engine;
use quickshake_keyprovider::EngineOptions;
use quickshake_mbmath::BackendKind;

/// Software (BoringSSL), crypto_mb when installed, and every multi-buffer backend the CPU has
/// (portable, avx2, fma, ifma); the ones missing are reported on stderr, never failed.
pub fn engines() -> Vec<Box<dyn Engine>> {
    let mut all: Vec<Box<dyn Engine>> = vec![Box::new(SoftwareEngine::default())];
    match CryptoMbEngine::load(&EngineOptions::default()) {
        Ok(e) => all.push(Box::new(e)),
        Err(e) => eprintln!("skip crypto_mb: {}", e.reason()),
    }
    for kind in BackendKind::ALL {
        match MbMathEngine::new(kind, 1) {
            Ok(e) => all.push(Box::new(e)),
            Err(e) => eprintln!("skip {}: {e}", kind.name()),
        }
    }
    all
}
