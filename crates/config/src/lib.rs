//! `quickshake-config` owns the configuration: it parses and validates the subset of the Envoy v3
//! bootstrap (YAML or JSON) that quickshake supports and resolves it into the [`model`] types the
//! rest of the workspace consumes. It is strict the way Envoy is: any field outside the supported
//! subset is an error ("unknown field", or "not supported yet" for Envoy fields quickshake does not
//! implement), and every error names the full field path, e.g.
//! `static_resources.listeners[0].filter_chains[0].transport_socket.typed_config.@type`.
//! It also renders the admin `/config_dump` view with secrets redacted.
//!
//! It must not do I/O beyond reading the configuration file, the environment variables a
//! `DataSource` names, access-log format files (`text_format_source.filename`, read at load as
//! Envoy reads them), and (on request, via [`read_data_source`]) data-source files; it does no
//! TLS and does not interpret certificates or keys — that is the TLS crate's job, which reads
//! them with [`read_data_source`] so that their errors still carry the config path.

#![forbid(unsafe_code)]

mod access_log;
mod access_log_filter;
mod address;
mod bootstrap;
mod certificate;
mod cluster;
mod config_source;
mod dump;
mod duration;
mod endpoint;
mod error;
mod filter_config;
mod fraction;
mod hash_policy;
mod header_mutation;
mod health;
mod http;
mod http_filter;
mod http_ratelimit;
mod istio;
mod lb_policy;
mod limits;
mod listener;
mod matcher;
mod merge;
pub mod model;
mod no_effect;
mod quic;
mod sds;
pub use sds::{
    load_sds_session_ticket_keys, load_sds_tls_certificate, load_sds_trusted_ca, secret_resource,
    SecretKind,
};
mod rewrite;
mod route;
mod source;
mod static_secrets;
pub use static_secrets::with_static_secrets;
mod ticket_keys;
pub use ticket_keys::SESSION_TICKET_KEY_LEN;
mod tls;
mod validation;
mod walk;

use std::path::Path;

pub use access_log::{parse_format, parse_json_format, FormatError};
pub use duration::parse_duration;
pub use error::ConfigError;
pub use merge::merge_json;
pub use model::*;
pub use source::{key_file_permission_warning, read_data_source};

/// A copy of a configuration document (or xDS resource) with key material redacted, as
/// `/config_dump` shows it.
pub fn redacted_json(v: &serde_json::Value) -> serde_json::Value {
    dump::redacted(v)
}

/// Check that no two of `listeners` (the bootstrap's and those from a control plane), nor one
/// of them and the admin endpoint, share an address; the error names the second listener's
/// `address` field.
pub fn check_listener_addresses<'a>(
    listeners: impl IntoIterator<Item = &'a Listener>,
    admin: Option<&Admin>,
) -> Result<(), ConfigError> {
    bootstrap::check_addresses(listeners, admin)
}

/// Parse one `Listener` resource as the xDS client receives it (its JSON form). Field paths in
/// errors are relative to the listener (`filter_chains[0].filters[0]...`), in the same words
/// as the static configuration's. `clusters` are the names routes and tcp proxies may use.
pub fn listener_resource(
    v: &serde_json::Value,
    clusters: &[String],
) -> Result<Listener, ConfigError> {
    let names: cluster::ClusterNames = clusters.iter().cloned().collect();
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("@type");
    }
    listener::listener(&walk::Node::new(&v, ""), 0, &names)
}

/// Load a configuration file: JSON when the extension is `.json`, YAML otherwise (JSON is also
/// valid YAML, so a JSON document in a `.yaml` file works too).
pub fn load_file(path: &Path) -> Result<Bootstrap, ConfigError> {
    bootstrap::bootstrap(file_json(path)?)
}

/// Load the bootstrap as Envoy does from `-c` and `--config-yaml`: the file alone; the string
/// alone (the whole bootstrap, as Envoy Gateway launches Envoy); or the string merged into the
/// file's bootstrap with protobuf `MergeFrom` semantics ([`merge_json`]: nested messages merged
/// field by field, lists appended, scalars replaced) before anything is validated. Errors keep
/// the merged document's field paths; those in the string, or at a field the string set, are
/// [`ConfigError::ConfigYaml`].
pub fn load(path: Option<&Path>, yaml: Option<&str>) -> Result<Bootstrap, ConfigError> {
    match (path, yaml) {
        (Some(path), None) => load_file(path),
        (None, Some(yaml)) => bootstrap::bootstrap(config_yaml_json(yaml)?).map_err(in_config_yaml),
        (Some(path), Some(yaml)) => {
            let base = file_json(path)?;
            let overlay = config_yaml_json(yaml)?;
            let mut merged = base.clone();
            merge_json(&mut merged, &overlay);
            bootstrap::bootstrap(merged).map_err(|e| match e.path() {
                Some(at) if merge::from_overlay(&base, &overlay, at) => in_config_yaml(e),
                _ => e,
            })
        }
        (None, None) => Err(ConfigError::Syntax {
            origin: "configuration".to_owned(),
            message: "none given: a file (-c) or a string (--config-yaml) is required".to_owned(),
        }),
    }
}

