//! Provider-held keys: parsed once, checked against what providers accept, split into the parts
//! engines need. A queued operation holds an `Arc<ProviderKey>`, so a key reload never changes
//! the key of an operation already in flight.

use std::fmt;
use std::sync::Arc;

use boring::bn::BigNumRef;
use boring::nid::Nid;
use boring::pkey::{Id, PKey, Private, Public};

use crate::engine::{EcKeyParts, RsaKeyParts};
use crate::error::ProviderError;
use crate::key_error::KeyError;

/// RSA modulus sizes the providers accept (Envoy's cryptomb accepts the same).
pub const RSA_BITS: [u32; 4] = [1024, 2048, 3072, 4096];

/// What kind of key a provider holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    Rsa { bits: u32 },
    EcdsaP256,
}

/// One private key as providers use it. `Debug` prints the type only.
pub struct ProviderKey {
    pub key_type: KeyType,
    /// The key in-process; `None` for a key that stays in a token (PKCS#11), whose parts hold
    /// the public values only.
    pub pkey: Option<PKey<Private>>,
    pub rsa: Option<RsaKeyParts>,
    pub ec: Option<EcKeyParts>,
    /// For verifying every RSA result before it leaves the provider.
    pub rsa_public: Option<boring::rsa::Rsa<Public>>,
    pub ec_public: Option<boring::ec::EcKey<Public>>,
}

impl fmt::Debug for ProviderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProviderKey({:?})", self.key_type)
    }
}

impl ProviderKey {
    /// Parse and check a PEM key. `field` and `file` name where it came from, for errors.
    pub fn from_pem(
        pem: &[u8],
        field: &str,
        file: &str,
    ) -> Result<Arc<ProviderKey>, ProviderError> {
        let bad = |reason: String| ProviderError::Key {
            field: field.to_string(),
            file: file.to_string(),
            reason,
        };
        let pkey =
            PKey::private_key_from_pem(pem).map_err(|_| bad("not a PEM private key".into()))?;
        Self::from_pkey(pkey).map_err(|source| ProviderError::KeyCheck {
            field: field.to_string(),
            file: file.to_string(),
            source,
        })
    }

    /// Check a parsed key and split it into engine parts.
    pub fn from_pkey(pkey: PKey<Private>) -> Result<Arc<ProviderKey>, KeyError> {
        match pkey.id() {
            Id::RSA => Self::rsa(pkey),
            Id::EC => Self::ec(pkey),
            other => Err(KeyError::UnsupportedType(other)),
        }
    }

    fn rsa(pkey: PKey<Private>) -> Result<Arc<ProviderKey>, KeyError> {
        let rsa = pkey.rsa().map_err(|source| KeyError::Unreadable {
            kind: "RSA",
            source,
        })?;
        let bits = pkey.bits();
        if !RSA_BITS.contains(&bits) {
            return Err(KeyError::RsaSize(bits));
        }
        if rsa.e().to_vec() != [1, 0, 1] {
            return Err(KeyError::RsaExponent);
        }
        let part = |b: Option<&BigNumRef>| b.map(BigNumRef::to_vec).ok_or(KeyError::MissingCrt);
        let parts = RsaKeyParts {
            bits,
            n: rsa.n().to_vec(),
            e: rsa.e().to_vec(),
            d: rsa.d().to_vec(),
            p: part(rsa.p())?,
            q: part(rsa.q())?,
            dp: part(rsa.dmp1())?,
            dq: part(rsa.dmq1())?,
            qinv: part(rsa.iqmp())?,
            native: Some(rsa.clone()),
        };
        let public =
            boring::rsa::Rsa::from_public_components(rsa.n().to_owned()?, rsa.e().to_owned()?)?;
        Ok(Arc::new(ProviderKey {
            key_type: KeyType::Rsa { bits },
            pkey: Some(pkey),
            rsa: Some(parts),
            ec: None,
            rsa_public: Some(public),
            ec_public: None,
        }))
    }

    fn ec(pkey: PKey<Private>) -> Result<Arc<ProviderKey>, KeyError> {
        let ec = pkey
            .ec_key()
            .map_err(|source| KeyError::Unreadable { kind: "EC", source })?;
        if ec.group().curve_name() != Some(Nid::X9_62_PRIME256V1) {
            return Err(KeyError::Curve);
        }
        let mut ctx = boring::bn::BigNumContext::new()?;
        let (mut x, mut y) = (boring::bn::BigNum::new()?, boring::bn::BigNum::new()?);
        ec.public_key()
            .affine_coordinates_gfp(ec.group(), &mut x, &mut y, &mut ctx)?;
        let pad32 = |b: &BigNumRef| b.to_vec_padded(32).map_err(KeyError::from);
        let public = boring::ec::EcKey::from_public_key(ec.group(), ec.public_key())?;
        let parts = EcKeyParts {
            d: pad32(ec.private_key())?,
            x: pad32(&x)?,
            y: pad32(&y)?,
            native: Some(ec.clone()),
        };
        Ok(Arc::new(ProviderKey {
            key_type: KeyType::EcdsaP256,
            pkey: Some(pkey),
            rsa: None,
            ec: Some(parts),
            rsa_public: None,
            ec_public: Some(public),
        }))
    }

    /// A key held outside the process (a token): public parts only, from the certificate's
    /// public key. Engines get empty secret parts; there is no software redo.
    pub fn from_public(public: &PKey<Public>) -> Result<Arc<ProviderKey>, KeyError> {
        match public.id() {
            Id::RSA => {
                let rsa = public.rsa().map_err(|source| KeyError::Unreadable {
                    kind: "RSA",
                    source,
                })?;
                let bits = public.bits();
                if !RSA_BITS.contains(&bits) {
                    return Err(KeyError::RsaSize(bits));
                }
                let parts = RsaKeyParts {
                    bits,
                    n: rsa.n().to_vec(),
                    e: rsa.e().to_vec(),
                    d: Vec::new(),
                    p: Vec::new(),
                    q: Vec::new(),
                    dp: Vec::new(),
                    dq: Vec::new(),
                    qinv: Vec::new(),
                    native: None,
                };
                Ok(Arc::new(ProviderKey {
                    key_type: KeyType::Rsa { bits },
                    pkey: None,
                    rsa: Some(parts),
                    ec: None,
                    rsa_public: Some(rsa),
                    ec_public: None,
                }))
            }
            Id::EC => {
                let ec = public
                    .ec_key()
                    .map_err(|source| KeyError::Unreadable { kind: "EC", source })?;
                if ec.group().curve_name() != Some(Nid::X9_62_PRIME256V1) {
                    return Err(KeyError::Curve);
                }
                let parts = EcKeyParts {
                    d: Vec::new(),
                    x: Vec::new(),
                    y: Vec::new(),
                    native: None,
                };
                Ok(Arc::new(ProviderKey {
                    key_type: KeyType::EcdsaP256,
                    pkey: None,
                    rsa: None,
                    ec: Some(parts),
                    rsa_public: None,
                    ec_public: Some(ec),
                }))
            }
            other => Err(KeyError::UnsupportedType(other)),
        }
    }

    /// Modulus length in bytes (RSA) or 0.
    pub fn rsa_len(&self) -> usize {
        self.rsa.as_ref().map_or(0, |r| r.n.len())
    }
}

/// The committed RSA-2048 test key, for this crate's unit tests.
#[cfg(test)]
pub(crate) fn test_rsa2048() -> Arc<ProviderKey> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/certs/rsa2048.key.pem"
    );
    let pem = std::fs::read(path).expect("committed test key");
    ProviderKey::from_pem(&pem, "test", path).expect("valid key")
}
