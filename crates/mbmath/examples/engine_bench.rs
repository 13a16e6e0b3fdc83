//! Micro-benchmark of the multi-buffer arithmetic alone, for tuning this crate.
//!
//! `cargo run --release -p quickshake-mbmath --example engine_bench [-- SECONDS]`
//! (`ENGINE_BENCH_ONLY=<backend name>` times that backend alone)
//!
//! Prints the CPU features mbmath detects at run time and its backends, then per available
//! backend: ns per 1024-bit Montgomery multiplication and squaring per lane (16 lanes in
//! flight, the RSA-2048 batch shape), and RSA-2048 CRT signatures/s on this one thread for
//! batches of 8 (16 modular exponentiations per batch).
//!
//! `bench/engine` (`crates/bench/src/bin/engine-bench.rs`) compares the engines as the
//! provider runs them, against BoringSSL; this example builds without BoringSSL or the
//! provider and times squaring and whole mbmath batches, the figures of bench/engine-notes.md.
//! It prints no CPU model: `/proc/cpuinfo` has one reader, keyprovider's `cpu_info()`, which
//! this crate cannot depend on; `target/ci/quickshake-bench cpu-info` (or `bench/engine`)
//! prints it.

use std::time::{Duration, Instant};

use quickshake_mbmath::{
    available_backends, mont_mul_1024_lanes, mont_sqr_1024_lanes, rsa_private_crt_batch,
    rsa_public_batch, rsa_public_batch_vartime, Backend, RsaCrtKey,
};

fn flags() -> String {
    let mut v = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        for (name, on) in [
            ("avx2", std::arch::is_x86_feature_detected!("avx2")),
            ("fma", std::arch::is_x86_feature_detected!("fma")),
            ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
            (
                "avx512ifma",
                std::arch::is_x86_feature_detected!("avx512ifma"),
            ),
            ("bmi2", std::arch::is_x86_feature_detected!("bmi2")),
            ("adx", std::arch::is_x86_feature_detected!("adx")),
        ] {
            v.push(format!("{name}={}", if on { "yes" } else { "no" }));
        }
    }
    v.join(" ")
}

/// Deterministic pseudo-random limbs (xorshift), top bit set and odd for moduli.
type Lanes = Vec<[u64; 16]>;

fn lanes_data(count: usize) -> (Lanes, Lanes, Lanes) {
    let mut s = 0x9e3779b97f4a7c15u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut n = vec![[0u64; 16]; count];
    let mut a = vec![[0u64; 16]; count];
    let mut b = vec![[0u64; 16]; count];
    for i in 0..count {
        for k in 0..16 {
            n[i][k] = next();
            a[i][k] = next();
            b[i][k] = next();
        }
        n[i][15] |= 1 << 63;
        n[i][0] |= 1;
        a[i][15] >>= 1; // < n
        b[i][15] >>= 1;
    }
    (a, b, n)
}

