//! The message descriptors the bridge decodes resources with: every message `envoy-types` was
//! generated from (its shipped descriptor set), plus the few that crate does not carry, declared
//! here: the contrib private key providers (`cryptomb`, `qat`, `sgx`), quickshake's own batching
//! and `pkcs11` providers and handshake limit listener filter, and `TypedStruct` (`udpa.type.v1` and `xds.type.v3`, as Istio wraps extensions).
//! Field numbers and names are those of Envoy's `.proto` files. The shipped set (a copy in
//! `descriptors/`) is pruned at build time (`build.rs`) to the files the accepted message types need (1.2 of 3.4 MB; the
//! decoded pool is most of the xDS client's resident memory).

use std::sync::OnceLock;

use prost::Message;
use prost_reflect::DescriptorPool;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet};

static ENVOY_TYPES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/envoy_types.bin"));

/// Why the descriptor pool could not be built (the shipped set is corrupt or inconsistent).
#[derive(Debug, thiserror::Error)]
pub enum DescriptorsError {
    #[error("envoy-types descriptor set: {0}")]
    Decode(#[source] prost::DecodeError),
    #[error("descriptor pool: {0}")]
    Pool(#[source] prost_reflect::DescriptorError),
}

/// The pool, built once.
pub fn pool() -> Result<&'static DescriptorPool, &'static DescriptorsError> {
    static POOL: OnceLock<Result<DescriptorPool, DescriptorsError>> = OnceLock::new();
    POOL.get_or_init(build).as_ref()
}

fn build() -> Result<DescriptorPool, DescriptorsError> {
    let mut set = FileDescriptorSet::decode(ENVOY_TYPES).map_err(DescriptorsError::Decode)?;
    set.file.extend(declared());
    DescriptorPool::from_file_descriptor_set(set).map_err(DescriptorsError::Pool)
}

fn field(name: &str, number: i32, ty: Type, type_name: Option<&str>) -> FieldDescriptorProto {
    FieldDescriptorProto {
        name: Some(name.to_owned()),
        number: Some(number),
        label: Some(Label::Optional as i32),
        r#type: Some(ty as i32),
        type_name: type_name.map(str::to_owned),
        // No json_name: the bridge writes proto field names, and prost-reflect derives the
        // lowerCamelCase one when it is absent.
        ..Default::default()
    }
}

fn message(name: &str, fields: Vec<FieldDescriptorProto>) -> DescriptorProto {
    DescriptorProto {
        name: Some(name.to_owned()),
        field: fields,
        ..Default::default()
    }
}

fn file(
    name: &str,
    package: &str,
    deps: &[&str],
    messages: Vec<DescriptorProto>,
) -> FileDescriptorProto {
    FileDescriptorProto {
        name: Some(name.to_owned()),
        package: Some(package.to_owned()),
        dependency: deps.iter().map(|d| (*d).to_owned()).collect(),
        message_type: messages,
        syntax: Some("proto3".to_owned()),
        ..Default::default()
    }
}

const DATA_SOURCE: &str = ".envoy.config.core.v3.DataSource";
const DURATION: &str = ".google.protobuf.Duration";
const STRUCT: &str = ".google.protobuf.Struct";

/// `private_key = 1; poll_delay = 2`, as in Envoy's contrib cryptomb.proto and qat.proto.
fn key_and_delay() -> Vec<FieldDescriptorProto> {
    vec![
        field("private_key", 1, Type::Message, Some(DATA_SOURCE)),
        field("poll_delay", 2, Type::Message, Some(DURATION)),
    ]
}

fn declared() -> Vec<FileDescriptorProto> {
    let core = "envoy/config/core/v3/base.proto";
    let duration = "google/protobuf/duration.proto";
    let strukt = "google/protobuf/struct.proto";
    let typed_struct = || {
        message(
            "TypedStruct",
            vec![
                field("type_url", 1, Type::String, None),
                field("value", 2, Type::Message, Some(STRUCT)),
            ],
        )
    };
    vec![
        file(
            "quickshake/contrib/cryptomb.proto",
            "envoy.extensions.private_key_providers.cryptomb.v3alpha",
            &[core, duration],
            vec![message("CryptoMbPrivateKeyMethodConfig", key_and_delay())],
        ),
        file(
            "quickshake/contrib/qat.proto",
            "envoy.extensions.private_key_providers.qat.v3alpha",
            &[core, duration],
            vec![message("QatPrivateKeyMethodConfig", key_and_delay())],
        ),
        file(
            "quickshake/batching.proto",
            "quickshake.private_key_providers.v1",
            &[core, duration],
            vec![
                message(
                    "BatchingConfig",
                    vec![
                        field("private_key", 1, Type::Message, Some(DATA_SOURCE)),
                        field("poll_delay", 2, Type::Message, Some(DURATION)),
                        field("engine", 3, Type::String, None),
                        field("batching", 4, Type::String, None),
                        field(
                            "fault",
                            5,
                            Type::Message,
                            Some(".quickshake.private_key_providers.v1.FaultConfig"),
                        ),
                    ],
                ),
                message(
                    "FaultConfig",
                    vec![
                        field("error_every", 1, Type::Uint64, None),
                        field("corrupt_every", 2, Type::Uint64, None),
                        field("panic_every", 3, Type::Uint64, None),
                        field("delay", 4, Type::Message, Some(DURATION)),
                    ],
                ),
            ],
        ),
        file(
            "quickshake/contrib/sgx.proto",
            "envoy.extensions.private_key_providers.sgx.v3alpha",
            &[],
            vec![message(
                "SgxPrivateKeyMethodConfig",
                vec![
                    field("sgx_library", 1, Type::String, None),
                    field("key_label", 2, Type::String, None),
                    field("usr_pin", 3, Type::String, None),
                    field("so_pin", 4, Type::String, None),
                    field("token_label", 5, Type::String, None),
                    field("key_type", 6, Type::String, None),
                ],
            )],
        ),
        // `provider_name: pkcs11` (README: the pkcs11 provider); `key_id` is hex, as in YAML.
        file(
            "quickshake/pkcs11.proto",
            "quickshake.private_key_providers.v1",
            &[core, duration],
            vec![message(
                "Pkcs11Config",
                vec![
                    field("module", 1, Type::String, None),
                    field("token_label", 2, Type::String, None),
                    field("token_serial", 3, Type::String, None),
                    field("key_label", 4, Type::String, None),
                    field("key_id", 5, Type::String, None),
                    field("user_pin", 6, Type::Message, Some(DATA_SOURCE)),
                    field("pool_size", 7, Type::Uint32, None),
                    field("deadline", 8, Type::Message, Some(DURATION)),
                    field("max_pending", 9, Type::Uint32, None),
                ],
            )],
        ),
        file(
            "quickshake/handshake_limit.proto",
            "quickshake.filters.listener.v1",
            &[],
            vec![message(
                "HandshakeLimit",
                vec![field("max_handshakes_per_source", 1, Type::Uint32, None)],
            )],
        ),
        file(
            "quickshake/udpa_typed_struct.proto",
            "udpa.type.v1",
            &[strukt],
            vec![typed_struct()],
        ),
        file(
            "quickshake/xds_typed_struct.proto",
            "xds.type.v3",
            &[strukt],
            vec![typed_struct()],
        ),
    ]
}

#[cfg(test)]
mod tests {
    /// `descriptors/envoy-types.bin` is the set of the `envoy-types` version the workspace
    /// locks: a version bump without `scripts/regen-xds-descriptors` fails here.
    #[test]
    fn descriptor_set_matches_envoy_types() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let copied = std::fs::read_to_string(dir.join("descriptors/envoy-types.version")).unwrap();
        let lock = std::fs::read_to_string(dir.join("../../Cargo.lock")).unwrap();
        let locked = lock
            .split("[[package]]")
            .find(|p| p.contains("name = \"envoy-types\""))
            .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = ")))
            .map(|v| v.trim_matches('"').to_owned())
            .expect("envoy-types in Cargo.lock");
        assert_eq!(
            copied.trim(),
            locked,
            "crates/xds/descriptors holds another envoy-types version's set: run scripts/regen-xds-descriptors"
        );
    }

    #[test]
    fn every_resource_and_declared_message_resolves() {
        let pool = super::pool().unwrap();
        for m in [
            "envoy.config.listener.v3.Listener",
            "envoy.config.route.v3.RouteConfiguration",
            "envoy.config.cluster.v3.Cluster",
            "envoy.config.endpoint.v3.ClusterLoadAssignment",
            "envoy.extensions.transport_sockets.tls.v3.Secret",
            "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            "envoy.extensions.private_key_providers.cryptomb.v3alpha.CryptoMbPrivateKeyMethodConfig",
            "envoy.extensions.private_key_providers.qat.v3alpha.QatPrivateKeyMethodConfig",
            "quickshake.private_key_providers.v1.BatchingConfig",
            "quickshake.private_key_providers.v1.Pkcs11Config",
            "envoy.extensions.private_key_providers.sgx.v3alpha.SgxPrivateKeyMethodConfig",
            "quickshake.filters.listener.v1.HandshakeLimit",
            "envoy.extensions.filters.listener.local_ratelimit.v3.LocalRateLimit",
            "envoy.extensions.filters.network.local_ratelimit.v3.LocalRateLimit",
            "udpa.type.v1.TypedStruct",
        ] {
            assert!(pool.get_message_by_name(m).is_some(), "{m}");
        }
    }
}
