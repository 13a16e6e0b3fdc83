//! `bench/engine`: the engines' arithmetic side by side in one run, on one core.
//!
//! Prints the CPU model and flags; ns per 1024-bit Montgomery multiplication per lane for each
//! multi-buffer backend next to BoringSSL's `BN_mod_mul_montgomery`; RSA-2048 signatures/s for
//! batches of 8 through each backend (and crypto_mb where it runs) next to BoringSSL signing
//! one at a time, in alternating rounds; the small-batch crossover of each engine; and one
//! closing line per backend: `rsa2048 backend=<name> ratio=<x> best=<y> rounds=<r>` (`ratio`:
//! the median over the rounds of the per-round ratio of its signatures/s to BoringSSL's in the
//! same round; `best`: its best round over BoringSSL's best round), and where crypto_mb runs,
//! one `rsa2048 backend=<name> vs=crypto_mb ratio=<x> range=<lo>-<hi> rounds=<r>` per other
//! backend (median and range of the per-round ratios of its signatures/s to crypto_mb's); then
//! the same for RSA-3072 and RSA-4096 (`rsa3072 ...`, `rsa4096 ...` lines; ifma, avx2 and
//! crypto_mb only; `ENGINE_BENCH_NO_LARGE=1` skips them); the public-key check of results
//! (`rsa2048-public backend=<name> batch8_us=<x> per_us=<x/8> boringssl_us=<y>`) and the X25519
//! key exchange (`x25519 ...`, the same fields: one exchange is our share and the shared
//! secret, in batches of 8 exchanges, against BoringSSL's `X25519_keypair` + `X25519`). Every
//! rate inside a round is the median of single-call times, so a neighbour's burst on a shared
//! machine moves neither.
//!
//! `unsafe` is needed for BoringSSL calls `boring` does not wrap (Montgomery context and
//! multiplication, X25519), each marked `// SAFETY:`.
#![deny(unsafe_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use boring::bn::{BigNum, BigNumContext};
use boring::rsa::Padding;
use quickshake_keyprovider::engine::crypto_mb::CryptoMbEngine;
use quickshake_keyprovider::engine::mbmath::MbMathEngine;
use quickshake_keyprovider::engine::{EcdsaLane, Engine, RsaLane};
use quickshake_keyprovider::ProviderKey;
use quickshake_mbmath::{available_backends, mont_mul_1024_lanes, Backend};