fn parse_key(line: &str) -> RsaCrtKey {
    let get = |name: &str| -> Vec<u8> {
        let prefix = format!("{name}=");
        let hex = line
            .split_whitespace()
            .find_map(|f| f.strip_prefix(&prefix))
            .expect("field");
        let hex = if hex.len() % 2 == 1 {
            format!("0{hex}")
        } else {
            hex.to_string()
        };
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    };
    RsaCrtKey::from_components(
        &get("n"),
        &get("e"),
        &get("d"),
        &get("p"),
        &get("q"),
        &get("dp"),
        &get("dq"),
        &get("qinv"),
    )
    .expect("key")
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let budget = Duration::from_secs_f64(secs);
    println!("flags: {}", flags());
    println!(
        "backends: {:?}",
        available_backends()
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
    );

    let keys_text = include_str!("../tests/data/rsa2048_keys.txt");
    let keys: Vec<RsaCrtKey> = keys_text
        .lines()
        .filter(|l| !l.is_empty())
        .take(8)
        .map(parse_key)
        .collect();
    let msgs: Vec<Vec<u8>> = (0..8u8)
        .map(|i| {
            let mut m = vec![0u8; 256];
            m[1] = 1;
            for (j, b) in m.iter_mut().enumerate().skip(2) {
                *b = (j as u8).wrapping_mul(31).wrapping_add(i);
            }
            m
        })
        .collect();
    let lanes: Vec<(&RsaCrtKey, &[u8])> = keys
        .iter()
        .zip(&msgs)
        .map(|(k, m)| (k, m.as_slice()))
        .collect();

    let (a, b, n) = lanes_data(16);
    println!();
    println!("(best-of-runs timings; batch mean in parentheses)");
    println!(
        "{:<9} {:>14} {:>14} {:>10} {:>10} {:>13} {:>10}",
        "backend",
        "mulmont ns/ln",
        "sqrmont ns/ln",
        "batch8 ms",
        "(mean)",
        "signs/s/core",
        "us/modexp"
    );
    // `ENGINE_BENCH_ONLY=ifma` (a backend name): that backend alone, e.g. under `perf record`.
    let only = std::env::var("ENGINE_BENCH_ONLY").ok();
    for kind in available_backends() {
        if only.as_deref().is_some_and(|o| o != kind.name()) {
            continue;
        }
        let backend = Backend::new(kind).unwrap();
        // Best of many short runs: robust against other load on the machine.
        let best = |f: &dyn Fn()| -> f64 {
            let t0 = Instant::now();
            let mut best = f64::INFINITY;
            while t0.elapsed() < budget / 4 {
                let t = Instant::now();
                f();
                best = best.min(t.elapsed().as_secs_f64());
            }
            best
        };
        let iters = 200;
        let per = (iters * a.len()) as f64;
        let mul_ns = best(&|| {
            std::hint::black_box(mont_mul_1024_lanes(backend, &a, &b, &n, iters).unwrap());
        }) * 1e9
            / per;
        let sqr_ns = best(&|| {
            std::hint::black_box(mont_sqr_1024_lanes(backend, &a, &n, iters).unwrap());
        }) * 1e9
            / per;

        // warm up, then time whole batches of 8 signatures
        let _ = rsa_private_crt_batch(backend, &lanes);
        let t0 = Instant::now();
        let mut per_batch = f64::INFINITY;
        let mut total = 0.0;
        let mut batches = 0u32;
        while t0.elapsed() < budget / 2 || batches < 3 {
            let t = Instant::now();
            let r = rsa_private_crt_batch(backend, &lanes);
            let dt = t.elapsed().as_secs_f64();
            assert!(r.iter().all(|x| x.is_ok()));
            per_batch = per_batch.min(dt);
            total += dt;
            batches += 1;
        }
        let mean = total / batches as f64;
        println!(
            "{:<9} {:>14.1} {:>14.1} {:>10.3} {:>10.3} {:>13.0} {:>10.1}",
            kind.name(),
            mul_ns,
            sqr_ns,
            per_batch * 1e3,
            mean * 1e3,
            8.0 / per_batch,
            per_batch * 1e6 / 16.0
        );
        // The public-key check of the 8 results, batched on this backend.
        let sigs: Vec<Vec<u8>> = rsa_private_crt_batch(backend, &lanes)
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        let back: Vec<(&RsaCrtKey, &[u8])> = keys
            .iter()
            .zip(&sigs)
            .map(|(k, s)| (k, s.as_slice()))
            .collect();
        let public = best(&|| {
            std::hint::black_box(rsa_public_batch(backend, &back));
        });
        println!(
            "{:<9} public op (e = 65537), batch of 8: {:.1} us ({:.2} us per lane)",
            kind.name(),
            public * 1e6,
            public * 1e6 / 8.0
        );
    }
    let back: Vec<(&RsaCrtKey, &[u8])> = keys
        .iter()
        .zip(&msgs)
        .map(|(k, s)| (k, s.as_slice()))
        .collect();
    let t = Instant::now();
    let mut runs = 0u32;
    while t.elapsed() < budget / 8 {
        std::hint::black_box(rsa_public_batch_vartime(&back));
        runs += 1;
    }
    println!(
        "radix-2^64 public op one at a time: {:.2} us per lane",
        t.elapsed().as_secs_f64() * 1e6 / f64::from(runs) / 8.0
    );
}
