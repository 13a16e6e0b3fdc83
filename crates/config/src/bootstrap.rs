//! The top level of the bootstrap: `static_resources`, `admin`, `overload_manager`, `node`,
//! `layered_runtime`, and the checks that span listeners (socket addresses: `address`).

use std::collections::HashMap;
use std::net::SocketAddr;

use serde_json::Value;

use crate::address::address;
use crate::cluster::{clusters, ClusterNames};
use crate::config_source::dynamic_resources;
use crate::duration::duration;
use crate::error::ConfigError;
use crate::listener::listener;
use crate::model::{
    Admin, ApiConfigSource, Bootstrap, Cluster, ConfigSourceKind, DynamicResources, Listener,
    Node as NodeInfo, RawConfig, RuntimeLayer,
};
use crate::static_secrets::{in_scope, static_secrets, StaticSecrets};
use crate::walk::{join, Node, Obj, Result};

const GDMC_MONITOR: &str = "envoy.resource_monitors.global_downstream_max_connections";
const GDMC_TYPE: &str = "type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig";
const GDMC_RUNTIME_KEY: &str = "overload.global_downstream_max_connections";

/// Bootstrap fields accepted with no effect: they shape telemetry quickshake does not export,
/// or name features it does not have and does not need to run the configuration (an Istio or
/// Envoy Gateway bootstrap sets them). Each is logged once at start and listed in
/// docs/configuration.md.
const NO_EFFECT: &[&str] = &[
    "stats_config",
    "stats_sinks",
    "stats_flush_interval",
    "stats_flush_on_admin",
    "tracing",
    "deferred_stat_options",
    "enable_dispatcher_stats",
    "stats_server_version_override",
];

/// Build the model from the JSON form of the whole configuration.
pub(crate) fn bootstrap(raw: Value) -> Result<Bootstrap> {
    let mut ignored = Vec::new();
    let mut runtime = Vec::new();
    let (listeners, clusters, admin, limit, node, dynamic) = {
        let root = Node::new(&raw, "");
        if root.v.is_null() {
            return Err(root.err("the configuration is empty"));
        }
        let mut allowed = vec![
            "static_resources",
            "dynamic_resources",
            "admin",
            "overload_manager",
            "node",
            "layered_runtime",
            "cluster_manager",
            "application_log_config",
            "bootstrap_extensions",
        ];
        allowed.extend_from_slice(NO_EFFECT);
        let o = root.obj_with(
            &allowed,
            &[
                "hds_config",
                "flags_path",
                "watchdog",
                "watchdogs",
                "runtime",
                "header_prefix",
                "use_tcp_for_dns_lookups",
                "dns_resolution_config",
                "typed_dns_resolver_config",
                "fatal_actions",
                "config_sources",
                "default_config_source",
                "default_socket_interface",
                "certificate_provider_instances",
                "inline_headers",
                "perf_tracing_file_path",
                "default_regex_engine",
                "xds_delegate_extension",
                "xds_config_tracker_extension",
                "listener_manager",
                "grpc_async_client_manager_config",
                "memory_allocator_manager",
                "node_context_params",
            ],
        )?;
        for key in NO_EFFECT {
            if let Some(n) = o.get(key) {
                ignored.push(n.path);
            }
        }
        let node = o
            .get("node")
            .map(|n| node(&n))
            .transpose()?
            .unwrap_or_default();
        let (listeners, clusters) = match o.get("static_resources") {
            Some(sr) => static_resources(&sr)?,
            None => (Vec::new(), Vec::new()),
        };
        let dynamic = o
            .get("dynamic_resources")
            .map(|d| dynamic_resources(&d))
            .transpose()?;
        if let Some(d) = &dynamic {
            check_xds_clusters(d, &clusters)?;
        }
        if let Some(cm) = o.get("cluster_manager") {
            cluster_manager(&cm, &mut ignored)?;
        }
        if let Some(a) = o.get("application_log_config") {
            application_log_config(&a)?;
        }
        for e in o.items("bootstrap_extensions") {
            bootstrap_extension(&e, &mut ignored)?;
        }
        let admin = match o.get("admin") {
            Some(a) => admin(&a, &mut ignored)?,
            None => None,
        };
        let from_overload = o
            .get("overload_manager")
            .map(|n| overload_manager(&n))
            .transpose()?
            .flatten();
        let from_runtime = o
            .get("layered_runtime")
            .map(|n| layered_runtime(&n, &mut runtime, &mut ignored))
            .transpose()?
            .flatten();
        let limit = match (from_overload, from_runtime) {
            (Some(a), Some((b, path))) if a != b => {
                return Err(ConfigError::invalid(
                    path,
                    format!(
                        "{b} disagrees with overload_manager's max_active_downstream_connections \
                         {a}; set the limit in one place"
                    ),
                ))
            }
            (Some(a), _) => Some(a),
            (None, r) => r.map(|(b, _)| b),
        };
        check_addresses(&listeners, admin.as_ref())?;
        (listeners, clusters, admin, limit, node, dynamic)
    };
    Ok(Bootstrap {
        listeners,
        clusters,
        admin,
        global_downstream_max_connections: limit,
        node,
        dynamic,
        ignored,
        runtime,
        raw: RawConfig(raw),
    })
}

