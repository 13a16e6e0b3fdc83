//! What happens around the raw private-key operation: hashing the handshake message, PKCS#1
//! v1.5 and PSS encoding for RSA signatures (RFC 8017), and checking every result with the
//! public key before it leaves the provider.
//!
//! Constant time: the encodings depend only on public data (the message BoringSSL hands us, the
//! modulus length, a fresh random salt); the result check compares with `boring::memcmp::eq`,
//! which is constant-time in the compared bytes.

use boring::hash::{hash, MessageDigest};
use boring::pkey::Public;
use boring::rsa::{Padding, Rsa};

/// The signature algorithms BoringSSL asks private key methods for (TLS code points).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigAlg {
    RsaPkcs1(Digest),
    RsaPss(Digest),
    Ecdsa(Digest),
}

/// Digests used by TLS 1.2/1.3 signature algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Digest {
    Sha1,
    Sha256,
    Sha384,
    Sha512,
}

impl Digest {
    fn md(self) -> MessageDigest {
        match self {
            Digest::Sha1 => MessageDigest::sha1(),
            Digest::Sha256 => MessageDigest::sha256(),
            Digest::Sha384 => MessageDigest::sha384(),
            Digest::Sha512 => MessageDigest::sha512(),
        }
    }

    /// DER DigestInfo prefix for PKCS#1 v1.5 (RFC 8017 section 9.2 note 1).
    fn digest_info_prefix(self) -> &'static [u8] {
        match self {
            Digest::Sha1 => &[
                0x30, 0x21, 0x30, 0x09, 0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a, 0x05, 0x00, 0x04,
                0x14,
            ],
            Digest::Sha256 => &[
                0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02,
                0x01, 0x05, 0x00, 0x04, 0x20,
            ],
            Digest::Sha384 => &[
                0x30, 0x41, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02,
                0x02, 0x05, 0x00, 0x04, 0x30,
            ],
            Digest::Sha512 => &[
                0x30, 0x51, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02,
                0x03, 0x05, 0x00, 0x04, 0x40,
            ],
        }
    }

    pub fn digest(self, msg: &[u8]) -> Result<Vec<u8>, PaddingError> {
        Ok(hash(self.md(), msg)
            .map_err(|_| PaddingError::Hash)?
            .to_vec())
    }
}

impl SigAlg {
    /// From BoringSSL's signature algorithm value.
    pub fn from_boring(alg: boring::ssl::SslSignatureAlgorithm) -> Option<SigAlg> {
        const CODES: [u16; 11] = [
            0x0201, 0x0401, 0x0501, 0x0601, 0x0804, 0x0805, 0x0806, 0x0203, 0x0403, 0x0503, 0x0603,
        ];
        CODES
            .iter()
            .find(|&&c| boring::ssl::SslSignatureAlgorithm::from(c) == alg)
            .and_then(|&c| SigAlg::from_code(c))
    }

