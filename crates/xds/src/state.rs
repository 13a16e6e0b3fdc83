//! The protocol state of one xDS stream, as a pure state machine: what to ask for, and what to
//! answer to each response (ACK or NACK), for state-of-the-world and incremental streams alike.
//! It does no I/O: [`crate::stream`] feeds it responses and sends what it returns, and the
//! caller's `apply` decides whether a candidate set of resources can serve (a NACK otherwise).
//!
//! Rules kept here, as Envoy keeps them:
//! - An update is accepted or rejected whole; a rejected one changes nothing, and the NACK
//!   carries the last accepted `version_info`, the response's nonce and an `error_detail`.
//! - LDS and CDS are wildcard subscriptions; RDS, EDS and SDS ask for the names the accepted
//!   listeners and clusters use, and the subscription follows them.
//! - On reconnect a state-of-the-world stream sends its last accepted versions, an incremental
//!   one its resources' versions (`initial_resource_versions`), so a control plane that was
//!   restarted sends only what changed, and the last accepted configuration serves meanwhile.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use serde_json::Value;

use crate::bridge;
use crate::kind::Kind;

/// Why the caller's `apply` (the data path's `Sink`) refused a candidate set: its `Display`
/// (the whole source chain's text is the sink's to include) is the NACK's `error_detail`.
pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// One accepted resource.
#[derive(Debug, Clone)]
pub struct Entry {
    pub version: String,
    /// Its JSON form (with key material: never log it; the dump redacts it).
    pub json: Value,
    pub last_updated: SystemTime,
}

/// Every accepted resource, by kind and name.
pub type Resources = BTreeMap<Kind, BTreeMap<String, Entry>>;

/// A response, as decoded from either stream kind.
#[derive(Debug, Clone, Default)]
pub struct Incoming {
    pub type_url: String,
    /// State of the world: the response's version.
    pub version_info: String,
    pub nonce: String,
    /// `(name, version, type_url, bytes)`; state-of-the-world resources have no name or version
    /// of their own (the name is read from the resource).
    pub resources: Vec<(Option<String>, String, String, Vec<u8>)>,
    /// Incremental: names removed.
    pub removed: Vec<String>,
}

/// A request to send.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outgoing {
    pub kind: Option<Kind>,
    pub type_url: String,
    /// State of the world: the names wanted (empty for a wildcard).
    pub resource_names: Vec<String>,
    /// State of the world: the last accepted version.
    pub version_info: String,
    pub nonce: String,
    /// Incremental.
    pub subscribe: Vec<String>,
    pub unsubscribe: Vec<String>,
    pub initial_versions: BTreeMap<String, String>,
    /// A NACK's reason.
    pub error: Option<String>,
}

/// What became of one response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Accepted { kind: Kind, version: String },
    Rejected { kind: Option<Kind>, message: String },
}

#[derive(Debug, Default)]
struct TypeState {
    /// Last accepted `version_info` (state of the world).
    version_info: String,
    /// Names the control plane was last asked for (named kinds).
    sent: Option<BTreeSet<String>>,
    /// Whether a first request went out on this connection.
    requested: bool,
}

/// Which stream a named resource comes on: the ADS stream, or the stream of its own
/// `api_config_source` to a cluster (Istio's SDS to pilot-agent).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Ads,
    Cluster(String),
}

/// One stream's state; `delta` picks the incremental protocol.
#[derive(Debug)]
pub struct Stream {
    delta: bool,
    kinds: Vec<Kind>,
    source: Source,
    types: BTreeMap<Kind, TypeState>,
}

impl Stream {
    /// A stream serving `kinds` (all five for ADS; secrets only on an SDS stream) from `source`.
    pub fn new(delta: bool, kinds: &[Kind], source: Source) -> Self {
        Stream {
            delta,
            kinds: kinds.to_vec(),
            source,
            types: kinds.iter().map(|k| (*k, TypeState::default())).collect(),
        }
    }

    /// The first requests of a (re)connected stream, in warming order.
    pub fn connected(&mut self, resources: &Resources) -> Vec<Outgoing> {
        for t in self.types.values_mut() {
            t.requested = false;
            t.sent = None;
        }
        self.subscriptions(resources)
    }

