//! The configuration of the `cors`, `fault` and `grpc_stats` HTTP filters, and the
//! `typed_per_filter_config` of routes, virtual hosts and route configurations (the local rate
//! limit's own is crate::http_ratelimit's).

use crate::duration::duration;
use crate::fraction::{fraction, runtime_fraction};
use crate::matcher::{header_matcher, string_matcher};
use crate::model::{
    CorsPolicy, FaultAbort, FaultAbortKind, FaultConfig, FaultDelay, Fraction, GrpcStatsFilter,
    PerFilterConfig, PerFilterConfigs,
};
use crate::walk::{Node, Obj, Result};

pub(crate) const CORS: &str = "envoy.extensions.filters.http.cors.v3.Cors";
pub(crate) const CORS_POLICY: &str = "envoy.extensions.filters.http.cors.v3.CorsPolicy";
pub(crate) const FAULT: &str = "envoy.extensions.filters.http.fault.v3.HTTPFault";
pub(crate) const GRPC_STATS: &str = "envoy.extensions.filters.http.grpc_stats.v3.FilterConfig";
const FILTER_CONFIG: &str = "envoy.config.route.v3.FilterConfig";
const COMPRESSOR_PER_ROUTE: &str = "envoy.extensions.filters.http.compressor.v3.CompressorPerRoute";

fn url(short: &str) -> String {
    format!("type.googleapis.com/{short}")
}

fn short(t: &str) -> &str {
    t.rsplit('/').next().unwrap_or(t)
}

/// The CORS filter's own `typed_config` (`envoy.extensions.filters.http.cors.v3.Cors`, no
/// fields).
pub(crate) fn cors_filter(tc: &Node<'_>) -> Result<()> {
    tc.typed(&url(CORS), &[], &[])?;
    Ok(())
}

/// A CORS policy: the per-route `envoy.extensions.filters.http.cors.v3.CorsPolicy`
/// (`typed = true`, with `@type`) or the route's / virtual host's `cors`.
pub(crate) fn cors_policy(node: &Node<'_>, typed: bool) -> Result<CorsPolicy> {
    const CORS_FIELDS: &[&str] = &[
        "allow_origin_string_match",
        "allow_methods",
        "allow_headers",
        "expose_headers",
        "max_age",
        "allow_credentials",
        "allow_private_network_access",
        "forward_not_matching_preflights",
        "filter_enabled",
        "shadow_enabled",
    ];
    let o = if typed {
        node.typed(&url(CORS_POLICY), CORS_FIELDS, &[])?
    } else {
        node.obj(CORS_FIELDS)?
    };
    let s = |k: &str| -> Result<Option<String>> {
        Ok(o.opt_str(k)?.filter(|v| !v.is_empty()).map(str::to_owned))
    };
    Ok(CorsPolicy {
        allow_origins: o
            .items("allow_origin_string_match")
            .iter()
            .map(string_matcher)
            .collect::<Result<_>>()?,
        allow_methods: s("allow_methods")?,
        allow_headers: s("allow_headers")?,
        expose_headers: s("expose_headers")?,
        max_age: s("max_age")?,
        allow_credentials: o.opt_bool("allow_credentials")?,
        allow_private_network_access: o.opt_bool("allow_private_network_access")?,
        forward_not_matching_preflights: o.opt_bool("forward_not_matching_preflights")?,
        filter_enabled: o
            .get("filter_enabled")
            .map(|f| runtime_fraction(&f))
            .transpose()?
            .unwrap_or(Fraction::ALL),
        shadow_enabled: o
            .get("shadow_enabled")
            .map(|f| runtime_fraction(&f))
            .transpose()?,
    })
}

