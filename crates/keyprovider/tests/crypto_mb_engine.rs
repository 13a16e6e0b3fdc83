//! The crypto_mb engine against the real library, checked against BoringSSL.
//!
//! crypto_mb is loaded from `QUICKSHAKE_CRYPTO_MB_DIR`, else `<repo>/.deps/crypto_mb`
//! (`common/crypto_mb_dir.rs`). Every test skips (reported by
//! `quickshake_test_support::skip`; a failure where `QUICKSHAKE_REQUIRE` names crypto_mb) when
//! crypto_mb is not installed there (`scripts/install-crypto-mb`) or the CPU lacks AVX-512 IFMA.
//!
//! Throughput and crossover (not run by default):
//! `cargo test -p quickshake-keyprovider --profile ci --test crypto_mb_engine -- --ignored --nocapture crossover`

use std::time::Instant;

use boring::bn::{BigNumContext, BigNumRef};
use boring::ec::{EcGroup, EcKey};
use boring::ecdsa::EcdsaSig;
use boring::nid::Nid;
use boring::pkey::Private;
use boring::rsa::{Padding, Rsa};
use quickshake_keyprovider::engine::crypto_mb::{self, CryptoMbEngine, CryptoMbUnavailable};
use quickshake_keyprovider::engine::{
    EcKeyParts, EcdsaLane, Engine, LaneError, RsaKeyParts, RsaLane,
};
use quickshake_keyprovider::EngineOptions;
use quickshake_test_support::skip;

#[path = "common/crypto_mb_dir.rs"]
mod crypto_mb_dir;

/// The engine, or `None` after reporting the skip (a failure where crypto_mb is required).
fn engine() -> Option<CryptoMbEngine> {
    skip::available(
        "crypto_mb",
        CryptoMbEngine::load(&crypto_mb_dir::dev_options()),
    )
}

fn bytes(b: Option<&BigNumRef>) -> Vec<u8> {
    b.expect("CRT part present").to_vec()
}

fn rsa_parts(rsa: &Rsa<Private>) -> RsaKeyParts {
    RsaKeyParts {
        bits: rsa.n().num_bits() as u32,
        n: rsa.n().to_vec(),
        e: rsa.e().to_vec(),
        d: rsa.d().to_vec(),
        p: bytes(rsa.p()),
        q: bytes(rsa.q()),
        dp: bytes(rsa.dmp1()),
        dq: bytes(rsa.dmq1()),
        qinv: bytes(rsa.iqmp()),
        native: None,
    }
}

fn random_input(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    boring::rand::rand_bytes(&mut v).unwrap();
    v[0] = 0; // < n, whose top byte is >= 0x80
    v
}

fn boring_raw(rsa: &Rsa<Private>, input: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; rsa.size() as usize];
    let n = rsa.private_decrypt(input, &mut out, Padding::NONE).unwrap();
    out.truncate(n);
    out
}

struct RsaKey {
    rsa: Rsa<Private>,
    parts: RsaKeyParts,
}

fn rsa_keys(bits: u32, count: usize) -> Vec<RsaKey> {
    (0..count)
        .map(|_| {
            let rsa = Rsa::generate(bits).unwrap();
            let parts = rsa_parts(&rsa);
            RsaKey { rsa, parts }
        })
        .collect()
}

/// Run `lanes` lanes over `keys` (cyclically) and compare each with BoringSSL.
fn check_rsa_batch(engine: &CryptoMbEngine, keys: &[RsaKey], lanes: usize) {
    let inputs: Vec<Vec<u8>> = (0..lanes)
        .map(|i| random_input(keys[i % keys.len()].parts.n.len()))
        .collect();
    let batch: Vec<RsaLane<'_>> = (0..lanes)
        .map(|i| RsaLane {
            key: &keys[i % keys.len()].parts,
            input: &inputs[i],
        })
        .collect();
    let results = engine.rsa_private(&batch);
    assert_eq!(results.len(), lanes);
    for (i, r) in results.into_iter().enumerate() {
        let key = &keys[i % keys.len()];
        let got = r.unwrap_or_else(|e| {
            panic!("lane {i} of {lanes} ({} bits) failed: {e}", key.parts.bits)
        });
        assert_eq!(
            got,
            boring_raw(&key.rsa, &inputs[i]),
            "lane {i} of {lanes} ({} bits)",
            key.parts.bits
        );
    }
}

