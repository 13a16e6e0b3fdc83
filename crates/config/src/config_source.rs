//! Where dynamic resources come from: `dynamic_resources` (ADS, LDS, CDS) and every
//! `ConfigSource` (`ads`, `api_config_source`, `path_config_source`), as Envoy's
//! `envoy.config.core.v3.ConfigSource` and `ApiConfigSource` define them. quickshake's xDS
//! client speaks gRPC (state of the world and incremental) to a cluster named by
//! `envoy_grpc.cluster_name`; other transports are "not supported yet".

use std::path::PathBuf;

use crate::duration::duration;
use crate::model::{ApiConfigSource, ConfigSource, ConfigSourceKind, DynamicResources, XdsApiType};
use crate::walk::{Node, Result};

/// `dynamic_resources`.
pub(crate) fn dynamic_resources(node: &Node<'_>) -> Result<DynamicResources> {
    let o = node.obj_with(
        &["ads_config", "lds_config", "cds_config"],
        &["lds_resources_locator", "cds_resources_locator"],
    )?;
    let ads = o
        .get("ads_config")
        .map(|n| api_config_source(&n))
        .transpose()?;
    let lds = o.get("lds_config").map(|n| config_source(&n)).transpose()?;
    let cds = o.get("cds_config").map(|n| config_source(&n)).transpose()?;
    for src in [&lds, &cds].into_iter().flatten() {
        if matches!(src.kind, ConfigSourceKind::Ads) && ads.is_none() {
            return Err(Node::new(node.v, src.path.clone())
                .err("uses ads, but dynamic_resources.ads_config is not set"));
        }
    }
    Ok(DynamicResources {
        path: node.path.clone(),
        ads,
        lds,
        cds,
    })
}

/// A `ConfigSource`: `ads: {}`, `api_config_source` or a file (`path_config_source.path`, or
/// the older `path`).
pub(crate) fn config_source(node: &Node<'_>) -> Result<ConfigSource> {
    let o = node.obj_with(
        &[
            "ads",
            "api_config_source",
            "path_config_source",
            "path",
            "resource_api_version",
            "initial_fetch_timeout",
        ],
        &["authorities", "self"],
    )?;
    if let Some(v) = o.get("resource_api_version") {
        resource_api_version(&v)?;
    }
    let initial_fetch_timeout = o
        .get("initial_fetch_timeout")
        .map(|d| duration(&d))
        .transpose()?;
    let given = o.present(&["ads", "api_config_source", "path_config_source", "path"]);
    if given.len() > 1 {
        return Err(node.err(format!("only one of {} may be set", given.join(", "))));
    }
    let kind = if let Some(a) = o.get("ads") {
        a.obj(&[])?;
        ConfigSourceKind::Ads
    } else if let Some(a) = o.get("api_config_source") {
        ConfigSourceKind::Api(api_config_source(&a)?)
    } else if let Some(p) = o.get("path_config_source") {
        let po = p.obj(&["path", "watched_directory"])?;
        ConfigSourceKind::Path(PathBuf::from(po.req("path")?.non_empty_str()?))
    } else if let Some(p) = o.get("path") {
        ConfigSourceKind::Path(PathBuf::from(p.non_empty_str()?))
    } else {
        return Err(node.err("one of ads, api_config_source or path_config_source is required"));
    };
    Ok(ConfigSource {
        path: node.path.clone(),
        kind,
        initial_fetch_timeout,
    })
}

/// An `ApiConfigSource` (also the shape of `ads_config`): gRPC to an Envoy cluster.
pub(crate) fn api_config_source(node: &Node<'_>) -> Result<ApiConfigSource> {
    let o = node.obj_with(
        &[
            "api_type",
            "transport_api_version",
            "grpc_services",
            "set_node_on_first_message_only",
            "request_timeout",
            "refresh_delay",
        ],
        &["cluster_names", "rate_limit_settings", "config_validators"],
    )?;
    let api_type = {
        let t = o.req("api_type")?;
        match t.as_str()? {
            "GRPC" => XdsApiType::Grpc,
            "DELTA_GRPC" => XdsApiType::DeltaGrpc,
            "AGGREGATED_GRPC" | "AGGREGATED_DELTA_GRPC" | "REST" | "UNSUPPORTED_REST_LEGACY" => {
                return Err(t.unsupported(Some("api_type GRPC or DELTA_GRPC")))
            }
            other => return Err(t.err(format!("unknown api_type {other}"))),
        }
    };
    if let Some(v) = o.get("transport_api_version") {
        resource_api_version(&v)?;
    }
    for key in ["request_timeout", "refresh_delay"] {
        if let Some(d) = o.get(key) {
            duration(&d)?;
        }
    }
    let services = o.items("grpc_services");
    let first = match services.as_slice() {
        [one] => one,
        [] => return Err(o.missing("grpc_services")),
        [_, second, ..] => return Err(second.unsupported(Some("exactly one grpc_services entry"))),
    };
    let so = first.obj_with(
        &["envoy_grpc", "timeout", "initial_metadata"],
        &["google_grpc", "retry_policy"],
    )?;
    if let Some(t) = so.get("timeout") {
        duration(&t)?;
    }
    let eg = so.req("envoy_grpc")?;
    let eo = eg.obj_with(
        &["cluster_name", "authority"],
        &[
            "retry_policy",
            "max_receive_message_length",
            "skip_envoy_headers",
        ],
    )?;
    let cluster_name = eo.req("cluster_name")?.non_empty_str()?.to_owned();
    eo.opt_str("authority")?;
    let initial_metadata = so
        .items("initial_metadata")
        .iter()
        .map(metadata_entry)
        .collect::<Result<Vec<_>>>()?;
    Ok(ApiConfigSource {
        path: node.path.clone(),
        api_type,
        cluster_name,
        set_node_on_first_message_only: o.bool_or_false("set_node_on_first_message_only")?,
        initial_metadata,
    })
}

/// One `grpc_services[].initial_metadata` entry (a `HeaderValue` `{key, value}`): the key
/// lower-cased, as Envoy's gRPC client adds it to the stream's request headers.
fn metadata_entry(node: &Node<'_>) -> Result<(String, String)> {
    let o = node.obj_with(&["key", "value"], &["raw_value"])?;
    let key = o.req("key")?;
    let name = key.non_empty_str()?;
    if crate::header_mutation::http_name_invalid(name) {
        return Err(key.err(format!("\"{name}\" is not a valid header name")));
    }
    let value = match o.get("value") {
        Some(v) => {
            let s = v.as_str()?;
            if s.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
                return Err(v.err("a header value cannot hold control characters"));
            }
            s.to_owned()
        }
        None => String::new(),
    };
    Ok((name.to_ascii_lowercase(), value))
}

/// `resource_api_version` / `transport_api_version`: only V3 exists now (AUTO meant V2 or V3).
fn resource_api_version(node: &Node<'_>) -> Result<()> {
    match node.as_str()? {
        "V3" | "AUTO" => Ok(()),
        "V2" => Err(node.unsupported(Some("the v2 xDS API is gone from Envoy; use V3"))),
        other => Err(node.err(format!("unknown API version {other}"))),
    }
}
