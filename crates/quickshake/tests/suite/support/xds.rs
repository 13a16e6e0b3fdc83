//! xDS test helpers: the bootstrap both data planes (Envoy 1.39.3 and quickshake) start on, a
//! data plane of either kind, and builders of xDS resources in Envoy's JSON form (what
//! [`ControlPlane::push`] takes).

use std::collections::HashMap;

use serde_json::{json, Value};

use super::control_plane::ControlPlane;
use super::envoy::Envoy;
use super::{certs_dir, free_port, Gateway};

pub const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
pub const ROUTE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
pub const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub const ENDPOINTS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
pub const SECRET: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

/// Which data plane a scenario runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plane {
    Envoy,
    Quickshake,
}

/// ADS flavour: state of the world (`GRPC`) or incremental (`DELTA_GRPC`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Sotw,
    Delta,
}

/// Envoy's bootstrap for a data plane fed only by ADS from `cp` (over its TCP port, or its
/// unix socket when it has no TCP port), admin on 127.0.0.1:`admin_port`. quickshake is
/// started on the same text.
pub fn xds_bootstrap(mode: Mode, node_id: &str, cp: &ControlPlane, admin_port: u16) -> String {
    let api_type = match mode {
        Mode::Sotw => "GRPC",
        Mode::Delta => "DELTA_GRPC",
    };
    let address = match (cp.grpc_port, &cp.grpc_unix) {
        (Some(p), _) => format!("socket_address: {{ address: 127.0.0.1, port_value: {p} }}"),
        (None, Some(path)) => format!("pipe: {{ path: {} }}", path.display()),
        (None, None) => panic!("control plane without a gRPC address"),
    };
    format!(
        r#"node: {{ id: {node_id}, cluster: xds-test }}
admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: {admin_port} }} }}
dynamic_resources:
  ads_config:
    api_type: {api_type}
    transport_api_version: V3
    grpc_services: [{{ envoy_grpc: {{ cluster_name: xds_cluster }} }}]
    set_node_on_first_message_only: true
  lds_config: {{ ads: {{}}, resource_api_version: V3, initial_fetch_timeout: 5s }}
  cds_config: {{ ads: {{}}, resource_api_version: V3, initial_fetch_timeout: 5s }}
static_resources:
  clusters:
  - name: xds_cluster
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{ http2_protocol_options: {{}} }}
    load_assignment:
      cluster_name: xds_cluster
      endpoints:
      - lb_endpoints:
        - endpoint: {{ address: {{ {address} }} }}
"#
    )
}

/// A running data plane of either kind.
pub enum DataPlane {
    Envoy(Envoy),
    Quickshake(Gateway),
}

impl DataPlane {
    /// Start `plane` on [`xds_bootstrap`] with one worker; returns once its admin says LIVE.
    pub fn start(plane: Plane, mode: Mode, node_id: &str, cp: &ControlPlane) -> DataPlane {
        Self::start_with(plane, mode, node_id, cp, "")
    }

