//! Batched SHA3/SHAKE (`sha3_*_batch`, `shake*_batch`) against Python's hashlib: the answers
//! in `testdata/keccak/sha3_vectors.txt` (written by `testdata/keccak/gen_vectors.py`), byte
//! for byte, for every lane count 1..=8, on every backend this CPU has (missing ones are
//! reported by `quickshake_test_support::skip`), and for batches mixing input lengths.

mod common;

use std::collections::BTreeMap;

use common::backends;
use quickshake_mbmath::{
    sha3_256_batch, sha3_512_batch, shake128_batch, shake256_batch, Backend, KECCAK_LANES,
};
use quickshake_test_support::paths::testdata;

/// (message length, lane) -> message; (alg, length, lane, outlen) -> answer.
struct Vectors {
    msgs: BTreeMap<(usize, usize), Vec<u8>>,
    answers: BTreeMap<(String, usize, usize, usize), Vec<u8>>,
}

fn hex(s: &str) -> Vec<u8> {
    if s == "-" {
        return Vec::new();
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn load() -> Vectors {
    let path = testdata("keccak/sha3_vectors.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut v = Vectors {
        msgs: BTreeMap::new(),
        answers: BTreeMap::new(),
    };
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let f: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| f[i].parse::<usize>().expect("number");
        if f[0] == "msg" {
            v.msgs.insert((num(1), num(2)), hex(f[3]));
        } else {
            v.answers
                .insert((f[0].to_owned(), num(1), num(2), num(3)), hex(f[4]));
        }
    }
    assert!(
        v.msgs.len() >= 100 && v.answers.len() >= 600,
        "vector file too short"
    );
    v
}

/// `alg`'s outputs for `inputs` on `backend`, `outlen` bytes each.
fn run(backend: Backend, alg: &str, inputs: &[&[u8]], outlen: usize) -> Vec<Vec<u8>> {
    match alg {
        "sha3_256" => sha3_256_batch(backend, inputs)
            .into_iter()
            .map(|h| h.to_vec())
            .collect(),
        "sha3_512" => sha3_512_batch(backend, inputs)
            .into_iter()
            .map(|h| h.to_vec())
            .collect(),
        "shake128" => shake128_batch(backend, inputs, outlen),
        "shake256" => shake256_batch(backend, inputs, outlen),
        other => panic!("unknown algorithm {other}"),
    }
}

const ALGS: [(&str, &[usize]); 4] = [
    ("sha3_256", &[32]),
    ("sha3_512", &[64]),
    ("shake128", &[32, 350]),
    ("shake256", &[32, 350]),
];

#[test]
fn hashlib_answers_every_lane_count_every_backend() {
    let v = load();
    let lengths: Vec<usize> = v.msgs.keys().map(|&(len, _)| len).collect();
    let mut checked = 0;
    for backend in backends() {
        for &len in lengths.iter().filter(|&&l| l > 0).chain([&0]) {
            let msgs: Vec<&[u8]> = (0..KECCAK_LANES).map(|l| &v.msgs[&(len, l)][..]).collect();
            for (alg, outlens) in ALGS {
                for &outlen in outlens {
                    for lanes in 1..=KECCAK_LANES {
                        let got = run(backend, alg, &msgs[..lanes], outlen);
                        for (l, g) in got.iter().enumerate() {
                            let want = &v.answers[&(alg.to_owned(), len, l, outlen)];
                            assert_eq!(
                                g,
                                want,
                                "{alg} len {len} lane {l} of {lanes} on {:?}",
                                backend.kind()
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 0);
}

/// One batch of inputs of different lengths (the lanes finish absorbing at different blocks),
/// and batches longer than 8 (several passes), against the same answers.
#[test]
fn mixed_lengths_and_long_batches() {
    let v = load();
    for backend in backends() {
        for (alg, outlens) in ALGS {
            for &outlen in outlens {
                // 19 inputs: lengths cycling through the file's, lanes cycling 0..8.
                let keys: Vec<(usize, usize)> = v
                    .msgs
                    .keys()
                    .map(|&(len, _)| len)
                    .collect::<std::collections::BTreeSet<_>>()
                    .iter()
                    .copied()
                    .cycle()
                    .zip((0..KECCAK_LANES).cycle())
                    .take(19)
                    .collect();
                let inputs: Vec<&[u8]> = keys.iter().map(|k| &v.msgs[k][..]).collect();
                let got = run(backend, alg, &inputs, outlen);
                for (g, &(len, l)) in got.iter().zip(&keys) {
                    let want = &v.answers[&(alg.to_owned(), len, l, outlen)];
                    assert_eq!(g, want, "{alg} len {len} lane {l} on {:?}", backend.kind());
                }
            }
        }
    }
}
