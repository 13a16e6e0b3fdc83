//! Protobuf to the configuration model: a resource arrives as a `google.protobuf.Any`, is decoded
//! by reflection over Envoy's descriptors into its canonical JSON form (proto field names,
//! enums by name, durations as `"1.5s"`, bytes as base64: the same JSON a YAML bootstrap is),
//! and then goes through the configuration crate's walker like any static resource. So there is
//! one parser, and an xDS error reads like a bootstrap error: a field path and a reason.

use prost_reflect::{DynamicMessage, SerializeOptions};
use serde_json::Value;

use crate::descriptors;

/// Why a resource could not be turned into JSON.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("{0}")]
    Descriptors(#[source] &'static crate::descriptors::DescriptorsError),
    #[error("unknown resource type {0}")]
    UnknownType(String),
    #[error("cannot decode {type_url}: {reason}")]
    Decode { type_url: String, reason: String },
}

/// The JSON form of a serialized message of type `type_url`
/// (`type.googleapis.com/<full name>`); nested `Any`s carry their `@type`.
pub fn to_json(type_url: &str, bytes: &[u8]) -> Result<Value, BridgeError> {
    let pool = descriptors::pool().map_err(BridgeError::Descriptors)?;
    let name = type_url.rsplit('/').next().unwrap_or(type_url);
    let desc = pool
        .get_message_by_name(name)
        .ok_or_else(|| BridgeError::UnknownType(type_url.to_owned()))?;
    let decode_err = |reason: String| BridgeError::Decode {
        type_url: type_url.to_owned(),
        reason,
    };
    let msg = DynamicMessage::decode(desc, bytes).map_err(|e| decode_err(e.to_string()))?;
    let opts = SerializeOptions::new()
        .use_proto_field_name(true)
        .stringify_64_bit_integers(false);
    msg.serialize_with_options(serde_json::value::Serializer, &opts)
        .map_err(|e| decode_err(e.to_string()))
}

