//! Envoy's `session_ticket_keys`, used as Envoy uses them, so that tickets are interchangeable
//! between Envoy and quickshake processes holding the same keys (a fleet behind one load
//! balancer, a migration from one to the other).
//!
//! Each key is 80 bytes: a 16-byte name, a 32-byte HMAC-SHA256 secret and a 32-byte AES-256
//! secret. BoringSSL's ticket key callback does the rest, as in Envoy's
//! `ServerContextImpl::sessionTicketProcess`: a new ticket is encrypted under the first key
//! (AES-256-CBC with a random IV, then HMAC-SHA256); an offered ticket is decrypted with the
//! key whose name it carries, whichever position that key has; one under an older key resumes
//! and is renewed under the first. A ticket under no configured key is a full handshake, and
//! counted (`ssl.session_ticket_decrypt_failed`, beside `ssl.session_reused`).
//!
//! Keys are secrets: the buffers they were read into and the keys themselves are wiped with
//! BoringSSL's `OPENSSL_cleanse` when dropped, and nothing here prints them (`Debug` shows how
//! many keys there are, no names).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use boring::ex_data::Index;
use boring::hash::MessageDigest;
use boring::ssl::{Ssl, SslContextBuilder, SslRef, TicketKeyCallbackResult};
use boring::symm::Cipher;
use quickshake_config::{read_data_source, DataSource, DownstreamTls, SESSION_TICKET_KEY_LEN};

use crate::error::TlsError;

/// Zero a secret buffer in a way the optimiser keeps (BoringSSL's `OPENSSL_cleanse`).
pub(crate) fn cleanse(buf: &mut [u8]) {
    // SAFETY: `buf` is a live, writable slice of `buf.len()` bytes for the whole call.
    unsafe { boring_sys::OPENSSL_cleanse(buf.as_mut_ptr().cast(), buf.len()) }
}

/// One Envoy session ticket key.
struct TicketKey {
    name: [u8; 16],
    hmac: [u8; 32],
    aes: [u8; 32],
}

impl Drop for TicketKey {
    fn drop(&mut self) {
        cleanse(&mut self.hmac);
        cleanse(&mut self.aes);
    }
}

impl TicketKey {
    /// Split one 80-byte Envoy key: name, HMAC secret, AES secret (Envoy's order).
    fn from_envoy(raw: &[u8]) -> Option<TicketKey> {
        if raw.len() != SESSION_TICKET_KEY_LEN {
            return None;
        }
        let mut key = TicketKey {
            name: [0; 16],
            hmac: [0; 32],
            aes: [0; 32],
        };
        key.name.copy_from_slice(&raw[..16]);
        key.hmac.copy_from_slice(&raw[16..48]);
        key.aes.copy_from_slice(&raw[48..80]);
        Some(key)
    }
}

/// A listener's ticket keys, in configured order: the first encrypts, every one decrypts.
pub struct TicketKeys {
    keys: Vec<TicketKey>,
}

impl std::fmt::Debug for TicketKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TicketKeys({} keys)", self.keys.len())
    }
}

impl TicketKeys {
    /// Read every key; `field` is the config path of the list (`...session_ticket_keys.keys`),
    /// for errors. Errors name the key's position and file, never its bytes.
    pub fn load(sources: &[DataSource], field: &str) -> Result<TicketKeys, TlsError> {
        let mut keys = Vec::with_capacity(sources.len());
        for (i, ds) in sources.iter().enumerate() {
            let field = format!("{field}[{i}]");
            let mut raw = read_data_source(ds, &field)?;
            let key = TicketKey::from_envoy(&raw);
            let len = raw.len();
            cleanse(&mut raw);
            keys.push(key.ok_or_else(|| TlsError::Invalid {
                field,
                reason: format!(
                    "a session ticket key must be exactly {SESSION_TICKET_KEY_LEN} bytes, got {len}"
                ),
            })?);
        }
        if keys.is_empty() {
            return Err(TlsError::Invalid {
                field: field.to_owned(),
                reason: "at least one key is required".into(),
            });
        }
        Ok(TicketKeys { keys })
    }