/// `envoy.extensions.filters.http.fault.v3.HTTPFault`.
pub(crate) fn fault(tc: &Node<'_>) -> Result<FaultConfig> {
    /// Runtime keys overriding the settings (quickshake has no runtime overrides).
    const RUNTIME_KEYS: [&str; 7] = [
        "delay_percent_runtime",
        "abort_percent_runtime",
        "delay_duration_runtime",
        "abort_http_status_runtime",
        "max_active_faults_runtime",
        "response_rate_limit_percent_runtime",
        "abort_grpc_status_runtime",
    ];
    let mut allowed = vec![
        "delay",
        "abort",
        "upstream_cluster",
        "headers",
        "downstream_nodes",
        "max_active_faults",
        "disable_downstream_cluster_stats",
    ];
    allowed.extend(RUNTIME_KEYS);
    let o = tc.typed(
        &url(FAULT),
        &allowed,
        &["response_rate_limit", "filter_metadata"],
    )?;
    for k in RUNTIME_KEYS {
        o.opt_str(k)?;
    }
    o.opt_bool("disable_downstream_cluster_stats")?;
    Ok(FaultConfig {
        delay: o.get("delay").map(|d| fault_delay(&d)).transpose()?,
        abort: o.get("abort").map(|a| fault_abort(&a)).transpose()?,
        upstream_cluster: o
            .opt_str("upstream_cluster")?
            .filter(|c| !c.is_empty())
            .map(str::to_owned),
        headers: o
            .items("headers")
            .iter()
            .map(header_matcher)
            .collect::<Result<_>>()?,
        downstream_nodes: o.str_list("downstream_nodes")?,
        max_active_faults: o.get("max_active_faults").map(|n| n.as_u64()).transpose()?,
    })
}

fn percentage(o: &Obj<'_>) -> Result<Fraction> {
    // Protobuf's default `FractionalPercent` is 0/100: no request.
    o.get("percentage")
        .map(|p| fraction(&p))
        .transpose()
        .map(|f| {
            f.unwrap_or(Fraction {
                numerator: 0,
                denominator: 100,
            })
        })
}

fn fault_delay(node: &Node<'_>) -> Result<FaultDelay> {
    let o = node.obj(&["fixed_delay", "header_delay", "percentage", "type"])?;
    let fixed = match o.present(&["fixed_delay", "header_delay"]).as_slice() {
        ["fixed_delay"] => Some(duration(&o.req("fixed_delay")?)?),
        ["header_delay"] => {
            o.req("header_delay")?.obj(&[])?;
            None
        }
        [] => return Err(node.err("needs fixed_delay or header_delay")),
        _ => return Err(node.err("only one of fixed_delay, header_delay may be set")),
    };
    Ok(FaultDelay {
        fixed,
        percentage: percentage(&o)?,
    })
}

fn fault_abort(node: &Node<'_>) -> Result<FaultAbort> {
    let o = node.obj(&["http_status", "grpc_status", "header_abort", "percentage"])?;
    let kind = match o
        .present(&["http_status", "grpc_status", "header_abort"])
        .as_slice()
    {
        ["http_status"] => {
            let n = o.req("http_status")?;
            FaultAbortKind::Http(n.as_u64_in(200, 599)? as u16)
        }
        ["grpc_status"] => {
            let n = o.req("grpc_status")?;
            FaultAbortKind::Grpc(u32::try_from(n.as_u64()?).map_err(|_| n.err("out of range"))?)
        }
        ["header_abort"] => {
            o.req("header_abort")?.obj(&[])?;
            FaultAbortKind::Header
        }
        [] => return Err(node.err("needs http_status, grpc_status or header_abort")),
        _ => return Err(node.err("only one of http_status, grpc_status, header_abort may be set")),
    };
    Ok(FaultAbort {
        kind,
        percentage: percentage(&o)?,
    })
}

