//! ECDSA over P-256: signing with hedged nonces and verification.
//!
//! # Nonces
//!
//! `k` comes from RFC 6979's HMAC-DRBG (section 3.2, HMAC-SHA-256, `qlen = 256`) with the
//! "additional data" of section 3.6: the DRBG is seeded with
//! `int2octets(x) || bits2octets(h1) || entropy`, where `x` is the private key, `h1` the
//! message digest and `entropy` 32 fresh random bytes supplied by the caller (the provider
//! takes them from BoringSSL's `RAND_bytes`). With `entropy` empty this is RFC 6979 exactly
//! (the A.2.5 answers test that core). A candidate `k` outside `[1, n)`, or one giving
//! `r = 0` or `s = 0`, is replaced by the next DRBG output as section 3.2 step h says.
//!
//! BoringSSL (`ecdsa_sign_with_nonce` / `ecdsa_sign_digest` in `crypto/fipsmodule/ecdsa`)
//! hedges differently: it draws `k` by rejection sampling (`ec_random_nonzero_scalar`,
//! `bn_rand_range_words`) from its CTR-DRBG (`RAND_bytes_with_additional_data`, fresh OS
//! entropy) with 32 bytes of additional data, the first half of
//! `SHA-512(private key words || digest)`. Both hedge against a failing entropy source (the
//! nonce still depends on key and message) and against fault or replay of the deterministic
//! part (fresh randomness). We use the RFC 6979 form because it has published answers and
//! needs only SHA-256 here; signatures are not comparable byte for byte with BoringSSL's
//! (both are random), so tests check ours by verifying them with BoringSSL.
//!
//! # Constant time
//!
//! The key, the nonce and their products are secret: the DRBG is SHA-256 (no data-dependent
//! branch), `k G` is the fixed-window multiplication, `k^-1` is Fermat's inversion with the
//! public exponent `n - 2`. Branches: the range check of each DRBG candidate and the `r = 0`
//! / `s = 0` retries (each rejection is independent of the `k` finally used and has
//! probability about `2^-32` or less). Verification handles public data only and is
//! `_vartime`.

use super::field::{is_zero_mask, limbs_from_be, limbs_to_be, lt_mask, OrderN, Scalar};
use super::point::Point;
use crate::sha256::hmac_sha256;

/// An ECDSA signature: `r` and `s` as 32-byte big-endian integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EcdsaP256Signature {
    /// `r`, in `[1, n)` for a valid signature.
    pub r: [u8; 32],
    /// `s`, in `[1, n)` for a valid signature.
    pub s: [u8; 32],
}

/// `bits2int(h) mod n` as limbs: the leftmost 256 bits of the digest (shorter digests are
/// taken whole), reduced once.
fn digest_to_limbs(digest: &[u8]) -> [u64; 4] {
    let mut b = [0u8; 32];
    if digest.len() >= 32 {
        b.copy_from_slice(&digest[..32]);
    } else {
        b[32 - digest.len()..].copy_from_slice(digest);
    }
    limbs_from_be(&b)
}

/// Parses a private key: 32 bytes big-endian in `[1, n)`. Branches only on validity.
pub(crate) fn scalar_from_key(key: &[u8; 32]) -> Option<[u64; 4]> {
    let d = limbs_from_be(key);
    let ok = lt_mask::<OrderN>(d) & !is_zero_mask(d);
    (ok != 0).then_some(d)
}

/// RFC 6979's HMAC-DRBG (section 3.2 steps b to h) with section 3.6's additional data.
pub(crate) struct NonceDrbg {
    key: [u8; 32],
    v: [u8; 32],
    started: bool,
}

impl NonceDrbg {
    /// Seeded with `int2octets(d) || bits2octets(h1) || entropy` (steps d and f).
    pub(crate) fn new(d: &[u64; 4], e: &Scalar, entropy: &[u8]) -> Self {
        let mut x = limbs_to_be(*d);
        let h1 = e.to_be_bytes();
        let mut v = [1u8; 32];
        let mut key = hmac_sha256(&[0u8; 32], &[&v, &[0], &x, &h1, entropy]);
        v = hmac_sha256(&key, &[&v]);
        key = hmac_sha256(&key, &[&v, &[1], &x, &h1, entropy]);
        v = hmac_sha256(&key, &[&v]);
        x = core::hint::black_box([0; 32]);
        let _ = x;
        NonceDrbg {
            key,
            v,
            started: false,
        }
    }