/// The `--config-yaml` string as shown back (`/server_info`): as given, unless it holds key
/// material, which is then redacted as `/config_dump` redacts it (the result is JSON, which is
/// YAML too).
pub fn redacted_config_yaml(yaml: &str) -> String {
    let Ok(parsed) = source::yaml_text_to_json(yaml, CONFIG_YAML) else {
        return yaml.to_owned();
    };
    let redacted = dump::redacted(&parsed);
    if redacted == parsed {
        yaml.to_owned()
    } else {
        redacted.to_string()
    }
}

const CONFIG_YAML: &str = "--config-yaml";

fn in_config_yaml(e: ConfigError) -> ConfigError {
    match e {
        ConfigError::ConfigYaml(_) => e,
        e => ConfigError::ConfigYaml(Box::new(e)),
    }
}

/// The `--config-yaml` string in JSON form: YAML (JSON is YAML too) whose root is a mapping.
fn config_yaml_json(yaml: &str) -> Result<serde_json::Value, ConfigError> {
    let v = source::yaml_text_to_json(yaml, CONFIG_YAML).map_err(|e| match e {
        ConfigError::Syntax { .. } => e,
        e => in_config_yaml(e),
    })?;
    if !(v.is_object() || v.is_null()) {
        return Err(in_config_yaml(ConfigError::Invalid {
            path: String::new(),
            message: "expected a mapping (a bootstrap)".to_owned(),
        }));
    }
    Ok(v)
}

/// A configuration file in JSON form: JSON when the extension is `.json`, YAML otherwise.
fn file_json(path: &Path) -> Result<serde_json::Value, ConfigError> {
    let text = source::read_config_text(path)?;
    let origin = path.display().to_string();
    let is_json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if is_json {
        source::json_text_to_json(&text, &origin)
    } else {
        source::yaml_text_to_json(&text, &origin)
    }
}

/// Parse one `RouteConfiguration` resource on its own (as RDS delivers it, in JSON form). Its
/// routes may name clusters that do not exist (yet): `validate_clusters` defaults to false, as
/// Envoy's does for RDS. Errors carry `path` as their root, e.g.
/// `RouteConfiguration local_route: virtual_hosts[0].routes[1].match: ...`.
pub fn route_configuration(
    json: &serde_json::Value,
    path: &str,
) -> Result<RouteConfig, ConfigError> {
    route::route_config(&walk::Node::new(json, ""), None, false).map_err(|e| e.rooted(path))
}

/// Parse one `ApiConfigSource` on its own (in JSON form: the `sds_config.api_config_source` of
/// a secret reference in a resource that xDS delivered); errors carry `path` as their root.
pub fn api_config_source(
    json: &serde_json::Value,
    path: &str,
) -> Result<ApiConfigSource, ConfigError> {
    config_source::api_config_source(&walk::Node::new(json, "")).map_err(|e| e.rooted(path))
}

/// Parse one `Cluster` resource on its own (as CDS delivers it, in JSON form); errors carry
/// `path` as their root. An EDS cluster has no endpoints: they come by
/// [`cluster_load_assignment`].
pub fn cluster_resource(json: &serde_json::Value, path: &str) -> Result<Cluster, ConfigError> {
    cluster::cluster(&walk::Node::new(json, ""))
        .map(|mut c| {
            c.path = path.to_owned();
            c
        })
        .map_err(|e| e.rooted(path))
}

/// Parse one `ClusterLoadAssignment` resource (as EDS delivers it, in JSON form): its
/// endpoints that take traffic (IP addresses; `health_status` UNHEALTHY, DRAINING and TIMEOUT
/// left out). `cluster_name` is required. Errors carry `path` as their root.
pub fn cluster_load_assignment(
    json: &serde_json::Value,
    path: &str,
) -> Result<Vec<Endpoint>, ConfigError> {
    let node = walk::Node::new(json, "");
    let parsed = endpoint::load_assignment(&node, endpoint::Addresses::IpOnly).and_then(|a| {
        node.obj_with(
            &["cluster_name", "endpoints", "policy", "named_endpoints"],
            &[],
        )?
        .req("cluster_name")?
        .non_empty_str()?;
        Ok(a.endpoints)
    });
    parsed.map_err(|e| e.rooted(path))
}

/// Parse configuration text (YAML, or JSON which is YAML too).
pub fn parse_str(text: &str) -> Result<Bootstrap, ConfigError> {
    bootstrap::bootstrap(source::yaml_text_to_json(text, "config")?)
}

