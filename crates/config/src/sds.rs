//! SDS-shaped secrets from files: `tls_certificate_sds_secret_configs[]` whose `sds_config` is
//! `path_config_source.path` (or the older `path`), pointing at a file of
//! `envoy.extensions.transport_sockets.tls.v3.Secret` resources, as Envoy reads them and as
//! Envoy Gateway's `EnvoyPatchPolicy` produces them. The reference is kept unresolved in the
//! model; `load_sds_tls_certificate` reads the file each time a context is built, so a changed
//! file is picked up by a reload. SDS over gRPC (ADS) is out of scope.

use std::path::PathBuf;

use serde_json::Value;

use crate::certificate::tls_certificate;
use crate::error::ConfigError;
use crate::model::{SdsSecretRef, TlsCertificate};
use crate::source::{read_config_text, yaml_text_to_json};
use crate::walk::Node;
use crate::walk::Result;

const SECRET_TYPE: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

/// Parse one `tls_certificate_sds_secret_configs[]` entry.
pub(crate) fn sds_secret_ref(node: &Node<'_>) -> Result<SdsSecretRef> {
    let o = node.obj(&["name", "sds_config"])?;
    let name = o.req("name")?.non_empty_str()?.to_owned();
    let cfg = o.req("sds_config")?;
    let co = cfg.obj_with(
        &[
            "path_config_source",
            "path",
            "resource_api_version",
            "initial_fetch_timeout",
        ],
        &["api_config_source", "ads"],
    )?;
    let file = if let Some(pcs) = co.get("path_config_source") {
        let po = pcs.obj(&["path", "watched_directory"])?;
        po.req("path")?.non_empty_str()?.to_owned()
    } else if let Some(p) = co.get("path") {
        p.non_empty_str()?.to_owned()
    } else {
        return Err(cfg.err("needs path_config_source.path (SDS over gRPC is not supported yet)"));
    };
    Ok(SdsSecretRef {
        path: node.path.clone(),
        name,
        file: PathBuf::from(file),
    })
}

/// Read an SDS secret file and build the named secret's `tls_certificate`. Errors name the
/// secret file and the field inside it.
pub fn load_sds_tls_certificate(r: &SdsSecretRef) -> Result<TlsCertificate> {
    let text = read_config_text(&r.file).map_err(|e| ConfigError::Invalid {
        path: r.path.clone(),
        message: format!("SDS secret file: {e}"),
    })?;
    let origin = r.file.display().to_string();
    let doc = yaml_text_to_json(&text, &origin)?;
    let root = Node::new(&doc, origin.clone());
    let ro = root.obj(&["resources", "version_info"])?;
    for res in ro.items("resources") {
        let Some(name) = res.v.get("name").and_then(Value::as_str) else {
            continue;
        };
        if name != r.name {
            continue;
        }
        let so = res.typed(
            SECRET_TYPE,
            &["name", "tls_certificate"],
            &[
                "session_ticket_keys",
                "validation_context",
                "generic_secret",
            ],
        )?;
        let tc = so.req("tls_certificate")?;
        let mut cert = tls_certificate(&tc)?;
        cert.path = format!("{} (secret '{}' in {})", r.path, r.name, origin);
        return Ok(cert);
    }
    Err(ConfigError::Invalid {
        path: r.path.clone(),
        message: format!("no Secret named '{}' in {origin}", r.name),
    })
}
