//! Shared test helpers: the committed key corpus and num-bigint conversions.
#![allow(dead_code)]

use num_bigint::BigUint;
use quickshake_mbmath::{Backend, BackendKind, RsaCrtKey};
use quickshake_test_support::paths::testdata;
use quickshake_test_support::skip;

/// One test key's components as big integers.
pub struct KeyComponents {
    pub n: BigUint,
    pub e: BigUint,
    pub d: BigUint,
    pub p: BigUint,
    pub q: BigUint,
    pub dp: BigUint,
    pub dq: BigUint,
    pub qinv: BigUint,
}

impl KeyComponents {
    pub fn key(&self) -> RsaCrtKey {
        let b = |x: &BigUint| x.to_bytes_be();
        RsaCrtKey::from_components(
            &b(&self.n),
            &b(&self.e),
            &b(&self.d),
            &b(&self.p),
            &b(&self.q),
            &b(&self.dp),
            &b(&self.dq),
            &b(&self.qinv),
        )
        .expect("valid test key")
    }
}

/// Parses `testdata/rsa-crt-keys/rsa{bits}_keys.txt` (written by its `gen_keys.sh`).
pub fn load_keys(bits: usize) -> Vec<KeyComponents> {
    let path = testdata(&format!("rsa-crt-keys/rsa{bits}_keys.txt"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let get = |name: &str| -> BigUint {
                let prefix = format!("{name}=");
                let hex = line
                    .split_whitespace()
                    .find_map(|f| f.strip_prefix(&prefix))
                    .unwrap_or_else(|| panic!("field {name} missing"));
                BigUint::parse_bytes(hex.as_bytes(), 16).expect("hex")
            };
            KeyComponents {
                n: get("n"),
                e: get("e"),
                d: get("d"),
                p: get("p"),
                q: get("q"),
                dp: get("dp"),
                dq: get("dq"),
                qinv: get("qinv"),
            }
        })
        .collect()
}

/// The backends to test: every kind this CPU runs; each one it cannot run is reported as a
/// skip (a failure where `QUICKSHAKE_REQUIRE` names it).
pub fn backends() -> Vec<Backend> {
    BackendKind::ALL
        .into_iter()
        .filter_map(|kind| {
            skip::available(
                kind.name(),
                Backend::new(kind).map_err(|_| format!("backend {kind} not available on this CPU")),
            )
        })
        .collect()
}

pub fn to_limbs16(x: &BigUint) -> [u64; 16] {
    let d = x.to_u64_digits();
    assert!(d.len() <= 16);
    let mut out = [0u64; 16];
    out[..d.len()].copy_from_slice(&d);
    out
}

pub fn from_limbs(x: &[u64]) -> BigUint {
    let mut bytes = Vec::with_capacity(8 * x.len());
    for l in x {
        bytes.extend_from_slice(&l.to_le_bytes());
    }
    BigUint::from_bytes_le(&bytes)
}

/// Big-endian, left-padded to `len` bytes.
pub fn be_padded(x: &BigUint, len: usize) -> Vec<u8> {
    let b = x.to_bytes_be();
    assert!(b.len() <= len);
    let mut out = vec![0u8; len - b.len()];
    out.extend_from_slice(&b);
    out
}
