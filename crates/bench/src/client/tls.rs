//! The TLS client every connection of a run shares: protocol versions, groups, signature
//! algorithms, ciphers, ALPN, verification and client certificates, and whether sessions are
//! offered at all (without them, no handshake can be anything but full); and the same
//! options as a BoringSSL context for the QUIC client (`--h3`).

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use boring::ex_data::Index;
use boring::ssl::{
    Ssl, SslConnector, SslContextBuilder, SslInfoCallbackMode, SslMethod, SslOptions, SslRef,
    SslSession, SslSessionCacheMode, SslSignatureAlgorithm, SslVerifyMode, SslVersion,
};

use crate::report::Negotiated;

/// TLS protocol version pinned with `--tls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    V12,
    V13,
}

/// ALPN offered with `--alpn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    H1,
    H2,
}

/// Everything about the TLS client.
#[derive(Debug, Clone)]
pub struct TlsOptions {
    pub version: Option<TlsVersion>,
    pub cacert: Option<PathBuf>,
    pub insecure: bool,
    /// Colon- or comma-separated group names, e.g. `X25519`, `P-256`, `X25519MLKEM768`.
    pub groups: String,
    /// Comma- or colon-separated IANA names, e.g. `rsa_pss_rsae_sha256`.
    pub sigalgs: Option<String>,
    /// TLS 1.2 cipher list (BoringSSL does not configure TLS 1.3 suites).
    pub cipher: Option<String>,
    pub alpn: Option<Alpn>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

pub(super) type SessionSlot = Arc<Mutex<Option<SslSession>>>;

fn sigalg_by_name(name: &str) -> Option<SslSignatureAlgorithm> {
    Some(match name.trim().to_ascii_lowercase().as_str() {
        "rsa_pkcs1_sha1" => SslSignatureAlgorithm::RSA_PKCS1_SHA1,
        "rsa_pkcs1_sha256" => SslSignatureAlgorithm::RSA_PKCS1_SHA256,
        "rsa_pkcs1_sha384" => SslSignatureAlgorithm::RSA_PKCS1_SHA384,
        "rsa_pkcs1_sha512" => SslSignatureAlgorithm::RSA_PKCS1_SHA512,
        "ecdsa_sha1" => SslSignatureAlgorithm::ECDSA_SHA1,
        "ecdsa_secp256r1_sha256" => SslSignatureAlgorithm::ECDSA_SECP256R1_SHA256,
        "ecdsa_secp384r1_sha384" => SslSignatureAlgorithm::ECDSA_SECP384R1_SHA384,
        "ecdsa_secp521r1_sha512" => SslSignatureAlgorithm::ECDSA_SECP521R1_SHA512,
        "rsa_pss_rsae_sha256" => SslSignatureAlgorithm::RSA_PSS_RSAE_SHA256,
        "rsa_pss_rsae_sha384" => SslSignatureAlgorithm::RSA_PSS_RSAE_SHA384,
        "rsa_pss_rsae_sha512" => SslSignatureAlgorithm::RSA_PSS_RSAE_SHA512,
        "ed25519" => SslSignatureAlgorithm::ED25519,
        _ => return None,
    })
}

const SIGALG_NAMES: [&str; 12] = [
    "rsa_pkcs1_sha1",
    "rsa_pkcs1_sha256",
    "rsa_pkcs1_sha384",
    "rsa_pkcs1_sha512",
    "ecdsa_sha1",
    "ecdsa_secp256r1_sha256",
    "ecdsa_secp384r1_sha384",
    "ecdsa_secp521r1_sha512",
    "rsa_pss_rsae_sha256",
    "rsa_pss_rsae_sha384",
    "rsa_pss_rsae_sha512",
    "ed25519",
];

pub(super) fn sigalg_name(alg: SslSignatureAlgorithm) -> String {
    SIGALG_NAMES
        .iter()
        .find(|n| sigalg_by_name(n) == Some(alg))
        .map(|n| n.to_string())
        .unwrap_or_else(|| format!("{alg:?}"))
}

fn setup_err(what: &str, err: boring::error::ErrorStack) -> String {
    format!("TLS setup, {what}: {err}")
}

/// What the TCP and QUIC clients share: protocol versions `min..=max`, groups, signature
/// algorithms, TLS 1.2 ciphers, verification and the client certificate.
fn configure(
    b: &mut SslContextBuilder,
    tls: &TlsOptions,
    (min, max): (SslVersion, SslVersion),
) -> Result<(), String> {
    let e = setup_err;
    b.set_min_proto_version(Some(min))
        .map_err(|x| e("min version", x))?;
    b.set_max_proto_version(Some(max))
        .map_err(|x| e("max version", x))?;
    let groups = tls.groups.replace(',', ":");
    b.set_curves_list(&groups)
        .map_err(|x| e(&format!("groups {groups:?}"), x))?;
    if let Some(list) = &tls.sigalgs {
        let mut algs = Vec::new();
        for name in list.split([',', ':']).filter(|s| !s.trim().is_empty()) {
            algs.push(sigalg_by_name(name).ok_or_else(|| {
                format!(
                    "unknown signature algorithm {name:?} (known: {})",
                    SIGALG_NAMES.join(", ")
                )
            })?);
        }
        b.set_verify_algorithm_prefs(&algs)
            .map_err(|x| e("sigalgs", x))?;
    }
    if let Some(c) = &tls.cipher {
        b.set_cipher_list(c)
            .map_err(|x| e(&format!("cipher list {c:?}"), x))?;
    }
    if tls.insecure {
        b.set_verify(SslVerifyMode::NONE);
    } else {
        b.set_verify(SslVerifyMode::PEER);
        match &tls.cacert {
            Some(ca) => b
                .set_ca_file(ca)
                .map_err(|x| e(&format!("--cacert {}", ca.display()), x))?,
            None => b
                .set_default_verify_paths()
                .map_err(|x| e("default CA paths", x))?,
        }
    }
    match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => {
            b.set_certificate_chain_file(cert)
                .map_err(|x| e(&format!("--cert {}", cert.display()), x))?;
            b.set_private_key_file(key, boring::ssl::SslFiletype::PEM)
                .map_err(|x| e(&format!("--key {}", key.display()), x))?;
            b.check_private_key()
                .map_err(|x| e("--cert/--key mismatch", x))?;
        }
        (None, None) => {}
        _ => return Err("--cert and --key go together".to_string()),
    }
    Ok(())
}

