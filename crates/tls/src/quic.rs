//! QUIC's TLS: the `quiche::Config` a QUIC listener's connections are created from.
//!
//! quiche creates each connection's `Ssl` itself, from one `SSL_CTX` (its "dispatching"
//! context here), before any ClientHello is seen. That context has no certificate: its early
//! (select-certificate) callback reads the SNI, asks the listener for the filter chain that
//! serves it (as TCP connections choose theirs, see `quickshake-listener`), switches the
//! connection to that chain's contexts and runs the chain's own certificate selection
//! ([`ChainTls::select_quic`]). So a QUIC handshake signs with the same `SSL_CTX`s as a TCP
//! handshake of the same certificate: an in-process key, or the asynchronous private key method
//! of a provider, whose per-worker queue then batches QUIC and TCP operations together.
//!
//! quiche answers BoringSSL's `SSL_ERROR_WANT_PRIVATE_KEY_OPERATION` as "not done yet"; the
//! caller must store its task's waker on the `Ssl` ([`set_waker`]) before driving the
//! connection (`boring`'s asynchronous callbacks need it) and drive the connection again
//! (`Connection::send`) when woken: the handshake resumes there with the provider's answer.
//!
//! What an `Ssl` copies from its context when it is created (and so, for a QUIC connection,
//! from the dispatching context) is set from the chain when it is chosen: the verify mode
//! (`require_client_certificate`, `validation_context`; the trust store comes with the chain's
//! context) and the session tickets' keys (the chain's `session_ticket_keys`, inline, files or
//! SDS, so a ticket resumes on every process holding them; without keys, a per-process one).
//!
//! Certificate rotation needs nothing here: the callback asks the listener for the chain on
//! every handshake, so new chains serve new connections at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

use boring::ssl::{NameType, SelectCertError, SslContextBuilder, SslMethod, SslRef};
use quickshake_config::QuicOptions;

use crate::context::{ChainTls, DEFAULT_CURVES};
use crate::error::TlsError;
use crate::handshake_stats::HandshakeStats;

/// The filter chain's TLS for a ClientHello's SNI (`None`: no chain matches, the handshake
/// fails).
pub type ChainForSni = dyn Fn(Option<&str>) -> Option<Arc<ChainTls>> + Send + Sync;

/// Largest UDP payload sent: fits the 1280-byte minimum IPv6 MTU with headers to spare, as
/// quiche's and Envoy's defaults do.
pub const MAX_UDP_PAYLOAD: usize = 1350;

/// The configuration a QUIC listener's connections are accepted with (one per worker: quiche
/// takes it `&mut` on accept). `chains` picks the filter chain by SNI on every handshake.
pub fn quic_config(
    opts: &QuicOptions,
    chains: Arc<ChainForSni>,
) -> Result<quiche::Config, TlsError> {
    let ssl = |e: boring::error::ErrorStack| TlsError::Ssl {
        field: "udp_listener_config.quic_options".into(),
        source: e,
    };
    let quic = |e: quiche::Error| TlsError::Invalid {
        field: "udp_listener_config.quic_options".into(),
        reason: format!("quiche refused the configuration: {e}"),
    };
    let mut b = SslContextBuilder::new(SslMethod::tls()).map_err(ssl)?;
    b.set_curves_list(DEFAULT_CURVES).map_err(ssl)?;
    // Tickets are made and read with this context's callback, under the chosen chain's keys.
    crate::tickets::install_quic_ticket_dispatch(&mut b);
    b.set_select_certificate_callback(move |mut hello| {
        let sni = hello
            .servername(NameType::HOST_NAME)
            .map(str::to_ascii_lowercase);
        let chain = chains(sni.as_deref()).ok_or(SelectCertError::ERROR)?;
        chain.select_quic(&mut hello)
    });
    let mut c =
        quiche::Config::with_boring_ssl_ctx_builder(quiche::PROTOCOL_VERSION, b).map_err(quic)?;
    c.set_application_protos(quiche::h3::APPLICATION_PROTOCOL)
        .map_err(quic)?;
    c.set_max_idle_timeout(u64::try_from(opts.idle_timeout.as_millis()).unwrap_or(u64::MAX));
    c.set_max_recv_udp_payload_size(MAX_UDP_PAYLOAD);
    c.set_max_send_udp_payload_size(MAX_UDP_PAYLOAD);
    c.set_initial_max_data(opts.initial_connection_window_size);
    c.set_initial_max_stream_data_bidi_local(opts.initial_stream_window_size);
    c.set_initial_max_stream_data_bidi_remote(opts.initial_stream_window_size);
    c.set_initial_max_stream_data_uni(opts.initial_stream_window_size);
    c.set_initial_max_streams_bidi(opts.max_concurrent_streams);
    // HTTP/3's control and QPACK streams, and a few spare.
    c.set_initial_max_streams_uni(16);
    // Connection migration would move a connection's packets to another 4-tuple, and so,
    // with SO_REUSEPORT, to another worker's socket; they are forwarded by connection ID, but
    // a new path is not validated here: clients are asked not to migrate.
    c.set_disable_active_migration(true);
    Ok(c)
}

