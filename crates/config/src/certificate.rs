//! A `TlsCertificate`: a certificate chain with its private key or private key provider, as it
//! appears inline in a `CommonTlsContext` and inside an SDS `Secret` resource. Files are not read
//! here.

use std::path::PathBuf;

use crate::model::{PrivateKeyProvider, TlsCertificate};
use crate::source::data_source;
use crate::walk::{Node, Result};

pub(crate) fn tls_certificate(node: &Node<'_>) -> Result<TlsCertificate> {
    let o = node.obj_with(
        &[
            "certificate_chain",
            "private_key",
            "private_key_provider",
            "watched_directory",
            "ocsp_staple",
        ],
        &["password", "pkcs12", "signed_certificate_timestamp"],
    )?;
    let certificate_chain = data_source(&o.req("certificate_chain")?)?;
    let private_key = o.get("private_key").map(|k| data_source(&k)).transpose()?;
    let private_key_provider = o
        .get("private_key_provider")
        .map(|p| private_key_provider(&p))
        .transpose()?;
    if private_key.is_none() && private_key_provider.is_none() {
        return Err(node.err("needs private_key or private_key_provider"));
    }
    let watched_directory = match o.get("watched_directory") {
        Some(w) => Some(PathBuf::from(
            w.obj(&["path"])?.req("path")?.non_empty_str()?,
        )),
        None => None,
    };
    let ocsp_staple = o.get("ocsp_staple").map(|s| data_source(&s)).transpose()?;
    Ok(TlsCertificate {
        watched_directory,
        ocsp_staple,
        path: node.path.clone(),
        certificate_chain,
        private_key,
        private_key_provider,
    })
}

fn private_key_provider(node: &Node<'_>) -> Result<PrivateKeyProvider> {
    let o = node.obj(&["provider_name", "typed_config", "fallback"])?;
    let provider_name = o.req("provider_name")?.non_empty_str()?.to_owned();
    let tc = o.req("typed_config")?;
    // The provider registry checks the type URL; here it only has to be present.
    let type_url = tc.type_url()?.to_owned();
    let typed_config = tc.any_obj()?.without_type();
    Ok(PrivateKeyProvider {
        path: node.path.clone(),
        provider_name,
        type_url,
        typed_config,
        fallback: o.bool_or_false("fallback")?,
    })
}
