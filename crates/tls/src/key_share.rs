//! Batched TLS 1.3 key exchange: a handshake's X25519 computed in a provider's batch instead of
//! inside BoringSSL, handed to BoringSSL as a handshake hint.
//!
//! BoringSSL has no asynchronous hook for the key exchange (only for the private-key operation),
//! but it has handshake hints (`SSL_set_handshake_hints`): values a split-handshake front end
//! received from a back end that computed them. A key-share hint carries the group, the
//! server's share and the shared secret; `resolve_ecdhe_secret` (tls13_server.cc) uses them
//! when the negotiated group is the hint's, and computes as usual otherwise. So the early
//! (select-certificate) callback, which sees the ClientHello before any key exchange, reads the
//! client's X25519 share, queues the exchange with the certificate's provider and returns
//! "retry"; when the batch has run, the callback's second call gives BoringSSL the hint.
//!
//! Only when X25519 is the group BoringSSL will pick (its rule, [`predicted_group`]) and the
//! client sent an X25519 share; otherwise, or when the provider hands the exchange back (a
//! batch below the crossover, an engine error, a low-order share), nothing is set and
//! BoringSSL computes as it always does. The hint holds the connection's secret: it is built
//! here, passed to BoringSSL and wiped; it never leaves the process.

use boring::ssl::{
    AsyncSelectCertError, BoxSelectCertFinish, BoxSelectCertFuture, ClientHello, ExtensionType,
    SelectCertError, SslRef,
};
use foreign_types::ForeignTypeRef;
use quickshake_keyprovider::op::KexShare;
use quickshake_keyprovider::ProviderMethod;

/// X25519's TLS group id (RFC 8446 section 4.2.7).
pub(crate) const X25519: u16 = 29;

/// TLS group ids of the names `ecdh_curves` takes (BoringSSL's spellings); `None` for a name
/// not known here, which turns batching off (the pick cannot be predicted).
fn group_id(name: &str) -> Option<u16> {
    Some(match name {
        "X25519" => X25519,
        "P-256" | "prime256v1" | "secp256r1" => 23,
        "P-384" | "secp384r1" => 24,
        "P-521" | "secp521r1" => 25,
        "X25519MLKEM768" => 0x11ec,
        "X25519Kyber768Draft00" => 0x6399,
        "MLKEM1024" => 0x0202,
        _ => return None,
    })
}

/// An extension holding a 16-bit-length-prefixed list of 16-bit values, as values.
pub(crate) fn u16_list(ext: &[u8]) -> impl Iterator<Item = u16> + '_ {
    ext.get(2..)
        .unwrap_or(&[])
        .chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
}

/// How a chain's handshakes batch their key exchange: the provider of its first certificate,
/// and what BoringSSL's group choice needs (our groups in order, whose order wins).
#[derive(Clone)]
pub(crate) struct KeyShareBatching {
    method: ProviderMethod,
    groups: Vec<u16>,
    server_preference: bool,
}

impl KeyShareBatching {
    /// `None` when the provider does not batch key exchanges or a configured group's name is
    /// not known here.
    pub(crate) fn new(
        method: &ProviderMethod,
        curves: &str,
        server_preference: bool,
    ) -> Option<Self> {
        if !method.batches_key_exchange() {
            return None;
        }
        let groups = curves
            .split(':')
            .map(group_id)
            .collect::<Option<Vec<_>>>()?;
        groups.contains(&X25519).then(|| KeyShareBatching {
            method: method.clone(),
            groups,
            server_preference,
        })
    }

    /// The async early callback: `select` (certificate choice, OCSP) at once, then, when the
    /// exchange is batched, the wait for its batch; the finish applies the hint.
    pub(crate) fn callback(
        self,
        select: impl Fn(&mut ClientHello<'_>) -> Result<(), SelectCertError> + Send + Sync + 'static,
    ) -> impl Fn(&mut ClientHello<'_>) -> Result<BoxSelectCertFuture, AsyncSelectCertError>
           + Send
           + Sync
           + 'static {
        move |hello| {
            select(hello).map_err(|_| AsyncSelectCertError)?;
            let peer = client_x25519_share(hello, &self.groups, self.server_preference);
            let Some(peer) = peer else {
                return Ok(Box::pin(async {
                    Ok(Box::new(|_: ClientHello<'_>| Ok(())) as BoxSelectCertFinish)
                }));
            };
            let exchange = self.method.x25519(peer);
            Ok(Box::pin(async move {
                let share = exchange.await;
                Ok(Box::new(move |mut hello: ClientHello<'_>| {
                    if let Some(share) = share {
                        // A hint BoringSSL refuses leaves the handshake to compute as usual.
                        let _ = set_key_share_hint(hello.ssl_mut(), &share);
                    }
                    Ok(())
                }) as BoxSelectCertFinish)
            }))
        }
    }
}

/// The group BoringSSL's `tls1_get_shared_group` picks: with server preference (Envoy's
/// default) our first group the client supports, else the client's first group we support.
pub(crate) fn predicted_group(
    ours: &[u16],
    client: &[u16],
    server_preference: bool,
) -> Option<u16> {
    if server_preference {
        ours.iter().copied().find(|g| client.contains(g))
    } else {
        client.iter().copied().find(|g| ours.contains(g))
    }
}

/// The client's X25519 key share, when X25519 is the group this handshake will use.
fn client_x25519_share<'a>(
    hello: &'a ClientHello<'_>,
    ours: &[u16],
    server_preference: bool,
) -> Option<&'a [u8]> {
    let client: Vec<u16> =
        u16_list(hello.get_extension(ExtensionType::SUPPORTED_GROUPS)?).collect();
    if predicted_group(ours, &client, server_preference)? != X25519 {
        return None;
    }
    key_share_entry(hello.get_extension(ExtensionType::KEY_SHARE)?, X25519)
}

