//! Full RSA CRT private operations against num-bigint's `modpow` with `d`.

mod common;

use common::{backends, be_padded, load_keys, KeyComponents};
use num_bigint::{BigUint, RandBigInt};
use num_traits::{One, Zero};
use quickshake_mbmath::{
    rsa_private_crt_batch, rsa_public_batch, rsa_public_batch_vartime, Backend, MathError,
    RsaCrtKey,
};
use rand::{rngs::StdRng, SeedableRng};

fn check_batch(backend: Backend, comps: &[&KeyComponents], keys: &[&RsaCrtKey], msgs: &[BigUint]) {
    let len = keys[0].modulus_bytes();
    let inputs: Vec<Vec<u8>> = msgs
        .iter()
        .zip(keys)
        .map(|(m, k)| be_padded(m, k.modulus_bytes()))
        .collect();
    let lanes: Vec<(&RsaCrtKey, &[u8])> = keys
        .iter()
        .zip(&inputs)
        .map(|(k, i)| (*k, i.as_slice()))
        .collect();
    let out = rsa_private_crt_batch(backend, &lanes);
    assert_eq!(out.len(), lanes.len());
    for (i, r) in out.iter().enumerate() {
        let want = msgs[i].modpow(&comps[i].d, &comps[i].n);
        let got = r.as_ref().unwrap_or_else(|e| panic!("lane {i}: {e}"));
        assert_eq!(
            got.len(),
            keys[i]
                .modulus_bytes()
                .max(len)
                .min(keys[i].modulus_bytes())
        );
        assert_eq!(
            BigUint::from_bytes_be(got),
            want,
            "backend {} lane {i} of {}",
            backend.kind(),
            lanes.len()
        );
    }
}

#[test]
fn rsa2048_random_messages_all_batch_sizes() {
    let comps = load_keys(2048);
    let keys: Vec<RsaCrtKey> = comps.iter().map(|c| c.key()).collect();
    let mut rng = StdRng::seed_from_u64(1);
    for backend in backends() {
        for batch in 1..=9usize {
            let start = batch % comps.len();
            let idx: Vec<usize> = (0..batch).map(|k| (start + 3 * k) % comps.len()).collect();
            let c: Vec<&KeyComponents> = idx.iter().map(|&i| &comps[i]).collect();
            let k: Vec<&RsaCrtKey> = idx.iter().map(|&i| &keys[i]).collect();
            let msgs: Vec<BigUint> = c.iter().map(|c| rng.gen_biguint_below(&c.n)).collect();
            check_batch(backend, &c, &k, &msgs);
        }
    }
}

#[test]
fn rsa2048_edge_messages() {
    let comps = load_keys(2048);
    let keys: Vec<RsaCrtKey> = comps.iter().map(|c| c.key()).collect();
    for backend in backends() {
        for (ki, c) in comps.iter().enumerate().take(4) {
            let pmax = c.p.clone().max(c.q.clone());
            let pmin = c.p.clone().min(c.q.clone());
            let msgs = vec![
                BigUint::zero(),
                BigUint::one(),
                BigUint::from(2u32),
                &c.n - 1u32,
                &c.n - 2u32,
                c.p.clone(),
                c.q.clone(),
                &pmax + 1u32,
                &pmin - 1u32,
                &pmin * 2u32,
                &c.p * 5u32,
                &c.q * 7u32,
                (BigUint::one() << 2047) - 1u32,
                BigUint::one() << 1024,
                (BigUint::one() << 1024) - 1u32,
            ];
            for chunk in msgs.chunks(8) {
                let cs: Vec<&KeyComponents> = chunk.iter().map(|_| c).collect();
                let ks: Vec<&RsaCrtKey> = chunk.iter().map(|_| &keys[ki]).collect();
                check_batch(backend, &cs, &ks, chunk);
            }
        }
    }
}

