//! X25519 (RFC 7748) in batches: the key exchange of a TLS 1.3 handshake, computed for up to
//! 8 handshakes at once.
//!
//! [`x25519_batch`] computes `X25519(k_i, u_i)` for each job. The `ifma` backend runs one
//! Montgomery ladder per `zmm` lane (`ifma::x25519`: radix 2^51, 5 limbs per field element,
//! 52x52-bit products with `vpmadd52{l,h}uq`), and for public keys (`u = 9`) the Edwards
//! form's fixed-base comb per lane instead (`ifma::x25519_base`, about a third of the work;
//! see `x25519_base`); the `portable` backend runs the same two one job at a time on `u64`
//! limbs with `u128` products (`field25519`; its ladder is the reference the tests compare the
//! SIMD code and the combs with). `avx2` and `fma` have no X25519 ([`MathError::Unsupported`]): there
//! BoringSSL's own single-operation code is faster than anything batched here.
//!
//! Constant time: the ladder runs all 255 steps for every scalar; the conditional swap is a
//! masked exchange (`(a ^ b) & mask`), the scalar bit only ever becomes a mask, the
//! inversion is a fixed addition chain, and the final reduction to canonical bytes is a
//! masked subtraction. No branch or address depends on the scalar, the point or any
//! intermediate. The dudect-style timing test (`tests/dudect.rs`) measures the `ifma` ladder
//! with fixed vs random scalars.

use crate::backend::Backend;
use crate::error::MathError;
use crate::field25519::{
    add, clamp, cswap, fe_from_bytes, fe_to_bytes, invert_with, mul, mul_small, sqr_n, sub, wipe,
    A24,
};

/// Lanes per batch: one `zmm` register of 64-bit lanes.
pub const X25519_LANES: usize = 8;

/// The base point's u-coordinate (9), for computing public keys.
pub const X25519_BASE_POINT: [u8; 32] = {
    let mut b = [0u8; 32];
    b[0] = 9;
    b
};

/// One X25519 job: a 32-byte scalar (clamped here, as RFC 7748 says) and a 32-byte
/// u-coordinate (its top bit ignored).
#[derive(Clone, Copy)]
pub struct X25519Job<'a> {
    /// The private scalar.
    pub scalar: &'a [u8; 32],
    /// The peer's public value, or [`X25519_BASE_POINT`].
    pub point: &'a [u8; 32],
}

