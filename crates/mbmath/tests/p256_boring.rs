//! P-256 against BoringSSL (the `boring` crate) and RFC 6979:
//!
//! * RFC 6979 A.2.5 (P-256, SHA-256, messages "sample" and "test"): the signing core with no
//!   added randomness gives the RFC's `r` and `s`; the key's public point is the RFC's `U`.
//! * Differential, every batch shape 1..=17 with keys mixed across lanes (each lane picks one
//!   of 5 keys at random), on every backend this CPU has: our public keys equal BoringSSL's;
//!   our hedged signatures verify in BoringSSL (and ours), BoringSSL's verify in ours, a
//!   tampered digest fails; ECDH both ways (our scalar with BoringSSL's point and the
//!   reverse) gives BoringSSL's shared secret.

mod common;

use boring::bn::{BigNum, BigNumContext};
use boring::derive::Deriver;
use boring::ec::{EcGroup, EcKey, EcPoint, PointConversionForm};
use boring::ecdsa::EcdsaSig;
use boring::nid::Nid;
use boring::pkey::{PKey, Private};
use common::backends;
use quickshake_mbmath::{
    ecdsa_p256_sign_batch, ecdsa_p256_sign_rfc6979, ecdsa_p256_verify_batch_vartime,
    p256_ecdh_batch, p256_public_key_batch, EcdsaP256SignJob, EcdsaP256Signature,
    EcdsaP256VerifyJob, P256EcdhJob,
};
use rand::{Rng, SeedableRng};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn arr32(v: &[u8]) -> [u8; 32] {
    v.try_into().expect("32 bytes")
}

#[test]
fn rfc6979_a25() {
    let x = arr32(&hex(
        "c9afa9d845ba75166b5c215767b1d6934e50c3db36e89b127b8a622b120f6721",
    ));
    let ux = "60fed4ba255a9d31c961eb74c6356d68c049b8923b61fa6ce669622e60f29fb6";
    let uy = "7903fe1008b8bc99a41ae9e95628bc64f2f1b20c2d7e9f5177a3c294d4462299";
    let public = hex(&format!("04{ux}{uy}"));
    for backend in backends() {
        let pk = p256_public_key_batch(backend, &[&x]);
        assert_eq!(pk[0].as_ref().expect("key").as_slice(), public);
    }
    let vectors = [
        (
            "sample",
            "efd48b2aacb6a8fd1140dd9cd45e81d69d2c877b56aaf991c34d0ea84eaf3716",
            "f7cb1c942d657c41d436c7a1b6e29f65f3e900dbb9aff4064dc4ab2f843acda8",
        ),
        (
            "test",
            "f1abb023518351cd71d881567b1ea663ed3efcf6c5132b354f28d3b0b7d38367",
            "019f4113742a2b14bd25926b49c649155f267e60d3814b4c0cc84250e46f0083",
        ),
    ];
    for (msg, r, s) in vectors {
        let digest = boring::sha::sha256(msg.as_bytes());
        let sig = ecdsa_p256_sign_rfc6979(&x, &digest).expect("sign");
        assert_eq!(sig.r.as_slice(), hex(r), "r for {msg:?}");
        assert_eq!(sig.s.as_slice(), hex(s), "s for {msg:?}");
        assert_eq!(EcdsaP256Signature::from_der(&sig.to_der()), Some(sig));
    }
}

struct Key {
    private: [u8; 32],
    public: Vec<u8>,
    boring: EcKey<Private>,
}

fn keys(n: usize) -> Vec<Key> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).expect("group");
    let mut ctx = BigNumContext::new().expect("ctx");
    (0..n)
        .map(|_| {
            let k = EcKey::generate(&group).expect("generate");
            let private = arr32(&k.private_key().to_vec_padded(32).expect("pad"));
            let public = k
                .public_key()
                .to_bytes(&group, PointConversionForm::UNCOMPRESSED, &mut ctx)
                .expect("point");
            Key {
                private,
                public,
                boring: k,
            }
        })
        .collect()
}

fn boring_ecdh(ours: &EcKey<Private>, peer_point: &[u8]) -> Vec<u8> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).expect("group");
    let mut ctx = BigNumContext::new().expect("ctx");
    let point = EcPoint::from_bytes(&group, peer_point, &mut ctx).expect("peer point");
    let peer =
        PKey::from_ec_key(EcKey::from_public_key(&group, &point).expect("peer key")).expect("pkey");
    let ours = PKey::from_ec_key(ours.clone()).expect("pkey");
    let mut d = Deriver::new(&ours).expect("deriver");
    d.set_peer(&peer).expect("set_peer");
    d.derive_to_vec().expect("derive")
}