/// The string field `field` (a resource's name) of a serialized message of type `type_url`,
/// read even when [`to_json`] fails on something nested in it (an `Any` of a type the
/// descriptors do not have), so that the refusal can name the resource.
pub fn resource_name(type_url: &str, bytes: &[u8], field: &str) -> Option<String> {
    let pool = descriptors::pool().ok()?;
    let name = type_url.rsplit('/').next().unwrap_or(type_url);
    let desc = pool.get_message_by_name(name)?;
    let msg = DynamicMessage::decode(desc, bytes).ok()?;
    let value = msg.get_field_by_name(field)?;
    value.as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use prost::Message;

    #[test]
    fn a_listener_reads_as_its_yaml_would() {
        use envoy_types::pb::envoy::config::core::v3 as core;
        use envoy_types::pb::envoy::config::listener::v3 as l;
        let listener = l::Listener {
            name: "web".into(),
            address: Some(core::Address {
                address: Some(core::address::Address::SocketAddress(core::SocketAddress {
                    address: "127.0.0.1".into(),
                    port_specifier: Some(core::socket_address::PortSpecifier::PortValue(8443)),
                    ..Default::default()
                })),
            }),
            ..Default::default()
        };
        let v = super::to_json(
            "type.googleapis.com/envoy.config.listener.v3.Listener",
            &listener.encode_to_vec(),
        )
        .unwrap();
        assert_eq!(v["name"], "web");
        assert_eq!(v["address"]["socket_address"]["port_value"], 8443);
        let e = super::to_json("type.googleapis.com/no.such.Type", &[]).unwrap_err();
        assert!(e.to_string().contains("unknown resource type"), "{e}");
    }

    /// A certificate whose key is in a PKCS#11 token arrives over SDS (or inline in LDS) with
    /// either provider config: quickshake's `pkcs11` and Envoy's `sgx`. Their fields read as in
    /// YAML, and the dump redacts every PIN.
    #[test]
    fn pkcs11_and_sgx_provider_configs_decode_and_dump_redacted() {
        use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
        use envoy_types::pb::google::protobuf::Any;
        use prost_reflect::DynamicMessage;
        let pool = crate::descriptors::pool().unwrap();
        let encode = |name: &str, json: serde_json::Value| {
            let desc = pool.get_message_by_name(name).unwrap();
            DynamicMessage::deserialize(desc, json)
                .unwrap()
                .encode_to_vec()
        };
        let secret = |provider: &str, name: &str, value: Vec<u8>| tls::Secret {
            name: "token-cert".into(),
            r#type: Some(tls::secret::Type::TlsCertificate(tls::TlsCertificate {
                private_key_provider: Some(tls::PrivateKeyProvider {
                    provider_name: provider.into(),
                    config_type: Some(tls::private_key_provider::ConfigType::TypedConfig(Any {
                        type_url: format!("type.googleapis.com/{name}"),
                        value,
                    })),
                    ..Default::default()
                }),
                ..Default::default()
            })),
        };
        let secret_url = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
        let name = "quickshake.private_key_providers.v1.Pkcs11Config";
        let value = encode(
            name,
            serde_json::json!({
                "module": "/usr/lib/softhsm/libsofthsm2.so",
                "token_label": "edge",
                "key_id": "0a1b",
                "user_pin": {"inline_string": "pin-4711"},
                "pool_size": 4,
                "deadline": "0.250s",
            }),
        );
        let v = super::to_json(secret_url, &secret("pkcs11", name, value).encode_to_vec()).unwrap();
        let cfg = &v["tls_certificate"]["private_key_provider"]["typed_config"];
        assert_eq!(cfg["@type"], format!("type.googleapis.com/{name}"));
        assert_eq!(cfg["module"], "/usr/lib/softhsm/libsofthsm2.so");
        assert_eq!(cfg["key_id"], "0a1b");
        assert_eq!(cfg["pool_size"], 4);
        assert_eq!(cfg["deadline"], "0.250s");
        assert_eq!(cfg["user_pin"]["inline_string"], "pin-4711");
        let dump = quickshake_config::redacted_json(&v).to_string();
        assert!(
            !dump.contains("pin-4711") && dump.contains("[redacted]"),
            "{dump}"
        );

        let name = "envoy.extensions.private_key_providers.sgx.v3alpha.SgxPrivateKeyMethodConfig";
        let value = encode(
            name,
            serde_json::json!({
                "sgx_library": "/usr/local/lib/libp11sgx.so",
                "key_label": "key1",
                "usr_pin": "usr-1234",
                "so_pin": "so-5678",
                "token_label": "enclave",
                "key_type": "rsa",
            }),
        );
        let v = super::to_json(secret_url, &secret("sgx", name, value).encode_to_vec()).unwrap();
        let cfg = &v["tls_certificate"]["private_key_provider"]["typed_config"];
        assert_eq!(cfg["sgx_library"], "/usr/local/lib/libp11sgx.so");
        assert_eq!(cfg["usr_pin"], "usr-1234");
        assert_eq!(cfg["key_type"], "rsa");
        let dump = quickshake_config::redacted_json(&v).to_string();
        assert!(
            !dump.contains("usr-1234") && !dump.contains("so-5678") && dump.contains("key1"),
            "{dump}"
        );
    }

    /// The admission filters arrive over LDS as they are written in a bootstrap: Envoy's
    /// `local_ratelimit` (its descriptors are in the pruned set) and quickshake's own
    /// `HandshakeLimit` (declared in `descriptors`), and parse into the same model.
    #[test]
    fn admission_filters_read_as_their_yaml_would() {
        use envoy_types::pb::envoy::config::listener::v3 as l;
        use envoy_types::pb::envoy::extensions::filters::listener::local_ratelimit::v3 as lrl;
        use envoy_types::pb::envoy::r#type::v3::TokenBucket;
        use envoy_types::pb::google::protobuf::{Any, Duration};
        let rate_limit = lrl::LocalRateLimit {
            stat_prefix: "edge".into(),
            token_bucket: Some(TokenBucket {
                max_tokens: 3,
                tokens_per_fill: None,
                fill_interval: Some(Duration {
                    seconds: 60,
                    nanos: 0,
                }),
            }),
            ..Default::default()
        };
        let filter = |name: &str, type_url: &str, value: Vec<u8>| l::ListenerFilter {
            name: name.into(),
            config_type: Some(l::listener_filter::ConfigType::TypedConfig(Any {
                type_url: type_url.into(),
                value,
            })),
            ..Default::default()
        };
        let listener = l::Listener {
            name: "web".into(),
            listener_filters: vec![
                filter(
                    "envoy.filters.listener.local_ratelimit",
                    "type.googleapis.com/envoy.extensions.filters.listener.local_ratelimit.v3.LocalRateLimit",
                    rate_limit.encode_to_vec(),
                ),
                // max_handshakes_per_source (field 1, varint) = 16.
                filter(
                    "quickshake.filters.listener.handshake_limit",
                    "type.googleapis.com/quickshake.filters.listener.v1.HandshakeLimit",
                    vec![0x08, 16],
                ),
            ],
            ..Default::default()
        };
        let mut v = super::to_json(
            "type.googleapis.com/envoy.config.listener.v3.Listener",
            &listener.encode_to_vec(),
        )
        .unwrap();
        v["address"] =
            serde_json::json!({"socket_address": {"address": "127.0.0.1", "port_value": 8443}});
        v["filter_chains"] = serde_json::json!([{"filters": [{
            "name": "envoy.filters.network.tcp_proxy",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
                "stat_prefix": "t", "cluster": "c"
            }
        }]}]);
        let parsed = quickshake_config::listener_resource(&v, &["c".to_owned()]).unwrap();
        let limits: Vec<_> = parsed.limits.iter().map(|x| &x.limit).collect();
        match limits.as_slice() {
            [quickshake_config::SocketLimit::LocalRateLimit(r), quickshake_config::SocketLimit::HandshakeLimit(h)] =>
            {
                assert_eq!(r.stat_prefix, "edge");
                assert_eq!(r.token_bucket.max_tokens, 3);
                assert_eq!(
                    r.token_bucket.fill_interval,
                    std::time::Duration::from_secs(60)
                );
                assert_eq!(h.max_handshakes_per_source, 16);
            }
            other => panic!("{other:?}"),
        }
    }

    /// The fields of the closed "accepted with no effect" list arrive over xDS as Envoy Gateway
    /// and istiod send them (a listener's, a route's and a virtual host's `metadata`, a route's
    /// `decorator`, the connection manager's `tracing` with a Zipkin provider; a cluster's, a
    /// locality's and an endpoint's `metadata`): they decode from protobuf (their messages are
    /// in the pruned set) and the resources parse.
    #[test]
    fn no_effect_fields_decode_and_parse() {
        use prost_reflect::DynamicMessage;
        let md = serde_json::json!({"filter_metadata": {"envoy-gateway": {"resources": [
            {"kind": "HTTPRoute", "name": "backend", "namespace": "default"}]}}});
        let hcm = serde_json::json!({
            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": "web",
            "tracing": {
                "random_sampling": {"value": 1.0},
                "custom_tags": [{"tag": "istio.canonical_service", "literal": {"value": "gw"}}],
                "provider": {"name": "envoy.tracers.zipkin", "typed_config": {
                    "@type": "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig",
                    "collector_cluster": "zipkin", "collector_endpoint": "/api/v2/spans",
                    "collector_endpoint_version": "HTTP_JSON"}}
            },
            "route_config": {"name": "r", "virtual_hosts": [{
                "name": "any", "domains": ["*"], "metadata": md,
                "routes": [{"match": {"prefix": "/"}, "metadata": md,
                    "decorator": {"operation": "backend:80/*"},
                    "route": {"cluster": "c"}}]}]},
            "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]
        });
        let listener = serde_json::json!({
            "name": "web", "metadata": md,
            "address": {"socket_address": {"address": "127.0.0.1", "port_value": 8080}},
            "filter_chains": [{"filters": [{
                "name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]}]
        });
        let cluster = serde_json::json!({
            "name": "c", "type": "STATIC", "connect_timeout": "1s", "metadata": md,
            "load_assignment": {"cluster_name": "c", "endpoints": [{"metadata": md,
                "lb_endpoints": [{"metadata": md, "endpoint": {"address": {"socket_address":
                    {"address": "127.0.0.1", "port_value": 8081}}}}]}]}
        });
        // JSON -> protobuf -> JSON, as a control plane's resource arrives.
        let over_the_wire = |type_url: &str, v: &serde_json::Value| {
            let pool = crate::descriptors::pool().unwrap();
            let desc = pool
                .get_message_by_name(type_url.rsplit('/').next().unwrap())
                .unwrap();
            let msg = DynamicMessage::deserialize(desc, v.clone()).unwrap();
            super::to_json(type_url, &msg.encode_to_vec()).unwrap()
        };
        let l = over_the_wire(
            "type.googleapis.com/envoy.config.listener.v3.Listener",
            &listener,
        );
        assert_eq!(l["metadata"], md);
        let hcm_back = &l["filter_chains"][0]["filters"][0]["typed_config"];
        assert_eq!(
            hcm_back["tracing"]["provider"]["typed_config"]["collector_cluster"],
            "zipkin"
        );
        quickshake_config::listener_resource(&l, &["c".to_owned()]).unwrap();
        let c = over_the_wire(
            "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            &cluster,
        );
        assert_eq!(
            c["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["metadata"],
            md
        );
        quickshake_config::cluster_resource(&c, "c").unwrap();
    }
}
