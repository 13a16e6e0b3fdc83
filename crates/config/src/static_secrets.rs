//! `static_resources.secrets`: `Secret` resources defined in the bootstrap, and the secret
//! references that name one. As in Envoy, a `*_sds_secret_config` without `sds_config` names a
//! static secret ("Unknown static secret" when there is none by that name); the secrets are
//! read before the clusters and listeners that use them, and names are unique per kind.
//!
//! A reference is resolved while the configuration is parsed: the secret's contents take the
//! reference's place in the model (a `tls_certificate`, with its `private_key_provider`, is a
//! certificate of the context like an inline one), so nothing downstream knows the difference.
//! The secrets in scope are set for the parse of one bootstrap, or of one xDS resource, by
//! [`with_static_secrets`] (a listener or cluster from a control plane may name them too).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::{Bootstrap, DataSource, TlsCertificate, ValidationContext};
use crate::sds::{secret_resource, SecretKind};
use crate::walk::{Node, Result};

/// `static_resources.secrets`, by name: each secret's contents and its config path.
#[derive(Debug, Clone, Default)]
pub(crate) struct StaticSecrets(Arc<BTreeMap<String, (SecretKind, String)>>);

thread_local! {
    static IN_SCOPE: RefCell<StaticSecrets> = RefCell::default();
}

/// Run `f` (the parse of a resource from a control plane) with `boot`'s static secrets in
/// scope, as Envoy resolves a reference without `sds_config` in any listener or cluster.
pub fn with_static_secrets<R>(boot: &Bootstrap, f: impl FnOnce() -> R) -> R {
    // The bootstrap parsed, so its secrets do.
    let secrets = boot
        .raw
        .0
        .get("static_resources")
        .and_then(|s| s.get("secrets"))
        .and_then(|s| static_secrets(&Node::new(s, "static_resources.secrets")).ok())
        .unwrap_or_default();
    in_scope(&secrets, f)
}

/// Run `f` (a parse) with `secrets` as the static secrets references resolve to.
pub(crate) fn in_scope<R>(secrets: &StaticSecrets, f: impl FnOnce() -> R) -> R {
    let before = IN_SCOPE.with(|s| s.replace(secrets.clone()));
    let out = f();
    IN_SCOPE.with(|s| *s.borrow_mut() = before);
    out
}

/// Parse `static_resources.secrets[]`. A name used twice is refused, as Envoy refuses a
/// duplicate static secret.
pub(crate) fn static_secrets(node: &Node<'_>) -> Result<StaticSecrets> {
    let mut map = BTreeMap::new();
    for s in node.items() {
        let (name, kind) = secret_resource(s.v, &s.path)?;
        if let Some((_, first)) = map.get(&name) {
            return Err(Node::new(s.v, format!("{}.name", s.path)).err(format!(
                "duplicate static secret name \"{name}\" (also {first})"
            )));
        }
        map.insert(name, (kind, s.path.clone()));
    }
    Ok(StaticSecrets(Arc::new(map)))
}

/// The static secret a reference without `sds_config` names (`node`: the reference).
fn lookup(node: &Node<'_>, name: &str) -> Result<(SecretKind, String)> {
    IN_SCOPE
        .with(|s| s.borrow().0.get(name).cloned())
        .ok_or_else(|| {
            node.err(format!(
                "Unknown static secret: {name} (a secret reference without sds_config names one \
             of static_resources.secrets)"
            ))
        })
}

fn wrong_kind(
    node: &Node<'_>,
    name: &str,
    at: &str,
    got: &SecretKind,
    wanted: &str,
) -> crate::ConfigError {
    node.err(format!(
        "static secret '{name}' ({at}) holds {}, not {wanted}",
        got.what()
    ))
}

/// A static `tls_certificate` secret; its `path` names the reference and the secret.
pub(crate) fn static_tls_certificate(node: &Node<'_>, name: &str) -> Result<TlsCertificate> {
    match lookup(node, name)? {
        (SecretKind::TlsCertificate(mut cert), at) => {
            cert.path = format!("{} (static secret '{name}', {at})", node.path);
            Ok(*cert)
        }
        (other, at) => Err(wrong_kind(node, name, &at, &other, "a tls_certificate")),
    }
}

/// A static `validation_context` secret (`trusted_ca` and SAN matchers).
pub(crate) fn static_trusted_ca(node: &Node<'_>, name: &str) -> Result<ValidationContext> {
    match lookup(node, name)? {
        (SecretKind::ValidationContext(ca), _) => Ok(ca),
        (other, at) => Err(wrong_kind(node, name, &at, &other, "a validation_context")),
    }
}

/// A static `session_ticket_keys` secret's keys.
pub(crate) fn static_session_ticket_keys(node: &Node<'_>, name: &str) -> Result<Vec<DataSource>> {
    match lookup(node, name)? {
        (SecretKind::SessionTicketKeys(keys), _) => Ok(keys),
        (other, at) => Err(wrong_kind(node, name, &at, &other, "session_ticket_keys")),
    }
}
