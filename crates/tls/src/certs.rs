//! Loading certificate chains and keys from Envoy `DataSource`s, with errors that name the
//! config field and the file, and the facts `/certs` shows about each loaded certificate; and
//! the PEM parsing both directions share: a certificate chain ([`chain_from_pem`]) and a trust
//! store of CA certificates ([`ca_store_from_pem`]).

use boring::error::ErrorStack;
use boring::nid::Nid;
use boring::pkey::{Id, PKey, Private, Public};
use boring::x509::store::{X509Store, X509StoreBuilder};
use boring::x509::X509;
use quickshake_config::{read_data_source, DataSource};

use crate::error::TlsError;

/// A loaded certificate chain (leaf first).
pub struct CertChain {
    pub leaf: X509,
    pub intermediates: Vec<X509>,
    pub info: CertInfo,
}

/// The key algorithm of a certificate, which decides which clients can use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Rsa,
    EcdsaP256,
    Other,
}

/// What the admin endpoint's `/certs` shows about one certificate. No secrets.
#[derive(Debug, Clone)]
pub struct CertInfo {
    /// Where it came from: a file name or `<inline>`.
    pub source: String,
    pub serial_number: String,
    pub subject: String,
    pub subject_alt_names: Vec<String>,
    pub not_before: String,
    pub not_after: String,
    /// Days until expiry, rounded down (negative once expired).
    pub days_until_expiration: i64,
    pub key_kind: KeyKind,
    pub key_bits: u32,
}

impl CertInfo {
    /// Envoy's `/certs` JSON for one certificate.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "path": self.source,
            "serial_number": self.serial_number,
            "subject_alt_names": self.subject_alt_names.iter().map(|n| serde_json::json!({"dns": n})).collect::<Vec<_>>(),
            "days_until_expiration": self.days_until_expiration.to_string(),
            "valid_from": self.not_before,
            "expiration_time": self.not_after,
            "subject": self.subject,
            "key_type": format!("{:?}", self.key_kind),
            "key_bits": self.key_bits,
        })
    }
}

