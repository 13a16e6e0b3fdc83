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
//! Only when X25519 or X25519MLKEM768 is the group BoringSSL will pick (its rule,
//! [`predicted_group`]) and the client sent a share for it; otherwise, or when the provider
//! hands the exchange back (a batch below the crossover, an engine error, a low-order share),
//! nothing is set and BoringSSL computes as it always does. For the hybrid group (what current
//! browsers and curl send first) the X25519 half is batched and the ML-KEM-768 encapsulation
//! is done here with BoringSSL's (`boring::mlkem`), laid out as BoringSSL's
//! `X25519MLKEM768KeyShare::Encap` does: ciphertext `mlkem_ct || x25519_share`, secret
//! `mlkem_secret || x25519_secret`. The hint holds the connection's secret: it is built
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
/// The hybrid X25519MLKEM768 group (draft-ietf-tls-ecdhe-mlkem).
pub(crate) const X25519_MLKEM768: u16 = 0x11ec;
/// ML-KEM-768's encapsulation key and ciphertext sizes (FIPS 203).
const MLKEM768_PUBLIC: usize = 1184;

/// TLS group ids of the names `ecdh_curves` takes (BoringSSL's spellings); `None` for a name
/// not known here, which turns batching off (the pick cannot be predicted).
fn group_id(name: &str) -> Option<u16> {
    Some(match name {
        "X25519" => X25519,
        "P-256" | "prime256v1" | "secp256r1" => 23,
        "P-384" | "secp384r1" => 24,
        "P-521" | "secp521r1" => 25,
        "X25519MLKEM768" => X25519_MLKEM768,
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
        groups
            .iter()
            .any(|g| [X25519, X25519_MLKEM768].contains(g))
            .then(|| KeyShareBatching {
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
            let Some(plan) = plan_exchange(hello, &self.groups, self.server_preference) else {
                return Ok(Box::pin(async {
                    Ok(Box::new(|_: ClientHello<'_>| Ok(())) as BoxSelectCertFinish)
                }));
            };
            let exchange = self.method.x25519(hello.ssl_mut(), &plan.x25519_peer);
            Ok(Box::pin(async move {
                let share = exchange.await;
                Ok(Box::new(move |mut hello: ClientHello<'_>| {
                    if let Some(share) = share {
                        let mut der = plan.hint(&share);
                        // A hint BoringSSL refuses leaves the handshake to compute as usual.
                        let _ = set_handshake_hints(hello.ssl_mut(), &der);
                        wipe(&mut der);
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

/// One handshake's exchange: the peer's X25519 share (to batch) and, for the hybrid group,
/// the ML-KEM-768 half already encapsulated.
struct Plan {
    group: u16,
    x25519_peer: Vec<u8>,
    mlkem: Option<(Vec<u8>, boring::mlkem::MlKemSharedSecret)>,
}

impl Plan {
    /// The key-share hint once the X25519 half is computed.
    fn hint(&self, share: &KexShare) -> Vec<u8> {
        let mut ciphertext = Vec::with_capacity(1120);
        let mut secret = Vec::with_capacity(64);
        if let Some((ct, ss)) = &self.mlkem {
            ciphertext.extend_from_slice(ct);
            secret.extend_from_slice(ss);
        }
        ciphertext.extend_from_slice(&share.public);
        secret.extend_from_slice(&share.secret);
        let der = key_share_hint_der(self.group, &ciphertext, &secret);
        wipe(&mut secret);
        der
    }
}

impl Drop for Plan {
    fn drop(&mut self) {
        if let Some((_, ss)) = &mut self.mlkem {
            wipe(ss);
        }
    }
}

/// What to compute for this ClientHello: `None` unless X25519 or X25519MLKEM768 is the group
/// this handshake will use and the client's share for it is well formed (a malformed one is
/// left to BoringSSL, which rejects it with the right alert).
fn plan_exchange(hello: &ClientHello<'_>, ours: &[u16], server_preference: bool) -> Option<Plan> {
    let client: Vec<u16> =
        u16_list(hello.get_extension(ExtensionType::SUPPORTED_GROUPS)?).collect();
    let group = predicted_group(ours, &client, server_preference)?;
    let share = key_share_entry(hello.get_extension(ExtensionType::KEY_SHARE)?, group)?;
    match group {
        X25519 if share.len() == 32 => Some(Plan {
            group,
            x25519_peer: share.to_vec(),
            mlkem: None,
        }),
        X25519_MLKEM768 if share.len() == MLKEM768_PUBLIC + 32 => {
            let (mlkem_pub, x25519) = share.split_at(MLKEM768_PUBLIC);
            let key = boring::mlkem::MlKemPublicKey::from_slice(
                boring::mlkem::Algorithm::MlKem768,
                mlkem_pub,
            )
            .ok()?;
            Some(Plan {
                group,
                x25519_peer: x25519.to_vec(),
                mlkem: Some(key.encapsulate().ok()?),
            })
        }
        _ => None,
    }
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

/// BoringSSL's `HandshakeHints` DER with only a key-share hint (handoff.cc): `SEQUENCE {
/// [1] IMPLICIT SEQUENCE { INTEGER group, OCTET STRING ciphertext, OCTET STRING secret } }`.
pub(crate) fn key_share_hint_der(group: u16, ciphertext: &[u8], secret: &[u8]) -> Vec<u8> {
    let mut inner = Vec::with_capacity(ciphertext.len() + secret.len() + 16);
    let g = group.to_be_bytes();
    let int: &[u8] = match group {
        0..=0x7f => &g[1..],
        0x80..=0x7fff => &g[..],
        _ => &[0, g[0], g[1]],
    };
    der_tlv(&mut inner, 0x02, int);
    der_tlv(&mut inner, 0x04, ciphertext);
    der_tlv(&mut inner, 0x04, secret);
    let mut hint = Vec::with_capacity(inner.len() + 4);
    der_tlv(&mut hint, 0xa1, &inner);
    wipe(&mut inner);
    let mut der = Vec::with_capacity(hint.len() + 4);
    der_tlv(&mut der, 0x30, &hint);
    wipe(&mut hint);
    der
}

/// One DER element (definite length, short or long form) appended to `out`.
fn der_tlv(out: &mut Vec<u8>, tag: u8, content: &[u8]) {
    out.push(tag);
    let n = content.len();
    match n {
        0..=0x7f => out.push(n as u8),
        0x80..=0xff => out.extend_from_slice(&[0x81, n as u8]),
        _ => out.extend_from_slice(&[0x82, (n >> 8) as u8, n as u8]),
    }
    out.extend_from_slice(content);
}

fn wipe(v: &mut [u8]) {
    v.fill(0);
    std::hint::black_box(v);
}

/// Hand BoringSSL the exchange's result for this handshake.
fn set_handshake_hints(ssl: &mut SslRef, der: &[u8]) -> Result<(), ()> {
    // SAFETY: `ssl` is a live `SSL` in its early callback (so its handshake state exists, as
    // `SSL_set_handshake_hints` requires); `der` is a valid buffer of `der.len()` bytes that
    // BoringSSL parses and copies before returning.
    #[allow(unsafe_code)]
    let ok = unsafe { boring_sys::SSL_set_handshake_hints(ssl.as_ptr(), der.as_ptr(), der.len()) };
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
        let ext = [0, 13, 0x11, 0xec, 0, 2, 7, 7, 0, 29, 0, 3, 1, 2, 3];
        assert_eq!(key_share_entry(&ext, X25519), Some(&[1u8, 2, 3][..]));
        assert_eq!(key_share_entry(&ext, 23), None);
        let short = [0, 13, 0x11, 0xec, 0, 2, 7, 7, 0, 29, 0, 4, 1, 2, 3];
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
        let der = key_share_hint_der(X25519, &[1; 32], &[2; 32]);
        assert_eq!(der.len(), 75);
        assert_eq!(&der[..9], &[0x30, 73, 0xa1, 71, 0x02, 0x01, 29, 0x04, 32]);
        assert_eq!(&der[41..43], &[0x04, 32]);
        // The hybrid group: a two-byte INTEGER and long-form lengths.
        let der = key_share_hint_der(X25519_MLKEM768, &[1; 1120], &[2; 64]);
        assert_eq!(&der[..4], &[0x30, 0x82, 0x04, 0xae]);
        assert_eq!(&der[4..8], &[0xa1, 0x82, 0x04, 0xaa]);
        assert_eq!(
            &der[8..16],
            &[0x02, 0x02, 0x11, 0xec, 0x04, 0x82, 0x04, 0x60]
        );
        assert_eq!(der.len(), 4 + 4 + 4 + 4 + 1120 + 2 + 64);
    }
}