    /// The next candidate in `[1, n)` (step h; after the first call, the candidate before
    /// was refused, so K and V are updated first). The range check branches: a rejection
    /// says nothing about the `k` finally used.
    pub(crate) fn next_nonce(&mut self) -> [u64; 4] {
        loop {
            if self.started {
                self.key = hmac_sha256(&self.key, &[&self.v, &[0]]);
                self.v = hmac_sha256(&self.key, &[&self.v]);
            }
            self.started = true;
            self.v = hmac_sha256(&self.key, &[&self.v]);
            let k = limbs_from_be(&self.v);
            if lt_mask::<OrderN>(k) & !is_zero_mask(k) != 0 {
                return k;
            }
        }
    }
}

impl Drop for NonceDrbg {
    fn drop(&mut self) {
        self.key = core::hint::black_box([0; 32]);
        self.v = core::hint::black_box([0; 32]);
    }
}

/// The signing core: RFC 6979 with `entropy` as section 3.6's additional data. `d` must be
/// in `[1, n)`.
pub(crate) fn sign(d: &[u64; 4], digest: &[u8], entropy: &[u8]) -> EcdsaP256Signature {
    let e = digest_scalar(digest);
    let mut drbg = NonceDrbg::new(d, &e, entropy);
    loop {
        let k = drbg.next_nonce();
        let (sig, ok) = sign_with_nonce(d, &e, &k);
        if ok != 0 {
            return sig;
        }
    }
}

/// `(r, s)` for the nonce `k` and all ones, or all zero if `r = 0` or `s = 0`. `d` and `k`
/// must be in `[1, n)`. No branch at all: the constant-time harness runs this with `d` and
/// `k` secret.
pub(crate) fn sign_with_nonce(d: &[u64; 4], e: &Scalar, k: &[u64; 4]) -> (EcdsaP256Signature, u64) {
    // k in [1, n): k G is never the identity.
    let rx = limbs_from_be(&Point::mul_base(k).to_affine().x);
    sign_with_rx(d, e, k, &rx)
}

/// As [`sign_with_nonce`], given `x(k G)` (canonical limbs) computed elsewhere.
pub(crate) fn sign_with_rx(
    d: &[u64; 4],
    e: &Scalar,
    k: &[u64; 4],
    rx: &[u64; 4],
) -> (EcdsaP256Signature, u64) {
    let mut km = Scalar::from_reduced(*k);
    let mut k_inv = km.invert();
    let out = sign_with_rx_kinv(d, e, &k_inv, rx);
    km.wipe();
    k_inv.wipe();
    out
}

/// As [`sign_with_rx`], given `k^-1` (from [`invert_batch`]).
pub(crate) fn sign_with_rx_kinv(
    d: &[u64; 4],
    e: &Scalar,
    k_inv: &Scalar,
    rx: &[u64; 4],
) -> (EcdsaP256Signature, u64) {
    let r = Scalar::from_u256(*rx);
    let mut dm = Scalar::from_reduced(*d);
    // s = k^-1 (e + r d)
    let mut s = k_inv.mul(&e.add(&r.mul(&dm)));
    let ok = !r.is_zero() & !s.is_zero();
    let sig = EcdsaP256Signature {
        r: r.to_be_bytes(),
        s: s.to_be_bytes(),
    };
    s.wipe();
    dm.wipe();
    (sig, ok)
}

/// `k_i^-1 mod n` for nonces in `[1, n)` with one inversion (Montgomery's trick: prefix
/// products, one Fermat inversion, then back). Constant time: products only.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn invert_batch(ks: &[[u64; 4]]) -> Vec<Scalar> {
    let ms: Vec<Scalar> = ks.iter().map(|k| Scalar::from_reduced(*k)).collect();
    let mut prefix = Vec::with_capacity(ms.len());
    let mut acc = Scalar::one();
    for m in &ms {
        prefix.push(acc);
        acc = acc.mul(m);
    }
    let mut inv = acc.invert();
    let mut out = vec![Scalar::ZERO; ms.len()];
    for i in (0..ms.len()).rev() {
        out[i] = inv.mul(&prefix[i]);
        inv = inv.mul(&ms[i]);
    }
    prefix.iter_mut().for_each(Scalar::wipe);
    inv.wipe();
    acc.wipe();
    out
}