const KEYS: [&str; 3] = ["rsa2048", "other", "mismatch"];

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let window = Duration::from_secs_f64(secs);
    print!(
        "{}",
        quickshake_bench::machine::header(quickshake_keyprovider::engines::cpu_info())
    );
    let keys = load_keys();
    let input = inputs(&keys);

    println!("\n1024-bit Montgomery multiplication, ns per lane:");
    println!(
        "  boringssl BN_mod_mul_montgomery  {:8.1}",
        boring_mont_mul_ns(window)
    );
    for kind in available_backends() {
        let backend = Backend::new(kind).expect("available");
        println!(
            "  {:<32} {:8.1}",
            kind.name(),
            mbmath_mont_mul_ns(backend, window)
        );
    }

    println!("\nRSA-2048 private operations per second on one core:");
    let mut engines: Vec<(String, Box<dyn Engine>)> = Vec::new();
    for kind in available_backends() {
        if let Ok(e) = MbMathEngine::new(kind, 1) {
            engines.push((kind.name().to_string(), Box::new(e)));
        }
    }
    // A binary reads its environment: the same variable the gateway's --crypto-mb-dir reads.
    let options = quickshake_keyprovider::EngineOptions {
        crypto_mb_dir: std::env::var_os("QUICKSHAKE_CRYPTO_MB_DIR").map(std::path::PathBuf::from),
        ..Default::default()
    };
    match CryptoMbEngine::load(&options) {
        Ok(e) => engines.push(("crypto_mb".into(), Box::new(e))),
        Err(e) => println!("  crypto_mb: not measured ({})", e.reason()),
    }
    // Rounds: BoringSSL, then each engine's batch of 8, back to back; a ratio is taken within
    // its round, so frequency and neighbour noise on a shared machine hit both sides of it.
    let mut boring_rates = Vec::new();
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); engines.len()];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); engines.len()];
    for _ in 0..ROUNDS {
        let boring = boring_signs_per_sec(&keys, &input, window / 2);
        boring_rates.push(boring);
        for (i, (_, engine)) in engines.iter().enumerate() {
            let rate = 8.0 / engine_batch_secs(engine.as_ref(), &keys, &input, 8, window / 2);
            rates[i].push(rate);
            ratios[i].push(rate / boring);
        }
    }
    let boring = max(&boring_rates);
    println!(
        "  boringssl one at a time          {boring:8.0}  (best of {ROUNDS} rounds; median {:.0}, worst {:.0})",
        median(&boring_rates),
        min(&boring_rates)
    );
    for (i, (name, engine)) in engines.iter().enumerate() {
        let crossover = (1..=8)
            .find(|&n| {
                engine_batch_secs(engine.as_ref(), &keys, &input, n, window / 4) < n as f64 / boring
            })
            .unwrap_or(9);
        let best = max(&rates[i]);
        println!(
            "  {name:<32} {best:8.0}  (batch of 8: {:.2} ms at best, median {:.0}/s; ratio per round {:.2}-{:.2}, median {:.2}; crossover: batches of >= {crossover} beat BoringSSL)",
            8.0 / best * 1000.0,
            median(&rates[i]),
            min(&ratios[i]),
            max(&ratios[i]),
            median(&ratios[i]),
        );
    }
    println!();
    for (i, (name, _)) in engines.iter().enumerate() {
        println!(
            "rsa2048 backend={name} ratio={:.2} best={:.2} rounds={ROUNDS}",
            median(&ratios[i]),
            max(&rates[i]) / boring
        );
    }
    vs_crypto_mb("rsa2048", &engines, &rates);
    // The public-key check of results (`Engine::rsa_public`), RSA-2048, e = 65537.
    public_check(&engines, &keys, &input, window);
    // The TLS 1.3 key exchange (`Engine::x25519`), where an engine batches it.
    key_exchange(&engines, window);
    // The check of ECDSA P-256 signatures (`Engine::ecdsa_verify`), where an engine batches it.
    ecdsa_check(&engines, window);
    // The larger keys: only the engines that are fast at RSA-2048 (ifma, avx2, crypto_mb).
    let fast: Vec<(String, Box<dyn Engine>)> = engines
        .into_iter()
        .filter(|(name, _)| ["ifma", "avx2", "crypto_mb"].contains(&name.as_str()))
        .collect();
    if std::env::var_os("ENGINE_BENCH_NO_LARGE").is_none() {
        larger_keys(&fast, window);
    }
}

/// The public-key check of 8 RSA-2048 results: BoringSSL's public operation one at a time
/// (what the provider does without a batched one) against each engine's `rsa_public` batch of 8
/// where it has one. Prints `rsa2048-public backend=<name> batch8_us=..` ([`batch_lines`]).
fn public_check(
    engines: &[(String, Box<dyn Engine>)],
    keys: &[std::sync::Arc<ProviderKey>],
    input: &[Vec<u8>],
    window: Duration,
) {
    let rsa = native_rsa(keys);
    let mut out = vec![0u8; rsa.size() as usize];
    let boring = time_per_call(window / 2, || {
        let _ = rsa.public_encrypt(&input[0], &mut out, Padding::NONE);
    });
    println!(
        "\nRSA-2048 public operation (the check of each result, e = 65537):\n  boringssl one at a time          {:8.1} us",
        boring * 1e6
    );
    let lanes: Vec<RsaLane<'_>> = (0..8)
        .map(|i| RsaLane {
            key: keys[i % keys.len()].rsa.as_ref().expect("rsa"),
            input: &input[i % keys.len()],
        })
        .collect();
    for (name, engine) in engines {
        if engine.rsa_public(&lanes).is_none() {
            continue;
        }
        let t = time_per_call(window / 2, || {
            let _ = engine.rsa_public(&lanes);
        });
        batch_lines("rsa2048-public", name, "result", t, boring);
    }
}

