//! One engine test suite, run against every engine this machine has: software, crypto_mb,
//! our multi-buffer backends (portable, avx2, ifma) and the fault injector. Each RSA lane is
//! compared with BoringSSL's raw private operation; each ECDSA signature is verified. Engines
//! the CPU lacks are reported as skips (failed where `QUICKSHAKE_REQUIRE` names them).

use std::sync::Arc;

use quickshake_keyprovider::engine::mbmath::MbMathEngine;
use quickshake_keyprovider::engine::software::SoftwareEngine;
use quickshake_keyprovider::engine::{EcdsaLane, Engine, LaneError, RsaLane};
use quickshake_keyprovider::ProviderKey;
use quickshake_mbmath::BackendKind;
use quickshake_test_support::fault::{FaultEngine, FaultPlan};
use quickshake_test_support::skip;

mod common;
use common::engines;
#[path = "common/keys.rs"]
mod keys;
use keys::{boring_raw, input, key};

#[test]
fn rsa_lanes_match_boringssl_on_every_engine() {
    let sizes = [
        "rsa1024", "rsa2048", "other", "mismatch", "rsa3072", "rsa4096",
    ];
    let keys: Vec<Arc<ProviderKey>> = sizes.iter().map(|s| key(s)).collect();
    for engine in engines() {
        let caps = engine.capabilities().clone();
        for n in 1..=8 {
            // Mixed keys and sizes within one batch; sizes the engine lacks must come back
            // `Unsupported` (the provider then runs them on the scalar path).
            let inputs: Vec<(Arc<ProviderKey>, Vec<u8>)> = (0..n)
                .map(|i| {
                    let k = keys[i % keys.len()].clone();
                    let d = input(&k, i);
                    (k, d)
                })
                .collect();
            let lanes: Vec<RsaLane<'_>> = inputs
                .iter()
                .map(|(k, d)| RsaLane {
                    key: k.rsa.as_ref().expect("rsa"),
                    input: d,
                })
                .collect();
            let results = engine.rsa_private(&lanes);
            assert_eq!(results.len(), n, "{}: one result per lane", caps.name);
            for ((k, d), r) in inputs.iter().zip(results) {
                let bits = k.rsa.as_ref().map(|r| r.bits).unwrap_or(0);
                match r {
                    Ok(out) => assert_eq!(
                        out,
                        boring_raw(k, d),
                        "{} RSA-{bits} lane of {n}",
                        caps.name
                    ),
                    Err(LaneError::Unsupported) => {
                        assert!(
                            !caps.rsa_bits.contains(&bits),
                            "{} claims RSA-{bits} but refused it",
                            caps.name
                        )
                    }
                    Err(e) => panic!("{} RSA-{bits}: {e}", caps.name),
                }
            }
        }
        eprintln!("{}: RSA lanes match BoringSSL", caps.name);
    }
}

#[test]
fn ecdsa_signatures_verify_on_every_engine_that_signs() {
    let k = key("ecdsa-p256");
    let ec = k.ec.as_ref().expect("ec key");
    let public = k.ec_public.as_ref().expect("public");
    for engine in engines() {
        let caps = engine.capabilities().clone();
        let digests: Vec<Vec<u8>> = (0..8u8)
            .map(|i| vec![i.wrapping_mul(37).wrapping_add(1); 32])
            .collect();
        let lanes: Vec<EcdsaLane<'_>> = digests
            .iter()
            .map(|d| EcdsaLane { key: ec, digest: d })
            .collect();
        for (d, r) in digests.iter().zip(engine.ecdsa_sign(&lanes)) {
            match r {
                Ok(der) => {
                    let sig = boring::ecdsa::EcdsaSig::from_der(&der).expect("DER");
                    assert!(sig.verify(d, public).expect("verify"), "{}", caps.name);
                }
                Err(LaneError::Unsupported) => assert!(!caps.ecdsa_p256, "{}", caps.name),
                Err(e) => panic!("{}: {e}", caps.name),
            }
        }
    }
}

#[test]
fn fault_engine_corrupts_and_errors_as_planned() {
    let k = key("rsa2048");
    let d = input(&k, 1);
    let plan = FaultPlan {
        corrupt_every: Some(2),
        error_every: Some(3),
        ..Default::default()
    };
    let engine = FaultEngine::new(Box::new(SoftwareEngine::default()), plan);
    let lanes: Vec<RsaLane<'_>> = (0..6)
        .map(|_| RsaLane {
            key: k.rsa.as_ref().expect("rsa"),
            input: &d,
        })
        .collect();
    let good = boring_raw(&k, &d);
    let r = engine.rsa_private(&lanes);
    // ops 1..6: 2 and 4 corrupted, 3 and 6 errors (error wins on 6).
    assert_eq!(r[0].as_ref().ok(), Some(&good));
    assert!(r[1].as_ref().is_ok_and(|v| *v != good));
    assert!(matches!(r[2], Err(LaneError::Failed(_))));
    assert!(r[3].as_ref().is_ok_and(|v| *v != good));
    assert_eq!(r[4].as_ref().ok(), Some(&good));
    assert!(matches!(r[5], Err(LaneError::Failed(_))));
}