#[test]
fn rsa_mixed_sizes_in_one_batch() {
    let mut comps = load_keys(2048);
    comps.truncate(3);
    comps.extend(load_keys(3072).into_iter().take(2));
    comps.extend(load_keys(4096).into_iter().take(2));
    let keys: Vec<RsaCrtKey> = comps.iter().map(|c| c.key()).collect();
    let mut rng = StdRng::seed_from_u64(2);
    for backend in backends() {
        let order = [0usize, 3, 5, 1, 4, 6, 2];
        let c: Vec<&KeyComponents> = order.iter().map(|&i| &comps[i]).collect();
        let k: Vec<&RsaCrtKey> = order.iter().map(|&i| &keys[i]).collect();
        let msgs: Vec<BigUint> = c.iter().map(|c| rng.gen_biguint_below(&c.n)).collect();
        check_batch(backend, &c, &k, &msgs);
    }
}

#[test]
fn rsa3072_and_4096_batches() {
    let mut rng = StdRng::seed_from_u64(3);
    for bits in [3072, 4096] {
        let comps = load_keys(bits);
        let keys: Vec<RsaCrtKey> = comps.iter().map(|c| c.key()).collect();
        for backend in backends() {
            let c: Vec<&KeyComponents> = comps.iter().collect();
            let k: Vec<&RsaCrtKey> = keys.iter().collect();
            let msgs: Vec<BigUint> = c.iter().map(|c| rng.gen_biguint_below(&c.n)).collect();
            check_batch(backend, &c, &k, &msgs);
        }
    }
}

#[test]
fn out_of_range_inputs_are_per_lane_errors() {
    let comps = load_keys(2048);
    let keys: Vec<RsaCrtKey> = comps.iter().take(2).map(|c| c.key()).collect();
    let n_bytes = be_padded(&comps[0].n, 256);
    let too_long = vec![1u8; 257];
    let mut zero_padded_long = vec![0u8; 1];
    zero_padded_long.extend_from_slice(&be_padded(&BigUint::from(5u32), 256));
    let ok = be_padded(&BigUint::from(12345u32), 256);
    for backend in backends() {
        let lanes: Vec<(&RsaCrtKey, &[u8])> = vec![
            (&keys[0], &n_bytes),
            (&keys[1], &ok),
            (&keys[0], &too_long),
            (&keys[1], &zero_padded_long),
        ];
        let out = rsa_private_crt_batch(backend, &lanes);
        assert_eq!(out[0], Err(MathError::InputOutOfRange));
        assert_eq!(
            BigUint::from_bytes_be(out[1].as_ref().unwrap()),
            BigUint::from(12345u32).modpow(&comps[1].d, &comps[1].n)
        );
        assert_eq!(out[2], Err(MathError::InputOutOfRange));
        // Longer than the modulus is rejected even with leading zeros.
        assert_eq!(out[3], Err(MathError::InputOutOfRange));
    }
}

#[test]
fn public_op_inverts_private_op() {
    let comps = load_keys(2048);
    let keys: Vec<RsaCrtKey> = comps.iter().take(4).map(|c| c.key()).collect();
    let mut rng = StdRng::seed_from_u64(4);
    let msgs: Vec<Vec<u8>> = comps
        .iter()
        .take(4)
        .map(|c| be_padded(&rng.gen_biguint_below(&c.n), 256))
        .collect();
    let lanes: Vec<(&RsaCrtKey, &[u8])> = keys
        .iter()
        .zip(&msgs)
        .map(|(k, m)| (k, m.as_slice()))
        .collect();
    let sigs = rsa_private_crt_batch(Backend::best(), &lanes);
    let sigs: Vec<Vec<u8>> = sigs.into_iter().map(|s| s.unwrap()).collect();
    let back_lanes: Vec<(&RsaCrtKey, &[u8])> = keys
        .iter()
        .zip(&sigs)
        .map(|(k, s)| (k, s.as_slice()))
        .collect();
    let back = rsa_public_batch_vartime(&back_lanes);
    for (b, m) in back.iter().zip(&msgs) {
        assert_eq!(b.as_ref().unwrap(), m);
    }
}