/// Give a new QUIC connection's `Ssl` what every server `Ssl` of a chain gets (the session
/// ticket outcome slot read by [`HandshakeStats::record_success`]).
pub fn prepare_ssl(ssl: &mut SslRef) {
    crate::tickets::prepare_ssl(ssl);
}

/// Store the driving task's waker on the connection's `Ssl`: `boring`'s asynchronous private
/// key callbacks poll the provider's future with it (and panic without one). Call it on every
/// poll of the task that drives the connection.
pub fn set_waker(ssl: &mut SslRef, waker: &Waker) {
    ssl.set_task_waker(Some(waker.clone()));
}

/// TLS alerts (RFC 8446 section 6): `certificate_required`, sent when a required client
/// certificate is missing.
const ALERT_CERTIFICATE_REQUIRED: u64 = 116;
/// QUIC carries a TLS alert as the transport error `0x100 + alert` (RFC 9001 section 4.8).
const CRYPTO_ERROR: u64 = 0x100;

/// A QUIC handshake that failed (quiche closed the connection before it was established):
/// Envoy's `ssl.connection_error`, and as on TCP `ssl.fail_verify_no_cert` when a required
/// client certificate was not sent, `ssl.fail_verify_error` when the one sent failed
/// verification. `local_error` is the transport error the server closed with.
pub fn record_failure(stats: &HandshakeStats, ssl: &SslRef, local_error: u64) {
    let no_certificate = local_error == CRYPTO_ERROR + ALERT_CERTIFICATE_REQUIRED;
    stats.record_failed(no_certificate, Some(ssl));
}

/// Stateless retry tokens (RFC 9000 section 8.1.2): a Retry packet carries one, the client
/// echoes it in its next Initial, and the server knows the address is the client's without
/// keeping any state. A token is `issued (u64 ms, big-endian) | odcid | HMAC-SHA256` over
/// the issue time, the client's address and the original destination connection ID, under a
/// key made at random when the listener starts (shared by its workers; a restart invalidates
/// outstanding tokens, which only costs those clients one more Retry).
pub struct RetryTokens {
    key: [u8; 32],
    lifetime: Duration,
}

impl Drop for RetryTokens {
    fn drop(&mut self) {
        crate::tickets::cleanse(&mut self.key);
    }
}

const TAG_LEN: usize = 16;

impl RetryTokens {
    /// Tokens valid for `lifetime` under a fresh random key.
    pub fn new(lifetime: Duration) -> Result<Self, TlsError> {
        let ssl = |e: boring::error::ErrorStack| TlsError::Ssl {
            field: "udp_listener_config (retry token key)".into(),
            source: e,
        };
        let mut key = [0u8; 32];
        boring::rand::rand_bytes(&mut key).map_err(ssl)?;
        Ok(RetryTokens { key, lifetime })
    }

    fn tag(&self, issued: &[u8], peer: &SocketAddr, odcid: &[u8]) -> Option<Vec<u8>> {
        let mut data = Vec::with_capacity(8 + 48 + odcid.len());
        data.extend_from_slice(issued);
        data.extend_from_slice(peer.to_string().as_bytes());
        data.push(0);
        data.extend_from_slice(odcid);
        let mac = boring::hash::hmac_sha256(&self.key, &data).ok()?;
        Some(mac[..TAG_LEN].to_vec())
    }

    /// A token for a client at `peer` whose first Initial went to `odcid`.
    pub fn mint(&self, peer: &SocketAddr, odcid: &[u8]) -> Option<Vec<u8>> {
        let issued = now_ms().to_be_bytes();
        let tag = self.tag(&issued, peer, odcid)?;
        let mut token = Vec::with_capacity(8 + odcid.len() + TAG_LEN);
        token.extend_from_slice(&issued);
        token.extend_from_slice(odcid);
        token.extend_from_slice(&tag);
        Some(token)
    }

    /// The original destination connection ID a valid, unexpired token from `peer` carries.
    pub fn validate(&self, peer: &SocketAddr, token: &[u8]) -> Option<Vec<u8>> {
        if token.len() < 8 + TAG_LEN {
            return None;
        }
        let (issued, rest) = token.split_at(8);
        let (odcid, tag) = rest.split_at(rest.len() - TAG_LEN);
        let expected = self.tag(issued, peer, odcid)?;
        if !boring::memcmp::eq(&expected, tag) {
            return None;
        }
        let at = u64::from_be_bytes(issued.try_into().ok()?);
        let age = now_ms().checked_sub(at)?;
        (u128::from(age) <= self.lifetime.as_millis()).then(|| odcid.to_vec())
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
#[path = "quic_tests.rs"]
mod tests;