#[test]
fn rsa_2048_batches_of_1_to_8_match_boringssl() {
    let Some(engine) = engine() else { return };
    let keys = rsa_keys(2048, 8);
    for lanes in 1..=8 {
        check_rsa_batch(&engine, &keys, lanes);
    }
    // More lanes than one call holds: split into calls of 8.
    check_rsa_batch(&engine, &keys, 19);
}

/// The batched public operation (the provider's check of RSA results): `x^65537 mod n` per lane
/// as BoringSSL's public operation gives it, for every size in one mixed batch; a lane whose key
/// has another public exponent is left to BoringSSL (`Unsupported`); fewer than 3 lanes: `None`.
#[test]
fn rsa_public_matches_boringssl() {
    let Some(engine) = engine() else { return };
    let mut keys: Vec<RsaKey> = [2048, 3072, 4096, 2048, 1024, 2048]
        .iter()
        .flat_map(|&bits| rsa_keys(bits, 1))
        .collect();
    let e3 = Rsa::generate_with_e(2048, &boring::bn::BigNum::from_u32(3).unwrap()).unwrap();
    keys.push(RsaKey {
        parts: rsa_parts(&e3),
        rsa: e3,
    });
    let inputs: Vec<Vec<u8>> = keys.iter().map(|k| random_input(k.parts.n.len())).collect();
    let lanes: Vec<RsaLane<'_>> = keys
        .iter()
        .zip(&inputs)
        .map(|(k, input)| RsaLane {
            key: &k.parts,
            input,
        })
        .collect();
    let out = engine.rsa_public(&lanes).expect("6 lanes with e = 65537");
    for (i, (r, k)) in out.iter().zip(&keys).enumerate() {
        if k.parts.e != [1, 0, 1] {
            assert!(matches!(r, Err(LaneError::Unsupported)), "lane {i}: {r:?}");
            continue;
        }
        let mut want = vec![0u8; k.rsa.size() as usize];
        k.rsa
            .public_encrypt(&inputs[i], &mut want, Padding::NONE)
            .unwrap();
        assert_eq!(
            r.as_ref().expect("public op"),
            &want,
            "lane {i}, {} bits",
            k.parts.bits
        );
    }
    assert!(engine.rsa_public(&lanes[..2]).is_none());
}

#[test]
fn rsa_other_sizes_match_boringssl() {
    let Some(engine) = engine() else { return };
    for (bits, count) in [(1024, 8), (3072, 3), (4096, 2)] {
        let keys = rsa_keys(bits, count);
        check_rsa_batch(&engine, &keys, 1);
        check_rsa_batch(&engine, &keys, 8);
    }
}

#[test]
fn rsa_mixed_sizes_and_bad_lanes() {
    let Some(engine) = engine() else { return };
    let k2 = rsa_keys(2048, 2);
    let k3 = rsa_keys(3072, 1);
    let k1536 = rsa_keys(1536, 1);
    let in2a = random_input(256);
    let in3 = random_input(384);
    let in2b = random_input(256);
    let too_big = k2[0].parts.n.clone(); // input == n
    let short = vec![1u8; 100];
    let in1536 = random_input(192);
    let lanes = [
        RsaLane {
            key: &k2[0].parts,
            input: &in2a,
        },
        RsaLane {
            key: &k3[0].parts,
            input: &in3,
        },
        RsaLane {
            key: &k2[0].parts,
            input: &too_big,
        },
        RsaLane {
            key: &k1536[0].parts,
            input: &in1536,
        },
        RsaLane {
            key: &k2[1].parts,
            input: &short,
        },
        RsaLane {
            key: &k2[1].parts,
            input: &in2b,
        },
    ];
    let r = engine.rsa_private(&lanes);
    assert_eq!(r.len(), 6);
    assert_eq!(r[0].as_ref().unwrap(), &boring_raw(&k2[0].rsa, &in2a));
    assert_eq!(r[1].as_ref().unwrap(), &boring_raw(&k3[0].rsa, &in3));
    assert!(matches!(r[2], Err(LaneError::Failed(_))), "{:?}", r[2]);
    assert_eq!(r[3], Err(LaneError::Unsupported));
    assert!(matches!(r[4], Err(LaneError::Failed(_))), "{:?}", r[4]);
    assert_eq!(r[5].as_ref().unwrap(), &boring_raw(&k2[1].rsa, &in2b));
    assert!(engine.rsa_private(&[]).is_empty());
}