/// The batched public operation (the provider's check of RSA results): on ifma, for 3 or more
/// RSA-2048 lanes, each result raised to `e` gives back its input exactly when the result is
/// right (a corrupted lane does not); other engines, smaller batches and other key sizes
/// decline (`None`: BoringSSL checks them).
#[test]
fn batched_public_operation_checks_results_on_ifma() {
    let Some(ifma) = skip::available("ifma", MbMathEngine::new(BackendKind::Ifma, 1)) else {
        return;
    };
    let keys = [key("rsa2048"), key("other"), key("mismatch")];
    let inputs: Vec<Vec<u8>> = (0..8).map(|i| input(&keys[i % 3], i)).collect();
    let lanes: Vec<RsaLane<'_>> = (0..8)
        .map(|i| RsaLane {
            key: keys[i % 3].rsa.as_ref().expect("rsa"),
            input: &inputs[i],
        })
        .collect();
    let plan = FaultPlan {
        corrupt_every: Some(3),
        ..Default::default()
    };
    let engine = FaultEngine::new(Box::new(ifma), plan);
    let results: Vec<Vec<u8>> = engine
        .rsa_private(&lanes)
        .into_iter()
        .map(|r| r.expect("no errors planned"))
        .collect();
    let checks: Vec<RsaLane<'_>> = (0..8)
        .map(|i| RsaLane {
            key: lanes[i].key,
            input: &results[i],
        })
        .collect();
    let backs = engine.rsa_public(&checks).expect("ifma checks 8 lanes");
    for (i, back) in backs.iter().enumerate() {
        // Operations 3 and 6 (lanes 2 and 5) were corrupted (a flipped bit may even put the
        // result above the modulus: a lane error, also a failed check).
        let good = i != 2 && i != 5;
        match back {
            Ok(back) => assert_eq!(*back == inputs[i], good, "lane {i}"),
            Err(e) => assert!(!good, "lane {i}: {e:?}"),
        }
    }
    assert!(
        engine.rsa_public(&checks[..2]).is_none(),
        "2 lanes: BoringSSL's"
    );
    assert!(SoftwareEngine::default().rsa_public(&checks).is_none());
    let big = key("rsa4096");
    let big_in = input(&big, 0);
    let big_lanes: Vec<RsaLane<'_>> = (0..4)
        .map(|_| RsaLane {
            key: big.rsa.as_ref().expect("rsa"),
            input: &big_in,
        })
        .collect();
    assert!(
        engine.rsa_public(&big_lanes).is_none(),
        "RSA-4096: BoringSSL's"
    );
}

/// Every engine with a batched X25519 against the reference ladder (itself checked against
/// RFC 7748's vectors in quickshake-mbmath): batch shapes 1 to 17, base-point and peer lanes
/// mixed, a low-order point among them (its output all zero, as computed); engines without one
/// fail every lane `Unsupported` and say so in their capabilities.
#[test]
fn x25519_on_every_engine_that_has_it() {
    use quickshake_keyprovider::engine::{X25519Lane, X25519_BASE};
    use quickshake_mbmath::x25519_portable;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        let mut b = [0u8; 32];
        for chunk in b.chunks_mut(8) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            chunk.copy_from_slice(&seed.to_le_bytes());
        }
        b
    };
    for engine in engines() {
        let name = engine.capabilities().name.clone();
        let has = engine.capabilities().x25519_min_batch != usize::MAX;
        for n in 1..=17usize {
            let scalars: Vec<[u8; 32]> = (0..n).map(|_| next()).collect();
            let points: Vec<[u8; 32]> = (0..n)
                .map(|i| match i % 4 {
                    0 => X25519_BASE,
                    3 if n > 8 => [0u8; 32],
                    _ => next(),
                })
                .collect();
            let lanes: Vec<X25519Lane<'_>> = scalars
                .iter()
                .zip(&points)
                .map(|(scalar, point)| X25519Lane { scalar, point })
                .collect();
            let got = engine.x25519(&lanes);
            assert_eq!(got.len(), n, "{name}");
            for (i, (g, l)) in got.iter().zip(&lanes).enumerate() {
                let want = x25519_portable(l.scalar, l.point);
                match g {
                    Ok(v) => assert_eq!(*v, want, "{name}: lane {i} of {n}"),
                    // crypto_mb reports a low-order point's lane as an error.
                    Err(_) if has && want == [0u8; 32] => {}
                    Err(LaneError::Unsupported) if !has => {}
                    Err(e) => panic!("{name}: lane {i} of {n}: {e}"),
                }
            }
        }
        eprintln!(
            "{name}: X25519 {}",
            if has {
                "checked"
            } else {
                "not batched (BoringSSL's)"
            }
        );
    }
}
