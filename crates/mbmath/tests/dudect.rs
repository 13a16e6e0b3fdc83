//! dudect-style timing test (Reparaz, Balasch, Verbauwhede 2017): times the
//! CRT batch for a *fixed* secret input class against a *random* one,
//! interleaved in random order, and prints Welch's t statistic per backend.
//! |t| well below ~4.5 means no leak was detected at this sample size.
//!
//! This is the constant-time check for the IFMA backend, which valgrind
//! cannot execute. Timing is noisy on shared machines, so the statistic is
//! reported, not asserted:
//!
//! `cargo test --release -p quickshake-mbmath --test dudect -- --ignored --nocapture`
//! (`DUDECT_SAMPLES=N` per class, default 1500.)
//!
//! Three tests: the message varies with the key fixed, and the CRT exponents
//! vary with the moduli and message fixed (`dp`, `dq` whose windows below the
//! top are all 0, so every table scan selects entry 0, against random ones):
//! the second measures the exponent-dependent table selection directly; the
//! third times X25519 (comb and ladder) with fixed against random scalars; the fourth
//! ML-KEM-768 encapsulation (8 lanes, the AVX-512 Keccak) with fixed against random `m`; the
//! fifth P-256 ECDH and ECDSA signing on `ifma` (8 lanes) with the scalar 1 against random
//! private keys.

mod common;

use std::time::Instant;

use num_bigint::{BigUint, RandBigInt};

use common::{backends, load_keys};
use quickshake_mbmath::{rsa_private_crt_batch_unchecked, RsaCrtKey};
use rand::{rngs::StdRng, Rng, SeedableRng};

fn welch_t(a: &[f64], b: &[f64]) -> f64 {
    let stats = |x: &[f64]| {
        let n = x.len() as f64;
        let mean = x.iter().sum::<f64>() / n;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var, n)
    };
    let (ma, va, na) = stats(a);
    let (mb, vb, nb) = stats(b);
    (ma - mb) / (va / na + vb / nb).sqrt()
}

/// Drops samples above the `pct` percentile of the pooled data (dudect's
/// cropping against interrupts and other noise).
fn crop(a: &[f64], b: &[f64], pct: f64) -> (Vec<f64>, Vec<f64>) {
    let mut all: Vec<f64> = a.iter().chain(b).copied().collect();
    all.sort_by(|x, y| x.partial_cmp(y).unwrap());
    let cut = all[((all.len() as f64 * pct) as usize).min(all.len() - 1)];
    (
        a.iter().copied().filter(|&v| v <= cut).collect(),
        b.iter().copied().filter(|&v| v <= cut).collect(),
    )
}

