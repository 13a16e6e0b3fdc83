//! The client side: BoringSSL client contexts for upstream connections (Envoy's
//! `UpstreamTlsContext`), built once per cluster, and the client handshake over any stream.
//!
//! It shares with the server side the trust-store builder and the chain parser
//! ([`crate::certs`]) and the ALPN wire encoder ([`crate::alpn`]).

use std::fmt;

use boring::error::ErrorStack;
use boring::pkey::PKey;
use boring::ssl::{SslConnector, SslMethod, SslVerifyMode};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_boring::SslStream;

use crate::alpn::{encode_alpn, BadAlpnProtocol};
use crate::certs::{ca_store_from_pem, chain_from_pem, PemChain, PemError};
use crate::san::verify_callback;
use quickshake_config::SanMatcher;

/// Envoy's `UpstreamTlsContext`, reduced to what the gateway supports, with its PEM material
/// already read.
///
/// Without `trusted_ca_pem` the server certificate is **not verified**, like Envoy without a
/// `validation_context`. With it, the chain must lead to one of these CAs (and only these: the
/// system trust store is not consulted), and when `sni` is set the certificate must also match
/// `sni` as a host name (Envoy's `auto_sni_san_validation`), and when `san_matchers` is not
/// empty, have a SAN one of them matches (`match_typed_subject_alt_names`; [`crate::san`]).
#[derive(Clone, Default)]
pub struct ClientTlsOptions {
    /// Server name sent in the ClientHello; none when absent or an IP literal.
    pub sni: Option<String>,
    /// PEM bundle of trusted CA certificates.
    pub trusted_ca_pem: Option<Vec<u8>>,
    /// `match_typed_subject_alt_names`, checked with `trusted_ca_pem` (the configuration
    /// refuses them without it, as Envoy does).
    pub san_matchers: Vec<SanMatcher>,
    /// ALPN protocols offered, e.g. `["h2", "http/1.1"]`; none offered when empty. (The
    /// upstream crate offers `h2` for an HTTP/2 cluster that lists none.)
    pub alpn: Vec<String>,
    /// PEM client certificate chain (leaf first), with `client_key_pem`.
    pub client_cert_pem: Option<Vec<u8>>,
    /// PEM private key of the client certificate.
    pub client_key_pem: Option<Vec<u8>>,
}