/// Every connection of the context verifies the peer's certificate against `ip`.
fn verify_ip(b: &mut SslContextBuilder, ip: IpAddr) -> Result<(), String> {
    use foreign_types::ForeignTypeRef;
    // SAFETY: SSL_CTX_get0_param returns the context's own verify parameters (never null for
    // a live context), which live as long as `b`, borrowed mutably for this whole function;
    // SSL_new copies them into each connection.
    #[allow(unsafe_code)]
    let param = unsafe {
        boring::x509::verify::X509VerifyParamRef::from_ptr_mut(boring_sys::SSL_CTX_get0_param(
            b.as_ptr(),
        ))
    };
    param
        .set_ip(ip)
        .map_err(|x| setup_err(&format!("verify IP {ip}"), x))
}

/// What a finished handshake negotiated.
pub(super) fn negotiated_of(ssl: &SslRef) -> Negotiated {
    Negotiated {
        version: ssl.version_str().to_string(),
        cipher: ssl.current_cipher().map(|c| c.name().to_string()),
        group: ssl.curve_name().map(str::to_string),
        signature_algorithm: ssl.peer_signature_algorithm().map(sigalg_name),
        alpn: ssl
            .selected_alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned()),
    }
}

/// Builds the one `SslConnector` every connection uses.
///
/// Without session offering: no tickets (`NO_TICKET`) and session cache `OFF`, so no
/// handshake can be anything but full. With it: the client cache mode hands each new
/// session to the slot stored in the connection's ex-data.
pub fn build_connector(
    tls: &TlsOptions,
    offer_sessions: bool,
) -> Result<(SslConnector, Index<Ssl, SessionSlot>), String> {
    let e = setup_err;
    let mut b = SslConnector::builder(SslMethod::tls()).map_err(|x| e("builder", x))?;
    let versions = match tls.version {
        Some(TlsVersion::V12) => (SslVersion::TLS1_2, SslVersion::TLS1_2),
        Some(TlsVersion::V13) => (SslVersion::TLS1_3, SslVersion::TLS1_3),
        None => (SslVersion::TLS1_2, SslVersion::TLS1_3),
    };
    configure(&mut b, tls, versions)?;
    if let Some(alpn) = tls.alpn {
        let wire: &[u8] = match alpn {
            Alpn::H1 => b"\x08http/1.1",
            Alpn::H2 => b"\x02h2",
        };
        b.set_alpn_protos(wire).map_err(|x| e("alpn", x))?;
    }
    let idx = Ssl::new_ex_index::<SessionSlot>().map_err(|x| e("ex index", x))?;
    if offer_sessions {
        b.set_session_cache_mode(SslSessionCacheMode::CLIENT);
        b.set_new_session_callback(move |ssl, session| {
            if let Some(slot) = ssl.ex_data(idx) {
                if let Ok(mut s) = slot.lock() {
                    *s = Some(session);
                }
            }
        });
    } else {
        b.set_options(SslOptions::NO_TICKET);
        b.set_session_cache_mode(SslSessionCacheMode::OFF);
    }
    Ok((b.build(), idx))
}