    /// From BoringSSL's `SSL_SIGN_*` code point.
    pub fn from_code(code: u16) -> Option<SigAlg> {
        use Digest::*;
        Some(match code {
            0x0201 => SigAlg::RsaPkcs1(Sha1),
            0x0401 => SigAlg::RsaPkcs1(Sha256),
            0x0501 => SigAlg::RsaPkcs1(Sha384),
            0x0601 => SigAlg::RsaPkcs1(Sha512),
            0x0804 => SigAlg::RsaPss(Sha256),
            0x0805 => SigAlg::RsaPss(Sha384),
            0x0806 => SigAlg::RsaPss(Sha512),
            0x0203 => SigAlg::Ecdsa(Sha1),
            0x0403 => SigAlg::Ecdsa(Sha256),
            0x0503 => SigAlg::Ecdsa(Sha384),
            0x0603 => SigAlg::Ecdsa(Sha512),
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PaddingError {
    #[error("hash failed")]
    Hash,
    #[error("modulus too small for this digest")]
    TooSmall,
    #[error("random salt unavailable")]
    Random,
}

/// How an RSA signature is to be made, for engines that sign on a device with the device's own
/// padding (a PKCS#11 token's `CKM_RSA_PKCS_PSS` or `CKM_RSA_PKCS`) rather than a raw RSA
/// operation on our padded block. Public data only: the scheme, the digest and the hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignView {
    /// PSS (MGF1 with the same digest, salt length = digest length) or PKCS#1 v1.5.
    pub pss: bool,
    pub digest: Digest,
    /// The hash of the message (what the signature covers).
    pub hash: Vec<u8>,
}

impl SignView {
    /// `DigestInfo || H`, what PKCS#1 v1.5 signs (the input of `CKM_RSA_PKCS`).
    pub fn digest_info(&self) -> Vec<u8> {
        let mut t = self.digest.digest_info_prefix().to_vec();
        t.extend_from_slice(&self.hash);
        t
    }
}

/// EMSA-PKCS1-v1_5: `00 01 FF.. 00 || DigestInfo || H`, `k` bytes.
pub fn pkcs1_v15(digest: Digest, msg: &[u8], k: usize) -> Result<Vec<u8>, PaddingError> {
    pkcs1_v15_hashed(digest, &digest.digest(msg)?, k)
}

/// [`pkcs1_v15`] of an already computed hash `h`.
pub fn pkcs1_v15_hashed(digest: Digest, h: &[u8], k: usize) -> Result<Vec<u8>, PaddingError> {
    let prefix = digest.digest_info_prefix();
    let t_len = prefix.len() + h.len();
    if k < t_len + 11 {
        return Err(PaddingError::TooSmall);
    }
    let mut em = vec![0xffu8; k];
    em[0] = 0;
    em[1] = 1;
    em[k - t_len - 1] = 0;
    em[k - t_len..k - h.len()].copy_from_slice(prefix);
    em[k - h.len()..].copy_from_slice(h);
    Ok(em)
}

/// EMSA-PSS-ENCODE with MGF1 over the same digest and salt length = digest length (what TLS
/// requires), for a modulus of `mod_bits` bits. Returns `k` bytes (leading zero byte when
/// `mod_bits - 1` is a multiple of 8).
pub fn pss(digest: Digest, msg: &[u8], mod_bits: usize) -> Result<Vec<u8>, PaddingError> {
    pss_hashed(digest, &digest.digest(msg)?, mod_bits)
}

/// [`pss`] of an already computed hash `m_hash`.
pub fn pss_hashed(digest: Digest, m_hash: &[u8], mod_bits: usize) -> Result<Vec<u8>, PaddingError> {
    let h_len = m_hash.len();
    let em_bits = mod_bits - 1;
    let em_len = em_bits.div_ceil(8);
    let k = mod_bits.div_ceil(8);
    if em_len < 2 * h_len + 2 {
        return Err(PaddingError::TooSmall);
    }
    let mut salt = vec![0u8; h_len];
    boring::rand::rand_bytes(&mut salt).map_err(|_| PaddingError::Random)?;
    let mut m_prime = vec![0u8; 8];
    m_prime.extend_from_slice(m_hash);
    m_prime.extend_from_slice(&salt);
    let h = digest.digest(&m_prime)?;
    let db_len = em_len - h_len - 1;
    let mut db = vec![0u8; db_len];
    db[db_len - h_len - 1] = 1;
    db[db_len - h_len..].copy_from_slice(&salt);
    let mask = mgf1(digest, &h, db_len)?;
    for (d, m) in db.iter_mut().zip(mask) {
        *d ^= m;
    }
    db[0] &= 0xffu8 >> (8 * em_len - em_bits);
    let mut em = Vec::with_capacity(k);
    em.resize(k - em_len, 0);
    em.extend_from_slice(&db);
    em.extend_from_slice(&h);
    em.push(0xbc);
    Ok(em)
}

fn mgf1(digest: Digest, seed: &[u8], len: usize) -> Result<Vec<u8>, PaddingError> {
    let mut out = Vec::with_capacity(len + 64);
    let mut counter = 0u32;
    while out.len() < len {
        let mut block = seed.to_vec();
        block.extend_from_slice(&counter.to_be_bytes());
        out.extend_from_slice(&digest.digest(&block)?);
        counter += 1;
    }
    out.truncate(len);
    Ok(out)
}

/// Check a raw RSA private-key result: `result^e mod n` must equal the input that was
/// exponentiated. Catches faulty CRT results (which would leak a prime) before they leave.
pub fn rsa_result_is_valid(public: &Rsa<Public>, input: &[u8], result: &[u8]) -> bool {
    input.len() == public.size() as usize
        && rsa_public_back(public, result)
            .is_some_and(|back| back_is_valid(input, None, &back, public.n().num_bits() as usize))
}

/// `result^e mod n` by BoringSSL's public operation; `None` unless `result` is as long as the
/// modulus and the operation succeeds.
pub fn rsa_public_back(public: &Rsa<Public>, result: &[u8]) -> Option<Vec<u8>> {
    let k = public.size() as usize;
    if result.len() != k {
        return None;
    }
    let mut back = vec![0u8; k];
    match public.public_encrypt(result, &mut back, Padding::NONE) {
        Ok(n) if n == k => Some(back),
        _ => None,
    }
}

/// Whether `back`, an RSA result raised to `e` mod `n` (by BoringSSL, or by an engine's batched
/// public operation), shows the result right: it equals `input` (constant-time compare), or,
/// for a PSS signature `view`, it is a valid EMSA-PSS encoding of the view's hash for a
/// `mod_bits`-bit modulus (a token-made PSS signature carries the token's salt).
pub fn back_is_valid(input: &[u8], view: Option<&SignView>, back: &[u8], mod_bits: usize) -> bool {
    (back.len() == input.len() && boring::memcmp::eq(back, input))
        || view.is_some_and(|v| v.pss && pss_verify(v.digest, &v.hash, back, mod_bits))
}

/// EMSA-PSS-VERIFY (RFC 8017 9.1.2) with MGF1 over the same digest and salt length = digest
/// length, the only PSS parameters TLS allows: whether `em` (`k` bytes, the signature raised to
/// `e`) encodes `m_hash` for a modulus of `mod_bits` bits. Works on public data only (a
/// signature and a hash the peer sees anyway), so it need not be constant-time.
pub fn pss_verify(digest: Digest, m_hash: &[u8], em: &[u8], mod_bits: usize) -> bool {
    let h_len = m_hash.len();
    if mod_bits < 2 || h_len == 0 {
        return false;
    }
    let em_bits = mod_bits - 1;
    let em_len = em_bits.div_ceil(8);
    let k = mod_bits.div_ceil(8);
    if em.len() != k || em_len < 2 * h_len + 2 {
        return false;
    }
    // A `k`-byte block whose top `k - em_len` bytes must be zero.
    let (top, em) = em.split_at(k - em_len);
    if top.iter().any(|b| *b != 0) || em[em_len - 1] != 0xbc {
        return false;
    }
    let db_len = em_len - h_len - 1;
    let (masked_db, h) = em.split_at(db_len);
    let h = &h[..h_len];
    let unused = 8 * em_len - em_bits;
    if masked_db[0] & !(0xffu8 >> unused) != 0 {
        return false;
    }
    let Ok(mask) = mgf1(digest, h, db_len) else {
        return false;
    };
    let mut db: Vec<u8> = masked_db.iter().zip(mask).map(|(a, b)| a ^ b).collect();
    db[0] &= 0xffu8 >> unused;
    // DB = PS (zeros) || 0x01 || salt, salt length = h_len.
    let ps_len = db_len - h_len - 1;
    if db[..ps_len].iter().any(|b| *b != 0) || db[ps_len] != 1 {
        return false;
    }
    let salt = &db[ps_len + 1..];
    let mut m_prime = vec![0u8; 8];
    m_prime.extend_from_slice(m_hash);
    m_prime.extend_from_slice(salt);
    digest
        .digest(&m_prime)
        .is_ok_and(|h2| boring::memcmp::eq(&h2, h))
}

/// Check a token-made RSA signature of the scheme `view` names: `result^e` must equal the block
/// we padded (`input`: a raw or PKCS#1 v1.5 signature is deterministic), or, for PSS only, be
/// a valid EMSA-PSS encoding of the hash with salt length = hash length (the token chose its own
/// salt). Nothing else is accepted.
pub fn rsa_signature_is_valid(
    public: &Rsa<Public>,
    input: &[u8],
    view: &SignView,
    result: &[u8],
) -> bool {
    input.len() == public.size() as usize
        && rsa_public_back(public, result).is_some_and(|back| {
            back_is_valid(input, Some(view), &back, public.n().num_bits() as usize)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use boring::pkey::PKey;
    use boring::sign::{RsaPssSaltlen, Verifier};

    fn raw_sign(rsa: &Rsa<boring::pkey::Private>, em: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; rsa.size() as usize];
        let n = rsa
            .private_decrypt(em, &mut out, Padding::NONE)
            .expect("raw op");
        out.truncate(n);
        out
    }

    #[test]
    fn pkcs1_and_pss_verify_with_boringssl() {
        let rsa = Rsa::generate(2048).expect("keygen");
        let pkey = PKey::from_rsa(rsa.clone()).expect("pkey");
        let msg = b"handshake transcript";
        for d in [Digest::Sha256, Digest::Sha384, Digest::Sha512] {
            let sig = raw_sign(&rsa, &pkcs1_v15(d, msg, 256).expect("pkcs1"));
            let mut v = Verifier::new(d.md(), &pkey).expect("verifier");
            v.update(msg).expect("update");
            assert!(v.verify(&sig).expect("verify"), "pkcs1 {d:?}");

            let sig = raw_sign(&rsa, &pss(d, msg, 2048).expect("pss"));
            let mut v = Verifier::new(d.md(), &pkey).expect("verifier");
            v.set_rsa_padding(Padding::PKCS1_PSS).expect("pss");
            v.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH)
                .expect("saltlen");
            v.update(msg).expect("update");
            assert!(v.verify(&sig).expect("verify"), "pss {d:?}");
        }
    }

    #[test]
    fn pss_uses_the_modulus_bit_length() {
        // BoringSSL rounds generated key sizes; encode for the modulus actually made.
        let rsa = Rsa::generate(1280).expect("keygen");
        let bits = rsa.n().num_bits() as usize;
        let pkey = PKey::from_rsa(rsa.clone()).expect("pkey");
        let sig = raw_sign(&rsa, &pss(Digest::Sha256, b"m", bits).expect("pss"));
        let mut v = Verifier::new(MessageDigest::sha256(), &pkey).expect("verifier");
        v.set_rsa_padding(Padding::PKCS1_PSS).expect("pss");
        v.set_rsa_pss_saltlen(RsaPssSaltlen::DIGEST_LENGTH)
            .expect("saltlen");
        v.update(b"m").expect("update");
        assert!(v.verify(&sig).expect("verify"));
    }

    /// Our EMSA-PSS-VERIFY accepts what BoringSSL's signer makes with salt length = hash
    /// length, and nothing else: other salt lengths, another hash, a flipped bit.
    #[test]
    fn pss_verify_agrees_with_boringssl() {
        use boring::sign::Signer;
        for bits in [2048u32, 1280, 3072] {
            let rsa = Rsa::generate(bits).expect("keygen");
            let mod_bits = rsa.n().num_bits() as usize;
            let public = Rsa::from_public_components(
                rsa.n().to_owned().unwrap(),
                rsa.e().to_owned().unwrap(),
            )
            .unwrap();
            let pkey = PKey::from_rsa(rsa.clone()).expect("pkey");
            let msg = b"tls 1.3 certificate verify";
            for d in [Digest::Sha256, Digest::Sha384, Digest::Sha512] {
                let h = d.digest(msg).unwrap();
                let sign = |salt: RsaPssSaltlen| {
                    let mut s = Signer::new(d.md(), &pkey).expect("signer");
                    s.set_rsa_padding(Padding::PKCS1_PSS).expect("pss");
                    s.set_rsa_pss_saltlen(salt).expect("saltlen");
                    s.update(msg).expect("update");
                    s.sign_to_vec().expect("sign")
                };
                let view = SignView {
                    pss: true,
                    digest: d,
                    hash: h.clone(),
                };
                // Our own block is unrelated to the token's: only the PSS check can pass.
                let ours = pss_hashed(d, &h, mod_bits).unwrap();
                let good = sign(RsaPssSaltlen::DIGEST_LENGTH);
                assert!(
                    rsa_signature_is_valid(&public, &ours, &view, &good),
                    "{bits} {d:?}"
                );
                let mut em = vec![0u8; rsa.size() as usize];
                public
                    .public_encrypt(&good, &mut em, Padding::NONE)
                    .unwrap();
                assert!(pss_verify(d, &h, &em, mod_bits));
                // Another salt length, another hash, a flipped bit, PKCS#1 v1.5 views: refused.
                for salt in [
                    RsaPssSaltlen::custom(0),
                    RsaPssSaltlen::custom(h.len() as i32 + 1),
                ] {
                    let other = sign(salt);
                    assert!(
                        !rsa_signature_is_valid(&public, &ours, &view, &other),
                        "salt"
                    );
                }
                let other_hash = SignView {
                    hash: d.digest(b"another message").unwrap(),
                    ..view.clone()
                };
                assert!(!rsa_signature_is_valid(&public, &ours, &other_hash, &good));
                let mut bad = good.clone();
                bad[10] ^= 0x40;
                assert!(!rsa_signature_is_valid(&public, &ours, &view, &bad));
                let pkcs = SignView {
                    pss: false,
                    ..view.clone()
                };
                assert!(!rsa_signature_is_valid(&public, &ours, &pkcs, &good));
                // PKCS#1 v1.5: BoringSSL's signature is our block raised to d, exactly.
                let block = pkcs1_v15_hashed(d, &h, rsa.size() as usize).unwrap();
                let mut s = Signer::new(d.md(), &pkey).expect("signer");
                s.update(msg).expect("update");
                let sig = s.sign_to_vec().expect("sign");
                assert!(rsa_signature_is_valid(&public, &block, &pkcs, &sig));
                assert!(block.ends_with(&pkcs.digest_info()));
            }
        }
    }

    #[test]
    fn verification_catches_a_flipped_bit() {
        let rsa = Rsa::generate(2048).expect("keygen");
        let public =
            Rsa::from_public_components(rsa.n().to_owned().unwrap(), rsa.e().to_owned().unwrap())
                .unwrap();
        let em = pkcs1_v15(Digest::Sha256, b"x", 256).unwrap();
        let mut sig = raw_sign(&rsa, &em);
        assert!(rsa_result_is_valid(&public, &em, &sig));
        sig[100] ^= 1;
        assert!(!rsa_result_is_valid(&public, &em, &sig));
    }
}