/// Why PEM data gave no usable certificates. Callers add the field or context.
#[derive(Debug, thiserror::Error)]
pub enum PemError {
    /// BoringSSL could not parse the data as PEM certificates.
    #[error("not PEM certificates: {0}")]
    Parse(#[source] ErrorStack),
    /// The data parsed but holds no certificate.
    #[error("no certificate found in PEM data")]
    NoCertificate,
    /// BoringSSL could not build the trust store from the certificates.
    #[error("building the trust store: {0}")]
    Store(#[source] ErrorStack),
}

/// A certificate chain parsed from PEM, leaf first.
pub struct PemChain {
    pub leaf: X509,
    pub intermediates: Vec<X509>,
}

/// Parse a PEM certificate chain (leaf first); it must hold at least one certificate.
pub fn chain_from_pem(pem: &[u8]) -> Result<PemChain, PemError> {
    let mut certs = X509::stack_from_pem(pem)
        .map_err(PemError::Parse)?
        .into_iter();
    let leaf = certs.next().ok_or(PemError::NoCertificate)?;
    Ok(PemChain {
        leaf,
        intermediates: certs.collect(),
    })
}

/// A trust store holding exactly the CA certificates of a PEM bundle, which must hold at least
/// one (an empty store would refuse every peer). Used to verify clients (the server's mTLS)
/// and servers (upstream TLS) alike.
pub fn ca_store_from_pem(pem: &[u8]) -> Result<X509Store, PemError> {
    let cas = X509::stack_from_pem(pem).map_err(PemError::Parse)?;
    if cas.is_empty() {
        return Err(PemError::NoCertificate);
    }
    let mut store = X509StoreBuilder::new().map_err(PemError::Store)?;
    for ca in cas {
        store.add_cert(ca).map_err(PemError::Store)?;
    }
    Ok(store.build())
}

/// A file name for messages: the path, or `<inline>` for inline data.
pub fn source_name(ds: &DataSource) -> String {
    match ds {
        DataSource::Filename(p) => p.display().to_string(),
        _ => "<inline>".to_string(),
    }
}

/// Read and parse a PEM certificate chain.
pub fn load_chain(ds: &DataSource, field: &str) -> Result<CertChain, TlsError> {
    let pem = read_data_source(ds, field)?;
    let file = source_name(ds);
    let bad = |reason: String| TlsError::File {
        field: field.to_string(),
        file: file.clone(),
        reason,
    };
    let PemChain {
        leaf,
        intermediates,
    } = chain_from_pem(&pem).map_err(|e| match e {
        PemError::Parse(e) => bad(format!("not a PEM certificate chain: {e}")),
        other => bad(other.to_string()),
    })?;
    let info = cert_info(&leaf, &file).map_err(|e| bad(format!("unreadable certificate: {e}")))?;
    Ok(CertChain {
        leaf,
        intermediates,
        info,
    })
}

/// Read and parse a PEM private key, and check it matches the certificate's public key.
/// The key's bytes never reach an error message.
pub fn load_key(
    ds: &DataSource,
    field: &str,
    cert_key: &PKey<Public>,
) -> Result<PKey<Private>, TlsError> {
    let pem = read_data_source(ds, field)?;
    if let Some(warning) = quickshake_config::key_file_permission_warning(ds) {
        tracing::warn!(field, "{warning}");
    }
    let file = source_name(ds);
    let key = PKey::private_key_from_pem(&pem).map_err(|_| TlsError::File {
        field: field.to_string(),
        file: file.clone(),
        reason: "not a PEM private key (PKCS#1, PKCS#8 or SEC1)".into(),
    })?;
    if !key.public_eq(cert_key) {
        return Err(TlsError::File {
            field: field.to_string(),
            file,
            reason: "private key does not match the certificate's public key".into(),
        });
    }
    Ok(key)
}

/// The kind of a public key.
pub fn key_kind<T: boring::pkey::HasPublic>(key: &boring::pkey::PKeyRef<T>) -> KeyKind {
    match key.id() {
        Id::RSA => KeyKind::Rsa,
        Id::EC => match key.ec_key().ok().and_then(|k| k.group().curve_name()) {
            Some(Nid::X9_62_PRIME256V1) => KeyKind::EcdsaP256,
            _ => KeyKind::Other,
        },
        _ => KeyKind::Other,
    }
}

fn cert_info(cert: &X509, source: &str) -> Result<CertInfo, boring::error::ErrorStack> {
    let serial = cert
        .serial_number()
        .to_bn()?
        .to_hex_str()?
        .to_string()
        .to_lowercase();
    let subject = cert
        .subject_name()
        .entries()
        .filter_map(|e| {
            let key = e.object().nid().short_name().ok()?;
            let val = e.data().as_utf8().ok()?;
            Some(format!("{key}={val}"))
        })
        .collect::<Vec<_>>()
        .join(",");
    let sans = cert
        .subject_alt_names()
        .map(|names| {
            names
                .iter()
                .filter_map(|n| {
                    n.dnsname()
                        .map(str::to_string)
                        .or_else(|| n.ipaddress().map(fmt_ip))
                })
                .collect()
        })
        .unwrap_or_default();
    let now = boring::asn1::Asn1Time::days_from_now(0)?;
    let days = now
        .diff(cert.not_after())
        .map(|d| i64::from(d.days))
        .unwrap_or(0);
    let public = cert.public_key()?;
    Ok(CertInfo {
        source: source.to_string(),
        serial_number: serial,
        subject,
        subject_alt_names: sans,
        not_before: cert.not_before().to_string(),
        not_after: cert.not_after().to_string(),
        days_until_expiration: days,
        key_kind: key_kind(&public),
        key_bits: public.bits(),
    })
}

fn fmt_ip(raw: &[u8]) -> String {
    match raw.len() {
        4 => std::net::Ipv4Addr::from([raw[0], raw[1], raw[2], raw[3]]).to_string(),
        16 => {
            let mut b = [0u8; 16];
            b.copy_from_slice(raw);
            std::net::Ipv6Addr::from(b).to_string()
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickshake_test_support::paths::read_cert as cert;

    #[test]
    fn ca_store_takes_a_bundle() {
        let mut bundle = cert("client-ca.cert.pem");
        bundle.extend_from_slice(&cert("rsa2048.cert.pem"));
        ca_store_from_pem(&bundle).expect("two CAs");
    }

    #[test]
    fn ca_store_rejects_pem_without_a_certificate() {
        for pem in [&b""[..], b"not a pem", &cert("client.key.pem")] {
            assert!(
                matches!(ca_store_from_pem(pem), Err(PemError::NoCertificate)),
                "{:?}",
                String::from_utf8_lossy(pem)
            );
        }
        let broken = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(matches!(ca_store_from_pem(broken), Err(PemError::Parse(_))));
    }

    #[test]
    fn chain_is_leaf_first() {
        let mut pem = cert("client.cert.pem");
        pem.extend_from_slice(&cert("client-ca.cert.pem"));
        let chain = chain_from_pem(&pem).expect("chain");
        let leaf = X509::from_pem(&cert("client.cert.pem")).expect("leaf");
        assert_eq!(
            chain.leaf.to_der().expect("der"),
            leaf.to_der().expect("der")
        );
        assert_eq!(chain.intermediates.len(), 1);
        assert!(matches!(
            chain_from_pem(b"nothing"),
            Err(PemError::NoCertificate)
        ));
    }
}