/// The BoringSSL context of the QUIC client (`--h3`): TLS 1.3 only, the same groups,
/// signature algorithms, verification and client certificate as the TCP client, no
/// tickets; ALPN `h3` is quiche's to set. The first finished handshake's parameters go into
/// `negotiated` (quiche does not hand out its `SSL`, its info callback does).
///
/// `server_name` as the TCP client treats it: a host name goes into SNI and is verified (by
/// quiche, per connection); an IP address is sent nowhere (no SNI, as `boring`'s connector
/// does: Envoy refuses an IP in SNI) and verified against the certificate's IP SANs here.
pub fn build_quic_context(
    tls: &TlsOptions,
    server_name: &str,
    negotiated: Arc<OnceLock<Negotiated>>,
) -> Result<SslContextBuilder, String> {
    if tls.version == Some(TlsVersion::V12) {
        return Err("--h3: QUIC is TLS 1.3 only".to_string());
    }
    if tls.alpn.is_some() {
        return Err("--h3: ALPN is h3 (--alpn is for TCP)".to_string());
    }
    let mut b = SslContextBuilder::new(SslMethod::tls()).map_err(|x| setup_err("builder", x))?;
    configure(&mut b, tls, (SslVersion::TLS1_3, SslVersion::TLS1_3))?;
    b.set_options(SslOptions::NO_TICKET);
    if let (Ok(ip), false) = (server_name.parse::<IpAddr>(), tls.insecure) {
        verify_ip(&mut b, ip)?;
    }
    b.set_info_callback(move |ssl, mode, _| {
        if mode == SslInfoCallbackMode::HANDSHAKE_DONE && negotiated.get().is_none() {
            let _ = negotiated.set(negotiated_of(ssl));
        }
    });
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> TlsOptions {
        TlsOptions {
            version: Some(TlsVersion::V13),
            cacert: None,
            insecure: true,
            groups: "X25519".into(),
            sigalgs: Some("rsa_pss_rsae_sha256,ecdsa_secp256r1_sha256".into()),
            cipher: None,
            alpn: Some(Alpn::H1),
            cert: None,
            key: None,
        }
    }

    #[test]
    fn connector_accepts_good_options() {
        assert!(build_connector(&opts(), false).is_ok());
        let mut o = opts();
        o.groups = "X25519MLKEM768,P-256".into();
        assert!(build_connector(&o, true).is_ok());
    }

    #[test]
    fn connector_rejects_bad_options() {
        let mut o = opts();
        o.groups = "NoSuchGroup".into();
        assert!(build_connector(&o, false).is_err());
        let mut o = opts();
        o.sigalgs = Some("rsa_md5".into());
        let e = build_connector(&o, false).err().unwrap_or_default();
        assert!(e.contains("rsa_md5"), "{e}");
        let mut o = opts();
        o.cert = Some("/nonexistent".into());
        assert!(build_connector(&o, false).is_err());
    }

    #[test]
    fn quic_context_is_tls13_only() {
        let cell = Arc::new(OnceLock::new());
        let o = TlsOptions {
            alpn: None,
            ..opts()
        };
        assert!(build_quic_context(&o, "localhost", cell.clone()).is_ok());
        let verified = TlsOptions {
            insecure: false,
            ..o.clone()
        };
        assert!(build_quic_context(&verified, "127.0.0.1", cell.clone()).is_ok());
        let e = build_quic_context(&opts(), "localhost", cell.clone())
            .err()
            .unwrap_or_default();
        assert!(e.contains("ALPN"), "{e}");
        let mut o = o;
        o.version = Some(TlsVersion::V12);
        assert!(build_quic_context(&o, "localhost", cell).is_err());
    }

    #[test]
    fn sigalg_names_round_trip() {
        for n in SIGALG_NAMES {
            let a = sigalg_by_name(n).unwrap();
            assert_eq!(sigalg_name(a), n);
        }
    }
}