/// The batched public operation on every backend, lanes with different public exponents (the
/// per-lane multiply steps) in batches of 1, 3, 8 and 9, against num-bigint; plus the per-lane
/// errors (a 3072-bit modulus, an input not below `n`).
#[test]
fn batched_public_op_matches_modpow() {
    let comps = load_keys(2048);
    let exps = [3u64, 65537, 17, 0x3fff_fffd, 65537, 5, 65537, 7, 65537];
    let b = |x: &BigUint| x.to_bytes_be();
    let keys: Vec<(BigUint, BigUint, RsaCrtKey)> = exps
        .iter()
        .enumerate()
        .map(|(i, &e)| {
            let c = &comps[i % comps.len()];
            let e = BigUint::from(e);
            let key = RsaCrtKey::from_components(
                &b(&c.n),
                &b(&e),
                &b(&c.d),
                &b(&c.p),
                &b(&c.q),
                &b(&c.dp),
                &b(&c.dq),
                &b(&c.qinv),
            )
            .expect("public exponent replaced");
            (c.n.clone(), e, key)
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(5);
    for backend in backends() {
        for batch in [1usize, 3, 8, 9] {
            let inputs: Vec<(BigUint, Vec<u8>)> = keys[..batch]
                .iter()
                .map(|(n, _, _)| {
                    let x = rng.gen_biguint_below(n);
                    let bytes = be_padded(&x, 256);
                    (x, bytes)
                })
                .collect();
            let lanes: Vec<(&RsaCrtKey, &[u8])> = keys[..batch]
                .iter()
                .zip(&inputs)
                .map(|((_, _, k), (_, i))| (k, i.as_slice()))
                .collect();
            let out = rsa_public_batch(backend, &lanes);
            for (i, r) in out.iter().enumerate() {
                let (n, e, _) = &keys[i];
                let want = inputs[i].0.modpow(e, n);
                let got = r.as_ref().unwrap_or_else(|e| panic!("lane {i}: {e}"));
                assert_eq!(got.len(), 256);
                assert_eq!(
                    BigUint::from_bytes_be(got),
                    want,
                    "backend {} lane {i} of {batch}",
                    backend.kind()
                );
            }
        }
        let big = load_keys(3072)[0].key();
        let too_big = vec![0xffu8; 256];
        let x = vec![1u8; 384];
        let lanes: Vec<(&RsaCrtKey, &[u8])> =
            vec![(&keys[0].2, too_big.as_slice()), (&big, x.as_slice())];
        let out = rsa_public_batch(backend, &lanes);
        assert_eq!(out[0], Err(MathError::InputOutOfRange));
        assert!(matches!(out[1], Err(MathError::Unsupported(_))));
    }
}

#[test]
fn key_validation() {
    let c = &load_keys(2048)[0];
    let b = |x: &BigUint| x.to_bytes_be();
    let mk = |n: &BigUint, p: &BigUint, qinv: &BigUint| {
        RsaCrtKey::from_components(
            &b(n),
            &b(&c.e),
            &b(&c.d),
            &b(p),
            &b(&c.q),
            &b(&c.dp),
            &b(&c.dq),
            &b(qinv),
        )
    };
    assert!(mk(&c.n, &c.p, &c.qinv).is_ok());
    assert!(matches!(
        mk(&(&c.n + 2u32), &c.p, &c.qinv),
        Err(MathError::InvalidKey(_))
    ));
    assert!(matches!(
        mk(&c.n, &c.p, &(&c.qinv + 1u32)),
        Err(MathError::InvalidKey(_))
    ));
    let small = BigUint::one() << 1023usize;
    assert!(matches!(
        mk(&(&small + 1u32), &c.p, &c.qinv),
        Err(MathError::Unsupported(_))
    ));
    let key = c.key();
    assert_eq!(key.modulus_bits(), 2048);
    let dbg = format!("{key:?}");
    assert!(dbg.contains("2048") && !dbg.to_lowercase().contains(&format!("{:x}", c.p)[..16]));
}
