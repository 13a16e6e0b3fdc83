//! Envoy's `listener.<address>.ssl.*` statistics, recorded once per finished handshake.

use std::collections::HashMap;
use std::sync::Mutex;

use boring::ssl::SslRef;
use quickshake_stats::{Counter, Store};

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
            named: Default::default(),
        }
    }

    /// Record a completed handshake.
    pub fn record_success(&self, ssl: &SslRef) {
        self.handshake.inc();
        if ssl.session_reused() {
            self.session_reused.inc();
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