/// Every gRPC source of `dynamic_resources` names a static cluster (Envoy: "envoy_grpc: unknown
/// cluster").
fn check_xds_clusters(d: &DynamicResources, clusters: &[Cluster]) -> Result<()> {
    let mut sources: Vec<&ApiConfigSource> = d.ads.iter().collect();
    for src in [&d.lds, &d.cds].into_iter().flatten() {
        if let ConfigSourceKind::Api(api) = &src.kind {
            sources.push(api);
        }
    }
    for api in sources {
        if !clusters.iter().any(|c| c.name == api.cluster_name) {
            return Err(ConfigError::invalid(
                format!("{}.grpc_services[0].envoy_grpc.cluster_name", api.path),
                format!(
                    "unknown cluster '{}': the xDS cluster must be one of static_resources.clusters",
                    api.cluster_name
                ),
            ));
        }
    }
    Ok(())
}

/// `cluster_manager`: `local_cluster_name` (must name a cluster once CDS has run; zone-aware
/// routing is not implemented, so it has no effect), `outlier_detection.event_log_path` and
/// `enable_deferred_cluster_creation` are accepted with no effect.
fn cluster_manager(node: &Node<'_>, ignored: &mut Vec<String>) -> Result<()> {
    let o = node.obj_with(
        &[
            "local_cluster_name",
            "outlier_detection",
            "enable_deferred_cluster_creation",
        ],
        &["upstream_bind_config", "load_stats_config"],
    )?;
    if let Some(n) = o.get("local_cluster_name") {
        n.as_str()?;
        ignored.push(n.path);
    }
    if let Some(od) = o.get("outlier_detection") {
        let odo = od.obj_with(&["event_log_path"], &["event_service"])?;
        if let Some(p) = odo.get("event_log_path") {
            p.as_str()?;
            ignored.push(p.path);
        }
    }
    if let Some(d) = o.get("enable_deferred_cluster_creation") {
        d.as_bool()?;
        ignored.push(d.path);
    }
    Ok(())
}

/// `application_log_config.log_format` (`text_format` or `json_format`): checked, and like
/// `--log-format` it does not change quickshake's log lines (see docs/configuration.md).
fn application_log_config(node: &Node<'_>) -> Result<()> {
    let o = node.obj(&["log_format"])?;
    if let Some(f) = o.get("log_format") {
        let fo = f.obj(&["text_format", "json_format"])?;
        if let Some(t) = fo.get("text_format") {
            t.as_str()?;
        }
        if let Some(j) = fo.get("json_format") {
            j.any_obj()?;
        }
        if fo.present(&["text_format", "json_format"]).len() > 1 {
            return Err(f.err("only one of text_format and json_format may be set"));
        }
    }
    Ok(())
}

/// `bootstrap_extensions[]`: Istio's `envoy.bootstrap.internal_listener` is accepted with no
/// effect while quickshake has no internal listeners; others are not supported.
fn bootstrap_extension(node: &Node<'_>, ignored: &mut Vec<String>) -> Result<()> {
    const INTERNAL: &str =
        "type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener";
    let o = node.obj(&["name", "typed_config"])?;
    let tc = o.req("typed_config")?;
    if Some(tc.config_type()?) != INTERNAL.rsplit('/').next() {
        return Err(tc.unsupported(Some(
            "the only bootstrap extension is envoy.bootstrap.internal_listener",
        )));
    }
    ignored.push(node.path.clone());
    Ok(())
}