    /// Requests for kinds whose wanted names changed (or that were never asked for).
    pub fn subscriptions(&mut self, resources: &Resources) -> Vec<Outgoing> {
        let mut out = Vec::new();
        for kind in self.kinds.clone() {
            let wanted = wanted(kind, resources, &self.source);
            let delta = self.delta;
            let Some(t) = self.types.get_mut(&kind) else {
                continue;
            };
            match &wanted {
                None if t.requested => continue,
                Some(names) if t.sent.as_ref() == Some(names) => continue,
                Some(names) if names.is_empty() && !t.requested => continue,
                _ => {}
            }
            let mut o = Outgoing {
                kind: Some(kind),
                type_url: kind.type_url().to_owned(),
                ..Default::default()
            };
            let names = wanted.clone().unwrap_or_default();
            if delta {
                if !t.requested {
                    o.initial_versions = resources
                        .get(&kind)
                        .map(|m| {
                            m.iter()
                                .map(|(n, e)| (n.clone(), e.version.clone()))
                                .collect()
                        })
                        .unwrap_or_default();
                    o.subscribe = names.iter().cloned().collect();
                } else {
                    let before = t.sent.clone().unwrap_or_default();
                    o.subscribe = names.difference(&before).cloned().collect();
                    o.unsubscribe = before.difference(&names).cloned().collect();
                }
            } else {
                o.resource_names = names.iter().cloned().collect();
                o.version_info = t.version_info.clone();
            }
            t.requested = true;
            t.sent = wanted;
            out.push(o);
        }
        out
    }

    /// Handle one response. `apply` gets the candidate resources (the accepted ones with this
    /// update in) and says whether they can serve; on `Ok` they replace `resources`. Returns the
    /// ACK or NACK, then any subscription changes the update caused, and the verdict.
    pub fn respond(
        &mut self,
        resp: Incoming,
        resources: &mut Resources,
        apply: &mut dyn FnMut(&Resources) -> Result<(), SinkError>,
    ) -> (Vec<Outgoing>, Verdict) {
        let kind = Kind::from_type_url(&resp.type_url).filter(|k| self.types.contains_key(k));
        let Some(kind) = kind else {
            let message = format!("unexpected resource type {}", resp.type_url);
            let nack = Outgoing {
                type_url: resp.type_url.clone(),
                nonce: resp.nonce.clone(),
                error: Some(message.clone()),
                ..Default::default()
            };
            return (
                vec![nack],
                Verdict::Rejected {
                    kind: None,
                    message,
                },
            );
        };
        let result = candidate(kind, &resp, resources, self.delta)
            .map_err(|e| e.to_string())
            .and_then(|c| apply(&c).map(|()| c).map_err(|e| e.to_string()));
        let t = self.types.entry(kind).or_default();
        let mut ack = Outgoing {
            kind: Some(kind),
            type_url: resp.type_url.clone(),
            nonce: resp.nonce.clone(),
            ..Default::default()
        };
        if !self.delta {
            ack.resource_names = t.sent.clone().unwrap_or_default().into_iter().collect();
        }
        match result {
            Ok(c) => {
                *resources = c;
                t.version_info = resp.version_info.clone();
                ack.version_info = resp.version_info.clone();
                let mut out = vec![ack];
                out.extend(self.subscriptions(resources));
                let verdict = Verdict::Accepted {
                    kind,
                    version: resp.version_info,
                };
                (out, verdict)
            }
            Err(message) => {
                ack.version_info = t.version_info.clone();
                ack.error = Some(message.clone());
                let verdict = Verdict::Rejected {
                    kind: Some(kind),
                    message,
                };
                (vec![ack], verdict)
            }
        }
    }
}

/// Why a response's resources cannot be taken as they are (its NACK's message).
#[derive(Debug, thiserror::Error)]
pub enum ResponseError {
    #[error("a {} response holds a resource of type {type_url}", kind.noun())]
    WrongType { kind: Kind, type_url: String },
    #[error(transparent)]
    Bridge(#[from] bridge::BridgeError),
    #[error("a {} without a {}", .0.noun(), .0.name_field())]
    Unnamed(Kind),
    #[error("duplicate {} '{name}' in one response", kind.noun())]
    Duplicate { kind: Kind, name: String },
}

/// The accepted resources with one response's update in.
fn candidate(
    kind: Kind,
    resp: &Incoming,
    current: &Resources,
    delta: bool,
) -> Result<Resources, ResponseError> {
    let now = SystemTime::now();
    let mut next = current.clone();
    let map = next.entry(kind).or_default();
    if !delta && kind.wildcard() {
        map.clear();
    }
    let mut seen = BTreeSet::new();
    for (name, version, type_url, bytes) in &resp.resources {
        if type_url != kind.type_url() {
            return Err(ResponseError::WrongType {
                kind,
                type_url: type_url.clone(),
            });
        }
        let json = bridge::to_json(type_url, bytes)?;
        let own = json
            .get(kind.name_field())
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let name = match name {
            Some(n) if !n.is_empty() => n.clone(),
            _ => own,
        };
        if name.is_empty() {
            return Err(ResponseError::Unnamed(kind));
        }
        if !seen.insert(name.clone()) {
            return Err(ResponseError::Duplicate { kind, name });
        }
        let version = if delta {
            version.clone()
        } else {
            resp.version_info.clone()
        };
        map.insert(
            name,
            Entry {
                version,
                json,
                last_updated: now,
            },
        );
    }
    for name in &resp.removed {
        map.remove(name);
    }
    Ok(next)
}

/// An SDS stream of its own: whether it is incremental, and the request metadata it opens with
/// (its `grpc_services[0].initial_metadata`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SdsStream {
    pub delta: bool,
    pub initial_metadata: Vec<(String, String)>,
}