    /// The encrypting key.
    fn first(&self) -> Option<&TicketKey> {
        self.keys.first()
    }

    /// The key named `name` and whether it is the encrypting one.
    fn find(&self, name: &[u8; 16]) -> Option<(&TicketKey, bool)> {
        self.keys
            .iter()
            .enumerate()
            .find(|(_, k)| &k.name == name)
            .map(|(i, k)| (k, i == 0))
    }
}

/// What happened to the ticket a client offered, recorded on the connection's `Ssl` by the
/// ticket key callback and read when the handshake is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TicketOutcome {
    /// No ticket offered (or tickets are not ours to decrypt: no configured keys).
    None,
    /// The ticket names a configured key.
    KeyFound,
    /// The ticket names no configured key: a full handshake follows.
    UnknownKey,
}

/// Per-connection slot for [`TicketOutcome`] (an `AtomicU8`, since the callback only sees a
/// shared `&SslRef`).
fn outcome_index() -> Option<Index<Ssl, AtomicU8>> {
    static INDEX: OnceLock<Option<Index<Ssl, AtomicU8>>> = OnceLock::new();
    *INDEX.get_or_init(|| Ssl::new_ex_index().ok())
}

/// Give a new server connection its outcome slot. Called for every `Ssl` a chain creates.
pub(crate) fn prepare_ssl(ssl: &mut SslRef) {
    if let Some(index) = outcome_index() {
        ssl.set_ex_data(index, AtomicU8::new(0));
    }
}

fn record(ssl: &SslRef, outcome: TicketOutcome) {
    if let Some(slot) = outcome_index().and_then(|i| ssl.ex_data(i)) {
        slot.store(outcome as u8, Ordering::Relaxed);
    }
}

/// The outcome recorded on a finished handshake's `Ssl`.
pub fn ticket_outcome(ssl: &SslRef) -> TicketOutcome {
    match outcome_index()
        .and_then(|i| ssl.ex_data(i))
        .map(|s| s.load(Ordering::Relaxed))
    {
        Some(1) => TicketOutcome::KeyFound,
        Some(2) => TicketOutcome::UnknownKey,
        _ => TicketOutcome::None,
    }
}

/// Envoy's `session_timeout`: `SSL_CTX_set_timeout`, which `boring` does not wrap. Sessions
/// and tickets older than this are not resumed; the ticket lifetime hint says the same.
pub(crate) fn set_session_timeout(b: &mut SslContextBuilder, timeout: std::time::Duration) {
    let secs = u32::try_from(timeout.as_secs()).unwrap_or(u32::MAX);
    // SAFETY: `b.as_ptr()` is the live SSL_CTX the builder owns; the call stores a number.
    unsafe {
        boring_sys::SSL_CTX_set_timeout(b.as_ptr(), secs);
    }
}

/// The configured keys (inline, from files, or from an SDS secret file), read once per chain:
/// every certificate's context of the chain shares them. `None`: no keys configured, BoringSSL's
/// own rotating keys are kept.
pub(crate) fn configured_ticket_keys(
    tls: &DownstreamTls,
) -> Result<Option<Arc<TicketKeys>>, TlsError> {
    let (sources, field) = match &tls.session_ticket_keys_sds {
        Some(sds) if tls.session_ticket_keys.is_empty() => (
            quickshake_config::load_sds_session_ticket_keys(sds)?,
            format!(
                "{} (secret '{}').session_ticket_keys.keys",
                sds.path, sds.name
            ),
        ),
        _ => (
            tls.session_ticket_keys.clone(),
            format!("{}.session_ticket_keys.keys", tls.path),
        ),
    };
    if sources.is_empty() {
        return Ok(None);
    }
    Ok(Some(Arc::new(TicketKeys::load(&sources, &field)?)))
}

