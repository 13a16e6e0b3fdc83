//! SDS-shaped secrets from files: `tls_certificate_sds_secret_configs[]` whose `sds_config` is
//! `path_config_source.path` (or the older `path`), pointing at a file of
//! `envoy.extensions.transport_sockets.tls.v3.Secret` resources, as Envoy reads them and as
//! Envoy Gateway's `EnvoyPatchPolicy` produces them. The reference is kept unresolved in the
//! model; `load_sds_tls_certificate` reads the file each time a context is built, so a changed
//! file is picked up by a reload. A reference whose `sds_config` is `ads` or an
//! `api_config_source` is resolved by the xDS client, which parses the `Secret` resources it
//! receives with [`secret_resource`], the same parser files go through.

use serde_json::Value;

use crate::certificate::tls_certificate;
use crate::config_source::config_source;
use crate::error::ConfigError;
use crate::model::DataSource;
use crate::model::{SdsSecretRef, TlsCertificate, ValidationContext};
use crate::source::{read_config_text, yaml_text_to_json};
use crate::ticket_keys::session_ticket_keys;
use crate::validation::validation_context_ca;
use crate::walk::Node;
use crate::walk::Result;

const SECRET_TYPE: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

/// A secret reference (`SdsSecretConfig`): a secret from its `sds_config` source, or, without
/// `sds_config`, the name of one of `static_resources.secrets` (resolved by the caller with
/// [`crate::static_secrets`]).
pub(crate) enum SecretRef {
    Sds(SdsSecretRef),
    Static(String),
}

/// Parse one `*_sds_secret_config(s)` entry.
pub(crate) fn secret_ref(node: &Node<'_>) -> Result<SecretRef> {
    let o = node.obj(&["name", "sds_config"])?;
    let name = o.req("name")?.non_empty_str()?.to_owned();
    let Some(c) = o.get("sds_config") else {
        return Ok(SecretRef::Static(name));
    };
    Ok(SecretRef::Sds(SdsSecretRef {
        path: node.path.clone(),
        name,
        source: config_source(&c)?,
    }))
}

/// What a `Secret` resource holds that quickshake uses.
#[derive(Debug, Clone)]
pub enum SecretKind {
    TlsCertificate(Box<TlsCertificate>),
    /// `validation_context`: `trusted_ca` and `match_typed_subject_alt_names`.
    ValidationContext(ValidationContext),
    /// `session_ticket_keys.keys[]`: the first encrypts, every one decrypts.
    SessionTicketKeys(Vec<DataSource>),
}

impl SecretKind {
    /// What the secret holds, for errors ("a tls_certificate").
    pub fn what(&self) -> &'static str {
        match self {
            SecretKind::TlsCertificate(_) => "a tls_certificate",
            SecretKind::ValidationContext(_) => "a validation_context",
            SecretKind::SessionTicketKeys(_) => "session_ticket_keys",
        }
    }
}

/// Parse one `envoy.extensions.transport_sockets.tls.v3.Secret` resource (its JSON form, with
/// or without `@type`), as the xDS client receives it. Errors carry paths rooted at `path`.
pub fn secret_resource(v: &Value, path: &str) -> Result<(String, SecretKind)> {
    let node = Node::new(v, path);
    let allowed = [
        "@type",
        "name",
        "tls_certificate",
        "validation_context",
        "session_ticket_keys",
    ];
    // A secret file's resources carry `@type`; one from xDS may not.
    let unsupported = ["generic_secret"];
    let so = if v.get("@type").is_some() {
        node.typed(SECRET_TYPE, &allowed[1..], &unsupported)?
    } else {
        node.obj_with(&allowed[1..], &unsupported)?
    };
    let name = so.req("name")?.non_empty_str()?.to_owned();
    let kinds = [
        "tls_certificate",
        "validation_context",
        "session_ticket_keys",
    ];
    let kind = match so.present(&kinds).as_slice() {
        ["tls_certificate"] => {
            SecretKind::TlsCertificate(Box::new(tls_certificate(&so.req("tls_certificate")?)?))
        }
        ["validation_context"] => {
            SecretKind::ValidationContext(validation_context_ca(&so.req("validation_context")?)?)
        }
        // The third kind, session_ticket_keys.
        [keys] => SecretKind::SessionTicketKeys(session_ticket_keys(&so.req(keys)?)?),
        [] => {
            return Err(node.err("needs tls_certificate, validation_context or session_ticket_keys"))
        }
        [_, second, ..] => {
            return Err(so.req(second)?.err(
                "only one of tls_certificate, validation_context and session_ticket_keys may \
                 be set",
            ))
        }
    };
    Ok((name, kind))
}

