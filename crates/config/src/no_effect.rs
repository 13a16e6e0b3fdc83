//! The closed list of resource fields accepted with no effect (docs/configuration.md, "Accepted
//! with no effect"): `metadata` on listeners, clusters, locality endpoints, lb endpoints, virtual
//! hosts and routes; a route's `decorator`; the connection manager's `tracing` (quickshake
//! exports no traces). Control planes emit them by default (Envoy Gateway's `metadata`, Istio's
//! `decorator` and `tracing`); they shape only what Envoy reports, never what it forwards.
//!
//! Each is checked for its shape, as Envoy's proto validation would, and then dropped: nothing
//! here reaches the model. Any other field stays "not supported yet" or unknown.

use crate::walk::{Node, Result};

/// `envoy.config.core.v3.Metadata`: `filter_metadata` (map of `Struct`) and
/// `typed_filter_metadata` (map of `Any`, each with its `@type`).
pub(crate) fn metadata(node: &Node<'_>) -> Result<()> {
    let o = node.obj(&["filter_metadata", "typed_filter_metadata"])?;
    if let Some(f) = o.get("filter_metadata") {
        let m = f.any_obj()?;
        for key in m.map.keys() {
            if let Some(v) = m.get(key) {
                v.any_obj()?;
            }
        }
    }
    if let Some(t) = o.get("typed_filter_metadata") {
        let m = t.any_obj()?;
        for key in m.map.keys() {
            if let Some(v) = m.get(key) {
                v.type_url()?;
            }
        }
    }
    Ok(())
}

/// `envoy.config.route.v3.Decorator`: `operation` (required, non-empty, as Envoy validates it)
/// and `propagate`.
pub(crate) fn decorator(node: &Node<'_>) -> Result<()> {
    let o = node.obj(&["operation", "propagate"])?;
    o.req("operation")?.non_empty_str()?;
    o.opt_bool("propagate")?;
    Ok(())
}

/// `HttpConnectionManager.Tracing`: its fields are checked by name; their values (sampling
/// percentages, custom tags, the tracer provider) are not read, since no span is ever made.
pub(crate) fn hcm_tracing(node: &Node<'_>) -> Result<()> {
    let o = node.obj(&[
        "client_sampling",
        "random_sampling",
        "overall_sampling",
        "verbose",
        "max_path_tag_length",
        "custom_tags",
        "provider",
        "spawn_upstream_span",
        "operation",
        "upstream_operation",
        "no_context_propagation",
    ])?;
    for key in ["client_sampling", "random_sampling", "overall_sampling"] {
        if let Some(p) = o.get(key) {
            p.obj(&["value"])?;
        }
    }
    if let Some(p) = o.get("provider") {
        let po = p.obj(&["name", "typed_config"])?;
        po.req("name")?.non_empty_str()?;
    }
    Ok(())
}