    /// Start with the xDS cluster over mTLS as Envoy Gateway renders it: its client certificate
    /// and trusted CA from SDS files (written to `sds_dir`).
    pub fn start_mtls(
        plane: Plane,
        mode: Mode,
        node_id: &str,
        cp: &ControlPlane,
        sds_dir: &std::path::Path,
    ) -> DataPlane {
        let pem = |f: &str| std::fs::read_to_string(certs_dir().join(f)).expect("test certificate");
        let cert = json!({"resources": [{
            "@type": SECRET, "name": "xds_certificate",
            "tls_certificate": {
                "certificate_chain": {"inline_string": pem("client.cert.pem")},
                "private_key": {"inline_string": pem("client.key.pem")}}}]});
        let ca = json!({"resources": [{
            "@type": SECRET, "name": "xds_trusted_ca",
            "validation_context": {"trusted_ca": {"inline_string": pem("rsa2048.cert.pem")}}}]});
        let (cert_file, ca_file) = (
            sds_dir.join("xds-certificate.json"),
            sds_dir.join("xds-trusted-ca.json"),
        );
        std::fs::write(&cert_file, cert.to_string()).expect("write SDS file");
        std::fs::write(&ca_file, ca.to_string()).expect("write SDS file");
        let tls = format!(
            r#"  - name: xds_cluster
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: localhost
        common_tls_context:
          tls_params: {{ tls_maximum_protocol_version: TLSv1_3 }}
          tls_certificate_sds_secret_configs:
          - name: xds_certificate
            sds_config: {{ path_config_source: {{ path: {} }}, resource_api_version: V3 }}
          validation_context_sds_secret_config:
            name: xds_trusted_ca
            sds_config: {{ path_config_source: {{ path: {} }}, resource_api_version: V3 }}
"#,
            cert_file.display(),
            ca_file.display()
        );
        Self::start_edited(plane, mode, node_id, cp, |b| {
            b.replacen("  - name: xds_cluster\n", &tls, 1)
        })
    }

    /// Start with more static clusters (YAML list items, indented as `static_resources.clusters`
    /// entries) after the xDS cluster.
    pub fn start_with(
        plane: Plane,
        mode: Mode,
        node_id: &str,
        cp: &ControlPlane,
        extra_clusters: &str,
    ) -> DataPlane {
        Self::start_edited(plane, mode, node_id, cp, |b| b + extra_clusters)
    }

    /// Start from [`xds_bootstrap`] as `edit` changes it.
    pub fn start_edited(
        plane: Plane,
        mode: Mode,
        node_id: &str,
        cp: &ControlPlane,
        edit: impl FnOnce(String) -> String,
    ) -> DataPlane {
        let admin = free_port();
        let bootstrap = edit(xds_bootstrap(mode, node_id, cp, admin));
        match plane {
            Plane::Envoy => DataPlane::Envoy(Envoy::start(&bootstrap, admin)),
            Plane::Quickshake => {
                // The gateway picks its own admin port: the same text with {{ADMIN}} there.
                let template = bootstrap.replace(
                    &format!("port_value: {admin} }}"),
                    "port_value: {{ADMIN}} }",
                );
                DataPlane::Quickshake(Gateway::start_argv(
                    &[("bootstrap.yaml", &template)],
                    &["-c", "{{DIR}}/bootstrap.yaml", "--concurrency", "1"],
                ))
            }
        }
    }

    pub fn stats(&self) -> HashMap<String, String> {
        match self {
            DataPlane::Envoy(e) => e.stats(),
            DataPlane::Quickshake(g) => g.stats(),
        }
    }

    /// A counter or gauge (`None` when absent).
    pub fn stat(&self, name: &str) -> Option<u64> {
        self.stats().get(name).and_then(|v| v.trim().parse().ok())
    }

    pub fn log_text(&self) -> String {
        match self {
            DataPlane::Envoy(e) => e.log_text(),
            DataPlane::Quickshake(g) => g.log_text(),
        }
    }

    /// `/config_dump`'s body.
    pub fn config_dump_text(&self) -> String {
        self.admin_text("/config_dump")
    }

    /// An admin page's body (GET).
    pub fn admin_text(&self, path: &str) -> String {
        match self {
            DataPlane::Envoy(e) => e.admin_get(path),
            DataPlane::Quickshake(g) => g.admin_get(path).1,
        }
    }
}

/// A TLS listener on 127.0.0.1:`port` whose certificate `secret` comes by SDS over ADS, with
/// an HTTP connection manager routed by RDS (`route_config_name`) and the router filter.
pub fn tls_listener(name: &str, port: u16, secret: &str, route_config_name: &str) -> Value {
    tls_listener_from(
        name,
        port,
        secret,
        route_config_name,
        json!({ "ads": {}, "resource_api_version": "V3" }),
    )
}

