//! ALPN's wire format (RFC 7301 section 3.1): a list of protocol names, each prefixed by its
//! length in one byte. The one encoder (a client's offer) and the one decoder (reading a
//! client's offer on the server) of that format.

/// A protocol name ALPN cannot carry: empty or longer than 255 bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad ALPN protocol {0:?}")]
pub struct BadAlpnProtocol(pub String);

/// Encode protocol names, in preference order, into ALPN's wire format.
pub fn encode_alpn<P: AsRef<str>>(protocols: &[P]) -> Result<Vec<u8>, BadAlpnProtocol> {
    let mut wire = Vec::with_capacity(protocols.iter().map(|p| p.as_ref().len() + 1).sum());
    for p in protocols {
        let p = p.as_ref();
        let len = u8::try_from(p.len())
            .ok()
            .filter(|l| *l > 0)
            .ok_or_else(|| BadAlpnProtocol(p.to_owned()))?;
        wire.push(len);
        wire.extend_from_slice(p.as_bytes());
    }
    Ok(wire)
}

/// The protocol names of a wire-format list, in order. A truncated last entry ends the list.
pub fn decode_alpn(wire: &[u8]) -> impl Iterator<Item = &[u8]> + '_ {
    let mut rest = wire;
    std::iter::from_fn(move || {
        let (&len, tail) = rest.split_first()?;
        let len = usize::from(len);
        if tail.len() < len {
            rest = &[];
            return None;
        }
        let (name, after) = tail.split_at(len);
        rest = after;
        Some(name)
    })
}

/// Server preference, as Envoy does: the first of ours the client offers. Returns the slice of
/// the client's wire-format list (length-prefixed protocols).
pub fn select_alpn<'c>(ours: &[Vec<u8>], client: &'c [u8]) -> Option<&'c [u8]> {
    let offered: Vec<&[u8]> = decode_alpn(client).collect();
    ours.iter()
        .find_map(|p| offered.iter().find(|o| **o == p.as_slice()).copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_length_prefixed() {
        assert_eq!(
            encode_alpn(&["h2", "http/1.1"]).expect("valid"),
            b"\x02h2\x08http/1.1".to_vec()
        );
        assert_eq!(
            encode_alpn::<&str>(&[]).expect("empty list"),
            Vec::<u8>::new()
        );
    }

    #[test]
    fn rejects_what_the_format_cannot_carry() {
        assert_eq!(
            encode_alpn(&["h2", ""]),
            Err(BadAlpnProtocol(String::new()))
        );
        let long = "x".repeat(256);
        assert_eq!(
            encode_alpn(&[long.as_str()]),
            Err(BadAlpnProtocol(long.clone()))
        );
        assert!(encode_alpn(&["y".repeat(255)]).is_ok());
        assert_eq!(
            BadAlpnProtocol(String::new()).to_string(),
            "bad ALPN protocol \"\""
        );
    }

    #[test]
    fn round_trips_through_select_alpn() {
        let offer = encode_alpn(&["h2", "http/1.1"]).expect("valid");
        assert_eq!(
            decode_alpn(&offer).collect::<Vec<_>>(),
            vec![&b"h2"[..], &b"http/1.1"[..]]
        );
        // Server preference wins over the client's order.
        let ours = vec![b"http/1.1".to_vec(), b"h2".to_vec()];
        assert_eq!(select_alpn(&ours, &offer), Some(&b"http/1.1"[..]));
        assert_eq!(select_alpn(&[b"h2".to_vec()], &offer), Some(&b"h2"[..]));
        assert_eq!(select_alpn(&[b"h3".to_vec()], &offer), None);
    }

    #[test]
    fn truncated_offer_ends_the_list() {
        let mut offer = encode_alpn(&["h2"]).expect("valid");
        offer.extend_from_slice(b"\x08http");
        assert_eq!(decode_alpn(&offer).collect::<Vec<_>>(), vec![&b"h2"[..]]);
        assert_eq!(select_alpn(&[b"http".to_vec()], &offer), None);
    }
}
