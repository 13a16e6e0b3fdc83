//! `match_typed_subject_alt_names` in the handshake: after BoringSSL has verified the peer's
//! chain, its certificate must carry a SAN one of the matchers matches (Envoy's
//! `DefaultCertValidator::verifyCertificate`), or the handshake fails with
//! `X509_V_ERR_APPLICATION_VERIFICATION`. Used by the client (upstream) and the server
//! (client certificates) contexts.

use std::net::IpAddr;
use std::sync::Arc;

use boring::x509::{X509Ref, X509StoreContextRef, X509VerifyError};
use quickshake_config::{SanMatcher, SanType};

/// Whether `cert` has a SAN one of `matchers` matches (true when there are no matchers).
pub fn leaf_matches(cert: &X509Ref, matchers: &[SanMatcher]) -> bool {
    if matchers.is_empty() {
        return true;
    }
    let Some(names) = cert.subject_alt_names() else {
        return false;
    };
    names.iter().any(|name| {
        let typed = if let Some(d) = name.dnsname() {
            Some((SanType::Dns, d.to_owned()))
        } else if let Some(e) = name.email() {
            Some((SanType::Email, e.to_owned()))
        } else if let Some(u) = name.uri() {
            Some((SanType::Uri, u.to_owned()))
        } else {
            name.ipaddress()
                .and_then(ip_text)
                .map(|ip| (SanType::IpAddress, ip))
        };
        typed.is_some_and(|(t, v)| matchers.iter().any(|m| m.matches(t, &v)))
    })
}

/// An IP address SAN as text (4 or 16 bytes), as Envoy writes it (`inet_ntop`).
fn ip_text(b: &[u8]) -> Option<String> {
    let ip: IpAddr = match b.len() {
        4 => <[u8; 4]>::try_from(b).ok()?.into(),
        16 => <[u8; 16]>::try_from(b).ok()?.into(),
        _ => return None,
    };
    Some(ip.to_string())
}

/// A verify callback for `SSL_CTX_set_verify` / `SSL_set_verify`: BoringSSL's own verdict for
/// each certificate of the chain, and for the peer's certificate (depth 0) the SAN matchers
/// too.
pub fn verify_callback(
    matchers: Arc<[SanMatcher]>,
) -> impl Fn(bool, &mut X509StoreContextRef) -> bool + Send + Sync + 'static {
    move |preverified, ctx| {
        if !preverified || ctx.error_depth() != 0 {
            return preverified;
        }
        let ok = ctx
            .current_cert()
            .is_some_and(|c| leaf_matches(c, &matchers));
        if !ok {
            ctx.set_error(Err(X509VerifyError::APPLICATION_VERIFICATION));
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boring::x509::X509;
    use quickshake_config::{StringMatch, StringMatcher};
    use quickshake_test_support::paths::read_cert as cert;

    fn m(t: SanType, kind: StringMatch) -> SanMatcher {
        SanMatcher {
            san_type: t,
            matcher: StringMatcher {
                kind,
                ignore_case: false,
            },
        }
    }

    #[test]
    fn matches_the_leaf_sans_by_type() {
        // rsa2048: DNS:localhost, IP:127.0.0.1, IP:::1; other: DNS:other.test, DNS:*.other.test.
        let localhost = X509::from_pem(&cert("rsa2048.cert.pem")).expect("pem");
        let other = X509::from_pem(&cert("other.cert.pem")).expect("pem");
        let dns = |s: &str| m(SanType::Dns, StringMatch::Exact(s.into()));
        assert!(leaf_matches(&localhost, &[]));
        assert!(leaf_matches(&localhost, &[dns("LOCALHOST")]));
        assert!(!leaf_matches(&localhost, &[dns("envoy-gateway")]));
        assert!(leaf_matches(&localhost, &[dns("x"), dns("localhost")]));
        assert!(leaf_matches(
            &localhost,
            &[m(SanType::IpAddress, StringMatch::Exact("::1".into()))]
        ));
        assert!(!leaf_matches(
            &localhost,
            &[m(SanType::Uri, StringMatch::Exact("localhost".into()))]
        ));
        assert!(leaf_matches(&other, &[dns("a.other.test")]));
        assert!(leaf_matches(
            &other,
            &[m(SanType::Dns, StringMatch::Suffix(".test".into()))]
        ));
    }
}
