//! Lane validation and conversions: which lanes crypto_mb can compute, big-endian bytes to and
//! from crypto_mb's little-endian 64-bit limbs, the P-256 digest reduction and nonce, and the
//! DER encoding of the signatures it returns.
//!
//! Constant time in the secret inputs: limbs are copied without branching on secret values,
//! and leading zero bytes of secret parts are checked with an OR fold, never stripped.

use crate::engine::{wipe, EcKeyParts, LaneError, RsaKeyParts, RsaLane};

/// Lanes per crypto_mb call.
pub(super) const LANES: usize = 8;
/// RSA modulus sizes crypto_mb computes.
pub(super) const RSA_BITS: [u32; 4] = [1024, 2048, 3072, 4096];

/// P-256 group order n, big-endian.
const P256_N: [u8; 32] = [
    0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
    0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
];

/// Whether the key's public exponent is 65537, the only one `mbx_rsa_public_mb8` computes.
pub(super) fn is_f4(key: &RsaKeyParts) -> bool {
    strip_zeros(&key.e) == [1, 0, 1]
}

/// Validate one RSA lane; returns its size group (index into `RSA_BITS`).
pub(super) fn check_rsa_lane(lane: &RsaLane<'_>) -> Result<usize, LaneError> {
    let k: &RsaKeyParts = lane.key;
    let Some(g) = RSA_BITS.iter().position(|&b| b == k.bits) else {
        return Err(LaneError::Unsupported);
    };
    let bytes = k.bits as usize / 8;
    // The modulus is public: strip leading zeros and require exactly `bits` bits.
    let n = strip_zeros(&k.n);
    if n.len() != bytes || n[0] & 0x80 == 0 {
        return Err(LaneError::Unsupported);
    }
    if lane.input.len() != bytes {
        return Err(LaneError::Failed(format!(
            "input is {} bytes, modulus is {bytes}",
            lane.input.len()
        )));
    }
    // Inputs are public (padded block or ciphertext); big-endian equal length: compare bytes.
    if lane.input >= n {
        return Err(LaneError::Failed(
            "input is not less than the modulus".into(),
        ));
    }
    Ok(g)
}

/// Validate one ECDSA lane: returns the digest reduced mod n (big-endian) and the private key
/// as little-endian limbs.
pub(super) fn check_ecdsa_lane(
    key: &EcKeyParts,
    digest: &[u8],
) -> Result<([u8; 32], [u64; 4]), LaneError> {
    let d = be_to_le_limbs(&key.d, 4)
        .ok_or_else(|| LaneError::Failed("P-256 private key longer than 32 bytes".into()))?;
    let d: [u64; 4] = [d[0], d[1], d[2], d[3]];
    let (_, borrow) = sub_n(&d);
    if (d.iter().fold(0, |a, &x| a | x) == 0) | (borrow == 0) {
        return Err(LaneError::Failed("P-256 private key out of range".into()));
    }
    Ok((ecdsa_message(digest)?, d))
}

/// The message crypto_mb signs and verifies for a digest: its leftmost 256 bits reduced mod n,
/// big-endian; an error for an empty digest or one that is 0 mod n (never a real hash).
pub(super) fn ecdsa_message(digest: &[u8]) -> Result<[u8; 32], LaneError> {
    if digest.is_empty() {
        return Err(LaneError::Failed("empty digest".into()));
    }
    // ECDSA uses the leftmost 256 bits of the digest, as an integer, reduced mod n
    // (crypto_mb rejects a message >= n).
    let mut e = [0u8; 32];
    let take = digest.len().min(32);
    e[32 - take..].copy_from_slice(&digest[..take]);
    let e_l: [u64; 4] = be32_to_limbs(&e);
    let (e_minus_n, borrow) = sub_n(&e_l);
    let reduced = if borrow == 0 { e_minus_n } else { e_l };
    if reduced == [0; 4] {
        // Valid ECDSA (s = k^-1 r d) but crypto_mb rejects a zero message
        // (MBX_STATUS_MISMATCH_PARAM_ERR); never happens with a real hash.
        return Err(LaneError::Failed(
            "digest is 0 mod n, which crypto_mb does not sign".into(),
        ));
    }
    Ok(limbs_to_be32(&reduced))
}

/// One signature to verify as `mbx_nistp256_ecdsa_verify_mb8` takes it: the message
/// ([`ecdsa_message`]), the public point's coordinates as little-endian limbs, `r` and `s` as
/// 32 big-endian bytes.
#[derive(Clone, Copy)]
pub(super) struct VerifyParts {
    pub(super) msg: [u8; 32],
    pub(super) x: [u64; 4],
    pub(super) y: [u64; 4],
    pub(super) r: [u8; 32],
    pub(super) s: [u8; 32],
}

/// A lane's [`VerifyParts`]; `None` when its digest, key or DER signature does not convert.
pub(super) fn verify_parts(
    key: &EcKeyParts,
    digest: &[u8],
    signature: &[u8],
) -> Option<VerifyParts> {
    let msg = ecdsa_message(digest).ok()?;
    let x = be_to_le_limbs(&key.x, 4)?;
    let y = be_to_le_limbs(&key.y, 4)?;
    let sig = boring::ecdsa::EcdsaSig::from_der(signature).ok()?;
    let r: [u8; 32] = sig.r().to_vec_padded(32).ok()?.try_into().ok()?;
    let s: [u8; 32] = sig.s().to_vec_padded(32).ok()?.try_into().ok()?;
    Some(VerifyParts {
        msg,
        x: [x[0], x[1], x[2], x[3]],
        y: [y[0], y[1], y[2], y[3]],
        r,
        s,
    })
}