/// The `sds_config` source of one secret reference (`None`: a file), and its stream's options.
fn secret_source(r: &Value) -> Option<(Source, SdsStream)> {
    let c = r.get("sds_config")?;
    if c.get("ads").is_some() {
        return Some((Source::Ads, SdsStream::default()));
    }
    let api = c.get("api_config_source")?;
    let cluster = api
        .get("grpc_services")?
        .get(0)?
        .get("envoy_grpc")?
        .get("cluster_name")?
        .as_str()?;
    let delta = api.get("api_type").and_then(Value::as_str) == Some("DELTA_GRPC");
    // The resource holding it was accepted, so the source parses.
    let initial_metadata = quickshake_config::api_config_source(api, "")
        .map(|a| a.initial_metadata)
        .unwrap_or_default();
    let stream = SdsStream {
        delta,
        initial_metadata,
    };
    Some((Source::Cluster(cluster.to_owned()), stream))
}

/// Every secret reference of the accepted listeners and clusters: `(name, source, stream)`.
fn secret_refs(resources: &Resources) -> Vec<(String, Source, SdsStream)> {
    let mut out = Vec::new();
    let each = |k: Kind| resources.get(&k).into_iter().flat_map(|m| m.values());
    for e in each(Kind::Listener).chain(each(Kind::Cluster)) {
        find(&e.json, &mut |o| {
            let refs = o
                .get("tls_certificate_sds_secret_configs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .chain(o.get("validation_context_sds_secret_config"))
                .chain(o.get("session_ticket_keys_sds_secret_config"));
            for r in refs {
                if let (Some((source, stream)), Some(n)) =
                    (secret_source(r), r.get("name").and_then(Value::as_str))
                {
                    out.push((n.to_owned(), source, stream));
                }
            }
        });
    }
    out
}

/// The SDS streams of their own that the accepted resources need, by cluster name.
pub fn sds_streams(resources: &Resources) -> BTreeMap<String, SdsStream> {
    secret_refs(resources)
        .into_iter()
        .filter_map(|(_, s, stream)| match s {
            Source::Cluster(c) => Some((c, stream)),
            Source::Ads => None,
        })
        .collect()
}

/// The names a named kind wants on the stream of `source`, from the accepted listeners and
/// clusters; `None` for a wildcard kind.
pub fn wanted(kind: Kind, resources: &Resources, source: &Source) -> Option<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    let each = |k: Kind| resources.get(&k).into_iter().flat_map(|m| m.values());
    match kind {
        Kind::Listener | Kind::Cluster => return None,
        Kind::Route => {
            for e in each(Kind::Listener) {
                find(&e.json, &mut |o| {
                    if let Some(n) = o
                        .get("rds")
                        .and_then(|r| r.get("route_config_name"))
                        .and_then(Value::as_str)
                    {
                        names.insert(n.to_owned());
                    }
                });
            }
        }
        Kind::Endpoint => {
            for (name, e) in resources.get(&Kind::Cluster).into_iter().flatten() {
                if e.json.get("type").and_then(Value::as_str) == Some("EDS") {
                    let service = e
                        .json
                        .get("eds_cluster_config")
                        .and_then(|c| c.get("service_name"))
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty());
                    names.insert(service.unwrap_or(name).to_owned());
                }
            }
        }
        Kind::Secret => {
            names.extend(
                secret_refs(resources)
                    .into_iter()
                    .filter(|(_, s, _)| s == source)
                    .map(|(n, _, _)| n),
            );
        }
    }
    Some(names)
}

