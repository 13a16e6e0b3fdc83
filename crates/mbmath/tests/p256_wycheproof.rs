//! P-256 against Wycheproof (`testdata/wycheproof/`, see its README): the key share
//! (`p256_ecdh_batch`) with `ecdh_secp256r1_test.json` (X.509 public keys: only the plain
//! named-curve, uncompressed encoding is a TLS key share, every other encoding must be
//! refused) and `ecdh_secp256r1_ecpoint_test.json` (bare SEC1 points), and the ECDSA verify
//! check (`ecdsa_p256_verify_batch_vartime`, strict DER via `EcdsaP256Signature::from_der`)
//! with `ecdsa_secp256r1_sha256_test.json`. Every backend this CPU has, all vectors of a
//! file in one batch and again in batches of 7 (mixed valid and invalid jobs).

mod common;

use common::backends;
use quickshake_mbmath::{
    ecdsa_p256_verify_batch_vartime, p256_ecdh_batch, EcdsaP256Signature, EcdsaP256VerifyJob,
    P256EcdhJob,
};
use quickshake_test_support::paths::testdata;
use serde_json::Value;

/// The DER prefix of a P-256 SubjectPublicKeyInfo with a named curve and an uncompressed
/// point; what follows is the 65-byte point.
const SPKI_PREFIX: &str = "3059301306072a8648ce3d020106082a8648ce3d030107034200";

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn load(name: &str) -> Value {
    let path = testdata(&format!("wycheproof/{name}"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

fn tests(doc: &Value) -> impl Iterator<Item = (&Value, &Value)> {
    doc["testGroups"]
        .as_array()
        .expect("testGroups")
        .iter()
        .flat_map(|g| {
            g["tests"]
                .as_array()
                .expect("tests")
                .iter()
                .map(move |t| (g, t))
        })
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_else(|| panic!("field {key}"))
}

/// A Wycheproof private key (a big-endian integer, maybe with a sign byte, maybe short)
/// as 32 bytes.
fn private32(h: &str) -> [u8; 32] {
    let b = hex(h);
    let b = &b[b.iter().position(|&x| x != 0).unwrap_or(b.len())..];
    assert!(b.len() <= 32, "private key too long");
    let mut out = [0u8; 32];
    out[32 - b.len()..].copy_from_slice(b);
    out
}

struct EcdhCase {
    id: u64,
    private: [u8; 32],
    peer: Vec<u8>,
    shared: Vec<u8>,
    result: String,
}

fn ecdh_cases(file: &str, spki: bool) -> Vec<EcdhCase> {
    let doc = load(file);
    tests(&doc)
        .map(|(_, t)| {
            let public = s(t, "public");
            let peer = if spki {
                // Anything but the plain named-curve uncompressed SPKI is not a key share:
                // hand the batch an empty point, which must be refused.
                match public.strip_prefix(SPKI_PREFIX) {
                    Some(point) if point.len() == 130 => hex(point),
                    _ => Vec::new(),
                }
            } else {
                hex(public)
            };
            EcdhCase {
                id: t["tcId"].as_u64().expect("tcId"),
                private: private32(s(t, "private")),
                peer,
                shared: hex(s(t, "shared")),
                result: s(t, "result").to_string(),
            }
        })
        .collect()
}

fn check_ecdh(file: &str, spki: bool) {
    let cases = ecdh_cases(file, spki);
    assert!(cases.len() > 100, "{file}: too few vectors");
    for backend in backends() {
        for chunk_len in [cases.len(), 7] {
            let (mut valid, mut refused) = (0, 0);
            for chunk in cases.chunks(chunk_len) {
                let jobs: Vec<P256EcdhJob<'_>> = chunk
                    .iter()
                    .map(|c| P256EcdhJob {
                        private: &c.private,
                        peer: &c.peer,
                    })
                    .collect();
                let out = p256_ecdh_batch(backend, &jobs);
                assert_eq!(out.len(), chunk.len());
                for (c, r) in chunk.iter().zip(out) {
                    match (c.result.as_str(), r) {
                        ("valid", Ok(shared)) => {
                            assert_eq!(shared.as_slice(), c.shared, "{file} tcId {}", c.id);
                            valid += 1;
                        }
                        ("valid", Err(e)) => panic!("{file} tcId {}: refused: {e}", c.id),
                        ("invalid", Ok(_)) => panic!("{file} tcId {}: accepted", c.id),
                        ("invalid", Err(_)) => refused += 1,
                        ("acceptable", Ok(shared)) => {
                            assert_eq!(shared.as_slice(), c.shared, "{file} tcId {}", c.id)
                        }
                        ("acceptable", Err(_)) => {}
                        (other, _) => panic!("{file} tcId {}: result {other}", c.id),
                    }
                }
            }
            assert!(
                valid > 100 && refused > 10,
                "{file}: {valid} valid, {refused} refused"
            );
        }
    }
}

#[test]
fn ecdh_x509_public_keys() {
    check_ecdh("ecdh_secp256r1_test.json", true);
}

#[test]
fn ecdh_sec1_points() {
    check_ecdh("ecdh_secp256r1_ecpoint_test.json", false);
}

#[test]
fn ecdsa_verify_sha256() {
    let doc = load("ecdsa_secp256r1_sha256_test.json");
    struct Case {
        id: u64,
        public: Vec<u8>,
        digest: Vec<u8>,
        sig: Option<EcdsaP256Signature>,
        result: String,
    }
    let cases: Vec<Case> = tests(&doc)
        .map(|(g, t)| Case {
            id: t["tcId"].as_u64().expect("tcId"),
            public: hex(s(&g["publicKey"], "uncompressed")),
            digest: boring::sha::sha256(&hex(s(t, "msg"))).to_vec(),
            sig: EcdsaP256Signature::from_der(&hex(s(t, "sig"))),
            result: s(t, "result").to_string(),
        })
        .collect();
    // A signature that does not parse is refused before the batch; give the batch a
    // placeholder so the shapes stay mixed.
    let zero = EcdsaP256Signature {
        r: [0; 32],
        s: [0; 32],
    };
    for backend in backends() {
        for chunk_len in [cases.len(), 7] {
            let (mut valid, mut refused) = (0, 0);
            for chunk in cases.chunks(chunk_len) {
                let jobs: Vec<EcdsaP256VerifyJob<'_>> = chunk
                    .iter()
                    .map(|c| EcdsaP256VerifyJob {
                        public: &c.public,
                        digest: &c.digest,
                        signature: c.sig.as_ref().unwrap_or(&zero),
                    })
                    .collect();
                let out = ecdsa_p256_verify_batch_vartime(backend, &jobs);
                for (c, ok) in chunk.iter().zip(out) {
                    let accepted = ok && c.sig.is_some();
                    match c.result.as_str() {
                        "valid" => {
                            assert!(accepted, "tcId {}: valid signature refused", c.id);
                            valid += 1;
                        }
                        "invalid" => {
                            assert!(!accepted, "tcId {}: invalid signature accepted", c.id);
                            refused += 1;
                        }
                        "acceptable" => {}
                        other => panic!("tcId {}: result {other}", c.id),
                    }
                }
            }
            assert!(
                valid > 100 && refused > 100,
                "{valid} valid, {refused} refused"
            );
        }
    }
}
