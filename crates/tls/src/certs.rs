//! Loading certificate chains and keys from Envoy `DataSource`s, with errors that name the
//! config field and the file, and the facts `/certs` shows about each loaded certificate.

use boring::nid::Nid;
use boring::pkey::{Id, PKey, Private, Public};
use boring::x509::X509;
use quickshake_config::{read_data_source, DataSource};

use crate::TlsError;

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
    let mut certs =
        X509::stack_from_pem(&pem).map_err(|e| bad(format!("not a PEM certificate chain: {e}")))?;
    if certs.is_empty() {
        return Err(bad("no certificate found in PEM data".into()));
    }
    let leaf = certs.remove(0);
    let info = cert_info(&leaf, &file).map_err(|e| bad(format!("unreadable certificate: {e}")))?;
    Ok(CertChain {
        leaf,
        intermediates: certs,
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