/// Call `f` on every object in `v`.
fn find(v: &Value, f: &mut dyn FnMut(&serde_json::Map<String, Value>)) {
    match v {
        Value::Object(o) => {
            f(o);
            for child in o.values() {
                find(child, f);
            }
        }
        Value::Array(a) => {
            for child in a {
                find(child, f);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::listener::v3::Listener;
    use prost::Message;

    fn cluster(name: &str, eds: bool) -> (Option<String>, String, String, Vec<u8>) {
        let mut c = Cluster {
            name: name.into(),
            ..Default::default()
        };
        if eds {
            c.cluster_discovery_type = Some(
                envoy_types::pb::envoy::config::cluster::v3::cluster::ClusterDiscoveryType::Type(3),
            );
        }
        (
            None,
            String::new(),
            Kind::Cluster.type_url().into(),
            c.encode_to_vec(),
        )
    }

    fn response(
        kind: Kind,
        version: &str,
        nonce: &str,
        resources: Vec<(Option<String>, String, String, Vec<u8>)>,
    ) -> Incoming {
        Incoming {
            type_url: kind.type_url().into(),
            version_info: version.into(),
            nonce: nonce.into(),
            resources,
            removed: Vec::new(),
        }
    }

    #[test]
    fn sotw_acks_nacks_and_follows_eds_names() {
        let mut s = Stream::new(false, &Kind::ALL, Source::Ads);
        let mut res = Resources::new();
        let first = s.connected(&res);
        let kinds: Vec<_> = first.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [Some(Kind::Cluster), Some(Kind::Listener)],
            "wildcards first, in warming order"
        );
        let (out, v) = s.respond(
            response(
                Kind::Cluster,
                "1",
                "n1",
                vec![cluster("a", true), cluster("b", false)],
            ),
            &mut res,
            &mut |_| Ok(()),
        );
        assert!(matches!(v, Verdict::Accepted { .. }));
        assert_eq!(
            (
                out[0].version_info.as_str(),
                out[0].nonce.as_str(),
                &out[0].error
            ),
            ("1", "n1", &None)
        );
        // The EDS cluster makes an EDS subscription for its name.
        assert_eq!(out[1].kind, Some(Kind::Endpoint));
        assert_eq!(out[1].resource_names, ["a"]);
        // A rejected update: NACK with the last accepted version; nothing changes.
        let (out, v) = s.respond(
            response(Kind::Cluster, "2", "n2", vec![cluster("c", false)]),
            &mut res,
            &mut |_| Err("Error adding/updating cluster(s) c: bad".into()),
        );
        assert!(matches!(v, Verdict::Rejected { .. }));
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].version_info.as_str(), out[0].nonce.as_str()),
            ("1", "n2")
        );
        assert!(out[0].error.as_deref().unwrap().contains("cluster(s) c"));
        assert_eq!(res[&Kind::Cluster].keys().collect::<Vec<_>>(), ["a", "b"]);
        // Reconnect: the last accepted version goes with the first request.
        let again = s.connected(&res);
        assert_eq!(again[0].version_info, "1");
        assert_eq!(again[1].kind, Some(Kind::Endpoint));
    }

    #[test]
    fn delta_subscribes_removes_and_resumes_with_versions() {
        let mut s = Stream::new(true, &Kind::ALL, Source::Ads);
        let mut res = Resources::new();
        s.connected(&res);
        let mut with_name = cluster("a", true);
        with_name.0 = Some("a".into());
        with_name.1 = "v7".into();
        let (out, _) = s.respond(
            response(Kind::Cluster, "", "n1", vec![with_name]),
            &mut res,
            &mut |_| Ok(()),
        );
        assert_eq!(out[1].subscribe, ["a"]);
        let mut removal = response(Kind::Cluster, "", "n2", Vec::new());
        removal.removed = vec!["a".into()];
        let (out, _) = s.respond(removal, &mut res, &mut |_| Ok(()));
        assert!(res[&Kind::Cluster].is_empty());
        assert_eq!(out[1].unsubscribe, ["a"]);
        // initial_resource_versions on reconnect.
        let l = Listener {
            name: "l".into(),
            ..Default::default()
        };
        let item = (
            Some("l".to_owned()),
            "v3".to_owned(),
            Kind::Listener.type_url().to_owned(),
            l.encode_to_vec(),
        );
        s.respond(
            response(Kind::Listener, "", "n3", vec![item]),
            &mut res,
            &mut |_| Ok(()),
        );
        let again = s.connected(&res);
        let lds = again
            .iter()
            .find(|o| o.kind == Some(Kind::Listener))
            .unwrap();
        assert_eq!(
            lds.initial_versions.get("l").map(String::as_str),
            Some("v3")
        );
    }

    #[test]
    fn a_response_of_another_type_is_nacked() {
        let mut s = Stream::new(false, &Kind::ALL, Source::Ads);
        let mut res = Resources::new();
        let mut r = response(Kind::Cluster, "1", "n", vec![cluster("a", false)]);
        r.resources[0].2 = Kind::Listener.type_url().into();
        let (out, _) = s.respond(r, &mut res, &mut |_| Ok(()));
        assert!(out[0]
            .error
            .as_deref()
            .unwrap()
            .contains("holds a resource of type"));
    }
}
