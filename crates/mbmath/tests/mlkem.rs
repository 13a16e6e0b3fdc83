//! ML-KEM-768 encapsulation (`mlkem768_encaps_batch`) against kyber-py 1.2.0 (an independent
//! pure-Python FIPS 203 implementation): `testdata/mlkem/mlkem768_encaps.txt`, written by
//! `testdata/mlkem/gen_vectors.py` with fixed randomness `m`; shared secret and ciphertext
//! byte for byte, for every batch size 1..=12 (so 1..=8 lanes and a batch of more than 8),
//! on every backend this CPU has, and with invalid encapsulation keys (the modulus check and
//! the length check of FIPS 203, 7.2) mixed into a batch: refused alone, the others unharmed.

mod common;

use common::backends;
use quickshake_mbmath::{
    mlkem768_encaps_batch, MathError, MlKemEncapsJob, MLKEM768_CIPHERTEXT_BYTES,
};
use quickshake_test_support::paths::testdata;

struct Valid {
    ek: Vec<u8>,
    m: [u8; 32],
    k: Vec<u8>,
    c: Vec<u8>,
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn load() -> (Vec<Valid>, Vec<(Vec<u8>, String)>) {
    let path = testdata("mlkem/mlkem768_encaps.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let (mut valid, mut invalid) = (Vec::new(), Vec::new());
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let f: Vec<&str> = line.split_whitespace().collect();
        let field = |name: &str| -> &str {
            f.iter()
                .find_map(|x| x.strip_prefix(name).and_then(|x| x.strip_prefix('=')))
                .unwrap_or_else(|| panic!("{name} missing in {}", &line[..20]))
        };
        match f[0] {
            "valid" => valid.push(Valid {
                ek: hex(field("ek")),
                m: hex(field("m")).try_into().expect("32-byte m"),
                k: hex(field("K")),
                c: hex(field("c")),
            }),
            "invalid" => invalid.push((hex(field("ek")), field("why").to_owned())),
            other => panic!("unknown line kind {other}"),
        }
    }
    assert!(
        valid.len() >= 9 && invalid.len() >= 3,
        "vector file too short"
    );
    (valid, invalid)
}

#[test]
fn kyber_py_answers_every_batch_size_every_backend() {
    let (valid, _) = load();
    for backend in backends() {
        for n in 1..=valid.len() {
            // Rotate the start so each vector takes different lanes.
            let vs: Vec<&Valid> = (0..n).map(|i| &valid[(i + n) % valid.len()]).collect();
            let jobs: Vec<MlKemEncapsJob<'_>> = vs
                .iter()
                .map(|v| MlKemEncapsJob { ek: &v.ek, m: &v.m })
                .collect();
            let got = mlkem768_encaps_batch(backend, &jobs);
            assert_eq!(got.len(), n);
            for (l, (g, v)) in got.iter().zip(&vs).enumerate() {
                let g = g.as_ref().expect("valid key accepted");
                assert_eq!(g.ciphertext.len(), MLKEM768_CIPHERTEXT_BYTES);
                assert_eq!(
                    g.ciphertext,
                    v.c,
                    "ciphertext, lane {l} of {n}, {:?}",
                    backend.kind()
                );
                assert_eq!(
                    g.shared_secret[..],
                    v.k[..],
                    "shared secret, lane {l} of {n}, {:?}",
                    backend.kind()
                );
            }
        }
    }
}

#[test]
fn invalid_keys_are_refused_alone() {
    let (valid, invalid) = load();
    for backend in backends() {
        // valid, invalid, valid, invalid, ...: every invalid key between valid ones.
        let mut jobs = Vec::new();
        let mut want: Vec<Option<&Valid>> = Vec::new();
        for (i, (ek, _)) in invalid.iter().enumerate() {
            let v = &valid[i % valid.len()];
            jobs.push(MlKemEncapsJob { ek: &v.ek, m: &v.m });
            want.push(Some(v));
            jobs.push(MlKemEncapsJob { ek, m: &v.m });
            want.push(None);
        }
        let got = mlkem768_encaps_batch(backend, &jobs);
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            match (g, w) {
                (Ok(g), Some(v)) => {
                    assert_eq!(g.ciphertext, v.c, "job {k}");
                    assert_eq!(g.shared_secret[..], v.k[..], "job {k}");
                }
                (Err(MathError::InvalidPublicKey(_)), None) => {}
                (Err(e), _) => panic!("job {k}: unexpected error {e}"),
                (Ok(_), None) => panic!("job {k}: invalid key ({}) accepted", invalid[k / 2].1),
            }
        }
    }
}
