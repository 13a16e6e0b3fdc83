//! P-256 (secp256r1) for batched TLS handshakes: the key share (ECDH) and ECDSA certificate
//! signatures, many independent operations per call (issue 31, not yet wired into the
//! providers).
//!
//! * [`p256_public_key_batch`]: our ephemeral public points `d G` (key generation for the key
//!   share; the only P-256 step of a TLS 1.2 ECDHE handshake that can be batched).
//! * [`p256_ecdh_batch`]: the TLS 1.3 `secp256r1` key share: each job's peer point is decoded
//!   and validated (uncompressed SEC1, both coordinates below `p`, on the curve: so not the
//!   identity), then the shared secret is the x-coordinate of `d Q` (RFC 8446, 7.4.2).
//! * [`ecdsa_p256_sign_batch`]: signatures with hedged RFC 6979 nonces (see `ecdsa` for
//!   exactly what), [`ecdsa_p256_verify_batch_vartime`]: the verify check (public data).
//!
//! A bad input (a private key outside `[1, n)`, an invalid peer point) fails its own job
//! only. Backends:
//!
//! * `ifma`: the variable-base multiplications run 8 jobs per pass, one per 64-bit lane of a
//!   `zmm` (`ifma::p256`: 5 x 52-bit limbs, the RSA code's `vpmadd52` products, the same
//!   complete formulas, a per-lane masked window scan): ECDH `d Q` and the `u2 Q` half of
//!   verification; public keys and ECDSA's `k G` by a fixed-base comb over the lanes (64
//!   additions, each row's 16 entries broadcast and masked per lane); signing inverts its
//!   nonces with one inversion (Montgomery's trick). Same outputs as the portable code.
//! * every other backend (`portable`, `avx2`, `fma`) runs the portable code one job at a
//!   time: `field` (4 x 64-bit Montgomery arithmetic modulo `p` and `n`), `point` (complete
//!   projective formulas, fixed-window and fixed-base comb multiplications). A 4-lane AVX2
//!   form is later work.
//!
//! Constant time: see `field`, `point` and `ecdsa`. Secret inputs (private keys, nonces) only
//! ever become masks; the branches are on validity (of a key, a peer point, a DRBG
//! candidate) and on public data.

mod ecdsa;
pub(crate) mod field;
pub(crate) mod point;

pub use ecdsa::EcdsaP256Signature;

use crate::backend::Backend;
use crate::error::MathError;
use point::Point;

/// A number below `2^256`, little-endian 64-bit limbs.
type Limbs = [u64; 4];
/// A multiplication for the IFMA lanes: the job's index, `Qx`, `Qy` (affine, validated)
/// and the scalar.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
type LaneJob = (usize, Limbs, Limbs, Limbs);

/// The most jobs one SIMD pass will take (one per 64-bit lane of a `zmm`); any number of jobs
/// may be passed, they are processed in such groups.
pub const P256_LANES: usize = 8;

/// Bytes of an uncompressed SEC1 point (`04 || x || y`), the TLS 1.3 key share encoding.
pub const P256_POINT_BYTES: usize = 65;

/// One ECDH job: our private scalar and the peer's key share.
#[derive(Clone, Copy)]
pub struct P256EcdhJob<'a> {
    /// Our ephemeral private scalar, 32 bytes big-endian in `[1, n)`.
    pub private: &'a [u8; 32],
    /// The peer's point, uncompressed SEC1 (65 bytes).
    pub peer: &'a [u8],
}

/// One ECDSA signing job.
#[derive(Clone, Copy)]
pub struct EcdsaP256SignJob<'a> {
    /// The private key, 32 bytes big-endian in `[1, n)`.
    pub private: &'a [u8; 32],
    /// The message digest (SHA-256 for `ecdsa_secp256r1_sha256`; longer digests are
    /// truncated to their leftmost 256 bits as FIPS 186 says).
    pub digest: &'a [u8],
    /// 32 fresh random bytes hedging the nonce (RFC 6979 section 3.6 additional data).
    pub entropy: &'a [u8; 32],
}

