//! `validation_context`: the trusted CA certificates (`trusted_ca`) a TLS context verifies
//! peers with, and `match_typed_subject_alt_names` (the SANs the peer's certificate must
//! have); the other ways to verify are not supported yet.

use crate::matcher::string_matcher;
use crate::model::{DataSource, SanMatcher, SanType, ValidationContext};
use crate::source::data_source;
use crate::walk::{Node, Result};

/// `SubjectAltNameMatcher.SanType`, in number order (0 is `SAN_TYPE_UNSPECIFIED`, refused).
const SAN_TYPES: [&str; 6] = [
    "SAN_TYPE_UNSPECIFIED",
    "DNS",
    "EMAIL",
    "URI",
    "IP_ADDRESS",
    "OTHER_NAME",
];

/// A `CertificateValidationContext`; `None` when it sets nothing quickshake verifies with.
pub(crate) fn validation_context(node: &Node<'_>) -> Result<Option<ValidationContext>> {
    let (ca, san_matchers) = validation_fields(node, true)?;
    Ok(ca.map(|trusted_ca| ValidationContext {
        trusted_ca,
        san_matchers,
    }))
}

/// A `CertificateValidationContext`'s `trusted_ca` (if any) and SAN matchers; without
/// `sans_need_ca` (a `combined_validation_context`'s default, whose secret brings the CA) SAN
/// matchers may come alone.
pub(crate) fn validation_fields(
    node: &Node<'_>,
    sans_need_ca: bool,
) -> Result<(Option<DataSource>, Vec<SanMatcher>)> {
    let o = node.obj_with(
        &["trusted_ca", "match_typed_subject_alt_names"],
        &[
            "ca_certificate_provider_instance",
            "system_root_certs",
            "watched_directory",
            "verify_certificate_spki",
            "verify_certificate_hash",
            "match_subject_alt_names",
            "require_signed_certificate_timestamp",
            "crl",
            "allow_expired_certificate",
            "trust_chain_verification",
            "custom_validator_config",
            "only_verify_leaf_cert_crl",
            "max_verify_depth",
        ],
    )?;
    let mut san_matchers = Vec::new();
    for m in o.items("match_typed_subject_alt_names") {
        san_matchers.push(san_matcher(&m)?);
    }
    let Some(ca) = o.get("trusted_ca") else {
        if let Some(m) = o
            .get("match_typed_subject_alt_names")
            .filter(|_| sans_need_ca)
        {
            if !san_matchers.is_empty() {
                // Envoy: "SAN-based verification of peer certificates without trusted CA is
                // insecure and not allowed".
                return Err(m.err("needs trusted_ca (SAN verification without a trusted CA is insecure and not allowed)"));
            }
        }
        return Ok((None, san_matchers));
    };
    Ok((Some(data_source(&ca)?), san_matchers))
}

/// A `SubjectAltNameMatcher`: `san_type` and `matcher` (a `StringMatcher`).
fn san_matcher(node: &Node<'_>) -> Result<SanMatcher> {
    let o = node.obj(&["san_type", "matcher", "oid"])?;
    let t = o.req("san_type")?;
    let san_type = match t.enum_index(&SAN_TYPES)? {
        1 => SanType::Dns,
        2 => SanType::Email,
        3 => SanType::Uri,
        4 => SanType::IpAddress,
        5 => return Err(t.unsupported(Some("DNS, EMAIL, URI or IP_ADDRESS"))),
        _ => return Err(t.err("must be DNS, EMAIL, URI, IP_ADDRESS or OTHER_NAME")),
    };
    if let Some(oid) = o.get("oid") {
        // Envoy reads `oid` only for OTHER_NAME.
        oid.as_str()?;
    }
    Ok(SanMatcher {
        san_type,
        matcher: string_matcher(&o.req("matcher")?)?,
    })
}

/// A `Secret`'s `validation_context`, which must hold `trusted_ca`.
pub(crate) fn validation_context_ca(node: &Node<'_>) -> Result<ValidationContext> {
    match validation_context(node)? {
        Some(v) => Ok(v),
        None => Err(node.err("needs trusted_ca")),
    }
}