/// `bits2int(digest) mod n` in Montgomery form.
pub(crate) fn digest_scalar(digest: &[u8]) -> Scalar {
    Scalar::from_u256(digest_to_limbs(digest))
}

/// Verifies `sig` over `digest` with the public point `q` (already validated). Public data:
/// branches freely.
pub(crate) fn verify_vartime(q: &Point, digest: &[u8], sig: &EcdsaP256Signature) -> bool {
    match verify_scalars_vartime(digest, sig) {
        Some((u1, u2, r)) => verify_finish_vartime(&u1, &q.mul(&u2), &r),
        None => false,
    }
}

/// `(u1, u2, r)` of the verification equation `R = u1 G + u2 Q` (canonical limbs), or `None`
/// if `r` or `s` is outside `[1, n)`.
pub(crate) fn verify_scalars_vartime(
    digest: &[u8],
    sig: &EcdsaP256Signature,
) -> Option<([u64; 4], [u64; 4], [u64; 4])> {
    let (r, s) = (limbs_from_be(&sig.r), limbs_from_be(&sig.s));
    let in_range = |v: [u64; 4]| lt_mask::<OrderN>(v) != 0 && is_zero_mask(v) == 0;
    if !in_range(r) || !in_range(s) {
        return None;
    }
    let e = digest_scalar(digest);
    let w = Scalar::from_reduced(s).invert();
    let rm = Scalar::from_reduced(r);
    Some((e.mul(&w).to_limbs(), rm.mul(&w).to_limbs(), r))
}

/// Whether `x(u1 G + u2q) mod n == r`, given `u2q = u2 Q` (computed here or on the lanes).
pub(crate) fn verify_finish_vartime(u1: &[u64; 4], u2q: &Point, r: &[u64; 4]) -> bool {
    let p = Point::mul_base(u1).add(u2q);
    if p.is_identity() != 0 {
        return false;
    }
    let x = Scalar::from_u256(limbs_from_be(&p.to_affine().x)).to_limbs();
    x == *r
}

impl EcdsaP256Signature {
    /// DER `ECDSA-Sig-Value` (`SEQUENCE { INTEGER r, INTEGER s }`), as TLS carries it.
    pub fn to_der(&self) -> Vec<u8> {
        fn int(v: &[u8; 32], out: &mut Vec<u8>) {
            let start = v.iter().position(|&b| b != 0).unwrap_or(31);
            let body = &v[start..];
            let pad = body[0] & 0x80 != 0;
            out.push(0x02);
            out.push((body.len() + usize::from(pad)) as u8);
            if pad {
                out.push(0);
            }
            out.extend_from_slice(body);
        }
        let mut body = Vec::with_capacity(72);
        int(&self.r, &mut body);
        int(&self.s, &mut body);
        let mut out = Vec::with_capacity(body.len() + 2);
        out.push(0x30);
        out.push(body.len() as u8);
        out.extend_from_slice(&body);
        out
    }

    /// Parses a strict DER `ECDSA-Sig-Value` (minimal lengths and integers, positive, at most
    /// 32 bytes of magnitude, nothing trailing). `None` for anything else.
    pub fn from_der(der: &[u8]) -> Option<Self> {
        fn int(b: &[u8]) -> Option<([u8; 32], &[u8])> {
            let (&tag, rest) = b.split_first()?;
            let (&len, rest) = rest.split_first()?;
            let len = usize::from(len);
            if tag != 0x02 || len == 0 || len >= 0x80 || rest.len() < len {
                return None;
            }
            let (v, rest) = rest.split_at(len);
            if v[0] & 0x80 != 0 || (len > 1 && v[0] == 0 && v[1] & 0x80 == 0) {
                return None; // negative or not minimal
            }
            let v = if v[0] == 0 && len > 1 { &v[1..] } else { v };
            if v.len() > 32 {
                return None;
            }
            let mut out = [0u8; 32];
            out[32 - v.len()..].copy_from_slice(v);
            Some((out, rest))
        }
        let (&tag, rest) = der.split_first()?;
        let (&len, rest) = rest.split_first()?;
        if tag != 0x30 || len >= 0x80 || rest.len() != usize::from(len) {
            return None;
        }
        let (r, rest) = int(rest)?;
        let (s, rest) = int(rest)?;
        rest.is_empty().then_some(EcdsaP256Signature { r, s })
    }
}