/// One TLS 1.3 X25519 exchange (our key share, then the shared secret with the peer's):
/// BoringSSL's `X25519_keypair` + `X25519` one at a time against each engine's batch of 8
/// exchanges (16 lanes: 8 base-point, 8 peer). Prints `x25519 backend=<name> batch8_us=..`
/// ([`batch_lines`]).
#[allow(unsafe_code)]
fn key_exchange(engines: &[(String, Box<dyn Engine>)], window: Duration) {
    use quickshake_keyprovider::engine::{X25519Lane, X25519_BASE};
    let peer_private = [0x5au8; 32];
    let mut peer = [0u8; 32];
    // SAFETY: both arguments are 32-byte buffers, what X25519_public_from_private reads/writes.
    unsafe { boring_sys::X25519_public_from_private(peer.as_mut_ptr(), peer_private.as_ptr()) };
    let (mut public, mut private, mut secret) = ([0u8; 32], [0u8; 32], [0u8; 32]);
    let boring = time_per_call(window / 2, || {
        // SAFETY: 32-byte buffers, as X25519_keypair and X25519 read and write.
        unsafe {
            boring_sys::X25519_keypair(public.as_mut_ptr(), private.as_mut_ptr());
            boring_sys::X25519(secret.as_mut_ptr(), private.as_ptr(), peer.as_ptr());
        }
    });
    println!(
        "
X25519 key exchange (our share + the shared secret):
  boringssl one at a time          {:8.1} us",
        boring * 1e6
    );
    let scalars: Vec<[u8; 32]> = (0..8u8).map(|i| [i.wrapping_mul(41) ^ 0x33; 32]).collect();
    let lanes: Vec<X25519Lane<'_>> = scalars
        .iter()
        .flat_map(|scalar| {
            [
                X25519Lane {
                    scalar,
                    point: &X25519_BASE,
                },
                X25519Lane {
                    scalar,
                    point: &peer,
                },
            ]
        })
        .collect();
    for (name, engine) in engines {
        if engine.capabilities().x25519_min_batch == usize::MAX {
            continue;
        }
        let t = time_per_call(window / 2, || {
            let _ = engine.x25519(&lanes);
        });
        batch_lines("x25519", name, "exchange", t, boring);
    }
}

/// The check of 8 ECDSA P-256 signatures: BoringSSL's verification one at a time against each
/// engine's `ecdsa_verify` batch of 8 where it has one. Prints `p256-verify backend=<name>
/// batch8_us=..` ([`batch_lines`]).
fn ecdsa_check(engines: &[(String, Box<dyn Engine>)], window: Duration) {
    let path = certs().join("ecdsa-p256.key.pem");
    let Ok(pem) = std::fs::read(&path) else {
        return;
    };
    let Ok(key) = ProviderKey::from_pem(&pem, "bench", &path.display().to_string()) else {
        return;
    };
    let (Some(parts), Some(public)) = (key.ec.as_ref(), key.ec_public.as_ref()) else {
        return;
    };
    let digests: Vec<[u8; 32]> = (0..8u8).map(|i| boring::sha::sha256(&[i; 9])).collect();
    let sigs: Vec<Vec<u8>> = digests
        .iter()
        .filter_map(|d| {
            boring::ecdsa::EcdsaSig::sign(d, native_ec(&key)?)
                .ok()?
                .to_der()
                .ok()
        })
        .collect();
    if sigs.len() != 8 {
        return;
    }
    let parsed: Vec<boring::ecdsa::EcdsaSig> = sigs
        .iter()
        .filter_map(|s| boring::ecdsa::EcdsaSig::from_der(s).ok())
        .collect();
    let boring = time_per_call(window / 2, || {
        let _ = parsed[0].verify(&digests[0], public);
    });
    println!(
        "\nECDSA P-256 signature check (every result, before it leaves the provider):\n  boringssl one at a time          {:8.1} us",
        boring * 1e6
    );
    let lanes: Vec<EcdsaLane<'_>> = digests
        .iter()
        .map(|d| EcdsaLane {
            key: parts,
            digest: d,
        })
        .collect();
    let refs: Vec<&[u8]> = sigs.iter().map(|s| s.as_slice()).collect();
    for (name, engine) in engines {
        if engine.ecdsa_verify(&lanes, &refs).is_none() {
            continue;
        }
        let t = time_per_call(window / 2, || {
            let _ = engine.ecdsa_verify(&lanes, &refs);
        });
        batch_lines("p256-verify", name, "signature", t, boring);
    }
}

/// The EC key as BoringSSL holds it (the provider key's native copy).
fn native_ec(key: &ProviderKey) -> Option<&boring::ec::EcKeyRef<boring::pkey::Private>> {
    key.ec.as_ref()?.native.as_deref()
}

/// The first key's RSA key as BoringSSL holds it (the provider key's native copy).
fn native_rsa(keys: &[std::sync::Arc<ProviderKey>]) -> boring::rsa::Rsa<boring::pkey::Private> {
    keys[0]
        .rsa
        .as_ref()
        .and_then(|r| r.native.clone())
        .expect("native key")
}