/// `node`: `id`, `cluster`, `locality` and `metadata` identify the gateway (shown in
/// `/server_info`, sent to the control plane); Node's other fields are not supported yet.
fn node(n: &Node<'_>) -> Result<NodeInfo> {
    let o = n.obj_with(
        &["id", "cluster", "locality", "metadata"],
        &[
            "dynamic_parameters",
            "user_agent_name",
            "user_agent_version",
            "user_agent_build_version",
            "extensions",
            "client_features",
            "listening_addresses",
        ],
    )?;
    let (mut region, mut zone, mut sub_zone) = (String::new(), String::new(), String::new());
    if let Some(l) = o.get("locality") {
        let lo = l.obj(&["region", "zone", "sub_zone"])?;
        region = lo.opt_str("region")?.unwrap_or_default().to_owned();
        zone = lo.opt_str("zone")?.unwrap_or_default().to_owned();
        sub_zone = lo.opt_str("sub_zone")?.unwrap_or_default().to_owned();
    }
    let metadata = match o.get("metadata") {
        Some(m) => {
            m.any_obj()?;
            m.v.clone()
        }
        None => Value::Null,
    };
    Ok(NodeInfo {
        id: o.opt_str("id")?.unwrap_or_default().to_owned(),
        cluster: o.opt_str("cluster")?.unwrap_or_default().to_owned(),
        zone,
        region,
        sub_zone,
        metadata,
    })
}

/// Secrets, listeners and clusters. Secrets are read first (listeners and clusters name them),
/// then clusters (routes and tcp proxies name them).
fn static_resources(node: &Node<'_>) -> Result<(Vec<Listener>, Vec<Cluster>)> {
    let o = node.obj(&["listeners", "clusters", "secrets"])?;
    let secrets = match o.get("secrets") {
        Some(s) => static_secrets(&s)?,
        None => StaticSecrets::default(),
    };
    in_scope(&secrets, || listeners_and_clusters(&o))
}

fn listeners_and_clusters(o: &Obj<'_>) -> Result<(Vec<Listener>, Vec<Cluster>)> {
    let clusters = match o.get("clusters") {
        Some(c) => clusters(&c)?,
        None => Vec::new(),
    };
    let names: ClusterNames = clusters.iter().map(|c| c.name.clone()).collect();
    let mut listeners = Vec::new();
    for (i, l) in o.items("listeners").iter().enumerate() {
        listeners.push(listener(l, i, &names)?);
    }
    let mut names: HashMap<&str, &str> = HashMap::new();
    for l in &listeners {
        if let Some(first) = names.insert(&l.name, &l.path) {
            return Err(ConfigError::invalid(
                join(&l.path, "name"),
                format!("duplicate listener name \"{}\" (also {first})", l.name),
            ));
        }
    }
    Ok((listeners, clusters))
}

/// No two listeners (nor a listener and the admin endpoint) on one address: the bootstrap's,
/// and with those a control plane adds (`crate::check_listener_addresses`).
pub(crate) fn check_addresses<'a>(
    listeners: impl IntoIterator<Item = &'a Listener>,
    admin: Option<&Admin>,
) -> Result<()> {
    // A TCP and a UDP (QUIC) listener may share an address, as Envoy's HTTP/3 examples do.
    let mut seen: HashMap<(SocketAddr, bool), String> = HashMap::new();
    if let Some(a) = admin {
        if a.address.port() != 0 {
            seen.insert((a.address, false), "admin.address".to_owned());
        }
    }
    for l in listeners {
        if l.address.port() == 0 {
            continue;
        }
        let key = (l.address, l.quic.is_some());
        if let Some(first) = seen.get(&key) {
            return Err(ConfigError::invalid(
                join(&l.path, "address"),
                format!("address {} is already used by {first}", l.address),
            ));
        }
        seen.insert(key, l.path.clone());
    }
    Ok(())
}