/// `X25519(scalar, point)` for every job, in order. An all-zero output (a low-order point)
/// is returned as it is: the caller rejects it, as RFC 7748 section 6.1 says a TLS peer must.
pub fn x25519_batch(backend: Backend, jobs: &[X25519Job<'_>]) -> Result<Vec<[u8; 32]>, MathError> {
    match backend {
        Backend::Portable => Ok(jobs
            .iter()
            .map(|j| {
                if *j.point == X25519_BASE_POINT {
                    crate::x25519_base::x25519_base_portable(j.scalar)
                } else {
                    x25519_portable(j.scalar, j.point)
                }
            })
            .collect()),
        #[cfg(target_arch = "x86_64")]
        Backend::Ifma(token) => {
            // Public keys (the base point) by the fixed-base comb, the rest by the ladder.
            let mut out = vec![[0u8; 32]; jobs.len()];
            let (base, peer): (Vec<usize>, Vec<usize>) =
                (0..jobs.len()).partition(|&i| *jobs[i].point == X25519_BASE_POINT);
            for (idx, is_base) in [(base, true), (peer, false)] {
                for chunk in idx.chunks(X25519_LANES) {
                    let mut scalars = [[0u8; 32]; X25519_LANES];
                    let mut points = [[0u8; 32]; X25519_LANES];
                    for (l, &i) in chunk.iter().enumerate() {
                        scalars[l] = *jobs[i].scalar;
                        points[l] = *jobs[i].point;
                    }
                    let res = if is_base {
                        crate::ifma::x25519_base::x25519_base_8(token, &scalars)
                    } else {
                        crate::ifma::x25519::x25519_8(token, &scalars, &points)
                    };
                    wipe(&mut scalars);
                    for (l, &i) in chunk.iter().enumerate() {
                        out[i] = res[l];
                    }
                }
            }
            Ok(out)
        }
        #[allow(unreachable_patterns)]
        _ => Err(MathError::Unsupported("X25519 on this backend")),
    }
}

/// X25519 one job at a time (RFC 7748 section 5): the reference for the SIMD ladder.
pub fn x25519_portable(scalar: &[u8; 32], point: &[u8; 32]) -> [u8; 32] {
    let k = clamp(scalar);
    let x1 = fe_from_bytes(point);
    let (mut x2, mut z2, mut x3, mut z3) = ([1, 0, 0, 0, 0], [0; 5], x1, [1, 0, 0, 0, 0]);
    let mut swap = 0u64;
    for t in (0..255).rev() {
        let bit = u64::from((k[t / 8] >> (t % 8)) & 1);
        swap ^= bit;
        cswap(swap.wrapping_neg(), &mut x2, &mut x3);
        cswap(swap.wrapping_neg(), &mut z2, &mut z3);
        swap = bit;
        let a = add(&x2, &z2);
        let aa = mul(&a, &a);
        let b = sub(&x2, &z2);
        let bb = mul(&b, &b);
        let e = sub(&aa, &bb);
        let c = add(&x3, &z3);
        let d = sub(&x3, &z3);
        let da = mul(&d, &a);
        let cb = mul(&c, &b);
        let s = add(&da, &cb);
        x3 = mul(&s, &s);
        let dd = sub(&da, &cb);
        z3 = mul(&x1, &mul(&dd, &dd));
        x2 = mul(&aa, &bb);
        z2 = mul(&e, &add(&aa, &mul_small(&e, A24)));
    }
    cswap(swap.wrapping_neg(), &mut x2, &mut x3);
    cswap(swap.wrapping_neg(), &mut z2, &mut z3);
    let inv = invert_with(&z2, mul, sqr_n);
    fe_to_bytes(&mul(&x2, &inv))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field25519::{Fe, M51};

    fn hex32(s: &str) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }

    /// RFC 7748 section 5.2's two vectors and section 6.1's key pairs and shared secret.
    pub(crate) fn rfc7748_vectors() -> Vec<([u8; 32], [u8; 32], [u8; 32])> {
        let v = [
            (
                "a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
                "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
                "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552",
            ),
            (
                "4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
                "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
                "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957",
            ),
            (
                "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
                "0900000000000000000000000000000000000000000000000000000000000000",
                "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a",
            ),
            (
                "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb",
                "0900000000000000000000000000000000000000000000000000000000000000",
                "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f",
            ),
            (
                "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
                "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f",
                "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742",
            ),
        ];
        v.iter()
            .map(|(k, u, r)| (hex32(k), hex32(u), hex32(r)))
            .collect()
    }

    #[test]
    fn portable_matches_rfc7748() {
        for (k, u, r) in rfc7748_vectors() {
            assert_eq!(x25519_portable(&k, &u), r);
        }
    }

    /// RFC 7748 section 5.2's iteration: k = u = 9, then `k, u = X25519(k, u), k`.
    fn iterate(backend: Backend, n: usize) -> [u8; 32] {
        let (mut k, mut u) = (X25519_BASE_POINT, X25519_BASE_POINT);
        for _ in 0..n {
            let r = x25519_batch(
                backend,
                &[X25519Job {
                    scalar: &k,
                    point: &u,
                }],
            )
            .unwrap()[0];
            u = k;
            k = r;
        }
        k
    }

    #[test]
    fn portable_iterated() {
        assert_eq!(
            iterate(Backend::Portable, 1),
            hex32("422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079")
        );
        assert_eq!(
            iterate(Backend::Portable, 1000),
            hex32("684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51")
        );
    }

    #[test]
    fn canonical_encoding_of_values_at_and_above_p() {
        // p itself and p + 1 encode as 0 and 1; 2^255 - 1 = p + 18 as 18.
        let p: Fe = [M51 - 18, M51, M51, M51, M51];
        assert_eq!(fe_to_bytes(&p), [0u8; 32]);
        let mut one = [0u8; 32];
        one[0] = 1;
        assert_eq!(fe_to_bytes(&[M51 - 17, M51, M51, M51, M51]), one);
        let mut e18 = [0u8; 32];
        e18[0] = 18;
        assert_eq!(fe_to_bytes(&[M51, M51, M51, M51, M51]), e18);
        // Limbs at their bound between operations (below 2^52): the same value as after a
        // multiplication by one, which carries differently.
        let big = (1u64 << 52) - 1;
        assert_eq!(
            fe_to_bytes(&[big; 5]),
            fe_to_bytes(&mul(&[big; 5], &[1, 0, 0, 0, 0]))
        );
    }

    #[test]
    fn ifma_matches_portable_and_rfc7748() {
        let Ok(backend) = Backend::new(crate::BackendKind::Ifma) else {
            eprintln!("no AVX-512 IFMA on this CPU: ifma X25519 not run");
            return;
        };
        let vecs = rfc7748_vectors();
        let jobs: Vec<X25519Job<'_>> = vecs
            .iter()
            .map(|(k, u, _)| X25519Job {
                scalar: k,
                point: u,
            })
            .collect();
        let got = x25519_batch(backend, &jobs).unwrap();
        for (g, (_, _, r)) in got.iter().zip(&vecs) {
            assert_eq!(g, r);
        }
        assert_eq!(
            iterate(backend, 1000),
            hex32("684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51")
        );
        // Random jobs, every batch shape from 1 to 17, against the portable ladder; points
        // include the base point (the comb's jobs, mixed with the ladder's), non-canonical
        // ones (>= p, top bit set) and small-order ones.
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7748);
        let mut specials: Vec<[u8; 32]> = vec![[0u8; 32], [0xff; 32]];
        let mut one = [0u8; 32];
        one[0] = 1;
        specials.push(one);
        let mut p = [0xffu8; 32];
        p[0] = 0xed;
        p[31] = 0x7f;
        specials.push(p);
        for n in 1..=17 {
            let scalars: Vec<[u8; 32]> = (0..n).map(|_| rng.gen()).collect();
            let points: Vec<[u8; 32]> = (0..n)
                .map(|i| match i % 5 {
                    4 => specials[i % specials.len()],
                    1 | 2 => X25519_BASE_POINT,
                    _ => rng.gen(),
                })
                .collect();
            let jobs: Vec<X25519Job<'_>> = scalars
                .iter()
                .zip(&points)
                .map(|(k, u)| X25519Job {
                    scalar: k,
                    point: u,
                })
                .collect();
            let got = x25519_batch(backend, &jobs).unwrap();
            for (g, j) in got.iter().zip(&jobs) {
                assert_eq!(*g, x25519_portable(j.scalar, j.point));
            }
        }
    }
}