impl fmt::Debug for ClientTlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTlsOptions")
            .field("sni", &self.sni)
            .field(
                "trusted_ca_pem",
                &self.trusted_ca_pem.as_ref().map(|v| v.len()),
            )
            .field("san_matchers", &self.san_matchers)
            .field("alpn", &self.alpn)
            .field("client_cert_pem", &self.client_cert_pem.is_some())
            .field(
                "client_key_pem",
                &self.client_key_pem.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Why [`ClientTls::new`] refused the options. The messages name the setting; the key's bytes
/// never appear.
#[derive(Debug, thiserror::Error)]
pub enum ClientTlsError {
    /// BoringSSL refused a setting (`what`: `context`, `trusted_ca`, `trust store`, `ALPN`,
    /// `client certificate`, `client chain`, `client key`, `client key mismatch`).
    #[error("upstream TLS {what}: {source}")]
    Ssl {
        what: &'static str,
        #[source]
        source: ErrorStack,
    },
    #[error("upstream TLS trusted_ca holds no certificate")]
    NoTrustedCa,
    #[error("upstream TLS client certificate PEM holds no certificate")]
    NoClientCertificate,
    #[error("upstream TLS client certificate and key go together")]
    CertificateWithoutKey,
    #[error(transparent)]
    Alpn(#[from] BadAlpnProtocol),
}

/// Why [`ClientTls::connect`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientHandshakeError {
    /// BoringSSL could not set up the connection's `SSL`.
    #[error("{0}")]
    Setup(#[source] ErrorStack),
    /// The handshake failed: I/O, an alert from the server, or certificate verification.
    /// BoringSSL's description, including the verification result when there is one.
    #[error("{0}")]
    Handshake(String),
}

/// A client TLS configuration, built once (per cluster) and used for every connection.
pub struct ClientTls {
    connector: SslConnector,
    sni: Option<String>,
    verify: bool,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls")
            .field("sni", &self.sni)
            .field("verify", &self.verify)
            .finish_non_exhaustive()
    }
}

impl ClientTls {
    /// Build the client context: trust store and verification, ALPN offer, client certificate.
    pub fn new(opts: &ClientTlsOptions) -> Result<Self, ClientTlsError> {
        let ssl =
            |what: &'static str| move |source: ErrorStack| ClientTlsError::Ssl { what, source };
        let mut b = SslConnector::builder(SslMethod::tls()).map_err(ssl("context"))?;
        let verify = match &opts.trusted_ca_pem {
            Some(pem) => {
                let store = ca_store_from_pem(pem).map_err(|e| match e {
                    PemError::Parse(source) => ClientTlsError::Ssl {
                        what: "trusted_ca",
                        source,
                    },
                    PemError::NoCertificate => ClientTlsError::NoTrustedCa,
                    PemError::Store(source) => ClientTlsError::Ssl {
                        what: "trust store",
                        source,
                    },
                })?;
                // Replaces the default store: only the configured CAs are trusted.
                b.set_cert_store(store);
                if opts.san_matchers.is_empty() {
                    b.set_verify(SslVerifyMode::PEER);
                } else {
                    let matchers = opts.san_matchers.clone().into();
                    b.set_verify_callback(SslVerifyMode::PEER, verify_callback(matchers));
                }
                true
            }
            None => {
                b.set_verify(SslVerifyMode::NONE);
                false
            }
        };
        if !opts.alpn.is_empty() {
            let wire = encode_alpn(&opts.alpn)?;
            b.set_alpn_protos(&wire).map_err(ssl("ALPN"))?;
        }
        match (&opts.client_cert_pem, &opts.client_key_pem) {
            (Some(cert), Some(key)) => {
                let PemChain {
                    leaf,
                    intermediates,
                } = chain_from_pem(cert).map_err(|e| match e {
                    PemError::NoCertificate => ClientTlsError::NoClientCertificate,
                    PemError::Parse(source) | PemError::Store(source) => ClientTlsError::Ssl {
                        what: "client certificate",
                        source,
                    },
                })?;
                b.set_certificate(&leaf)
                    .map_err(ssl("client certificate"))?;
                for c in intermediates {
                    b.add_extra_chain_cert(c).map_err(ssl("client chain"))?;
                }
                let pkey = PKey::private_key_from_pem(key).map_err(ssl("client key"))?;
                b.set_private_key(&pkey).map_err(ssl("client key"))?;
                b.check_private_key().map_err(ssl("client key mismatch"))?;
            }
            (None, None) => {}
            _ => return Err(ClientTlsError::CertificateWithoutKey),
        }
        Ok(ClientTls {
            connector: b.build(),
            sni: opts.sni.clone().filter(|s| !s.is_empty()),
            verify,
        })
    }

    /// Whether the server's certificate is verified (a trust store was configured).
    pub fn verifies(&self) -> bool {
        self.verify
    }

    /// The client handshake over `stream`: SNI when configured, and when verifying, the
    /// server's certificate checked against `sni` as a host name too.
    pub async fn connect<S>(&self, stream: S) -> Result<SslStream<S>, ClientHandshakeError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let mut cfg = self
            .connector
            .configure()
            .map_err(ClientHandshakeError::Setup)?;
        cfg.set_use_server_name_indication(self.sni.is_some());
        cfg.set_verify_hostname(self.verify && self.sni.is_some());
        let domain = self.sni.as_deref().unwrap_or("");
        tokio_boring::connect(cfg, domain, stream)
            .await
            .map_err(|e| ClientHandshakeError::Handshake(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickshake_test_support::paths::read_cert as cert;

    fn must_fail(opts: ClientTlsOptions) -> ClientTlsError {
        match ClientTls::new(&opts) {
            Ok(c) => panic!("{opts:?} built {c:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn builds_with_and_without_verification() {
        let plain = ClientTls::new(&ClientTlsOptions::default()).expect("default options");
        assert!(!plain.verifies());
        let full = ClientTls::new(&ClientTlsOptions {
            sni: Some("localhost".into()),
            trusted_ca_pem: Some(cert("rsa2048.cert.pem")),
            alpn: vec!["h2".into(), "http/1.1".into()],
            client_cert_pem: Some(cert("client.cert.pem")),
            client_key_pem: Some(cert("client.key.pem")),
            san_matchers: Vec::new(),
        })
        .expect("full options");
        assert!(full.verifies());
    }

    #[test]
    fn refusals_keep_their_words() {
        let e = must_fail(ClientTlsOptions {
            trusted_ca_pem: Some(b"not a pem".to_vec()),
            ..Default::default()
        });
        assert_eq!(
            e.to_string(),
            "upstream TLS trusted_ca holds no certificate"
        );
        let e = must_fail(ClientTlsOptions {
            client_cert_pem: Some(cert("client.cert.pem")),
            ..Default::default()
        });
        assert_eq!(
            e.to_string(),
            "upstream TLS client certificate and key go together"
        );
        let e = must_fail(ClientTlsOptions {
            client_cert_pem: Some(b"no certificate here".to_vec()),
            client_key_pem: Some(cert("client.key.pem")),
            ..Default::default()
        });
        assert_eq!(
            e.to_string(),
            "upstream TLS client certificate PEM holds no certificate"
        );
        // A key not of the certificate: BoringSSL refuses it as it is set (another P-256 key
        // and a key of another type alike).
        for key in ["ecdsa-p256.key.pem", "other.key.pem"] {
            let e = must_fail(ClientTlsOptions {
                client_cert_pem: Some(cert("client.cert.pem")),
                client_key_pem: Some(cert(key)),
                ..Default::default()
            });
            assert!(e.to_string().starts_with("upstream TLS client key"), "{e}");
        }
        let e = must_fail(ClientTlsOptions {
            alpn: vec!["h2".into(), String::new()],
            ..Default::default()
        });
        assert_eq!(e.to_string(), "bad ALPN protocol \"\"");
    }

    #[test]
    fn options_debug_hides_the_key() {
        let opts = ClientTlsOptions {
            client_key_pem: Some(cert("client.key.pem")),
            ..Default::default()
        };
        let shown = format!("{opts:?}");
        assert!(shown.contains("<redacted>"), "{shown}");
        assert!(!shown.contains("PRIVATE KEY"), "{shown}");
    }
}
