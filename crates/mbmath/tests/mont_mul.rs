//! Montgomery multiplication / squaring per backend against num-bigint.

mod common;

use common::{backends, from_limbs, to_limbs16};
use num_bigint::{BigUint, RandBigInt};
use num_traits::One;
use proptest::prelude::*;
use quickshake_mbmath::{mont_mul_1024_lanes, mont_sqr_1024_lanes, Backend, BackendKind};
use rand::{rngs::StdRng, Rng, SeedableRng};

fn random_modulus(rng: &mut impl Rng) -> BigUint {
    let mut n = rng.gen_biguint(1024);
    n |= BigUint::one() << 1023usize;
    n |= BigUint::one();
    n
}

fn r_inv(backend: Backend, n: &BigUint) -> BigUint {
    let r = BigUint::one() << backend.kind().montgomery_r_bits(1024);
    // n is prime-or-not odd: invert R mod n via R^(phi) is unavailable, so
    // solve with the extended Euclid on BigInt.
    use num_bigint::BigInt;
    use num_integer::Integer;
    let e = BigInt::from(r).extended_gcd(&BigInt::from(n.clone()));
    assert!(e.gcd == BigInt::from(1));
    let m = BigInt::from(n.clone());
    ((e.x % &m + &m) % &m).to_biguint().unwrap()
}

fn check(backend: Backend, a: &[BigUint], b: &[BigUint], n: &[BigUint], iters: usize) {
    let al: Vec<[u64; 16]> = a.iter().map(to_limbs16).collect();
    let bl: Vec<[u64; 16]> = b.iter().map(to_limbs16).collect();
    let nl: Vec<[u64; 16]> = n.iter().map(to_limbs16).collect();
    let got = mont_mul_1024_lanes(backend, &al, &bl, &nl, iters).unwrap();
    let got_sq = mont_sqr_1024_lanes(backend, &al, &nl, iters).unwrap();
    for i in 0..a.len() {
        let ri = r_inv(backend, &n[i]);
        let mut x = a[i].clone();
        let mut y = a[i].clone();
        for _ in 0..iters {
            x = &x * &b[i] * &ri % &n[i];
            y = &y * &y * &ri % &n[i];
        }
        assert_eq!(
            from_limbs(&got[i]),
            x,
            "mul backend {} lane {i}/{} iters {iters}",
            backend.kind(),
            a.len()
        );
        assert_eq!(
            from_limbs(&got_sq[i]),
            y,
            "sqr backend {} lane {i}/{} iters {iters}",
            backend.kind(),
            a.len()
        );
    }
}

#[test]
fn random_moduli_all_backends() {
    let mut rng = StdRng::seed_from_u64(7);
    for backend in backends() {
        for lanes in [1usize, 3, 4, 5, 8, 9, 16] {
            let n: Vec<BigUint> = (0..lanes).map(|_| random_modulus(&mut rng)).collect();
            let a: Vec<BigUint> = n.iter().map(|n| rng.gen_biguint_below(n)).collect();
            let b: Vec<BigUint> = n.iter().map(|n| rng.gen_biguint_below(n)).collect();
            for iters in [1, 2, 13] {
                check(backend, &a, &b, &n, iters);
            }
        }
    }
}

#[test]
fn edge_operands() {
    let mut rng = StdRng::seed_from_u64(8);
    for backend in backends() {
        let mut n: Vec<BigUint> = (0..4).map(|_| random_modulus(&mut rng)).collect();
        n.push((BigUint::one() << 1024usize) - 1u32); // all ones
        n.push((BigUint::one() << 1023usize) + 1u32); // smallest
        for nn in n.clone() {
            let vals = [
                BigUint::from(0u32),
                BigUint::one(),
                &nn - 1u32,
                &nn - 2u32,
                &nn >> 1usize,
            ];
            let mut a = Vec::new();
            let mut b = Vec::new();
            let mut m = Vec::new();
            for x in &vals {
                for y in &vals {
                    a.push(x.clone());
                    b.push(y.clone());
                    m.push(nn.clone());
                }
            }
            check(backend, &a, &b, &m, 1);
            check(backend, &a, &b, &m, 3);
        }
    }
}

#[test]
fn unsupported_modulus_is_rejected() {
    let n = [[2u64; 16]];
    assert!(mont_mul_1024_lanes(Backend::Portable, &n, &n, &n, 1).is_err());
    for k in BackendKind::ALL {
        assert_eq!(BackendKind::from_name(k.name()), Some(k));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn prop_mont_mul_matches_bigint(seed in any::<u64>(), lanes in 1usize..10, iters in 1usize..4) {
        let mut rng = StdRng::seed_from_u64(seed);
        let n: Vec<BigUint> = (0..lanes).map(|_| random_modulus(&mut rng)).collect();
        let a: Vec<BigUint> = n.iter().map(|n| rng.gen_biguint_below(n)).collect();
        let b: Vec<BigUint> = n.iter().map(|n| rng.gen_biguint_below(n)).collect();
        for backend in backends() {
            check(backend, &a, &b, &n, iters);
        }
    }
}
