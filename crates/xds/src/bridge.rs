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
    Descriptors(String),
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
}
