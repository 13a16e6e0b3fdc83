//! The dynamic half of `/config_dump`, in Envoy's shapes: `ListenersConfigDump`'s
//! `dynamic_listeners`, `ClustersConfigDump`'s `dynamic_active_clusters`,
//! `RoutesConfigDump`'s `dynamic_route_configs`, `EndpointsConfigDump`'s
//! `dynamic_endpoint_configs` and `SecretsConfigDump`'s `dynamic_active_secrets`, each with
//! `version_info` and `last_updated`. Key material is redacted.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::kind::Kind;
use crate::state::{Entry, Resources};

fn timestamp(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

fn with_type(kind: Kind, e: &Entry) -> Value {
    let mut v = quickshake_config::redacted_json(&e.json);
    if let Value::Object(o) = &mut v {
        o.insert("@type".into(), Value::String(kind.type_url().to_owned()));
    }
    v
}

/// The dump sections for the accepted dynamic resources; `versions` holds the `version_info` of
/// the last accepted response of each type (each section's top-level `version_info`, as Envoy's).
pub fn config_dump(resources: &Resources, versions: &BTreeMap<Kind, String>) -> Vec<Value> {
    let version = |k: Kind| versions.get(&k).cloned().unwrap_or_default();
    let each = |k: Kind| resources.get(&k).into_iter().flatten();
    let listeners: Vec<Value> = each(Kind::Listener)
        .map(|(name, e)| {
            json!({"name": name, "active_state": {
                "version_info": e.version, "listener": with_type(Kind::Listener, e),
                "last_updated": timestamp(e.last_updated)}})
        })
        .collect();
    let clusters: Vec<Value> = each(Kind::Cluster)
        .map(|(_, e)| {
            json!({"version_info": e.version, "cluster": with_type(Kind::Cluster, e),
                "last_updated": timestamp(e.last_updated)})
        })
        .collect();
    let routes: Vec<Value> = each(Kind::Route)
        .map(|(_, e)| {
            json!({"version_info": e.version, "route_config": with_type(Kind::Route, e),
                "last_updated": timestamp(e.last_updated)})
        })
        .collect();
    let endpoints: Vec<Value> = each(Kind::Endpoint)
        .map(|(_, e)| {
            json!({"version_info": e.version, "endpoint_config": with_type(Kind::Endpoint, e),
                "last_updated": timestamp(e.last_updated)})
        })
        .collect();
    let secrets: Vec<Value> = each(Kind::Secret)
        .map(|(name, e)| {
            json!({"name": name, "version_info": e.version,
                "last_updated": timestamp(e.last_updated), "secret": with_type(Kind::Secret, e)})
        })
        .collect();
    vec![
        json!({"@type": "type.googleapis.com/envoy.admin.v3.ListenersConfigDump",
            "version_info": version(Kind::Listener), "dynamic_listeners": listeners}),
        json!({"@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump",
            "version_info": version(Kind::Cluster), "dynamic_active_clusters": clusters}),
        json!({"@type": "type.googleapis.com/envoy.admin.v3.RoutesConfigDump", "dynamic_route_configs": routes}),
        json!({"@type": "type.googleapis.com/envoy.admin.v3.EndpointsConfigDump", "dynamic_endpoint_configs": endpoints}),
        json!({"@type": "type.googleapis.com/envoy.admin.v3.SecretsConfigDump", "dynamic_active_secrets": secrets}),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_795_000_000_123);
        assert_eq!(super::timestamp(t), "2026-11-18T11:06:40.123Z");
    }
}