/// `DUDECT_SAMPLES` (default 1500).
fn samples() -> usize {
    std::env::var("DUDECT_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500)
}

/// Times `samples` calls of `sample` per class, the class of each drawn at random (`sample`
/// returns the nanoseconds of one call for that class); prints Welch's t (all samples and
/// cropped at the pooled 90th percentile) on a line starting with `label` and `name`.
fn report(
    label: &str,
    name: &str,
    samples: usize,
    rng: &mut StdRng,
    mut sample: impl FnMut(usize, &mut StdRng) -> f64,
) {
    let mut times = [Vec::with_capacity(samples), Vec::with_capacity(samples)];
    while times[0].len() < samples || times[1].len() < samples {
        let class = rng.gen_range(0..2usize);
        let dt = sample(class, rng);
        if times[class].len() < samples {
            times[class].push(dt);
        }
    }
    let t_all = welch_t(&times[0], &times[1]);
    let (a, b) = crop(&times[0], &times[1], 0.9);
    let t_crop = welch_t(&a, &b);
    let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64 / 1e3;
    println!(
        "{label} {name:<8} samples/class={samples} mean fixed={:.1}us random={:.1}us  t={t_all:+.2}  t(cropped p90)={t_crop:+.2}",
        mean(&times[0]),
        mean(&times[1]),
    );
}

/// For every backend: [`report`] on the RSA CRT batch, `lanes(class, rng)` giving the batch's
/// keys and inputs.
fn run_classes<'k>(
    label: &str,
    samples: usize,
    rng: &mut StdRng,
    mut lanes: impl FnMut(usize, &mut StdRng) -> Vec<(&'k RsaCrtKey, Vec<u8>)>,
) {
    for backend in backends() {
        report(label, backend.kind().name(), samples, rng, |class, rng| {
            let batch = lanes(class, rng);
            let refs: Vec<(&RsaCrtKey, &[u8])> =
                batch.iter().map(|(k, m)| (*k, m.as_slice())).collect();
            let t = Instant::now();
            let out = rsa_private_crt_batch_unchecked(backend, &refs);
            let dt = t.elapsed().as_nanos() as f64;
            std::hint::black_box(out);
            dt
        });
    }
}

#[test]
#[ignore = "timing measurement; run explicitly with --ignored --nocapture"]
fn dudect_fixed_vs_random_messages() {
    let keys: Vec<RsaCrtKey> = load_keys(2048).iter().take(8).map(|c| c.key()).collect();
    let mut rng = StdRng::seed_from_u64(0xd0d0);
    // Fixed class: a constant low-Hamming-weight message (1) in every lane.
    let mut fixed = vec![0u8; 256];
    fixed[255] = 1;
    run_classes("dudect", samples(), &mut rng, |class, rng| {
        keys.iter()
            .map(|k| {
                if class == 0 {
                    (k, fixed.clone())
                } else {
                    let mut m = vec![0u8; 256];
                    rng.fill(&mut m[1..]);
                    (k, m)
                }
            })
            .collect()
    });
}

#[test]
#[ignore = "timing measurement; run explicitly with --ignored --nocapture"]
fn dudect_fixed_vs_random_exponents() {
    let base = load_keys(2048);
    let base = &base[..8];
    let mut rng = StdRng::seed_from_u64(0xe0e0);
    // dp = dq = 2^1023 is below p and q, whose top bits are set.
    let top = BigUint::from(1u8) << 1023usize;
    let with = |dp: &BigUint, dq: &BigUint, k: &common::KeyComponents| {
        let b = |x: &BigUint| x.to_bytes_be();
        RsaCrtKey::from_components(
            &b(&k.n),
            &b(&k.e),
            &b(&k.d),
            &b(&k.p),
            &b(&k.q),
            &b(dp),
            &b(dq),
            &b(&k.qinv),
        )
        .expect("components in range")
    };
    // Both classes draw from a pool of 32 key sets (separate objects in both, so
    // where the keys sit in memory and caches is alike): the fixed class's sets
    // all hold dp = dq = 2^1023, the random class's uniform exponents below 2^1023.
    let fixed: Vec<Vec<RsaCrtKey>> = (0..32)
        .map(|_| base.iter().map(|k| with(&top, &top, k)).collect())
        .collect();
    let pool: Vec<Vec<RsaCrtKey>> = (0..32)
        .map(|_| {
            base.iter()
                .map(|k| {
                    let dp = rng.gen_biguint(1023);
                    let dq = rng.gen_biguint(1023);
                    with(&dp, &dq, k)
                })
                .collect()
        })
        .collect();
    let mut msg = vec![0u8; 256];
    rng.fill(&mut msg[1..]);
    run_classes("dudect-exp", samples(), &mut rng, |class, rng| {
        let set = rng.gen_range(0..pool.len());
        let keys = if class == 0 { &fixed[set] } else { &pool[set] };
        keys.iter().map(|k| (k, msg.clone())).collect()
    });
}

/// X25519 on ifma: 8 key shares (the fixed-base comb) and 8 shared secrets (the ladder) per
/// sample, with fixed scalars (all zero before clamping: a single bit set) against random
/// ones, the peers' points random in both classes.
#[test]
#[ignore = "timing measurement; run explicitly with --ignored --nocapture"]
fn dudect_x25519_fixed_vs_random_scalars() {
    use quickshake_mbmath::{x25519_batch, Backend, BackendKind, X25519Job, X25519_BASE_POINT};
    let Some(backend) = quickshake_test_support::skip::available(
        "ifma",
        Backend::new(BackendKind::Ifma).map_err(|_| "dudect-x25519: no AVX-512 IFMA on this CPU"),
    ) else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(0x2551_9000);
    report(
        "dudect-x25519",
        "ifma",
        samples(),
        &mut rng,
        |class, rng| {
            let scalars: Vec<[u8; 32]> = (0..8)
                .map(|_| if class == 0 { [0u8; 32] } else { rng.gen() })
                .collect();
            let points: Vec<[u8; 32]> = (0..8).map(|_| rng.gen()).collect();
            let jobs: Vec<X25519Job<'_>> = scalars
                .iter()
                .zip(&points)
                .flat_map(|(scalar, point)| {
                    [
                        X25519Job {
                            scalar,
                            point: &X25519_BASE_POINT,
                        },
                        X25519Job { scalar, point },
                    ]
                })
                .collect();
            let t = Instant::now();
            let out = x25519_batch(backend, &jobs);
            let dt = t.elapsed().as_nanos() as f64;
            let _ = std::hint::black_box(out);
            dt
        },
    );
}

/// ML-KEM-768 encapsulation on ifma (the AVX-512 Keccak; valgrind covers the portable and
/// AVX2 code, `tests/ctgrind.rs`): 8 lanes with fixed randomness `m` (all zero) against
/// random `m`, the encapsulation keys (public) the same in both classes.
#[test]
#[ignore = "timing measurement; run explicitly with --ignored --nocapture"]
fn dudect_mlkem_encaps_fixed_vs_random_m() {
    use quickshake_mbmath::{mlkem768_encaps_batch, Backend, BackendKind, MlKemEncapsJob};
    let Some(backend) = quickshake_test_support::skip::available(
        "ifma",
        Backend::new(BackendKind::Ifma).map_err(|_| "dudect-mlkem: no AVX-512 IFMA on this CPU"),
    ) else {
        return;
    };
    let text = std::fs::read_to_string(quickshake_test_support::paths::testdata(
        "mlkem/mlkem768_encaps.txt",
    ))
    .expect("ML-KEM vectors");
    let eks: Vec<Vec<u8>> = text
        .lines()
        .filter(|l| l.starts_with("valid "))
        .take(8)
        .map(|l| {
            let h = l
                .split_whitespace()
                .find_map(|f| f.strip_prefix("ek="))
                .expect("ek");
            (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("hex"))
                .collect()
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(0x6d6c_6b65_6d00);
    report("dudect-mlkem", "ifma", samples(), &mut rng, |class, rng| {
        let ms: Vec<[u8; 32]> = (0..eks.len())
            .map(|_| if class == 0 { [0u8; 32] } else { rng.gen() })
            .collect();
        let jobs: Vec<MlKemEncapsJob<'_>> = eks
            .iter()
            .zip(&ms)
            .map(|(ek, m)| MlKemEncapsJob { ek, m })
            .collect();
        let t = Instant::now();
        let out = mlkem768_encaps_batch(backend, &jobs);
        let dt = t.elapsed().as_nanos() as f64;
        let _ = std::hint::black_box(out);
        dt
    });
}

#[test]
#[ignore = "timing measurement; run explicitly with --ignored --nocapture"]
fn dudect_p256_fixed_vs_random_scalars() {
    use quickshake_mbmath::{
        ecdsa_p256_sign_batch, p256_ecdh_batch, p256_public_key_batch, Backend, BackendKind,
        EcdsaP256SignJob, P256EcdhJob,
    };
    let Some(backend) = quickshake_test_support::skip::available(
        "ifma",
        Backend::new(BackendKind::Ifma).map_err(|_| "dudect-p256: no AVX-512 IFMA on this CPU"),
    ) else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(0x9256_0000);
    let mut peer_key = [0u8; 32];
    peer_key[31] = 7;
    let peer = p256_public_key_batch(backend, &[&peer_key])[0]
        .clone()
        .expect("public key");
    let mut one = [0u8; 32];
    one[31] = 1;
    // Class 0: the scalar 1 in every lane; class 1: random scalars (top byte below 0xff, so
    // below n). ECDH (variable base) and signing (k G on the lanes) with them as keys.
    report("dudect-p256", "ifma", samples(), &mut rng, |class, rng| {
        let keys: Vec<[u8; 32]> = (0..8)
            .map(|_| {
                if class == 0 {
                    one
                } else {
                    let mut k: [u8; 32] = rng.gen();
                    k[0] &= 0x7f;
                    k[31] |= 1;
                    k
                }
            })
            .collect();
        let digest = [3u8; 32];
        let ejobs: Vec<P256EcdhJob<'_>> = keys
            .iter()
            .map(|private| P256EcdhJob {
                private,
                peer: &peer,
            })
            .collect();
        let sjobs: Vec<EcdsaP256SignJob<'_>> = keys
            .iter()
            .map(|private| EcdsaP256SignJob {
                private,
                digest: &digest,
                entropy: &digest,
            })
            .collect();
        let t = Instant::now();
        let a = p256_ecdh_batch(backend, &ejobs);
        let b = ecdsa_p256_sign_batch(backend, &sjobs);
        let dt = t.elapsed().as_nanos() as f64;
        let _ = std::hint::black_box((a, b));
        dt
    });
}
