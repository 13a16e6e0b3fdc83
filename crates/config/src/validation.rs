//! `validation_context`: the trusted CA certificates (`trusted_ca`) a TLS context verifies
//! peers with; the other ways to verify are not supported yet.

use crate::model::DataSource;
use crate::source::data_source;
use crate::walk::{Node, Result};

pub(crate) fn validation_context(node: &Node<'_>) -> Result<Option<DataSource>> {
    let o = node.obj_with(
        &["trusted_ca"],
        &[
            "ca_certificate_provider_instance",
            "system_root_certs",
            "watched_directory",
            "verify_certificate_spki",
            "verify_certificate_hash",
            "match_typed_subject_alt_names",
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
    o.get("trusted_ca").map(|t| data_source(&t)).transpose()
}

/// A `Secret`'s `validation_context`, which must hold `trusted_ca`.
pub(crate) fn validation_context_ca(node: &Node<'_>) -> Result<DataSource> {
    match validation_context(node)? {
        Some(ca) => Ok(ca),
        None => Err(node.err("needs trusted_ca")),
    }
}