/// Install `keys` on one certificate's context.
pub(crate) fn install_ticket_keys(b: &mut SslContextBuilder, keys: &Arc<TicketKeys>) {
    install(b, QuicTickets::Keys(Arc::clone(keys)));
}

/// How a QUIC connection's filter chain makes and reads session tickets.
///
/// BoringSSL calls the ticket key callback of the `SSL_CTX` an `Ssl` was created from (its
/// "session context": for a QUIC connection, its listener's dispatching context), and `boring`'s
/// trampoline then looks its closure up, by the closure's type, on the context the `Ssl` has
/// now (after the switch, the chain's). So every context involved gets a closure of the one type
/// [`ticket_callback`] returns: the dispatcher's ([`install_quic_ticket_dispatch`], used until a
/// chain is chosen) and each QUIC chain's ([`install_quic_tickets`]), which serves the
/// connection with that chain's keys. (A context without a closure of that type would abort the
/// process in `boring`'s trampoline.)
#[derive(Clone)]
pub(crate) enum QuicTickets {
    /// The chain's configured `session_ticket_keys` (inline, files or SDS): tickets resume on
    /// any process holding the same keys, TCP or QUIC.
    Keys(Arc<TicketKeys>),
    /// No keys configured: a random key made once per process (shared by its workers and
    /// QUIC listeners, as BoringSSL's own key is shared by a TCP chain's connections).
    Process,
    /// `disable_stateless_session_resumption`: no tickets made, none read.
    Off,
}

/// The one ticket key callback type (see [`QuicTickets`]).
fn ticket_callback(
    tickets: QuicTickets,
) -> impl Fn(
    &SslRef,
    &mut [u8; 16],
    &mut [u8; 16],
    &mut boring::symm::CipherCtxRef,
    &mut boring::hmac::HmacCtxRef,
    bool,
) -> TicketKeyCallbackResult
       + Send
       + Sync
       + 'static {
    move |ssl, name, iv, cipher, hmac, encrypt| {
        let (keys, configured) = match &tickets {
            QuicTickets::Keys(k) => (&**k, true),
            QuicTickets::Process => match process_keys() {
                Some(k) => (k, false),
                None => return TicketKeyCallbackResult::Noop,
            },
            QuicTickets::Off => return TicketKeyCallbackResult::Noop,
        };
        if encrypt {
            encrypt_ticket(keys, name, iv, cipher, hmac)
        } else {
            decrypt_ticket(ssl, keys, configured, name, iv, cipher, hmac)
        }
    }
}

fn install(b: &mut SslContextBuilder, tickets: QuicTickets) {
    // SAFETY: the callback sets the key name, the IV (16 bytes, AES-CBC's) and initialises both
    // contexts with keys of the sizes the cipher and digest take, as
    // `SSL_CTX_set_tlsext_ticket_key_cb` requires; it returns an error rather than leave one
    // half-initialised, and "no ticket" (`Noop`) where it has no key.
    unsafe { b.set_ticket_key_callback(ticket_callback(tickets)) };
}

/// A QUIC chain's context: its tickets as `tickets` says.
pub(crate) fn install_quic_tickets(b: &mut SslContextBuilder, tickets: QuicTickets) {
    install(b, tickets);
}

/// The dispatching context of a QUIC listener (see [`QuicTickets`]).
pub(crate) fn install_quic_ticket_dispatch(b: &mut SslContextBuilder) {
    install(b, QuicTickets::Process);
}

/// The per-process key of [`QuicTickets::Process`]: random, never configured, never shown.
fn process_keys() -> Option<&'static TicketKeys> {
    static KEYS: OnceLock<Option<TicketKeys>> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut raw = [0u8; SESSION_TICKET_KEY_LEN];
        boring::rand::rand_bytes(&mut raw).ok()?;
        let key = TicketKey::from_envoy(&raw);
        cleanse(&mut raw);
        Some(TicketKeys { keys: vec![key?] })
    })
    .as_ref()
}