struct EcKeyPair {
    key: EcKey<Private>,
    parts: EcKeyParts,
}

fn ec_keys(count: usize) -> Vec<EcKeyPair> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
    let mut ctx = BigNumContext::new().unwrap();
    (0..count)
        .map(|_| {
            let key = EcKey::generate(&group).unwrap();
            let mut x = boring::bn::BigNum::new().unwrap();
            let mut y = boring::bn::BigNum::new().unwrap();
            key.public_key()
                .affine_coordinates_gfp(&group, &mut x, &mut y, &mut ctx)
                .unwrap();
            let parts = EcKeyParts {
                d: key.private_key().to_vec_padded(32).unwrap(),
                x: x.to_vec_padded(32).unwrap(),
                y: y.to_vec_padded(32).unwrap(),
                native: None,
            };
            EcKeyPair { key, parts }
        })
        .collect()
}

/// Lane `i` signs `digests[i]` with key `i mod keys.len()`.
fn ec_lanes<'a>(keys: &'a [EcKeyPair], digests: &'a [Vec<u8>]) -> Vec<EcdsaLane<'a>> {
    digests
        .iter()
        .enumerate()
        .map(|(i, d)| EcdsaLane {
            key: &keys[i % keys.len()].parts,
            digest: d,
        })
        .collect()
}

fn check_ecdsa_batch(engine: &CryptoMbEngine, keys: &[EcKeyPair], digests: &[Vec<u8>]) {
    let lanes = ec_lanes(keys, digests);
    let results = engine.ecdsa_sign(&lanes);
    assert_eq!(results.len(), digests.len());
    for (i, r) in results.into_iter().enumerate() {
        let der = r.unwrap_or_else(|e| panic!("ECDSA lane {i} failed: {e}"));
        let sig = EcdsaSig::from_der(&der).unwrap();
        assert_eq!(sig.to_der().unwrap(), der, "lane {i}: DER not minimal");
        assert!(
            sig.verify(&digests[i], &keys[i % keys.len()].key).unwrap(),
            "lane {i}: signature does not verify"
        );
    }
}

#[test]
fn ecdsa_p256_signatures_verify() {
    let Some(engine) = engine() else { return };
    assert!(engine.capabilities().ecdsa_p256);
    let keys = ec_keys(8);
    for lanes in 1..=8 {
        let digests: Vec<Vec<u8>> = (0..lanes)
            .map(|i| boring::sha::sha256(&[i as u8; 40]).to_vec())
            .collect();
        check_ecdsa_batch(&engine, &keys, &digests);
    }
    // 11 lanes (two calls), including a digest >= n and a short one.
    let mut digests: Vec<Vec<u8>> = (0..9)
        .map(|i| boring::sha::sha256(&[i as u8; 3]).to_vec())
        .collect();
    digests.push(vec![0xFF; 32]);
    digests.push(vec![0x5A; 20]);
    check_ecdsa_batch(&engine, &keys, &digests);
    // crypto_mb refuses a zero message (ECDSA allows it): that lane fails, the others sign.
    let zero = [0u8; 32];
    let d1 = boring::sha::sha256(b"other lane");
    let r = engine.ecdsa_sign(&[
        EcdsaLane {
            key: &keys[0].parts,
            digest: &zero,
        },
        EcdsaLane {
            key: &keys[2].parts,
            digest: &d1,
        },
    ]);
    assert!(matches!(r[0], Err(LaneError::Failed(_))), "{:?}", r[0]);
    assert!(EcdsaSig::from_der(r[1].as_ref().unwrap())
        .unwrap()
        .verify(&d1, &keys[2].key)
        .unwrap());
    // The same digest and key twice gives different signatures (fresh nonces).
    let d = boring::sha::sha256(b"same");
    let lanes = [
        EcdsaLane {
            key: &keys[0].parts,
            digest: &d,
        },
        EcdsaLane {
            key: &keys[0].parts,
            digest: &d,
        },
    ];
    let r = engine.ecdsa_sign(&lanes);
    assert_ne!(r[0].as_ref().unwrap(), r[1].as_ref().unwrap());
    // A zero private key fails its lane only.
    let bad = EcKeyParts {
        d: vec![0; 32],
        x: vec![0; 32],
        y: vec![0; 32],
        native: None,
    };
    let r = engine.ecdsa_sign(&[
        EcdsaLane {
            key: &bad,
            digest: &d,
        },
        EcdsaLane {
            key: &keys[1].parts,
            digest: &d,
        },
    ]);
    assert!(matches!(r[0], Err(LaneError::Failed(_))));
    let sig = EcdsaSig::from_der(r[1].as_ref().unwrap()).unwrap();
    assert!(sig.verify(&d, &keys[1].key).unwrap());
}