/// One ECDSA verification job.
#[derive(Clone, Copy)]
pub struct EcdsaP256VerifyJob<'a> {
    /// The signer's public point, uncompressed SEC1 (65 bytes).
    pub public: &'a [u8],
    /// The message digest.
    pub digest: &'a [u8],
    /// The signature.
    pub signature: &'a EcdsaP256Signature,
}

fn private_scalar(key: &[u8; 32]) -> Result<[u64; 4], MathError> {
    ecdsa::scalar_from_key(key).ok_or(MathError::InvalidKey("P-256 private key not in [1, n)"))
}

/// `d G` for each private scalar: uncompressed SEC1 public points. On `ifma` 8 per pass
/// (the lanes' variable-base multiplication with `Q = G`), elsewhere the portable comb.
pub fn p256_public_key_batch(
    backend: Backend,
    privates: &[&[u8; 32]],
) -> Vec<Result<[u8; P256_POINT_BYTES], MathError>> {
    let scalars: Vec<Result<[u64; 4], MathError>> =
        privates.iter().map(|k| private_scalar(k)).collect();
    #[cfg(target_arch = "x86_64")]
    if let Backend::Ifma(token) = backend {
        let (gx, gy) = Point::generator_affine_limbs();
        let jobs: Vec<LaneJob> = scalars
            .iter()
            .enumerate()
            .filter_map(|(i, d)| d.as_ref().ok().map(|&d| (i, gx, gy, d)))
            .collect();
        let mut out: Vec<Result<[u8; P256_POINT_BYTES], MathError>> = scalars
            .iter()
            .map(|d| d.clone().map(|_| [0u8; 65]))
            .collect();
        for (i, r) in ifma_mul(token, &jobs, true) {
            // d in [1, n): never the identity.
            if let Some((x, y)) = r {
                let mut enc = [0u8; P256_POINT_BYTES];
                enc[0] = 4;
                enc[1..33].copy_from_slice(&field::limbs_to_be(x));
                enc[33..].copy_from_slice(&field::limbs_to_be(y));
                out[i] = Ok(enc);
            }
        }
        return out;
    }
    let _ = backend;
    scalars
        .into_iter()
        .map(|d| {
            let mut d = d?;
            let p = Point::mul_base(&d);
            d = core::hint::black_box([0; 4]);
            let _ = d;
            Ok(p.encode())
        })
        .collect()
}

