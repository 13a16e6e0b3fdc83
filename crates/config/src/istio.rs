//! Istio's proxy-only extensions, which istiod puts in what it sends every gateway and sidecar
//! and which only Istio's build of Envoy has: accepted with no effect, each for a stated reason
//! (docs/configuration.md, "Istio's own extensions"). Their shape is checked; nothing reaches
//! the model.
//!
//! - HTTP filter `istio.metadata_exchange` (`io.istio.http.peer_metadata.Config`, in a
//!   `TypedStruct`): discovers the peer's workload metadata and propagates the proxy's own in
//!   `x-envoy-peer-metadata*` headers, for Istio's telemetry labels. quickshake discovers and
//!   propagates none (no `x-envoy-peer-metadata*` header is added or read).
//! - HTTP filter `istio.alpn` (`istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig`):
//!   overrides the ALPN offered on upstream TLS per upstream protocol (`istio-http/1.1` ...),
//!   which matters only for ISTIO_MUTUAL upstreams (sidecars). quickshake offers each cluster's
//!   own `alpn_protocols`.
//! - HTTP filter `istio.stats` (`stats.PluginConfig`): Istio's standard metrics
//!   (`istio_requests_total` ...). quickshake exports its own Envoy-named statistics only.
//! - Cluster `filters[]` entry `istio.metadata_exchange`
//!   (`envoy.tcp.metadataexchange.config.MetadataExchange`, in a `TypedStruct`): exchanges
//!   metadata only on an upstream connection that negotiated ALPN `istio-peer-exchange`;
//!   quickshake sends none. Any other upstream network filter is refused.
//!
//! What this module must not do: change traffic, or accept a filter of another type.

use crate::walk::{Node, Result};

/// The configuration types of the HTTP filters above (the part after the last `/`).
const ISTIO_HTTP: &[&str] = &[
    "io.istio.http.peer_metadata.Config",
    "istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig",
    "stats.PluginConfig",
];
const METADATA_EXCHANGE: &str = "envoy.tcp.metadataexchange.config.MetadataExchange";
/// Whether this HTTP filter `typed_config` is one of Istio's own (accepted with no effect).
/// The fields of `istio.alpn`'s configuration are checked; the others are decoded, not read.
pub(crate) fn http_filter(tc: &Node<'_>) -> Result<bool> {
    let t = tc.config_type()?;
    if !ISTIO_HTTP.contains(&t) {
        return Ok(false);
    }
    if t == "istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig" {
        let o = tc.obj(&["@type", "alpn_override"])?;
        for item in o.items("alpn_override") {
            let a = item.obj(&["upstream_protocol", "alpn_override"])?;
            if let Some(p) = a.get("upstream_protocol") {
                p.enum_index(&["HTTP10", "HTTP11", "HTTP2"])?;
            }
            a.str_list("alpn_override")?;
        }
    }
    Ok(true)
}

/// A cluster's `filters[]` (upstream network filters): Istio's metadata exchange only.
pub(crate) fn cluster_filters(node: &Node<'_>) -> Result<()> {
    for f in node.items() {
        let o = f.obj(&["name", "typed_config"])?;
        o.req("name")?.non_empty_str()?;
        let tc = o.req("typed_config")?;
        if tc.config_type()? != METADATA_EXCHANGE {
            return Err(tc.unsupported(Some(
                "the only upstream network filter accepted is Istio's metadata exchange \
                 (envoy.tcp.metadataexchange.config.MetadataExchange, no effect)",
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::walk::Node;

    #[test]
    fn istio_http_filters_are_recognised_by_type() {
        let yes = [
            json!({"@type": "type.googleapis.com/udpa.type.v1.TypedStruct",
                   "type_url": "type.googleapis.com/io.istio.http.peer_metadata.Config",
                   "value": {"upstream_discovery": [{"istio_headers": {}}]}}),
            json!({"@type": "type.googleapis.com/istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig",
                   "alpn_override": [{"upstream_protocol": "HTTP11",
                                      "alpn_override": ["istio-http/1.1", "istio", "http/1.1"]}]}),
            json!({"@type": "type.googleapis.com/stats.PluginConfig",
                   "disable_host_header_fallback": true}),
        ];
        for v in &yes {
            assert!(super::http_filter(&Node::new(v, "tc")).unwrap(), "{v}");
        }
        let no = json!({"@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua"});
        assert!(!super::http_filter(&Node::new(&no, "tc")).unwrap());
        let bad = json!({"@type": "type.googleapis.com/istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig",
                         "alpn_override": [{"upstream_protocol": "HTTP9"}]});
        assert!(super::http_filter(&Node::new(&bad, "tc")).is_err());
    }

    #[test]
    fn cluster_filters_take_metadata_exchange_only() {
        let mx = json!([{"name": "istio.metadata_exchange", "typed_config": {
            "@type": "type.googleapis.com/udpa.type.v1.TypedStruct",
            "type_url": "type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange",
            "value": {"enable_discovery": true, "protocol": "istio-peer-exchange"}}}]);
        super::cluster_filters(&Node::new(&mx, "filters")).unwrap();
        let other = json!([{"name": "x", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.upstream.Other"}}]);
        let e = super::cluster_filters(&Node::new(&other, "filters")).unwrap_err();
        assert!(e.to_string().contains("filters[0].typed_config"), "{e}");
    }
}