/// The batched ECDSA check (`Engine::ecdsa_verify`, `mbx_nistp256_ecdsa_verify_mb8`): every
/// good signature confirmed, in batches of 4 to 11 with mixed keys (a digest >= n and a short
/// one among them); a corrupted signature, a signature over another digest and one under
/// another key are not (they go to BoringSSL's check, which rejects them); batches below the
/// crossover are left to BoringSSL altogether.
#[test]
fn ecdsa_batched_verification_confirms_only_good_signatures() {
    let Some(engine) = engine() else { return };
    let keys = ec_keys(8);
    let mut digests: Vec<Vec<u8>> = (0..9)
        .map(|i| boring::sha::sha256(&[i as u8; 7]).to_vec())
        .collect();
    digests.push(vec![0xFF; 32]);
    digests.push(vec![0x5A; 20]);
    let lanes = ec_lanes(&keys, &digests);
    let sigs: Vec<Vec<u8>> = engine
        .ecdsa_sign(&lanes)
        .into_iter()
        .map(|r| r.expect("signed"))
        .collect();
    for n in 4..=lanes.len() {
        let refs: Vec<&[u8]> = sigs[..n].iter().map(|s| s.as_slice()).collect();
        let ok = engine.ecdsa_verify(&lanes[..n], &refs).expect("batched");
        assert!(ok.iter().all(|&v| v), "{n} lanes: {ok:?}");
    }
    // Below the crossover (4) BoringSSL checks each one.
    let refs: Vec<&[u8]> = sigs[..3].iter().map(|s| s.as_slice()).collect();
    assert!(engine.ecdsa_verify(&lanes[..3], &refs).is_none());
    // Lane 1 corrupted (last byte of s), lane 2 checked against lane 3's digest, lane 4 under
    // lane 5's key.
    let mut bad = sigs.clone();
    let last = bad[1].len() - 1;
    bad[1][last] ^= 1;
    let mut wrong: Vec<EcdsaLane<'_>> = lanes[..6]
        .iter()
        .map(|l| EcdsaLane {
            key: l.key,
            digest: l.digest,
        })
        .collect();
    wrong[2] = EcdsaLane {
        key: lanes[2].key,
        digest: lanes[3].digest,
    };
    wrong[4] = EcdsaLane {
        key: lanes[5].key,
        digest: lanes[4].digest,
    };
    let refs: Vec<&[u8]> = bad[..6].iter().map(|s| s.as_slice()).collect();
    let ok = engine.ecdsa_verify(&wrong, &refs).expect("batched");
    assert_eq!(ok, [true, false, false, true, false, true]);
}

#[test]
fn capabilities_and_probe() {
    let Some(engine) = engine() else { return };
    let caps = engine.capabilities();
    assert_eq!(caps.name, "crypto_mb");
    assert!(caps.accelerated);
    assert_eq!(caps.lanes, 8);
    assert_eq!(caps.rsa_bits, vec![1024, 2048, 3072, 4096]);
    assert!(caps.rsa_min_batch >= 1 && caps.rsa_min_batch <= 8);
    let probe = crypto_mb::probe(&crypto_mb_dir::dev_options());
    assert!(probe.loaded && probe.applicable, "{probe:?}");
    assert!(probe.reason.is_none(), "{probe:?}");
    eprintln!("crypto_mb probe: {probe:?}; engine: {engine:?}");
}