/// The TLS 1.3 `secp256r1` shared secret for each job: the x-coordinate of `d Q`, 32 bytes.
/// An invalid peer point is [`MathError::InvalidPublicKey`]. On `ifma` the valid jobs run 8
/// per pass (`ifma::p256`), elsewhere one at a time.
pub fn p256_ecdh_batch(
    backend: Backend,
    jobs: &[P256EcdhJob<'_>],
) -> Vec<Result<[u8; 32], MathError>> {
    let decoded: Vec<Result<(Limbs, Limbs, Limbs), MathError>> = jobs
        .iter()
        .map(|j| {
            let (x, y) = Point::decode_affine_vartime(j.peer)
                .ok_or(MathError::InvalidPublicKey("P-256 point not on the curve"))?;
            Ok((x, y, private_scalar(j.private)?))
        })
        .collect();
    let identity = || MathError::InvalidPublicKey("P-256 shared point is the identity");
    #[cfg(target_arch = "x86_64")]
    if let Backend::Ifma(token) = backend {
        let mut out: Vec<Result<[u8; 32], MathError>> = decoded
            .iter()
            .map(|d| d.clone().map(|_| [0u8; 32]))
            .collect();
        let valid: Vec<usize> = (0..jobs.len()).filter(|&i| decoded[i].is_ok()).collect();
        let chunk_jobs: Vec<LaneJob> = valid
            .iter()
            .filter_map(|&i| decoded[i].as_ref().ok().map(|&(x, y, d)| (i, x, y, d)))
            .collect();
        for (i, r) in ifma_mul(token, &chunk_jobs, false) {
            out[i] = match r {
                Some((x, _)) => Ok(field::limbs_to_be(x)),
                None => Err(identity()),
            };
        }
        return out;
    }
    let _ = backend;
    decoded
        .into_iter()
        .map(|d| {
            let (x, y, k) = d?;
            let q = Point::from_affine_limbs(x, y);
            let (shared, ok) = ecdh(&k, &q);
            // Q has prime order n and d is in [1, n): never the identity; checked anyway.
            if ok == 0 {
                return Err(identity());
            }
            Ok(shared)
        })
        .collect()
}

/// `d Q` for jobs `(index, Qx, Qy, d)` on the IFMA lanes, 8 per pass (the unused lanes of
/// the last pass compute `1 G`): per index, the affine coordinates, `None` for the identity.
/// `base`: every `Q` is `G` (the given coordinates are ignored), by the fixed-base comb.
#[cfg(target_arch = "x86_64")]
fn ifma_mul(
    token: crate::token::IfmaToken,
    jobs: &[LaneJob],
    base: bool,
) -> Vec<(usize, Option<(Limbs, Limbs)>)> {
    let mut out = Vec::with_capacity(jobs.len());
    for chunk in jobs.chunks(P256_LANES) {
        let (gx, gy) = Point::generator_affine_limbs();
        let (mut qx, mut qy, mut k) = ([gx; 8], [gy; 8], [[1u64, 0, 0, 0]; 8]);
        for (l, &(_, x, y, d)) in chunk.iter().enumerate() {
            (qx[l], qy[l], k[l]) = (x, y, d);
        }
        let r = if base {
            crate::ifma::p256::mul_base_8(token, &k)
        } else {
            crate::ifma::p256::mul_8(token, &qx, &qy, &k)
        };
        k = core::hint::black_box([[0; 4]; 8]);
        let _ = k;
        for (l, &(i, ..)) in chunk.iter().enumerate() {
            out.push((i, (!r.identity[l]).then_some((r.x[l], r.y[l]))));
        }
    }
    out
}

/// `x(d Q)` and all ones, or all zero if `d Q` is the identity. No branch.
fn ecdh(d: &[u64; 4], q: &Point) -> ([u8; 32], u64) {
    let s = q.mul(d);
    (s.to_affine().x, !s.is_identity())
}

/// The constant-time harness's entry (`mbmath-ctgrind p256`): ECDH with a private scalar
/// that the caller guarantees to be in `[1, n)` (not checked: the check would branch on it)
/// and a peer point validated here (public). Returns the shared x-coordinate and the
/// all-ones success mask; `None` for an invalid point.
#[doc(hidden)]
pub fn p256_ecdh_unchecked(private: &[u8; 32], peer: &[u8]) -> Option<([u8; 32], u64)> {
    let q = Point::decode_vartime(peer)?;
    Some(ecdh(&field::limbs_from_be(private), &q))
}

/// The constant-time harness's entry: the signature for a given nonce `k`, with the private
/// key and `k` in `[1, n)` (not checked), and the success mask (zero if `r = 0` or `s = 0`).
#[doc(hidden)]
pub fn ecdsa_p256_sign_with_nonce_unchecked(
    private: &[u8; 32],
    digest: &[u8],
    k: &[u8; 32],
) -> (EcdsaP256Signature, u64) {
    ecdsa::sign_with_nonce(
        &field::limbs_from_be(private),
        &ecdsa::digest_scalar(digest),
        &field::limbs_from_be(k),
    )
}

/// ECDSA signatures, one per job (hedged RFC 6979 nonces, see the module docs). On `ifma`
/// the `k G` of 8 jobs run in one pass (the rest, `s`, per job); the same signatures as the
/// portable code.
pub fn ecdsa_p256_sign_batch(
    backend: Backend,
    jobs: &[EcdsaP256SignJob<'_>],
) -> Vec<Result<EcdsaP256Signature, MathError>> {
    let keys: Vec<Result<[u64; 4], MathError>> =
        jobs.iter().map(|j| private_scalar(j.private)).collect();
    #[cfg(target_arch = "x86_64")]
    if let Backend::Ifma(token) = backend {
        let (gx, gy) = Point::generator_affine_limbs();
        let mut nonces: Vec<LaneJob> = Vec::new();
        let mut digests = Vec::new();
        for (i, d) in keys.iter().enumerate() {
            if let Ok(d) = d {
                let e = ecdsa::digest_scalar(jobs[i].digest);
                let k = ecdsa::NonceDrbg::new(d, &e, jobs[i].entropy).next_nonce();
                nonces.push((i, gx, gy, k));
                digests.push(e);
            }
        }
        let mut out: Vec<Result<EcdsaP256Signature, MathError>> = keys
            .iter()
            .map(|d| {
                d.clone().map(|_| EcdsaP256Signature {
                    r: [0; 32],
                    s: [0; 32],
                })
            })
            .collect();
        let ks: Vec<[u64; 4]> = nonces.iter().map(|n| n.3).collect();
        let mut k_invs = ecdsa::invert_batch(&ks);
        for ((i, r), (k_inv, e)) in ifma_mul(token, &nonces, true)
            .into_iter()
            .zip(k_invs.iter().zip(&digests))
        {
            let Ok(d) = &keys[i] else { continue };
            // k in [1, n): k G is never the identity.
            let (sig, ok) = match r {
                Some((rx, _)) => ecdsa::sign_with_rx_kinv(d, e, k_inv, &rx),
                None => (
                    EcdsaP256Signature {
                        r: [0; 32],
                        s: [0; 32],
                    },
                    0,
                ),
            };
            // r = 0 or s = 0 (probability about 2^-256): the portable path continues the
            // same DRBG to its next candidate, so the result is the same as there.
            out[i] = Ok(if ok != 0 {
                sig
            } else {
                ecdsa::sign(d, jobs[i].digest, jobs[i].entropy)
            });
        }
        nonces.iter_mut().for_each(|n| n.3 = [0; 4]);
        k_invs.iter_mut().for_each(field::Scalar::wipe);
        return out;
    }
    let _ = backend;
    keys.into_iter()
        .zip(jobs)
        .map(|(d, j)| Ok(ecdsa::sign(&d?, j.digest, j.entropy)))
        .collect()
}

/// Deterministic RFC 6979 signing (no added randomness): the core [`ecdsa_p256_sign_batch`]
/// hedges, exposed for the RFC's known answers only.
#[doc(hidden)]
pub fn ecdsa_p256_sign_rfc6979(
    private: &[u8; 32],
    digest: &[u8],
) -> Result<EcdsaP256Signature, MathError> {
    Ok(ecdsa::sign(&private_scalar(private)?, digest, &[]))
}

/// The ECDSA verify check for each job: `true` iff the public point is valid and the
/// signature verifies. Public data only: not constant time.
pub fn ecdsa_p256_verify_batch_vartime(
    backend: Backend,
    jobs: &[EcdsaP256VerifyJob<'_>],
) -> Vec<bool> {
    #[cfg(target_arch = "x86_64")]
    if let Backend::Ifma(token) = backend {
        // u2 Q on the lanes, u1 G by the portable comb.
        let mut out = vec![false; jobs.len()];
        let mut lanes = Vec::new();
        let mut rest = Vec::new();
        for (i, j) in jobs.iter().enumerate() {
            let Some((qx, qy)) = Point::decode_affine_vartime(j.public) else {
                continue;
            };
            let Some((u1, u2, r)) = ecdsa::verify_scalars_vartime(j.digest, j.signature) else {
                continue;
            };
            lanes.push((i, qx, qy, u2));
            rest.push((u1, r));
        }
        for ((i, u2q), (u1, r)) in ifma_mul(token, &lanes, false).into_iter().zip(&rest) {
            let u2q = match u2q {
                Some((x, y)) => Point::from_affine_limbs(x, y),
                None => Point::identity(),
            };
            out[i] = ecdsa::verify_finish_vartime(u1, &u2q, r);
        }
        return out;
    }
    let _ = backend;
    jobs.iter()
        .map(|j| match Point::decode_vartime(j.public) {
            Some(q) => ecdsa::verify_vartime(&q, j.digest, j.signature),
            None => false,
        })
        .collect()
}
