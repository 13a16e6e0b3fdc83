//! Envoy's `session_ticket_keys`: 80-byte keys (16-byte name, 32-byte HMAC secret, 32-byte AES
//! secret). BoringSSL's built-in ticket code takes one 48-byte key (16 name, 16 HMAC, 16 AES),
//! so the first configured key is installed with each secret truncated to 16 bytes.
//! Difference from Envoy: Envoy encrypts with the first key and still decrypts tickets made with
//! the others; quickshake only accepts tickets made with the first key (older tickets fall back
//! to a full handshake, which is always safe).

use boring::ssl::SslContextBuilder;
use quickshake_config::{read_data_source, DownstreamTls};

use crate::error::TlsError;

const ENVOY_KEY_LEN: usize = 80;

/// The 48-byte BoringSSL ticket key made from one 80-byte Envoy key.
pub fn boringssl_ticket_key(envoy_key: &[u8]) -> Option<[u8; 48]> {
    if envoy_key.len() != ENVOY_KEY_LEN {
        return None;
    }
    let mut out = [0u8; 48];
    out[..16].copy_from_slice(&envoy_key[..16]);
    out[16..32].copy_from_slice(&envoy_key[16..32]);
    out[32..48].copy_from_slice(&envoy_key[48..64]);
    Some(out)
}

pub(crate) fn install_ticket_keys(
    b: &mut SslContextBuilder,
    tls: &DownstreamTls,
) -> Result<(), TlsError> {
    let field = format!("{}.session_ticket_keys.keys[0]", tls.path);
    let Some(first) = tls.session_ticket_keys.first() else {
        return Ok(());
    };
    let raw = read_data_source(first, &field)?;
    let key = boringssl_ticket_key(&raw).ok_or_else(|| TlsError::Invalid {
        field: field.clone(),
        reason: format!(
            "a session ticket key must be exactly {ENVOY_KEY_LEN} bytes, got {}",
            raw.len()
        ),
    })?;
    // SAFETY: `b.as_ptr()` is a live SSL_CTX owned by the builder; BoringSSL copies the 48 bytes
    // of `key`, which outlives the call, and returns 1 on success.
    let ok = unsafe {
        boring_sys::SSL_CTX_set_tlsext_ticket_keys(b.as_ptr(), key.as_ptr().cast(), key.len())
    };
    if ok != 1 {
        return Err(TlsError::Invalid {
            field,
            reason: "BoringSSL rejected the session ticket key".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn converts_envoy_keys() {
        let key: Vec<u8> = (0..80u8).collect();
        let k = super::boringssl_ticket_key(&key).expect("80 bytes");
        assert_eq!(&k[..16], &key[..16]);
        assert_eq!(&k[32..], &key[48..64]);
        assert!(super::boringssl_ticket_key(&key[..79]).is_none());
    }
}
