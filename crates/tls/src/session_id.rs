//! The session ID context of a filter chain, computed as Envoy computes it
//! (`ServerContextImpl::generateHashForSessionContextId` and
//! `DefaultCertValidator::updateDigestForSessionId`), so that a session or ticket issued by
//! Envoy resumes on quickshake, and the other way round, when both serve the same certificates
//! with the same client validation and server names. BoringSSL stores the context in every
//! session and resumes only sessions whose context matches.
//!
//! SHA-256 over, for each certificate in order: the subject's first CommonName, its DNS, IP and
//! URI subject alternative names, and the SHA-256 of the issuer name's DER; then the validation
//! settings (for a `trusted_ca`: the SHA-256 of its first certificate, `verify_trusted_ca`,
//! and Envoy's defaults for the settings quickshake does not implement: no SAN matchers, no CRL,
//! `allow_expired_certificate` false, `VERIFY_TRUST_CHAIN`, `only_verify_leaf_cert_crl` false,
//! no `max_verify_depth`, `auto_sni_san_validation` false); then the filter chain's
//! `server_names`. The validation part was checked byte for byte against Envoy 1.39.3 by
//! resuming its tickets (`tls_tickets` in the test suite); it is the one place to update when
//! quickshake implements more of `CertificateValidationContext`.

use boring::hash::{Hasher, MessageDigest};
use boring::nid::Nid;
use boring::x509::{X509Ref, X509};

use crate::error::TlsError;

/// A session ID context: SHA-256's 32 bytes, BoringSSL's maximum.
pub type SessionContextId = [u8; 32];

/// Envoy's session ID context for these certificates (leaves, in configured order), the
/// certificates of the client-validation CA list if there is one (`None`: no validation
/// context; Envoy 1.39.3 hashes the first of them, later Envoy main every one), and the chain's
/// server names. `field` names the TLS context for errors.
pub fn session_context_id(
    leaves: &[&X509Ref],
    trusted_ca: Option<&[X509]>,
    server_names: &[String],
    field: &str,
) -> Result<SessionContextId, TlsError> {
    let ssl_err = |e: boring::error::ErrorStack| TlsError::Ssl {
        field: field.to_owned(),
        source: e,
    };
    let mut md = Hasher::new(MessageDigest::sha256()).map_err(ssl_err)?;
    for leaf in leaves {
        let cn = leaf.subject_name().entries_by_nid(Nid::COMMONNAME).next();
        if let Some(cn) = cn {
            let data = cn.data().as_slice();
            if data.is_empty() {
                return Err(TlsError::Invalid {
                    field: field.to_owned(),
                    reason: "invalid TLS context: a certificate has an empty subject CN".into(),
                });
            }
            md.update(data).map_err(ssl_err)?;
        }
        let mut sans = 0usize;
        for name in leaf.subject_alt_names().iter().flatten() {
            let bytes = name
                .ipaddress()
                .or_else(|| name.dnsname().map(str::as_bytes))
                .or_else(|| name.uri().map(str::as_bytes));
            if let Some(b) = bytes {
                md.update(b).map_err(ssl_err)?;
                sans += 1;
            }
        }
        if cn.is_none() && sans == 0 {
            return Err(TlsError::Invalid {
                field: field.to_owned(),
                reason: "invalid TLS context: a certificate has neither a subject CN nor SAN names"
                    .into(),
            });
        }
        let issuer = leaf.issuer_name().to_der().map_err(ssl_err)?;
        let issuer_hash = boring::hash::hash(MessageDigest::sha256(), &issuer).map_err(ssl_err)?;
        md.update(&issuer_hash).map_err(ssl_err)?;
    }
    match trusted_ca {
        Some(bundle) => {
            for ca in bundle.iter().take(1) {
                let ca_hash = ca.digest(MessageDigest::sha256()).map_err(ssl_err)?;
                md.update(&ca_hash).map_err(ssl_err)?;
            }
            // verify_trusted_ca (a C++ bool), then the validation context's settings: no SAN
            // matchers, no CRL, allow_expired_certificate (bool), trust_chain_verification (a
            // 4-byte enum, VERIFY_TRUST_CHAIN = 0), only_verify_leaf_cert_crl (bool), no
            // max_verify_depth, auto_sni_san_validation (bool).
            md.update(&[1]).map_err(ssl_err)?;
            md.update(&[0, 0, 0, 0, 0, 0, 0]).map_err(ssl_err)?;
        }
        // No validation context: only verify_trusted_ca, false.
        None => md.update(&[0]).map_err(ssl_err)?,
    }
    for name in server_names {
        md.update(name.as_bytes()).map_err(ssl_err)?;
    }
    let digest = md.finish().map_err(ssl_err)?;
    let mut id = [0u8; 32];
    id.copy_from_slice(&digest);
    Ok(id)
}

/// The certificates of a PEM list, for [`session_context_id`] (none if it does not parse: the
/// trust store is built, and its errors reported, elsewhere).
pub fn pem_certificates(pem: &[u8]) -> Vec<X509> {
    X509::stack_from_pem(pem).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(name: &str) -> X509 {
        X509::from_pem(&quickshake_test_support::paths::read_cert(name)).expect("PEM")
    }

    #[test]
    fn depends_on_certificates_validation_and_server_names() {
        let rsa = cert("rsa2048.cert.pem");
        let ecdsa = cert("ecdsa-p256.cert.pem");
        let id = |leaves: &[&X509Ref], ca: Option<&[X509]>, names: &[String]| {
            session_context_id(leaves, ca, names, "t").expect("id")
        };
        let base = id(&[&rsa], None, &[]);
        assert_eq!(base, id(&[&rsa], None, &[]), "deterministic");
        assert_ne!(base, id(&[&rsa, &ecdsa], None, &[]));
        assert_ne!(base, id(&[&rsa], Some(std::slice::from_ref(&rsa)), &[]));
        // Envoy 1.39.3 hashes the bundle's first certificate only.
        assert_eq!(
            id(&[&rsa], Some(std::slice::from_ref(&rsa)), &[]),
            id(&[&rsa], Some(&[rsa.clone(), ecdsa.clone()]), &[])
        );
        assert_ne!(base, id(&[&rsa], None, &["a.example".into()]));
    }
}