/// Read an SDS secret file and return the named secret's `validation_context` (`trusted_ca`
/// and SAN matchers).
pub fn load_sds_trusted_ca(r: &SdsSecretRef) -> Result<ValidationContext> {
    match load_sds_secret(r)? {
        (SecretKind::ValidationContext(ca), _) => Ok(ca),
        (other, origin) => Err(wrong_kind(r, &origin, &other, "a validation_context")),
    }
}

/// Read an SDS secret file and build the named secret's `tls_certificate`. Errors name the
/// secret file and the field inside it.
pub fn load_sds_tls_certificate(r: &SdsSecretRef) -> Result<TlsCertificate> {
    match load_sds_secret(r)? {
        (SecretKind::TlsCertificate(mut cert), origin) => {
            cert.path = format!("{} (secret '{}' in {})", r.path, r.name, origin);
            Ok(*cert)
        }
        (other, origin) => Err(wrong_kind(r, &origin, &other, "a tls_certificate")),
    }
}

/// Read an SDS secret file and return the named secret's `session_ticket_keys.keys[]`.
pub fn load_sds_session_ticket_keys(r: &SdsSecretRef) -> Result<Vec<DataSource>> {
    match load_sds_secret(r)? {
        (SecretKind::SessionTicketKeys(keys), _) => Ok(keys),
        (other, origin) => Err(wrong_kind(r, &origin, &other, "session_ticket_keys")),
    }
}

fn wrong_kind(r: &SdsSecretRef, origin: &str, got: &SecretKind, wanted: &str) -> ConfigError {
    ConfigError::Invalid {
        path: r.path.clone(),
        message: format!(
            "secret '{}' in {origin} holds {}, not {wanted}",
            r.name,
            got.what()
        ),
    }
}

/// The named secret of an SDS file, and the file's name.
fn load_sds_secret(r: &SdsSecretRef) -> Result<(SecretKind, String)> {
    let Some(file) = r.file() else {
        return Err(ConfigError::Invalid {
            path: format!("{}.sds_config", r.path),
            message: format!("secret '{}' comes from a control plane, not a file", r.name),
        });
    };
    let text = read_config_text(file).map_err(|e| ConfigError::Invalid {
        path: r.path.clone(),
        message: format!("SDS secret file: {e}"),
    })?;
    let origin = file.display().to_string();
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
        let (_, kind) = secret_resource(res.v, &res.path)?;
        return Ok((kind, origin));
    }
    Err(ConfigError::Invalid {
        path: r.path.clone(),
        message: format!("no Secret named '{}' in {origin}", r.name),
    })
}

impl crate::model::Listener {
    /// The listener's secret references to a control plane (`sds_config` `ads` or an
    /// `api_config_source`): certificates and session ticket keys. Such a listener warms until
    /// they arrive, as in Envoy.
    pub fn control_plane_secrets(&self) -> Vec<&SdsSecretRef> {
        self.filter_chains
            .iter()
            .filter_map(|c| c.tls.as_ref())
            .flat_map(|t| t.sds_certificates.iter().chain(&t.session_ticket_keys_sds))
            .filter(|r| r.file().is_none())
            .collect()
    }
}
