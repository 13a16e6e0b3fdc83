//! Envoy's `x-forwarded-client-cert` (XFCC) header, as the connection manager's
//! `forward_client_cert_details` and `set_current_client_cert_details` say: removed, kept,
//! replaced by or appended with this hop's element
//! (`By=<our URI SAN>;Hash=<sha256 of the client certificate>;Cert="…";Chain="…";
//! Subject="…";URI=…;DNS=…`), from the client certificate of an mTLS connection.

use std::sync::OnceLock;

use boring::hash::MessageDigest;
use boring::ssl::SslRef;
use boring::x509::{X509Ref, X509};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use quickshake_config::{ClientCertDetails, ForwardClientCert};

const XFCC: HeaderName = HeaderName::from_static("x-forwarded-client-cert");
/// BoringSSL's `XN_FLAG_RFC2253`, as Envoy prints the subject.
const XN_FLAG_RFC2253: i32 = 0x0111_0317;

/// The certificates of an mTLS connection: the client's (and the chain it sent) and ours.
pub struct TlsPeer {
    leaf: X509,
    chain: Vec<X509>,
    local: Option<X509>,
    /// The element's parts, computed on the first request that needs them.
    parts: OnceLock<Parts>,
}

struct Parts {
    by: Vec<String>,
    hash: String,
    subject: String,
    uris: Vec<String>,
    dns: Vec<String>,
    cert: String,
    chain: String,
}

impl TlsPeer {
    /// The certificates of a handshake, `None` when the client presented none.
    pub fn from_ssl(ssl: &SslRef) -> Option<TlsPeer> {
        let leaf = ssl.peer_certificate()?;
        let chain = ssl
            .peer_cert_chain()
            .map(|c| c.iter().map(X509Ref::to_owned).collect())
            .unwrap_or_default();
        Some(TlsPeer {
            leaf,
            chain,
            local: ssl.certificate().map(X509Ref::to_owned),
            parts: OnceLock::new(),
        })
    }

    fn parts(&self) -> &Parts {
        self.parts.get_or_init(|| {
            let sans = |c: &X509Ref, uri: bool| -> Vec<String> {
                c.subject_alt_names()
                    .map(|names| {
                        names
                            .iter()
                            .filter_map(|n| if uri { n.uri() } else { n.dnsname() })
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let pem = |c: &X509Ref| {
                c.to_pem()
                    .map(|p| String::from_utf8_lossy(&p).into_owned())
                    .unwrap_or_default()
            };
            // The server side's chain leaves the leaf out; Envoy's full chain has it first.
            let mut chain = pem(&self.leaf);
            for c in &self.chain {
                if c.to_der().ok() != self.leaf.to_der().ok() {
                    chain.push_str(&pem(c));
                }
            }
            Parts {
                by: self
                    .local
                    .as_deref()
                    .map(|l| sans(l, true))
                    .unwrap_or_default(),
                hash: self
                    .leaf
                    .digest(MessageDigest::sha256())
                    .map(|d| d.iter().map(|b| format!("{b:02x}")).collect())
                    .unwrap_or_default(),
                subject: self
                    .leaf
                    .subject_name()
                    .print_ex(XN_FLAG_RFC2253)
                    .unwrap_or_default(),
                uris: sans(&self.leaf, true),
                dns: sans(&self.leaf, false),
                cert: url_encode(&pem(&self.leaf)),
                chain: url_encode(&chain),
            }
        })
    }

    /// This hop's XFCC element, in Envoy's order.
    fn element(&self, d: ClientCertDetails) -> String {
        let p = self.parts();
        let mut out: Vec<String> = p.by.iter().map(|u| format!("By={u}")).collect();
        if !p.hash.is_empty() {
            out.push(format!("Hash={}", p.hash));
        }
        if d.cert && !p.cert.is_empty() {
            out.push(format!("Cert=\"{}\"", p.cert));
        }
        if d.chain && !p.chain.is_empty() {
            out.push(format!("Chain=\"{}\"", p.chain));
        }
        if d.subject {
            out.push(format!("Subject=\"{}\"", p.subject));
        }
        if d.uri {
            if p.uris.is_empty() {
                out.push("URI=".to_owned());
            }
            out.extend(p.uris.iter().map(|u| format!("URI={u}")));
        }
        if d.dns {
            out.extend(p.dns.iter().map(|n| format!("DNS={n}")));
        }
        out.join(";")
    }
}

/// The PEM as Envoy URL-encodes it for XFCC.
fn url_encode(pem: &str) -> String {
    let mut out = String::with_capacity(pem.len() + pem.len() / 8);
    for c in pem.chars() {
        match c {
            '\n' => out.push_str("%0A"),
            ' ' => out.push_str("%20"),
            '+' => out.push_str("%2B"),
            '/' => out.push_str("%2F"),
            '=' => out.push_str("%3D"),
            c => out.push(c),
        }
    }
    out
}

/// Envoy's `mutateXfccRequestHeader`: the request's XFCC header under `mode`, with the
/// connection's client certificate (`None`: not an mTLS connection).
pub(crate) fn apply(h: &mut HeaderMap, mode: ForwardClientCert, peer: Option<&TlsPeer>) {
    let (details, peer) = match (mode, peer) {
        (ForwardClientCert::AlwaysForwardOnly, _) => return,
        (ForwardClientCert::Sanitize, _) | (_, None) => {
            h.remove(XFCC);
            return;
        }
        (ForwardClientCert::ForwardOnly, Some(_)) => return,
        (ForwardClientCert::AppendForward(d) | ForwardClientCert::SanitizeSet(d), Some(peer)) => {
            (d, peer)
        }
    };
    let element = peer.element(details);
    let value = match (mode, h.get(&XFCC).and_then(|v| v.to_str().ok())) {
        (ForwardClientCert::AppendForward(_), Some(prev)) if !prev.is_empty() => {
            format!("{prev},{element}")
        }
        _ => element,
    };
    match HeaderValue::from_str(&value) {
        Ok(v) => {
            h.insert(XFCC, v);
        }
        Err(_) => {
            h.remove(XFCC);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_without_a_client_certificate() {
        let mut h = HeaderMap::new();
        h.insert(XFCC, HeaderValue::from_static("By=spiffe://a;Hash=00"));
        apply(&mut h, ForwardClientCert::AlwaysForwardOnly, None);
        assert!(h.contains_key(XFCC));
        apply(&mut h, ForwardClientCert::ForwardOnly, None);
        assert!(!h.contains_key(XFCC));
        h.insert(XFCC, HeaderValue::from_static("x"));
        apply(
            &mut h,
            ForwardClientCert::SanitizeSet(ClientCertDetails::default()),
            None,
        );
        assert!(!h.contains_key(XFCC));
    }

    #[test]
    fn pem_encoding() {
        assert_eq!(url_encode("a b+c/d=\n"), "a%20b%2Bc%2Fd%3D%0A");
    }
}
