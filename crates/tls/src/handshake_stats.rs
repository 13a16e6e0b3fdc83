//! Envoy's `listener.<address>.ssl.*` statistics, recorded once per finished handshake,
//! successful ([`HandshakeStats::record_success`]) or not ([`HandshakeStats::record_failure`]).

use std::collections::HashMap;
use std::sync::Mutex;

use boring::ssl::SslRef;
use boring::x509::X509VerifyError;
use quickshake_stats::{Counter, Store};

use crate::tickets::{ticket_outcome, TicketOutcome};

/// Counters of one listener's TLS handshakes. Cheap to clone; shared by all workers.
#[derive(Clone)]
pub struct HandshakeStats {
    store: Store,
    prefix: String,
    pub handshake: Counter,
    pub session_reused: Counter,
    pub connection_error: Counter,
    pub no_certificate: Counter,
    pub fail_verify_no_cert: Counter,
    pub fail_verify_error: Counter,
    /// quickshake: a ticket the client offered did not resume: it names no configured session
    /// ticket key (issued before a rotation dropped its key, or by a process with other keys),
    /// or its key is configured but it failed to decrypt or verify. Envoy has no such counter.
    pub session_ticket_decrypt_failed: Counter,
    /// Named counters (cipher, version, curve, sigalg), created on first use.
    named: std::sync::Arc<Mutex<HashMap<String, Counter>>>,
}

impl HandshakeStats {
    /// `prefix` is the listener scope, e.g. `listener.0.0.0.0_9000.`.
    pub fn new(store: &Store, prefix: &str) -> Self {
        let c = |n: &str| store.counter(&format!("{prefix}ssl.{n}"));
        HandshakeStats {
            store: store.clone(),
            prefix: prefix.to_string(),
            handshake: c("handshake"),
            session_reused: c("session_reused"),
            connection_error: c("connection_error"),
            no_certificate: c("no_certificate"),
            fail_verify_no_cert: c("fail_verify_no_cert"),
            fail_verify_error: c("fail_verify_error"),
            session_ticket_decrypt_failed: c("session_ticket_decrypt_failed"),
            named: Default::default(),
        }
    }

    /// Record a completed handshake.
    pub fn record_success(&self, ssl: &SslRef) {
        self.handshake.inc();
        let reused = ssl.session_reused();
        if reused {
            self.session_reused.inc();
        }
        match ticket_outcome(ssl) {
            TicketOutcome::UnknownKey => self.session_ticket_decrypt_failed.inc(),
            TicketOutcome::KeyFound if !reused => self.session_ticket_decrypt_failed.inc(),
            _ => {}
        }
        if ssl.peer_certificate().is_none() {
            self.no_certificate.inc();
        }
        if let Some(cipher) = ssl.current_cipher() {
            self.named_inc("ciphers", cipher.name());
        }
        self.named_inc("versions", ssl.version_str());
        if let Some(curve) = ssl.curve_name() {
            self.named_inc("curves", curve);
        }
        if let Some(alg) = ssl.peer_signature_algorithm() {
            // Envoy names the algorithm the server signed with; BoringSSL reports it as the
            // peer's from the client's side only, so this is recorded when known.
            self.named_inc("sigalgs", &alg.to_string());
        }
    }

    /// Record a failed handshake: always `ssl.connection_error`, plus Envoy's client-certificate
    /// reason when there is one: `ssl.fail_verify_no_cert` when a required client certificate
    /// was not sent, `ssl.fail_verify_error` when the one sent failed verification.
    pub fn record_failure<S>(&self, e: &tokio_boring::HandshakeError<S>) {
        let no_certificate = e.to_string().contains("PEER_DID_NOT_RETURN_A_CERTIFICATE");
        self.record_failed(no_certificate, e.ssl());
    }

    /// A failed handshake, classified from BoringSSL's reason (`no_certificate`: a required
    /// client certificate was not sent) and the handshake's `SSL` (TCP and QUIC alike).
    pub(crate) fn record_failed(&self, no_certificate: bool, ssl: Option<&SslRef>) {
        self.connection_error.inc();
        match failure_reason(no_certificate, ssl) {
            Some(FailureReason::NoCertificate) => self.fail_verify_no_cert.inc(),
            Some(FailureReason::VerifyFailed) => self.fail_verify_error.inc(),
            None => {}
        }
    }

