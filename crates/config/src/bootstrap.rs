//! The top level of the bootstrap: `static_resources`, `admin`, `overload_manager`, `node`,
//! `layered_runtime`, and the checks that span listeners (socket addresses: `address`).

use std::collections::HashMap;
use std::net::SocketAddr;

use serde_json::Value;

use crate::address::address;
use crate::cluster::{clusters, ClusterNames};
use crate::duration::duration;
use crate::error::ConfigError;
use crate::listener::listener;
use crate::model::{Admin, Bootstrap, Cluster, Listener, Node as NodeInfo, RawConfig};
use crate::walk::{join, Node, Result};

const GDMC_MONITOR: &str = "envoy.resource_monitors.global_downstream_max_connections";
const GDMC_TYPE: &str = "type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig";
const GDMC_RUNTIME_KEY: &str = "overload.global_downstream_max_connections";

/// Build the model from the JSON form of the whole configuration.
pub(crate) fn bootstrap(raw: Value) -> Result<Bootstrap> {
    let (listeners, clusters, admin, limit, node) = {
        let root = Node::new(&raw, "");
        if root.v.is_null() {
            return Err(root.err("the configuration is empty"));
        }
        let o = root.obj_with(
            &[
                "static_resources",
                "admin",
                "overload_manager",
                "node",
                "layered_runtime",
            ],
            &[
                "dynamic_resources",
                "cluster_manager",
                "hds_config",
                "flags_path",
                "stats_sinks",
                "stats_config",
                "stats_flush_interval",
                "stats_flush_on_admin",
                "watchdog",
                "watchdogs",
                "tracing",
                "runtime",
                "enable_dispatcher_stats",
                "header_prefix",
                "stats_server_version_override",
                "use_tcp_for_dns_lookups",
                "dns_resolution_config",
                "typed_dns_resolver_config",
                "bootstrap_extensions",
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
                "application_log_config",
                "grpc_async_client_manager_config",
                "memory_allocator_manager",
                "node_context_params",
            ],
        )?;
        let node = o
            .get("node")
            .map(|n| node(&n))
            .transpose()?
            .unwrap_or_default();
        let (listeners, clusters) = match o.get("static_resources") {
            Some(sr) => static_resources(&sr)?,
            None => (Vec::new(), Vec::new()),
        };
        let admin = o.get("admin").map(|a| admin(&a)).transpose()?.flatten();
        let from_overload = o
            .get("overload_manager")
            .map(|n| overload_manager(&n))
            .transpose()?
            .flatten();
        let from_runtime = o
            .get("layered_runtime")
            .map(|n| layered_runtime(&n))
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
        (listeners, clusters, admin, limit, node)
    };
    Ok(Bootstrap {
        listeners,
        clusters,
        admin,
        global_downstream_max_connections: limit,
        node,
        raw: RawConfig(raw),
    })
}

/// `node`: `id`, `cluster` and `locality` (whose `zone` is kept) identify the gateway (shown in
/// `/server_info`); Node's other fields are not supported yet.
fn node(n: &Node<'_>) -> Result<NodeInfo> {
    let o = n.obj_with(
        &["id", "cluster", "locality"],
        &[
            "metadata",
            "dynamic_parameters",
            "user_agent_name",
            "user_agent_version",
            "user_agent_build_version",
            "extensions",
            "client_features",
            "listening_addresses",
        ],
    )?;
    let zone = match o.get("locality") {
        Some(l) => {
            let lo = l.obj(&["region", "zone", "sub_zone"])?;
            lo.opt_str("region")?;
            lo.opt_str("sub_zone")?;
            lo.opt_str("zone")?.unwrap_or_default().to_owned()
        }
        None => String::new(),
    };
    Ok(NodeInfo {
        id: o.opt_str("id")?.unwrap_or_default().to_owned(),
        cluster: o.opt_str("cluster")?.unwrap_or_default().to_owned(),
        zone,
    })
}

/// Listeners and clusters. Clusters are read first: routes and tcp proxies name them.
fn static_resources(node: &Node<'_>) -> Result<(Vec<Listener>, Vec<Cluster>)> {
    let o = node.obj_with(&["listeners", "clusters"], &["secrets"])?;
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

fn check_addresses(listeners: &[Listener], admin: Option<&Admin>) -> Result<()> {
    let mut seen: HashMap<SocketAddr, String> = HashMap::new();
    if let Some(a) = admin {
        if a.address.port() != 0 {
            seen.insert(a.address, "admin.address".to_owned());
        }
    }
    for l in listeners {
        if l.address.port() == 0 {
            continue;
        }
        if let Some(first) = seen.get(&l.address) {
            return Err(ConfigError::invalid(
                join(&l.path, "address"),
                format!("address {} is already used by {first}", l.address),
            ));
        }
        seen.insert(l.address, l.path.clone());
    }
    Ok(())
}

fn admin(node: &Node<'_>) -> Result<Option<Admin>> {
    let o = node.obj_with(
        &["address", "access_log_path", "access_log"],
        &["profile_path", "socket_options", "ignore_global_conn_limit"],
    )?;
    o.opt_str("access_log_path")?;
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
/// the path it came from.
fn layered_runtime(node: &Node<'_>) -> Result<Option<(u64, String)>> {
    let o = node.obj(&["layers"])?;
    let mut found = None;
    for layer in o.items("layers") {
        let lo = layer.obj_with(
            &["name", "static_layer", "admin_layer"],
            &["disk_layer", "rtds_layer"],
        )?;
        lo.opt_str("name")?;
        if let Some(a) = lo.get("admin_layer") {
            a.obj(&[])?;
        }
        if let Some(s) = lo.get("static_layer") {
            runtime_keys(&s, "", &mut found)?;
        }
    }
    Ok(found)
}

fn runtime_keys(node: &Node<'_>, prefix: &str, found: &mut Option<(u64, String)>) -> Result<()> {
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
            runtime_keys(&child, &full, found)?;
        } else if full == GDMC_RUNTIME_KEY {
            *found = Some((child.as_u64_in(1, i64::MAX as u64)?, child.path.clone()));
        } else {
            return Err(child.unsupported(Some(
                "the only runtime key is overload.global_downstream_max_connections",
            )));
        }
    }
    Ok(())
}
