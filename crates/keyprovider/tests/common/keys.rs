//! Test keys and inputs shared by the test binaries that run RSA operations and compare them
//! with BoringSSL's.

use std::sync::Arc;

use boring::rsa::Padding;
use quickshake_keyprovider::ProviderKey;
use quickshake_test_support::paths::certs_dir;

/// The committed test key `testdata/certs/<name>.key.pem`.
pub fn key(name: &str) -> Arc<ProviderKey> {
    let path = certs_dir().join(format!("{name}.key.pem"));
    let pem = std::fs::read(&path).expect("committed test key");
    ProviderKey::from_pem(&pem, "test", &path.display().to_string()).expect("valid key")
}

/// A block below the modulus, different for each `seed` (up to 65,536 of them).
pub fn input(k: &ProviderKey, seed: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..k.rsa_len())
        .map(|i| ((i * 131 + seed * 17 + 3) % 251) as u8)
        .collect();
    v[0] = 0;
    v[1] = (seed % 256) as u8;
    v[2] = (seed / 256 % 256) as u8;
    v
}

/// BoringSSL's raw private operation on `data`: the reference every engine must match.
pub fn boring_raw(k: &ProviderKey, data: &[u8]) -> Vec<u8> {
    let rsa = k
        .rsa
        .as_ref()
        .and_then(|r| r.native.clone())
        .expect("native");
    let mut out = vec![0u8; rsa.size() as usize];
    rsa.private_decrypt(data, &mut out, Padding::NONE)
        .expect("BoringSSL raw op");
    out
}