/// One engine's time for a batch of 8 (`t`, seconds) against BoringSSL's one at a time
/// (`boring`): a readable line and `<label> backend=<name> batch8_us=<x> per_us=<x/8>
/// boringssl_us=<y>`.
fn batch_lines(label: &str, name: &str, per: &str, t: f64, boring: f64) {
    println!(
        "  {name:<32} {:8.1} us per batch of 8 ({:.1} per {per})",
        t * 1e6,
        t * 1e6 / 8.0
    );
    println!(
        "{label} backend={name} batch8_us={:.1} per_us={:.1} boringssl_us={:.1}",
        t * 1e6,
        t * 1e6 / 8.0,
        boring * 1e6
    );
}

/// RSA-3072 and RSA-4096 (1536- and 2048-bit primes: 30 and 40 radix-2^52 limbs), batches of 8
/// through every engine that takes them, in rounds with BoringSSL as for RSA-2048, shorter
/// windows. Prints `rsa<bits> backend=<name> ratio=..` per engine and, where crypto_mb runs,
/// `rsa<bits> backend=<name> vs=crypto_mb ratio=<median> range=<lo>-<hi> rounds=<r>`.
fn larger_keys(engines: &[(String, Box<dyn Engine>)], window: Duration) {
    for bits in [3072, 4096] {
        let path = certs().join(format!("rsa{bits}.key.pem"));
        let pem = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let key = ProviderKey::from_pem(&pem, "bench", &path.display().to_string()).expect("key");
        let keys = vec![key];
        let input = inputs(&keys);
        let mut boring_rates = Vec::new();
        let mut rates: Vec<Vec<f64>> = vec![Vec::new(); engines.len()];
        for _ in 0..ROUNDS {
            boring_rates.push(boring_signs_per_sec(&keys, &input, window / 4));
            for (i, (_, engine)) in engines.iter().enumerate() {
                rates[i]
                    .push(8.0 / engine_batch_secs(engine.as_ref(), &keys, &input, 8, window / 4));
            }
        }
        println!(
            "\nRSA-{bits} private operations per second on one core (batches of 8):\n  boringssl one at a time          {:8.0}  (median of {ROUNDS} rounds)",
            median(&boring_rates)
        );
        let ratios: Vec<Vec<f64>> = rates
            .iter()
            .map(|r| r.iter().zip(&boring_rates).map(|(a, b)| a / b).collect())
            .collect();
        for (i, (name, _)) in engines.iter().enumerate() {
            let r = &ratios[i];
            println!(
                "  {name:<32} {:8.0}  (median; batch of 8: {:.2} ms; ratio per round {:.2}-{:.2})",
                median(&rates[i]),
                8.0 / median(&rates[i]) * 1000.0,
                min(r),
                max(r)
            );
        }
        for (i, (name, _)) in engines.iter().enumerate() {
            println!(
                "rsa{bits} backend={name} ratio={:.2} rounds={ROUNDS}",
                median(&ratios[i])
            );
        }
        vs_crypto_mb(&format!("rsa{bits}"), engines, &rates);
    }
}

/// Each engine against crypto_mb, round by round (crypto_mb runs right after the others in
/// every round): `<label> backend=<name> vs=crypto_mb ratio=<median> range=<lo>-<hi>`, where
/// crypto_mb runs.
fn vs_crypto_mb(label: &str, engines: &[(String, Box<dyn Engine>)], rates: &[Vec<f64>]) {
    let Some(c) = engines.iter().position(|(name, _)| name == "crypto_mb") else {
        return;
    };
    for (i, (name, _)) in engines.iter().enumerate().filter(|&(i, _)| i != c) {
        let r: Vec<f64> = rates[i].iter().zip(&rates[c]).map(|(a, b)| a / b).collect();
        println!(
            "{label} backend={name} vs=crypto_mb ratio={:.2} range={:.2}-{:.2} rounds={ROUNDS}",
            median(&r),
            min(&r),
            max(&r)
        );
    }
}

/// Rounds of the RSA comparison (at least 7: the closing ratio is the median of the per-round
/// ratios, each taken within one round so frequency and neighbour noise hit both sides of it).
const ROUNDS: usize = 7;

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

fn certs() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/certs")
}

fn load_keys() -> Vec<std::sync::Arc<ProviderKey>> {
    KEYS.iter()
        .map(|k| {
            let path = certs().join(format!("{k}.key.pem"));
            let pem = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            ProviderKey::from_pem(&pem, "bench", &path.display().to_string()).expect("test key")
        })
        .collect()
}