fn encrypt_ticket(
    keys: &TicketKeys,
    name: &mut [u8; 16],
    iv: &mut [u8; 16],
    cipher: &mut boring::symm::CipherCtxRef,
    hmac: &mut boring::hmac::HmacCtxRef,
) -> TicketKeyCallbackResult {
    let Some(key) = keys.first() else {
        return TicketKeyCallbackResult::Noop;
    };
    name.copy_from_slice(&key.name);
    if boring::rand::rand_bytes(iv).is_err()
        || cipher
            .init_encrypt(&Cipher::aes_256_cbc(), &key.aes, iv)
            .is_err()
        || hmac.init(&key.hmac, &MessageDigest::sha256()).is_err()
    {
        return TicketKeyCallbackResult::Error;
    }
    TicketKeyCallbackResult::Success
}

/// Decrypt with `keys`; `configured`: they are the chain's own (the outcome is recorded for
/// `ssl.session_ticket_decrypt_failed`), not the per-process QUIC key.
fn decrypt_ticket(
    ssl: &SslRef,
    keys: &TicketKeys,
    configured: bool,
    name: &[u8; 16],
    iv: &[u8; 16],
    cipher: &mut boring::symm::CipherCtxRef,
    hmac: &mut boring::hmac::HmacCtxRef,
) -> TicketKeyCallbackResult {
    let Some((key, encrypting)) = keys.find(name) else {
        if configured {
            record(ssl, TicketOutcome::UnknownKey);
        }
        return TicketKeyCallbackResult::Noop;
    };
    if configured {
        record(ssl, TicketOutcome::KeyFound);
    }
    if hmac.init(&key.hmac, &MessageDigest::sha256()).is_err()
        || cipher
            .init_decrypt(&Cipher::aes_256_cbc(), &key.aes, iv)
            .is_err()
    {
        return TicketKeyCallbackResult::Error;
    }
    if encrypting {
        TicketKeyCallbackResult::Success
    } else {
        // Under an older key: resume, and issue a ticket under the current one.
        TicketKeyCallbackResult::DecryptSuccessRenew
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> Vec<u8> {
        (0..80u8).map(|i| i.wrapping_add(seed)).collect()
    }

    #[test]
    fn splits_envoy_keys_in_envoy_order() {
        let raw = key(0);
        let k = TicketKey::from_envoy(&raw).expect("80 bytes");
        assert_eq!(&k.name[..], &raw[..16]);
        assert_eq!(&k.hmac[..], &raw[16..48]);
        assert_eq!(&k.aes[..], &raw[48..]);
        assert!(TicketKey::from_envoy(&raw[..79]).is_none());
    }

    #[test]
    fn first_encrypts_every_key_decrypts() {
        let keys = TicketKeys::load(
            &[
                DataSource::InlineBytes(key(1)),
                DataSource::InlineBytes(key(2)),
            ],
            "k",
        )
        .expect("keys");
        let first = keys.first().expect("first").name;
        assert_eq!(&first[..], &key(1)[..16]);
        let second: [u8; 16] = key(2)[..16].try_into().expect("16");
        assert!(matches!(keys.find(&second), Some((_, false))));
        assert!(matches!(keys.find(&first), Some((_, true))));
        assert!(keys.find(&[9; 16]).is_none());
        assert_eq!(format!("{keys:?}"), "TicketKeys(2 keys)");
    }

    #[test]
    fn wrong_length_names_the_key_not_its_bytes() {
        let err = TicketKeys::load(
            &[
                DataSource::InlineBytes(key(1)),
                DataSource::InlineString("SECRETSECRET".into()),
            ],
            "l.session_ticket_keys.keys",
        )
        .expect_err("short key");
        let text = err.to_string();
        assert!(text.contains("l.session_ticket_keys.keys[1]"), "{text}");
        assert!(text.contains("got 12"), "{text}");
        assert!(!text.contains("SECRET"), "{text}");
    }
}
