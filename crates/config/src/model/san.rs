//! `CertificateValidationContext.match_typed_subject_alt_names`: the SANs a peer's
//! certificate must have (the context itself is `model::ValidationContext`).

use super::matcher::StringMatcher;

/// One `SubjectAltNameMatcher`: a SAN of type `san_type` that `matcher` matches.
#[derive(Debug, Clone)]
pub struct SanMatcher {
    pub san_type: SanType,
    pub matcher: StringMatcher,
}

/// `SubjectAltNameMatcher.san_type` (`OTHER_NAME` is refused at load: not supported yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SanType {
    Dns,
    Email,
    Uri,
    IpAddress,
}

impl SanType {
    /// The enum's name, as Envoy's configuration writes it.
    pub fn name(self) -> &'static str {
        match self {
            SanType::Dns => "DNS",
            SanType::Email => "EMAIL",
            SanType::Uri => "URI",
            SanType::IpAddress => "IP_ADDRESS",
        }
    }
}

impl SanMatcher {
    /// Whether a SAN of type `san_type` with value `san` (an IP address in its text form)
    /// matches, as Envoy's `StringSanMatcher::match`: for a DNS SAN and an `exact` matcher,
    /// DNS name semantics (ASCII case-insensitive; a `*.` wildcard SAN covers one label).
    pub fn matches(&self, san_type: SanType, san: &str) -> bool {
        if san_type != self.san_type {
            return false;
        }
        match &self.matcher.kind {
            super::matcher::StringMatch::Exact(name) if san_type == SanType::Dns => {
                dns_name_match(name, san)
            }
            _ => self.matcher.matches(san),
        }
    }
}

/// Envoy's `Utility::dnsNameMatch(dns_name, pattern)`: equal ignoring ASCII case, or `pattern`
/// is `*.rest` and `dns_name` is one label (no `.`) followed by `.rest`.
fn dns_name_match(dns_name: &str, pattern: &str) -> bool {
    let name = dns_name.to_ascii_lowercase();
    let pattern = pattern.to_ascii_lowercase();
    if name == pattern {
        return true;
    }
    if let Some(rest) = pattern.strip_prefix('*') {
        if rest.starts_with('.') && name.len() > rest.len() {
            let (label, tail) = name.split_at(name.len() - rest.len());
            return !label.contains('.') && tail == rest;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::StringMatch;

    fn m(t: SanType, kind: StringMatch, ignore_case: bool) -> SanMatcher {
        SanMatcher {
            san_type: t,
            matcher: StringMatcher { kind, ignore_case },
        }
    }

    #[test]
    fn dns_exact_uses_dns_semantics() {
        let exact = m(
            SanType::Dns,
            StringMatch::Exact("Envoy-Gateway".into()),
            false,
        );
        assert!(exact.matches(SanType::Dns, "envoy-gateway"));
        assert!(!exact.matches(SanType::Uri, "envoy-gateway"));
        let host = m(
            SanType::Dns,
            StringMatch::Exact("a.example.com".into()),
            false,
        );
        assert!(host.matches(SanType::Dns, "*.example.com"));
        assert!(!host.matches(SanType::Dns, "*.b.example.com"));
        let deep = m(
            SanType::Dns,
            StringMatch::Exact("x.a.example.com".into()),
            false,
        );
        assert!(!deep.matches(SanType::Dns, "*.example.com"));
        // Only an exact DNS matcher gets DNS semantics: a prefix is case-sensitive.
        let prefix = m(SanType::Dns, StringMatch::Prefix("Envoy".into()), false);
        assert!(!prefix.matches(SanType::Dns, "envoy-gateway"));
        let folded = m(SanType::Dns, StringMatch::Prefix("Envoy".into()), true);
        assert!(folded.matches(SanType::Dns, "envoy-gateway"));
        let uri = m(SanType::Uri, StringMatch::Exact("spiffe://A".into()), false);
        assert!(!uri.matches(SanType::Uri, "spiffe://a"));
    }
}