fn admin(node: &Node<'_>, ignored: &mut Vec<String>) -> Result<Option<Admin>> {
    let o = node.obj_with(
        &["address", "access_log_path", "access_log", "profile_path"],
        &["socket_options", "ignore_global_conn_limit"],
    )?;
    o.opt_str("access_log_path")?;
    // `profile_path` (where Envoy writes CPU profiles; Istio sets it) has no profiler to use.
    if let Some(p) = o.get("profile_path") {
        p.as_str()?;
        ignored.push(p.path);
    }
    // `access_log` is accepted and ignored: admin access logging is not implemented.
    Ok(match o.get("address") {
        Some(a) => Some(Admin {
            address: address(&a)?,
        }),
        None => None,
    })
}

fn overload_manager(node: &Node<'_>) -> Result<Option<u64>> {
    let o = node.obj_with(
        &["refresh_interval", "resource_monitors"],
        &["actions", "buffer_factory_config", "loadshed_points"],
    )?;
    if let Some(r) = o.get("refresh_interval") {
        duration(&r)?;
    }
    let mut limit: Option<(u64, String)> = None;
    for m in o.items("resource_monitors") {
        let mo = m.obj(&["name", "typed_config"])?;
        let name_node = mo.req("name")?;
        let name = name_node.as_str()?;
        if name != GDMC_MONITOR {
            return Err(name_node.unsupported(Some(
                "only envoy.resource_monitors.global_downstream_max_connections",
            )));
        }
        let tc = mo.req("typed_config")?;
        let t = tc.typed(GDMC_TYPE, &["max_active_downstream_connections"], &[])?;
        let max = t.req("max_active_downstream_connections")?;
        let value = max.as_u64_in(1, i64::MAX as u64)?;
        if let Some((_, first)) = &limit {
            return Err(name_node.err(format!("duplicate resource monitor (also {first})")));
        }
        limit = Some((value, m.path.clone()));
    }
    Ok(limit.map(|(v, _)| v))
}

/// `layered_runtime.layers[]`: `static_layer` may set `overload.global_downstream_max_connections`
/// (flat or nested keys); later layers override earlier ones, as in Envoy. Returns the value and
/// the path it came from; each layer with the keys quickshake reads goes to `layers`.
fn layered_runtime(
    node: &Node<'_>,
    layers: &mut Vec<RuntimeLayer>,
    ignored: &mut Vec<String>,
) -> Result<Option<(u64, String)>> {
    let o = node.obj(&["layers"])?;
    let mut found = None;
    for layer in o.items("layers") {
        let lo = layer.obj_with(
            &["name", "static_layer", "admin_layer"],
            &["disk_layer", "rtds_layer"],
        )?;
        let mut entry = RuntimeLayer {
            name: lo.opt_str("name")?.unwrap_or_default().to_owned(),
            admin: false,
            values: Vec::new(),
        };
        if let Some(a) = lo.get("admin_layer") {
            a.obj(&[])?;
            entry.admin = true;
        }
        if let Some(s) = lo.get("static_layer") {
            let mut here = None;
            runtime_keys(&s, "", &mut here, ignored)?;
            if let Some((v, path)) = here {
                entry
                    .values
                    .push((GDMC_RUNTIME_KEY.to_owned(), v.to_string()));
                found = Some((v, path));
            }
        }
        layers.push(entry);
    }
    Ok(found)
}

/// Runtime keys quickshake does not read (Envoy's `envoy.reloadable_features.*`, `re2.*` limits,
/// which Istio and Envoy Gateway set) are accepted with no effect: a runtime key is a tuning
/// knob, never a feature the configuration depends on.
fn runtime_keys(
    node: &Node<'_>,
    prefix: &str,
    found: &mut Option<(u64, String)>,
    ignored: &mut Vec<String>,
) -> Result<()> {
    // Any key is allowed in a runtime layer; each leaf is checked below.
    let o = node.any_obj()?;
    for key in o.map.keys() {
        let full = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        let Some(child) = o.get(key) else { continue };
        if child.v.is_object() {
            runtime_keys(&child, &full, found, ignored)?;
        } else if full == GDMC_RUNTIME_KEY {
            *found = Some((child.as_u64_in(1, i64::MAX as u64)?, child.path.clone()));
        } else {
            ignored.push(child.path.clone());
        }
    }
    Ok(())
}
