//! Conversions between the state machine's requests and responses and Envoy's discovery
//! messages, and the node the control plane is told about.

use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::protobuf as pb;
use envoy_types::pb::google::rpc::Status;
use pb::value::Kind as PbKind;
use serde_json::Value;

use crate::state::{Incoming, Outgoing};

/// `google.rpc.Code.INVALID_ARGUMENT`, as Envoy sends in a NACK.
const INVALID_ARGUMENT: i32 = 3;

/// The `Node` sent on xDS streams.
pub fn node(n: &quickshake_config::Node) -> core::Node {
    let locality =
        (!(n.region.is_empty() && n.zone.is_empty() && n.sub_zone.is_empty())).then(|| {
            core::Locality {
                region: n.region.clone(),
                zone: n.zone.clone(),
                sub_zone: n.sub_zone.clone(),
            }
        });
    let metadata = match &n.metadata {
        Value::Object(o) => Some(strukt(o)),
        _ => None,
    };
    core::Node {
        id: n.id.clone(),
        cluster: n.cluster.clone(),
        metadata,
        locality,
        user_agent_name: "quickshake".to_owned(),
        user_agent_version_type: Some(core::node::UserAgentVersionType::UserAgentVersion(
            env!("CARGO_PKG_VERSION").to_owned(),
        )),
        ..Default::default()
    }
}

fn strukt(o: &serde_json::Map<String, Value>) -> pb::Struct {
    pb::Struct {
        fields: o.iter().map(|(k, v)| (k.clone(), value(v))).collect(),
    }
}

fn value(v: &Value) -> pb::Value {
    let kind = match v {
        Value::Null => PbKind::NullValue(0),
        Value::Bool(b) => PbKind::BoolValue(*b),
        Value::Number(n) => PbKind::NumberValue(n.as_f64().unwrap_or_default()),
        Value::String(s) => PbKind::StringValue(s.clone()),
        Value::Array(a) => PbKind::ListValue(pb::ListValue {
            values: a.iter().map(value).collect(),
        }),
        Value::Object(o) => PbKind::StructValue(strukt(o)),
    };
    pb::Value { kind: Some(kind) }
}

fn status(error: Option<String>) -> Option<Status> {
    error.map(|message| Status {
        code: INVALID_ARGUMENT,
        message,
        details: Vec::new(),
    })
}

pub fn sotw_request(o: Outgoing, node: Option<core::Node>) -> DiscoveryRequest {
    DiscoveryRequest {
        version_info: o.version_info,
        node,
        resource_names: o.resource_names,
        type_url: o.type_url,
        response_nonce: o.nonce,
        error_detail: status(o.error),
        ..Default::default()
    }
}

pub fn delta_request(o: Outgoing, node: Option<core::Node>) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        node,
        type_url: o.type_url,
        resource_names_subscribe: o.subscribe,
        resource_names_unsubscribe: o.unsubscribe,
        initial_resource_versions: o.initial_versions.into_iter().collect(),
        response_nonce: o.nonce,
        error_detail: status(o.error),
        ..Default::default()
    }
}

pub fn sotw_response(r: DiscoveryResponse) -> Incoming {
    Incoming {
        resources: r
            .resources
            .into_iter()
            .map(|a| (None, String::new(), a.type_url, a.value))
            .collect(),
        type_url: r.type_url,
        version_info: r.version_info,
        nonce: r.nonce,
        removed: Vec::new(),
    }
}

pub fn delta_response(r: DeltaDiscoveryResponse) -> Incoming {
    let type_url = r.type_url;
    Incoming {
        resources: r
            .resources
            .into_iter()
            .map(|res| {
                let (url, bytes) = match res.resource {
                    Some(a) => (a.type_url, a.value),
                    None => (type_url.clone(), Vec::new()),
                };
                (Some(res.name), res.version, url, bytes)
            })
            .collect(),
        version_info: r.system_version_info,
        nonce: r.nonce,
        removed: r.removed_resources,
        type_url,
    }
}