/// `envoy.extensions.filters.http.grpc_stats.v3.FilterConfig`.
pub(crate) fn grpc_stats(tc: &Node<'_>) -> Result<GrpcStatsFilter> {
    let o = tc.typed(
        &url(GRPC_STATS),
        &[
            "emit_filter_state",
            "individual_method_stats_allowlist",
            "stats_for_all_methods",
            "enable_upstream_stats",
            "replace_dots_in_grpc_service_name",
        ],
        &[],
    )?;
    o.opt_bool("enable_upstream_stats")?;
    let allowlist = match o.get("individual_method_stats_allowlist") {
        None => None,
        Some(a) => {
            if o.get("stats_for_all_methods").is_some() {
                return Err(a.err("cannot be combined with stats_for_all_methods"));
            }
            let ao = a.obj(&["services"])?;
            let mut services = Vec::new();
            for s in ao.items("services") {
                let so = s.obj(&["name", "method_names"])?;
                services.push((
                    so.req("name")?.non_empty_str()?.to_owned(),
                    so.str_list("method_names")?,
                ));
            }
            Some(services)
        }
    };
    Ok(GrpcStatsFilter {
        emit_filter_state: o.bool_or_false("emit_filter_state")?,
        stats_for_all_methods: o.bool_or_false("stats_for_all_methods")?,
        allowlist,
        replace_dots_in_grpc_service_name: o.bool_or_false("replace_dots_in_grpc_service_name")?,
    })
}

/// A level's `typed_per_filter_config`: filter name to its per-route configuration.
pub(crate) fn per_filter_configs(o: &Obj<'_>) -> Result<PerFilterConfigs> {
    let Some(map) = o.get("typed_per_filter_config") else {
        return Ok(Vec::new());
    };
    let m = map.any_obj()?;
    let mut out = Vec::new();
    for (name, v) in m.map.iter() {
        let node = Node::new(v, crate::walk::join(&map.path, name));
        out.push((name.clone(), per_filter_config(&node, false)?));
    }
    Ok(out)
}

fn per_filter_config(node: &Node<'_>, optional: bool) -> Result<PerFilterConfig> {
    let t = node.type_url()?;
    match short(t) {
        CORS_POLICY => Ok(PerFilterConfig::Cors(cors_policy(node, true)?)),
        FAULT => Ok(PerFilterConfig::Fault(fault(node)?)),
        COMPRESSOR_PER_ROUTE => {
            // `disabled: true` turns the compressor off for the route; otherwise the entry
            // enables it (Envoy Gateway writes `overrides: {response_direction_config: {}}`).
            let o = node.typed(&url(COMPRESSOR_PER_ROUTE), &["disabled", "overrides"], &[])?;
            if let Some(ov) = o.get("overrides") {
                let oo = ov.obj(&["response_direction_config"])?;
                if let Some(rd) = oo.get("response_direction_config") {
                    rd.obj_with(&[], &["remove_accept_encoding_header"])?;
                }
            }
            Ok(if o.bool_or_false("disabled")? {
                PerFilterConfig::Disabled
            } else {
                PerFilterConfig::Ignored
            })
        }
        crate::http_ratelimit::LOCAL_RATELIMIT => Ok(PerFilterConfig::LocalRateLimit(
            std::sync::Arc::new(crate::http_ratelimit::local_rate_limit(node)?),
        )),
        FILTER_CONFIG => {
            let o = node.typed(
                &url(FILTER_CONFIG),
                &["config", "is_optional", "disabled"],
                &[],
            )?;
            let optional = o.bool_or_false("is_optional")?;
            if o.bool_or_false("disabled")? {
                return Ok(PerFilterConfig::Disabled);
            }
            match o.get("config") {
                Some(c) => per_filter_config(&c, optional),
                None => Ok(PerFilterConfig::Ignored),
            }
        }
        _ if optional => Ok(PerFilterConfig::Ignored),
        other => Err(crate::ConfigError::unsupported(
            node.path.clone() + ".@type",
            Some(&format!(
                "per-route config {other} (supported: {CORS_POLICY}, {FAULT}, {}, \
                 {COMPRESSOR_PER_ROUTE}, {FILTER_CONFIG})",
                crate::http_ratelimit::LOCAL_RATELIMIT
            )),
        )),
    }
}