/// [`tls_listener`] with the certificate's `sds_config` given (e.g. an `api_config_source` to
/// an SDS cluster of its own, as Istio's sidecars have).
pub fn tls_listener_from(
    name: &str,
    port: u16,
    secret: &str,
    route_config_name: &str,
    sds_config: Value,
) -> Value {
    json!({
        "name": name,
        "address": { "socket_address": { "address": "127.0.0.1", "port_value": port } },
        "filter_chains": [{
            "transport_socket": {
                "name": "envoy.transport_sockets.tls",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
                    "common_tls_context": {
                        "alpn_protocols": ["h2", "http/1.1"],
                        "tls_certificate_sds_secret_configs": [{
                            "name": secret,
                            "sds_config": sds_config
                        }]
                    }
                }
            },
            "filters": [{
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                    "stat_prefix": "ingress_https",
                    "rds": {
                        "config_source": { "ads": {}, "resource_api_version": "V3" },
                        "route_config_name": route_config_name
                    },
                    "http_filters": [{
                        "name": "envoy.filters.http.router",
                        "typed_config": { "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" }
                    }]
                }
            }]
        }]
    })
}

/// A RouteConfiguration sending everything to `cluster`, answering `x-route: <tag>`.
pub fn route_config(name: &str, cluster: &str, tag: &str) -> Value {
    json!({
        "name": name,
        "virtual_hosts": [{
            "name": "all",
            "domains": ["*"],
            "routes": [{
                "match": { "prefix": "/" },
                "route": { "cluster": cluster },
                "response_headers_to_add": [{ "header": { "key": "x-route", "value": tag } }]
            }]
        }]
    })
}

/// A cluster whose endpoints come by EDS over ADS.
pub fn eds_cluster(name: &str) -> Value {
    json!({
        "name": name,
        "type": "EDS",
        "connect_timeout": "1s",
        "eds_cluster_config": { "eds_config": { "ads": {}, "resource_api_version": "V3" } }
    })
}

/// The endpoints of `cluster`: 127.0.0.1 on each of `ports`.
pub fn load_assignment(cluster: &str, ports: &[u16]) -> Value {
    let lb: Vec<Value> = ports
        .iter()
        .map(|p| json!({ "endpoint": { "address": { "socket_address": { "address": "127.0.0.1", "port_value": p } } } }))
        .collect();
    json!({ "cluster_name": cluster, "endpoints": [{ "lb_endpoints": lb }] })
}

fn pem(file: &str) -> String {
    std::fs::read_to_string(certs_dir().join(file)).expect("test certificate")
}

/// A Secret with `testdata/certs/<cert>.cert.pem` and its plain key, inline.
pub fn plain_secret(name: &str, cert: &str) -> Value {
    json!({
        "name": name,
        "tls_certificate": {
            "certificate_chain": { "inline_string": pem(&format!("{cert}.cert.pem")) },
            "private_key": { "inline_string": pem(&format!("{cert}.key.pem")) }
        }
    })
}

/// The Secret istiod sends when a ProxyConfig asks for cryptomb: no outer `private_key`, the
/// key as `inline_bytes` inside `CryptoMbPrivateKeyMethodConfig`, `fallback: true` (software
/// when the CPU lacks AVX-512 IFMA).
pub fn istiod_cryptomb_secret(name: &str, cert: &str) -> Value {
    let key = boring::base64::encode_block(pem(&format!("{cert}.key.pem")).as_bytes());
    json!({
        "name": name,
        "tls_certificate": {
            "certificate_chain": { "inline_string": pem(&format!("{cert}.cert.pem")) },
            "private_key_provider": {
                "provider_name": "cryptomb",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.private_key_providers.cryptomb.v3alpha.CryptoMbPrivateKeyMethodConfig",
                    "private_key": { "inline_bytes": key },
                    "poll_delay": "0.010s"
                },
                "fallback": true
            }
        }
    })
}