/// A fixed input below each modulus (a PKCS#1-shaped block: leading 0x00 0x01).
fn inputs(keys: &[std::sync::Arc<ProviderKey>]) -> Vec<Vec<u8>> {
    keys.iter()
        .map(|k| {
            let mut v: Vec<u8> = (0..k.rsa_len()).map(|i| (i * 31 + 7) as u8).collect();
            v[0] = 0;
            v[1] = 1;
            v
        })
        .collect()
}

/// Run `f` repeatedly for about `window`; the median seconds per call. Calls are timed one by
/// one and the median taken, so the bursts of a neighbour's work on a shared machine (which
/// multiply single calls several times over) do not move the figure as a mean would.
fn time_per_call(window: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    let mut times = Vec::new();
    while start.elapsed() < window || times.len() < 3 {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_secs_f64());
    }
    median(&times)
}

fn boring_signs_per_sec(
    keys: &[std::sync::Arc<ProviderKey>],
    input: &[Vec<u8>],
    window: Duration,
) -> f64 {
    let rsa = native_rsa(keys);
    let mut out = vec![0u8; rsa.size() as usize];
    1.0 / time_per_call(window, || {
        let _ = rsa.private_decrypt(&input[0], &mut out, Padding::NONE);
    })
}

fn engine_batch_secs(
    engine: &dyn Engine,
    keys: &[std::sync::Arc<ProviderKey>],
    input: &[Vec<u8>],
    n: usize,
    window: Duration,
) -> f64 {
    let lanes: Vec<RsaLane<'_>> = (0..n)
        .map(|i| RsaLane {
            key: keys[i % keys.len()].rsa.as_ref().expect("rsa"),
            input: &input[i % keys.len()],
        })
        .collect();
    time_per_call(window, || {
        let r = engine.rsa_private(&lanes);
        assert!(r.iter().all(|l| l.is_ok()), "engine failed: {r:?}");
    })
}

fn mbmath_mont_mul_ns(backend: Backend, window: Duration) -> f64 {
    let lanes = 16;
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut n = vec![[0u64; 16]; lanes];
    let mut a = vec![[0u64; 16]; lanes];
    let mut b = vec![[0u64; 16]; lanes];
    for l in 0..lanes {
        for i in 0..16 {
            n[l][i] = next();
            a[l][i] = next();
            b[l][i] = next();
        }
        n[l][0] |= 1;
        n[l][15] |= 1 << 63;
        a[l][15] &= !(1 << 63);
        b[l][15] &= !(1 << 63);
    }
    let iters = 2000;
    let per_call = time_per_call(window, || {
        let _ = mont_mul_1024_lanes(backend, &a, &b, &n, iters);
    });
    per_call / (iters * lanes) as f64 * 1e9
}

#[allow(unsafe_code)]
fn boring_mont_mul_ns(window: Duration) -> f64 {
    let ctx = BigNumContext::new().expect("ctx");
    let mut n = BigNum::new().expect("bn");
    n.rand(1024, boring::bn::MsbOption::ONE, true)
        .expect("rand");
    let mut a = BigNum::new().expect("bn");
    n.rand_range(&mut a).expect("rand");
    let r = BigNum::new().expect("bn");
    use foreign_types::ForeignTypeRef;
    // SAFETY: `n` is a live odd 1024-bit BIGNUM and `ctx` a live BN_CTX; the returned
    // BN_MONT_CTX is checked for null and freed below.
    let mont = unsafe { boring_sys::BN_MONT_CTX_new_for_modulus(n.as_ptr(), ctx.as_ptr()) };
    assert!(!mont.is_null(), "BN_MONT_CTX_new_for_modulus failed");
    let iters = 10_000;
    let per_call = time_per_call(window, || {
        for _ in 0..iters {
            // SAFETY: all pointers are live BIGNUMs/contexts owned above; `r` is a distinct
            // output; BoringSSL allows `a` < n inputs in Montgomery form (any value < n).
            unsafe {
                boring_sys::BN_mod_mul_montgomery(
                    r.as_ptr(),
                    a.as_ptr(),
                    a.as_ptr(),
                    mont,
                    ctx.as_ptr(),
                );
            }
        }
    });
    // SAFETY: `mont` came from BN_MONT_CTX_new_for_modulus and is not used after this.
    unsafe { boring_sys::BN_MONT_CTX_free(mont) };
    per_call / iters as f64 * 1e9
}
