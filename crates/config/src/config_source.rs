//! Envoy's `ConfigSource` for xDS resources (RDS routes, EDS endpoints): `ads: {}` or the gRPC
//! forms of `api_config_source`, with `resource_api_version: V3` and `initial_fetch_timeout`.

use std::time::Duration;

use crate::duration::duration;
use crate::model::{ApiConfigSource, ConfigSource, ConfigSourceKind};
use crate::walk::{Node, Obj, Result};

/// Envoy's default `initial_fetch_timeout`.
const DEFAULT_INITIAL_FETCH_TIMEOUT: Duration = Duration::from_secs(15);

pub(crate) fn config_source(node: &Node<'_>) -> Result<ConfigSource> {
    const KINDS: [&str; 2] = ["ads", "api_config_source"];
    let o = node.obj_with(
        &[
            "ads",
            "api_config_source",
            "resource_api_version",
            "initial_fetch_timeout",
        ],
        &["path", "path_config_source", "self", "authorities"],
    )?;
    api_version(&o, "resource_api_version")?;
    let kind = match o.present(&KINDS).as_slice() {
        ["ads"] => {
            o.req("ads")?.obj(&[])?;
            ConfigSourceKind::Ads
        }
        ["api_config_source"] => {
            ConfigSourceKind::Api(api_config_source(&o.req("api_config_source")?)?)
        }
        [] => return Err(node.err("needs one of ads, api_config_source")),
        _ => return Err(node.err("only one of ads, api_config_source may be set")),
    };
    let initial_fetch_timeout = match o.get("initial_fetch_timeout") {
        Some(d) => Some(duration(&d)?).filter(|d| !d.is_zero()),
        None => Some(DEFAULT_INITIAL_FETCH_TIMEOUT),
    };
    Ok(ConfigSource {
        path: node.path.clone(),
        kind,
        initial_fetch_timeout,
    })
}

/// `resource_api_version` / `transport_api_version`: V3 (or absent, which Envoy reads as AUTO =
/// V3 today).
fn api_version(o: &Obj<'_>, key: &str) -> Result<()> {
    if let Some(v) = o.get(key) {
        match &v.v {
            serde_json::Value::String(s) if s == "V3" || s == "AUTO" => {}
            serde_json::Value::Number(n) if n.as_u64() == Some(2) || n.as_u64() == Some(0) => {}
            serde_json::Value::String(s) if s == "V2" => {
                return Err(v.err("the v2 xDS API is gone from Envoy; use V3"))
            }
            _ => return Err(v.err("expected V3")),
        }
    }
    Ok(())
}

fn api_config_source(node: &Node<'_>) -> Result<ApiConfigSource> {
    let o = node.obj_with(
        &[
            "api_type",
            "transport_api_version",
            "grpc_services",
            "set_node_on_first_message_only",
        ],
        &[
            "cluster_names",
            "refresh_delay",
            "request_timeout",
            "rate_limit_settings",
            "config_validators",
        ],
    )?;
    api_version(&o, "transport_api_version")?;
    let t = o.req("api_type")?;
    let delta = match t.as_str()? {
        "GRPC" => false,
        "DELTA_GRPC" => true,
        "REST" | "AGGREGATED_GRPC" | "AGGREGATED_DELTA_GRPC" | "UNSUPPORTED_REST_LEGACY" => {
            return Err(t.unsupported(Some("only GRPC and DELTA_GRPC")))
        }
        other => return Err(t.err(format!("expected GRPC or DELTA_GRPC, got \"{other}\""))),
    };
    let mut clusters = Vec::new();
    for g in o.items("grpc_services") {
        let go = g.obj_with(
            &["envoy_grpc", "timeout"],
            &["google_grpc", "retry_policy", "initial_metadata"],
        )?;
        if let Some(t) = go.get("timeout") {
            duration(&t)?;
        }
        let eg = go.req("envoy_grpc")?;
        let eo = eg.obj_with(
            &["cluster_name", "authority"],
            &[
                "retry_policy",
                "max_receive_message_length",
                "skip_envoy_headers",
            ],
        )?;
        eo.opt_str("authority")?;
        clusters.push(eo.req("cluster_name")?.non_empty_str()?.to_owned());
    }
    if clusters.is_empty() {
        return Err(o.missing("grpc_services"));
    }
    Ok(ApiConfigSource {
        delta,
        clusters,
        set_node_on_first_message_only: o.bool_or_false("set_node_on_first_message_only")?,
    })
}