/// Decode an Envoy `DataSource` given as JSON (e.g. inside a provider's `typed_config`), with
/// errors naming `field_path`.
pub fn data_source_from_json(
    v: &serde_json::Value,
    field_path: &str,
) -> Result<DataSource, ConfigError> {
    source::data_source(&walk::Node::new(v, field_path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/full.yaml")
    }

    #[test]
    fn config_yaml_alone_is_the_bootstrap() {
        let b = load(
            None,
            Some("node: {id: n1, cluster: c1, locality: {region: r, zone: z1}}"),
        )
        .unwrap();
        assert_eq!(
            b.node,
            Node {
                id: "n1".into(),
                cluster: "c1".into(),
                zone: "z1".into(),
                region: "r".into(),
                ..Node::default()
            }
        );
        assert!(b.listeners.is_empty());
        let e = load(None, Some("")).unwrap_err();
        assert!(matches!(e, ConfigError::ConfigYaml(_)), "{e}");
        assert!(e.to_string().contains("empty"), "{e}");
    }

    #[test]
    fn config_yaml_merges_into_the_file() {
        let file = load_file(&full()).unwrap();
        let b = load(
            Some(&full()),
            Some(
                "node: {id: n2, locality: {zone: z2}}\n\
                 admin: {address: {socket_address: {port_value: 9902}}}\n\
                 layered_runtime: {layers: [{name: more, admin_layer: {}}]}",
            ),
        )
        .unwrap();
        // Scalars replaced, the rest of the mapping kept.
        assert_eq!(b.node.id, "n2");
        assert_eq!(b.node.cluster, "edge");
        assert_eq!(b.node.zone, "z2");
        assert_eq!(
            b.admin.as_ref().unwrap().address,
            "127.0.0.1:9902".parse::<std::net::SocketAddr>().unwrap()
        );
        assert_eq!(b.listeners.len(), file.listeners.len());
        // Lists appended (the dump shows the merged document).
        let layers = &b.config_dump()["configs"][0]["bootstrap"]["layered_runtime"]["layers"];
        assert_eq!(layers.as_array().map(Vec::len), Some(3), "{layers}");
        assert_eq!(layers[2]["name"], "more");
        // `/runtime`'s view: every layer, with the keys quickshake reads.
        assert_eq!(b.runtime.len(), 3, "{:?}", b.runtime);
        assert!(b.runtime[2].admin && b.runtime[2].name == "more");
        assert!(!b.runtime[0].admin && b.runtime[1].admin);
        assert_eq!(
            b.runtime[0].values,
            [(
                "overload.global_downstream_max_connections".to_owned(),
                "50000".to_owned()
            )]
        );
    }

    #[test]
    fn errors_say_which_document() {
        let n = load_file(&full()).unwrap().listeners.len();
        let e = load(
            Some(&full()),
            Some("static_resources: {listeners: [{name: extra, bogus: 1}]}"),
        )
        .unwrap_err();
        assert!(matches!(e, ConfigError::ConfigYaml(_)), "{e}");
        let at = format!("static_resources.listeners[{n}].bogus");
        assert_eq!(e.path(), Some(at.as_str()));
        assert_eq!(e.to_string(), format!("--config-yaml: {at}: unknown field"));

        let e = load(Some(&full()), Some("static_resources: [unclosed")).unwrap_err();
        assert!(
            e.to_string().starts_with("--config-yaml: invalid YAML"),
            "{e}"
        );
        let e = load(Some(&full()), Some("just a string")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--config-yaml: (root): expected a mapping (a bootstrap)"
        );
        let e = load(
            Some(&full()),
            Some("admin: {address: {socket_address: {port_value: -1}}}"),
        )
        .unwrap_err();
        assert!(matches!(e, ConfigError::ConfigYaml(_)), "{e}");
        assert!(
            e.to_string()
                .contains("admin.address.socket_address.port_value"),
            "{e}"
        );
        assert!(load(None, None).is_err());
    }

    #[test]
    fn service_flags_override_the_node() {
        let mut n = Node {
            id: "a".into(),
            cluster: "b".into(),
            zone: "c".into(),
            ..Node::default()
        };
        n.override_with(&Node {
            id: "x".into(),
            cluster: String::new(),
            zone: "z".into(),
            ..Node::default()
        });
        assert_eq!(
            n,
            Node {
                id: "x".into(),
                cluster: "b".into(),
                zone: "z".into(),
                ..Node::default()
            }
        );
    }

    #[test]
    fn config_yaml_shown_redacted() {
        let plain = "node: {id: n1}";
        assert_eq!(redacted_config_yaml(plain), plain);
        let shown = redacted_config_yaml("k: {private_key: {inline_string: TOPSECRET}}");
        assert!(!shown.contains("TOPSECRET"), "{shown}");
        assert!(shown.contains("[redacted]"), "{shown}");
    }
}