#[test]
fn differential_every_batch_shape() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x9256);
    let ks = keys(5);
    let peers = keys(5);
    for backend in backends() {
        for n in 1..=17usize {
            let pick: Vec<usize> = (0..n).map(|_| rng.gen_range(0..ks.len())).collect();
            let peer_pick: Vec<usize> = (0..n).map(|_| rng.gen_range(0..peers.len())).collect();
            let digests: Vec<[u8; 32]> = (0..n).map(|_| rng.gen()).collect();
            let entropy: Vec<[u8; 32]> = (0..n).map(|_| rng.gen()).collect();

            // Public keys.
            let privs: Vec<&[u8; 32]> = pick.iter().map(|&i| &ks[i].private).collect();
            for (r, &i) in p256_public_key_batch(backend, &privs).iter().zip(&pick) {
                assert_eq!(r.as_ref().expect("public").as_slice(), ks[i].public);
            }

            // Sign with ours, verify with BoringSSL and ours.
            let jobs: Vec<EcdsaP256SignJob<'_>> = (0..n)
                .map(|l| EcdsaP256SignJob {
                    private: &ks[pick[l]].private,
                    digest: &digests[l],
                    entropy: &entropy[l],
                })
                .collect();
            let sigs: Vec<EcdsaP256Signature> = ecdsa_p256_sign_batch(backend, &jobs)
                .into_iter()
                .map(|r| r.expect("sign"))
                .collect();
            // Every backend gives the portable code's signatures (same key, digest, entropy).
            let portable: Vec<EcdsaP256Signature> =
                ecdsa_p256_sign_batch(quickshake_mbmath::Backend::Portable, &jobs)
                    .into_iter()
                    .map(|r| r.expect("sign"))
                    .collect();
            assert_eq!(
                sigs,
                portable,
                "n={n}: {} differs from portable",
                backend.kind()
            );
            for l in 0..n {
                let bs = EcdsaSig::from_private_components(
                    BigNum::from_slice(&sigs[l].r).expect("r"),
                    BigNum::from_slice(&sigs[l].s).expect("s"),
                )
                .expect("sig");
                assert!(
                    bs.verify(&digests[l], &ks[pick[l]].boring).expect("verify"),
                    "n={n} lane {l}: BoringSSL refuses our signature"
                );
                let der = bs.to_der().expect("der");
                assert_eq!(der, sigs[l].to_der(), "DER encoding");
            }
            // BoringSSL's signatures, ours, and a tampered digest, through our verify.
            let bsigs: Vec<EcdsaP256Signature> = (0..n)
                .map(|l| {
                    let s = EcdsaSig::sign(&digests[l], &ks[pick[l]].boring).expect("sign");
                    EcdsaP256Signature::from_der(&s.to_der().expect("der")).expect("parse")
                })
                .collect();
            let mut bad = digests.clone();
            for d in &mut bad {
                d[rng.gen_range(0..32)] ^= 1 << rng.gen_range(0..8);
            }
            let mut vjobs = Vec::new();
            for l in 0..n {
                let public = &ks[pick[l]].public;
                vjobs.push(EcdsaP256VerifyJob {
                    public,
                    digest: &digests[l],
                    signature: &sigs[l],
                });
                vjobs.push(EcdsaP256VerifyJob {
                    public,
                    digest: &digests[l],
                    signature: &bsigs[l],
                });
                vjobs.push(EcdsaP256VerifyJob {
                    public,
                    digest: &bad[l],
                    signature: &sigs[l],
                });
            }
            let got = ecdsa_p256_verify_batch_vartime(backend, &vjobs);
            let want: Vec<bool> = (0..3 * n).map(|i| i % 3 != 2).collect();
            assert_eq!(got, want, "n={n}: verify results");

            // ECDH both ways.
            let ejobs: Vec<P256EcdhJob<'_>> = (0..n)
                .map(|l| P256EcdhJob {
                    private: &ks[pick[l]].private,
                    peer: &peers[peer_pick[l]].public,
                })
                .collect();
            for (l, r) in p256_ecdh_batch(backend, &ejobs).into_iter().enumerate() {
                let ours = r.expect("ecdh");
                let theirs = boring_ecdh(&ks[pick[l]].boring, &peers[peer_pick[l]].public);
                assert_eq!(ours.as_slice(), theirs, "n={n} lane {l}: ours vs BoringSSL");
                let reverse = boring_ecdh(&peers[peer_pick[l]].boring, &ks[pick[l]].public);
                assert_eq!(
                    ours.as_slice(),
                    reverse,
                    "n={n} lane {l}: reverse direction"
                );
            }
        }
    }
}