/// `a - n` over 4 limbs and the final borrow (1 when `a < n`). Constant time.
fn sub_n(a: &[u64; 4]) -> ([u64; 4], u64) {
    let n = be32_to_limbs(&P256_N);
    let mut out = [0u64; 4];
    let mut borrow = 0u64;
    for i in 0..4 {
        let (x, b1) = a[i].overflowing_sub(n[i]);
        let (y, b2) = x.overflowing_sub(borrow);
        out[i] = y;
        borrow = (b1 | b2) as u64;
    }
    (out, borrow)
}

/// A uniformly random scalar in [1, n-1] (rejection sampling) as little-endian limbs.
pub(super) fn random_scalar() -> Result<[u64; 4], String> {
    for _ in 0..64 {
        let mut buf = [0u8; 32];
        boring::rand::rand_bytes(&mut buf).map_err(|e| format!("RAND_bytes failed: {e}"))?;
        let k = be32_to_limbs(&buf);
        wipe(&mut buf);
        let (_, borrow) = sub_n(&k);
        if borrow == 1 && k.iter().fold(0, |a, &x| a | x) != 0 {
            return Ok(k);
        }
    }
    Err("could not sample an ECDSA nonce".into())
}

fn be32_to_limbs(b: &[u8; 32]) -> [u64; 4] {
    std::array::from_fn(|i| {
        u64::from_be_bytes(b[32 - 8 * (i + 1)..32 - 8 * i].try_into().expect("8 bytes"))
    })
}

fn limbs_to_be32(l: &[u64; 4]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for i in 0..4 {
        out[32 - 8 * (i + 1)..32 - 8 * i].copy_from_slice(&l[i].to_be_bytes());
    }
    out
}

/// Big-endian bytes to `limbs` little-endian 64-bit limbs; None when the value needs more
/// limbs. Leading zero bytes beyond the capacity are accepted, checked without branching on
/// their values.
pub(super) fn be_to_le_limbs(be: &[u8], limbs: usize) -> Option<Vec<u64>> {
    let cap = limbs * 8;
    let (excess, body) = if be.len() > cap {
        be.split_at(be.len() - cap)
    } else {
        (&[][..], be)
    };
    if excess.iter().fold(0u8, |a, &x| a | x) != 0 {
        return None;
    }
    let mut out = vec![0u64; limbs];
    for (pos, &byte) in body.iter().rev().enumerate() {
        out[pos / 8] |= u64::from(byte) << (8 * (pos % 8));
    }
    Some(out)
}

fn strip_zeros(b: &[u8]) -> &[u8] {
    let first = b.iter().position(|&x| x != 0).unwrap_or(b.len());
    &b[first..]
}

/// DER `ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER }`, minimal encoding.
pub(super) fn der_signature(r: &[u8; 32], s: &[u8; 32]) -> Vec<u8> {
    fn int(out: &mut Vec<u8>, v: &[u8]) {
        let v = strip_zeros(v);
        let v = if v.is_empty() { &[0u8][..] } else { v };
        let pad = v[0] & 0x80 != 0;
        out.push(0x02);
        out.push((v.len() + usize::from(pad)) as u8);
        if pad {
            out.push(0);
        }
        out.extend_from_slice(v);
    }
    let mut body = Vec::with_capacity(72);
    int(&mut body, r);
    int(&mut body, s);
    let mut out = Vec::with_capacity(body.len() + 2);
    out.push(0x30);
    out.push(body.len() as u8); // at most 70 for P-256: short form
    out.extend_from_slice(&body);
    out
}

pub(super) fn wipe_limbs(v: &mut [u64]) {
    v.fill(0);
    std::hint::black_box(v);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limbs_round_trip() {
        let be: Vec<u8> = (1..=20).collect();
        let l = be_to_le_limbs(&be, 4).unwrap();
        assert_eq!(l[0], 0x0d0e0f1011121314);
        assert_eq!(l[2], 0x01020304);
        assert_eq!(l[3], 0);
        assert!(be_to_le_limbs(&[1; 33], 4).is_none());
        assert_eq!(be_to_le_limbs(&[0, 0, 5], 1).unwrap(), vec![5]);
        let mut b = [0u8; 32];
        b[0] = 0x80;
        b[31] = 1;
        assert_eq!(limbs_to_be32(&be32_to_limbs(&b)), b);
    }

    #[test]
    fn digest_reduced_mod_n() {
        let key = EcKeyParts {
            d: vec![1; 32],
            x: vec![0; 32],
            y: vec![0; 32],
            native: None,
        };
        let (e, _) = check_ecdsa_lane(&key, &[0xFF; 32]).unwrap();
        // 2^256 - 1 - n
        let (want, _) = sub_n(&[u64::MAX; 4]);
        assert_eq!(e, limbs_to_be32(&want));
        let (e, _) = check_ecdsa_lane(&key, &[7; 16]).unwrap();
        assert_eq!(&e[16..], &[7; 16]);
        let zero = EcKeyParts {
            d: vec![0; 32],
            x: vec![],
            y: vec![],
            native: None,
        };
        assert!(check_ecdsa_lane(&zero, &[1; 32]).is_err());
        assert!(check_ecdsa_lane(&key, &[0; 32]).is_err());
        assert!(check_ecdsa_lane(&key, &P256_N).is_err());
        let big = EcKeyParts {
            d: P256_N.to_vec(),
            x: vec![],
            y: vec![],
            native: None,
        };
        assert!(check_ecdsa_lane(&big, &[1; 32]).is_err());
    }

    #[test]
    fn der_minimal() {
        let mut r = [0u8; 32];
        r[31] = 0x80;
        let s = [0x7F; 32];
        let der = der_signature(&r, &s);
        assert_eq!(&der[..7], &[0x30, 4 + 32 + 2, 0x02, 2, 0x00, 0x80, 0x02]);
        assert_eq!(der[7], 32);
    }
}