    fn named_inc(&self, family: &str, name: &str) {
        let key = format!("{family}.{name}");
        let counter = {
            let Ok(mut map) = self.named.lock() else {
                return;
            };
            map.entry(key)
                .or_insert_with_key(|k| self.store.counter(&format!("{}ssl.{k}", self.prefix)))
                .clone()
        };
        counter.inc();
    }
}

/// The client-certificate reason of a failed handshake, for Envoy's `fail_verify_*` counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FailureReason {
    /// Client certificates are required and the client sent none.
    NoCertificate,
    /// The client's certificate failed verification.
    VerifyFailed,
}

/// Classify a failed handshake.
///
/// A failed verification is read from the handshake's `SSL`: its verify result is an X.509
/// error once a chain was verified and refused (`INVALID_CALL` means no verification ran: no
/// certificate, or the handshake failed before one arrived).
///
/// A missing certificate leaves nothing on the `SSL` that tells it apart from any other early
/// failure (no peer certificate, verify result `INVALID_CALL`), so it is read from BoringSSL's
/// reason, `SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE`. The structured reason is out of reach:
/// `tokio_boring::HandshakeError` exposes its error stack only through
/// `std::error::Error::source`, which it implements only for a `Debug` stream, and the server's
/// streams are generic without that bound. Its `Display` does carry the reason name (BoringSSL's
/// `ERR_reason_error_string`, stable across versions), so this is the one place that matches text.
fn failure_reason(no_certificate: bool, ssl: Option<&SslRef>) -> Option<FailureReason> {
    if no_certificate {
        return Some(FailureReason::NoCertificate);
    }
    // As Envoy: only a verification that ran and refused the chain. `INVALID_CALL` means none
    // ran (garbage, an early close, a handshake the OCSP policy failed): a connection error only.
    match ssl?.verify_result() {
        Err(err) if err == X509VerifyError::INVALID_CALL => None,
        Err(_) => Some(FailureReason::VerifyFailed),
        Ok(()) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;

    use boring::pkey::PKey;
    use boring::ssl::{Ssl, SslContext, SslContextBuilder, SslMethod, SslVerifyMode, SslVersion};
    use quickshake_stats::Store;
    use tokio::io::{AsyncWriteExt, DuplexStream};

    use super::*;
    use crate::certs::{ca_store_from_pem, chain_from_pem};
    use crate::client::{ClientTls, ClientTlsOptions};
    use quickshake_test_support::paths::read_cert as cert;

    const PREFIX: &str = "listener.test.";

    /// A server requiring a client certificate issued by `client-ca`, set up as
    /// `context.rs` does for `require_client_certificate` (the trust store from the shared
    /// builder).
    fn mtls_server(max_version: SslVersion) -> SslContext {
        let mut b = SslContextBuilder::new(SslMethod::tls()).expect("context");
        let chain = chain_from_pem(&cert("rsa2048.cert.pem")).expect("server chain");
        b.set_certificate(&chain.leaf).expect("certificate");
        let key = PKey::private_key_from_pem(&cert("rsa2048.key.pem")).expect("server key");
        b.set_private_key(&key).expect("key");
        b.set_max_proto_version(Some(max_version)).expect("version");
        let store = ca_store_from_pem(&cert("client-ca.cert.pem")).expect("client CA");
        b.set_verify_cert_store(store).expect("trust store");
        b.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
        b.build()
    }

    fn client(cert_name: Option<&str>) -> ClientTls {
        ClientTls::new(&ClientTlsOptions {
            sni: Some("localhost".into()),
            trusted_ca_pem: Some(cert("rsa2048.cert.pem")),
            client_cert_pem: cert_name.map(|n| cert(&format!("{n}.cert.pem"))),
            client_key_pem: cert_name.map(|n| cert(&format!("{n}.key.pem"))),
            ..Default::default()
        })
        .expect("client context")
    }

    /// Accept one handshake on `server` while `peer` drives the other end, and record the
    /// outcome as the gateway does. Returns the counters.
    async fn handshake<F, Fut>(server: &SslContext, peer: F) -> Counts
    where
        F: FnOnce(DuplexStream) -> Fut,
        Fut: Future<Output = ()>,
    {
        let store = Store::new();
        let stats = HandshakeStats::new(&store, PREFIX);
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let ssl = Ssl::new(server).expect("server ssl");
        let accept = tokio_boring::SslStreamBuilder::new(ssl, ours).accept();
        let (accepted, ()) = tokio::join!(accept, peer(theirs));
        match accepted {
            Ok(s) => stats.record_success(s.ssl()),
            Err(e) => stats.record_failure(&e),
        }
        Counts::read(&store)
    }

    async fn tls_client(stream: DuplexStream, client: ClientTls) {
        // The client may finish (TLS 1.3) or fail (TLS 1.2) its side; the server's is checked.
        if let Ok(mut s) = client.connect(stream).await {
            let _ = s.shutdown().await;
        }
    }

    #[derive(Debug, PartialEq, Eq)]
    struct Counts {
        handshake: u64,
        connection_error: u64,
        fail_verify_no_cert: u64,
        fail_verify_error: u64,
    }

    impl Counts {
        fn read(store: &Store) -> Self {
            let get = |n: &str| {
                store
                    .counter_value(&format!("{PREFIX}ssl.{n}"))
                    .unwrap_or(0)
            };
            Counts {
                handshake: get("handshake"),
                connection_error: get("connection_error"),
                fail_verify_no_cert: get("fail_verify_no_cert"),
                fail_verify_error: get("fail_verify_error"),
            }
        }

        fn failed(fail_verify_no_cert: u64, fail_verify_error: u64) -> Self {
            Counts {
                handshake: 0,
                connection_error: 1,
                fail_verify_no_cert,
                fail_verify_error,
            }
        }
    }

    #[tokio::test]
    async fn trusted_client_certificate_succeeds() {
        for version in [SslVersion::TLS1_2, SslVersion::TLS1_3] {
            let server = mtls_server(version);
            let counts = handshake(&server, |s| tls_client(s, client(Some("client")))).await;
            assert_eq!(
                counts,
                Counts {
                    handshake: 1,
                    connection_error: 0,
                    fail_verify_no_cert: 0,
                    fail_verify_error: 0,
                },
                "{version:?}"
            );
        }
    }

    #[tokio::test]
    async fn missing_client_certificate_is_fail_verify_no_cert() {
        for version in [SslVersion::TLS1_2, SslVersion::TLS1_3] {
            let server = mtls_server(version);
            let counts = handshake(&server, |s| tls_client(s, client(None))).await;
            assert_eq!(counts, Counts::failed(1, 0), "{version:?}");
        }
    }

    #[tokio::test]
    async fn untrusted_client_certificate_is_fail_verify_error() {
        for version in [SslVersion::TLS1_2, SslVersion::TLS1_3] {
            let server = mtls_server(version);
            let counts =
                handshake(&server, |s| tls_client(s, client(Some("untrusted-client")))).await;
            assert_eq!(counts, Counts::failed(0, 1), "{version:?}");
        }
    }

    /// Garbage and an early close are connection errors, not a missing certificate. They also
    /// count `fail_verify_error` (no verification ran: INVALID_CALL), as the server always did;
    /// Envoy does not (see `failure_reason`).
    #[tokio::test]
    async fn garbage_and_early_close_are_connection_errors() {
        let server = mtls_server(SslVersion::TLS1_3);
        let counts = handshake(&server, |mut s: DuplexStream| async move {
            let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
            let _ = s.shutdown().await;
        })
        .await;
        assert_eq!(counts, Counts::failed(0, 0));
        let counts = handshake(&server, |s: DuplexStream| async move { drop(s) }).await;
        assert_eq!(counts, Counts::failed(0, 0));
    }
}