#[test]
fn bad_inputs_fail_alone() {
    let ks = keys(2);
    let zero = [0u8; 32];
    let n_bytes = arr32(&hex(
        "ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551",
    ));
    let mut off_curve = ks[1].public.clone();
    off_curve[64] ^= 1;
    let compressed = {
        let mut c = vec![2 + (ks[1].public[64] & 1)];
        c.extend_from_slice(&ks[1].public[1..33]);
        c
    };
    for backend in backends() {
        let jobs = [
            P256EcdhJob {
                private: &ks[0].private,
                peer: &ks[1].public,
            },
            P256EcdhJob {
                private: &zero,
                peer: &ks[1].public,
            },
            P256EcdhJob {
                private: &n_bytes,
                peer: &ks[1].public,
            },
            P256EcdhJob {
                private: &ks[0].private,
                peer: &off_curve,
            },
            P256EcdhJob {
                private: &ks[0].private,
                peer: &compressed,
            },
            P256EcdhJob {
                private: &ks[0].private,
                peer: &[0],
            },
            P256EcdhJob {
                private: &ks[0].private,
                peer: &ks[1].public,
            },
        ];
        let out = p256_ecdh_batch(backend, &jobs);
        let ok: Vec<bool> = out.iter().map(|r| r.is_ok()).collect();
        assert_eq!(ok, [true, false, false, false, false, false, true]);
        assert_eq!(out[0], out[6]);
        let e = [0u8; 32];
        let sjobs = [
            EcdsaP256SignJob {
                private: &n_bytes,
                digest: &e,
                entropy: &e,
            },
            EcdsaP256SignJob {
                private: &ks[0].private,
                digest: &e,
                entropy: &e,
            },
        ];
        let out = ecdsa_p256_sign_batch(backend, &sjobs);
        assert!(out[0].is_err() && out[1].is_ok());
    }
}

#[test]
fn entropy_changes_the_nonce() {
    let ks = keys(1);
    let d = [7u8; 32];
    let (e1, e2) = ([1u8; 32], [2u8; 32]);
    let backend = quickshake_mbmath::Backend::Portable;
    let jobs = [
        EcdsaP256SignJob {
            private: &ks[0].private,
            digest: &d,
            entropy: &e1,
        },
        EcdsaP256SignJob {
            private: &ks[0].private,
            digest: &d,
            entropy: &e2,
        },
        EcdsaP256SignJob {
            private: &ks[0].private,
            digest: &d,
            entropy: &e1,
        },
    ];
    let s: Vec<EcdsaP256Signature> = ecdsa_p256_sign_batch(backend, &jobs)
        .into_iter()
        .map(|r| r.expect("sign"))
        .collect();
    assert_ne!(s[0].r, s[1].r, "fresh entropy must change k");
    assert_eq!(s[0], s[2], "same inputs, same signature");
    let t = std::time::Instant::now();
    let many: Vec<EcdsaP256SignJob<'_>> = (0..16).map(|_| jobs[0]).collect();
    let _ = ecdsa_p256_sign_batch(backend, &many);
    eprintln!("portable P-256 sign: {:?} per signature", t.elapsed() / 16);
}

/// A short timing print (not a benchmark, not asserted): 64 signatures and 64 ECDH per
/// backend.
#[test]
fn ecdh_timing_print() {
    let ks = keys(2);
    let jobs: Vec<P256EcdhJob<'_>> = (0..64)
        .map(|i| P256EcdhJob {
            private: &ks[i % 2].private,
            peer: &ks[(i + 1) % 2].public,
        })
        .collect();
    let digest = [5u8; 32];
    let sjobs: Vec<EcdsaP256SignJob<'_>> = (0..64)
        .map(|i| EcdsaP256SignJob {
            private: &ks[i % 2].private,
            digest: &digest,
            entropy: &digest,
        })
        .collect();
    // BoringSSL on the same machine, one operation at a time, for comparison.
    let t = std::time::Instant::now();
    for i in 0..64 {
        let _ = EcdsaSig::sign(&digest, &ks[i % 2].boring).expect("sign");
    }
    eprintln!(
        "P-256 ECDSA sign in BoringSSL: {:?} per signature",
        t.elapsed() / 64
    );
    let t = std::time::Instant::now();
    for i in 0..64 {
        let _ = boring_ecdh(&ks[i % 2].boring, &ks[(i + 1) % 2].public);
    }
    eprintln!(
        "P-256 ECDH in BoringSSL: {:?} per operation",
        t.elapsed() / 64
    );
    for backend in backends() {
        let t = std::time::Instant::now();
        let _ = ecdsa_p256_sign_batch(backend, &sjobs);
        let per = t.elapsed() / 64;
        eprintln!(
            "P-256 ECDSA sign on {}: {per:?} per signature (batch of 64)",
            backend.kind()
        );
        let _ = p256_ecdh_batch(backend, &jobs[..8]);
        let t = std::time::Instant::now();
        let out = p256_ecdh_batch(backend, &jobs);
        let per = t.elapsed() / 64;
        assert!(out.iter().all(|r| r.is_ok()));
        eprintln!(
            "P-256 ECDH on {}: {per:?} per operation (batch of 64)",
            backend.kind()
        );
    }
}