#[test]
fn hidden_by_options() {
    for value in ["crypto_mb", "software,crypto_mb", "all"] {
        let options = EngineOptions::hiding(value);
        let err = CryptoMbEngine::load(&options).expect_err("hidden engine must not load");
        assert_eq!(err, CryptoMbUnavailable::Hidden);
        assert!(
            err.reason().contains("hidden by QUICKSHAKE_HIDE_ENGINES"),
            "{err}"
        );
        let probe = crypto_mb::probe(&options);
        assert!(!probe.loaded);
        assert!(probe
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("hidden by QUICKSHAKE_HIDE_ENGINES"));
    }
    if let Err(e) = CryptoMbEngine::load(&EngineOptions::hiding("software")) {
        assert_ne!(e, CryptoMbUnavailable::Hidden);
    }
}

fn per_op<F: FnMut()>(iters: usize, mut f: F) -> f64 {
    f();
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    t.elapsed().as_secs_f64() / iters as f64
}

/// For 1..=8 lanes, prints `call(lanes)` (seconds per crypto_mb call) per call and per
/// operation with `digits` decimals of milliseconds; the smallest batch whose one call beats
/// that many `scalar` operations.
fn crossover_of(
    name: &str,
    digits: usize,
    scalar: f64,
    mut call: impl FnMut(usize) -> f64,
) -> Option<usize> {
    let mut crossover = None;
    for lanes in 1..=8 {
        let call = call(lanes);
        println!(
            "{name} crypto_mb {lanes} lanes: {:.*} ms/call, {:.*} ms/op, {:.0} op/s",
            digits,
            call * 1e3,
            digits,
            call * 1e3 / lanes as f64,
            lanes as f64 / call
        );
        if crossover.is_none() && call < lanes as f64 * scalar {
            crossover = Some(lanes);
        }
    }
    crossover
}

/// Prints BoringSSL's time per operation, crypto_mb's time per call for 1..8 lanes, and the
/// smallest batch for which one crypto_mb call beats that many BoringSSL operations.
#[test]
#[ignore = "benchmark: run with --ignored --nocapture"]
fn crossover() {
    let Some(engine) = engine() else { return };
    let keys = rsa_keys(2048, 8);
    let inputs: Vec<Vec<u8>> = (0..8).map(|_| random_input(256)).collect();
    let scalar = per_op(400, || {
        std::hint::black_box(boring_raw(&keys[0].rsa, &inputs[0]));
    });
    println!(
        "RSA-2048 BoringSSL: {:.3} ms/op ({:.0} op/s)",
        scalar * 1e3,
        1.0 / scalar
    );
    let crossover = crossover_of("RSA-2048", 3, scalar, |lanes| {
        let batch: Vec<RsaLane<'_>> = (0..lanes)
            .map(|i| RsaLane {
                key: &keys[i].parts,
                input: &inputs[i],
            })
            .collect();
        per_op(200, || {
            std::hint::black_box(engine.rsa_private(&batch));
        })
    });
    println!("RSA-2048 crossover (crypto_mb call < lanes x BoringSSL): {crossover:?}");

    let ec = ec_keys(8);
    let digests: Vec<[u8; 32]> = (0..8).map(|i| boring::sha::sha256(&[i as u8])).collect();
    let scalar = per_op(4000, || {
        std::hint::black_box(EcdsaSig::sign(&digests[0], &ec[0].key).unwrap());
    });
    println!(
        "P-256 BoringSSL: {:.4} ms/sign ({:.0} op/s)",
        scalar * 1e3,
        1.0 / scalar
    );
    let crossover = crossover_of("P-256", 4, scalar, |lanes| {
        let batch: Vec<EcdsaLane<'_>> = (0..lanes)
            .map(|i| EcdsaLane {
                key: &ec[i].parts,
                digest: &digests[i],
            })
            .collect();
        per_op(2000, || {
            std::hint::black_box(engine.ecdsa_sign(&batch));
        })
    });
    println!("P-256 crossover: {crossover:?}");
}