/// The key exchange of `group` in a ClientHello's `key_share` extension
/// (`KeyShareEntry client_shares<0..2^16-1>`, each `group(2) length(2) key_exchange`).
pub(crate) fn key_share_entry(ext: &[u8], group: u16) -> Option<&[u8]> {
    let (len, mut rest) = ext.split_first_chunk::<2>()?;
    if usize::from(u16::from_be_bytes(*len)) != rest.len() {
        return None;
    }
    while let Some((head, tail)) = rest.split_first_chunk::<4>() {
        let g = u16::from_be_bytes([head[0], head[1]]);
        let n = usize::from(u16::from_be_bytes([head[2], head[3]]));
        let key = tail.get(..n)?;
        if g == group {
            return Some(key);
        }
        rest = &tail[n..];
    }
    None
}

/// BoringSSL's `HandshakeHints` DER with only a key-share hint (handoff.cc):
/// `SEQUENCE { [1] IMPLICIT SEQUENCE { INTEGER group, OCTET STRING share, OCTET STRING secret } }`.
pub(crate) fn key_share_hint_der(share: &KexShare) -> Vec<u8> {
    let mut inner = vec![0x02, 0x01, X25519 as u8, 0x04, 32];
    inner.extend_from_slice(&share.public);
    inner.extend_from_slice(&[0x04, 32]);
    inner.extend_from_slice(&share.secret);
    let mut der = vec![0x30, (inner.len() + 2) as u8, 0xa1, inner.len() as u8];
    der.extend_from_slice(&inner);
    wipe(&mut inner);
    der
}

fn wipe(v: &mut [u8]) {
    v.fill(0);
    std::hint::black_box(v);
}

/// Hand BoringSSL the exchange's result for this handshake.
fn set_key_share_hint(ssl: &mut SslRef, share: &KexShare) -> Result<(), ()> {
    let mut der = key_share_hint_der(share);
    // SAFETY: `ssl` is a live `SSL` in its early callback (so its handshake state exists, as
    // `SSL_set_handshake_hints` requires); `der` is a valid buffer of `der.len()` bytes that
    // BoringSSL parses and copies before returning.
    #[allow(unsafe_code)]
    let ok = unsafe { boring_sys::SSL_set_handshake_hints(ssl.as_ptr(), der.as_ptr(), der.len()) };
    wipe(&mut der);
    if ok == 1 {
        Ok(())
    } else {
        Err(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_share_among_several_and_rejects_bad_lengths() {
        // X25519MLKEM768 (2 bytes of key here), then X25519 (3 bytes).
        let ext = [0, 11, 0x11, 0xec, 0, 2, 7, 7, 0, 29, 0, 3, 1, 2, 3];
        assert_eq!(key_share_entry(&ext, X25519), Some(&[1u8, 2, 3][..]));
        assert_eq!(key_share_entry(&ext, 23), None);
        let short = [0, 11, 0x11, 0xec, 0, 2, 7, 7, 0, 29, 0, 4, 1, 2, 3];
        assert_eq!(key_share_entry(&short[..], X25519), None);
        assert_eq!(key_share_entry(&[0, 5, 0, 29], X25519), None);
    }

    #[test]
    fn predicts_boringssls_group_choice() {
        let ours = [0x11ec, X25519, 23];
        assert_eq!(predicted_group(&ours, &[X25519, 23], true), Some(X25519));
        assert_eq!(
            predicted_group(&ours, &[X25519, 0x11ec], true),
            Some(0x11ec)
        );
        assert_eq!(predicted_group(&ours, &[23, X25519], false), Some(23));
        assert_eq!(predicted_group(&ours, &[24], true), None);
    }

    #[test]
    fn hint_der_has_the_layout_boringssl_parses() {
        let share = KexShare {
            public: [1; 32],
            secret: [2; 32],
        };
        let der = key_share_hint_der(&share);
        assert_eq!(der.len(), 75);
        assert_eq!(&der[..9], &[0x30, 73, 0xa1, 71, 0x02, 0x01, 29, 0x04, 32]);
        assert_eq!(&der[41..43], &[0x04, 32]);
    }
}
