//! The protocol state of one xDS stream, as a pure state machine: what to ask for, and what to
//! answer to each response (ACK or NACK), for state-of-the-world and incremental streams alike.
//! It does no I/O: [`crate::stream`] feeds it responses and sends what it returns, and the
//! caller's `apply` decides whether a candidate set of resources can serve (a NACK otherwise).
//!
//! Rules kept here, as Envoy keeps them:
//! - An update is taken resource by resource ([`crate::accept`]): what the data path can serve
//!   is applied, each resource it cannot keeps its previous version (or stays absent) and is
//!   named in the NACK. A response that cannot be read (a resource of another type, one that
//!   does not decode or has no name) is rejected whole and changes nothing. A NACK carries the
//!   last accepted `version_info`, the response's nonce and an `error_detail`.
//! - LDS and CDS are wildcard subscriptions; RDS, EDS and SDS ask for the names the accepted
//!   listeners and clusters use, and the subscription follows them.
//! - On reconnect a state-of-the-world stream sends its last accepted versions, an incremental
//!   one its resources' versions (`initial_resource_versions`), so a control plane that was
//!   restarted sends only what changed, and the last accepted configuration serves meanwhile.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use serde_json::Value;

use crate::accept::{self, Fault, Refused};
use crate::bridge;
use crate::kind::Kind;

pub use crate::resources::{Entry, Resources, SinkError};

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
    Accepted {
        kind: Kind,
        version: String,
    },
    /// Part of the update was taken; the NACK names the resources that were not. `applied`:
    /// whether a resource of it was added, replaced or removed (Envoy then takes the update's
    /// version as the type's `version_info` in `/config_dump`).
    Partial {
        kind: Kind,
        version: String,
        message: String,
        applied: bool,
    },
    Rejected {
        kind: Option<Kind>,
        message: String,
    },
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
    /// The bootstrap's own secret references to a control plane ([`static_secret_refs`]).
    statics: Vec<SecretRef>,
}

impl Stream {
    /// A stream serving `kinds` (all five for ADS; secrets only on an SDS stream) from `source`.
    pub fn new(delta: bool, kinds: &[Kind], source: Source) -> Self {
        Stream {
            delta,
            kinds: kinds.to_vec(),
            source,
            types: kinds.iter().map(|k| (*k, TypeState::default())).collect(),
            statics: Vec::new(),
        }
    }

    /// The stream also asks for the secrets static listeners name ([`static_secret_refs`]).
    pub fn with_statics(mut self, statics: &[SecretRef]) -> Self {
        self.statics = statics.to_vec();
        self
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
            let wanted = wanted(kind, resources, &self.source, &self.statics);
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

    /// Handle one response. `apply` gets candidate resources (the accepted ones with this
    /// update in) and says which of them cannot serve; what it takes replaces `resources`, each
    /// resource it refuses keeps its accepted version ([`accept::settle`]). Returns the ACK or
    /// NACK, then any subscription changes the update caused, and the verdict.
    pub fn respond(
        &mut self,
        resp: Incoming,
        resources: &mut Resources,
        apply: &mut dyn FnMut(&Resources) -> Result<(), Refused>,
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
        let settled = candidate(kind, &resp, resources, self.delta)
            .map(|c| accept::settle(kind, resources, c.resources, &c.touched, c.refused, apply));
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
        let (taken, message, applied) = match settled {
            Ok(s) => (s.resources, s.refused.to_string(), s.applied),
            Err(e) => (None, e.to_string(), false),
        };
        let Some(taken) = taken else {
            ack.version_info = t.version_info.clone();
            ack.error = Some(message.clone());
            let verdict = Verdict::Rejected {
                kind: Some(kind),
                message,
            };
            return (vec![ack], verdict);
        };
        *resources = taken;
        let verdict = if message.is_empty() {
            t.version_info = resp.version_info.clone();
            ack.version_info = resp.version_info.clone();
            Verdict::Accepted {
                kind,
                version: resp.version_info,
            }
        } else {
            // Envoy's NACK carries the last version accepted whole, even when part of this
            // update now serves.
            ack.version_info = t.version_info.clone();
            ack.error = Some(message.clone());
            Verdict::Partial {
                kind,
                version: resp.version_info,
                message,
                applied,
            }
        };
        let mut out = vec![ack];
        out.extend(self.subscriptions(resources));
        (out, verdict)
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
}

/// The accepted resources with one response's update in, the names it adds, replaces or
/// removes, and what it refuses by itself.
struct Candidate {
    resources: Resources,
    touched: BTreeSet<String>,
    /// A name given twice: the first is taken, the second refused (as Envoy's LDS and CDS do);
    /// a resource that does not decode (an extension whose type quickshake does not know).
    refused: Vec<Fault>,
}

/// The second resource of one name in a response.
#[derive(Debug, thiserror::Error)]
#[error("duplicate {} {name} found", kind.noun())]
pub struct Duplicate {
    kind: Kind,
    name: String,
}

fn candidate(
    kind: Kind,
    resp: &Incoming,
    current: &Resources,
    delta: bool,
) -> Result<Candidate, ResponseError> {
    let now = SystemTime::now();
    let mut next = current.clone();
    let map = next.entry(kind).or_default();
    let mut touched = BTreeSet::new();
    if !delta && kind.wildcard() {
        // State of the world: what the response leaves out is removed.
        touched.extend(std::mem::take(map).into_keys());
    }
    let mut seen = BTreeSet::new();
    let mut refused = Vec::new();
    for (name, version, type_url, bytes) in &resp.resources {
        if type_url != kind.type_url() {
            return Err(ResponseError::WrongType {
                kind,
                type_url: type_url.clone(),
            });
        }
        let json = match bridge::to_json(type_url, bytes) {
            Ok(json) => json,
            Err(e) => {
                // Refused alone, as Envoy refuses a resource that names an extension it does
                // not have: its accepted version (if any) keeps serving. Only a resource with
                // no readable name fails the whole update.
                let name = match name {
                    Some(n) if !n.is_empty() => Some(n.clone()),
                    _ => bridge::resource_name(type_url, bytes, kind.name_field()),
                };
                let Some(name) = name.filter(|n| !n.is_empty()) else {
                    return Err(e.into());
                };
                if !seen.insert(name.clone()) {
                    continue;
                }
                match current.get(&kind).and_then(|m| m.get(&name)) {
                    Some(old) => {
                        map.insert(name.clone(), old.clone());
                    }
                    None => {
                        map.remove(&name);
                    }
                }
                refused.push(Fault::new(kind, name, e));
                continue;
            }
        };
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
            let why = Duplicate {
                kind,
                name: name.clone(),
            };
            refused.push(Fault::new(kind, name, why));
            continue;
        }
        let version = if delta {
            version.clone()
        } else {
            resp.version_info.clone()
        };
        touched.insert(name.clone());
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
        if map.remove(name).is_some() {
            touched.insert(name.clone());
        }
    }
    Ok(Candidate {
        resources: next,
        touched,
        refused,
    })
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

/// A secret reference to a control plane: `(name, source, stream)`.
pub type SecretRef = (String, Source, SdsStream);

/// The secret references of static listeners whose secrets come from a control plane (over ADS
/// or an SDS stream of their own), as Envoy subscribes to them at start.
pub fn static_secret_refs(listeners: &[quickshake_config::Listener]) -> Vec<SecretRef> {
    listeners
        .iter()
        .flat_map(|l| l.control_plane_secrets())
        .filter_map(|r| {
            let (source, stream) = match &r.source.kind {
                quickshake_config::ConfigSourceKind::Ads => (Source::Ads, SdsStream::default()),
                quickshake_config::ConfigSourceKind::Api(a) => (
                    Source::Cluster(a.cluster_name.clone()),
                    SdsStream {
                        delta: a.api_type == quickshake_config::XdsApiType::DeltaGrpc,
                        initial_metadata: a.initial_metadata.clone(),
                    },
                ),
                quickshake_config::ConfigSourceKind::Path(_) => return None,
            };
            Some((r.name.clone(), source, stream))
        })
        .collect()
}

/// Every secret reference of the accepted listeners and clusters, and the static ones.
fn secret_refs(resources: &Resources, statics: &[SecretRef]) -> Vec<SecretRef> {
    let mut out = statics.to_vec();
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

/// The SDS streams of their own that the accepted resources and static listeners need, by
/// cluster name.
pub fn sds_streams(resources: &Resources, statics: &[SecretRef]) -> BTreeMap<String, SdsStream> {
    secret_refs(resources, statics)
        .into_iter()
        .filter_map(|(_, s, stream)| match s {
            Source::Cluster(c) => Some((c, stream)),
            Source::Ads => None,
        })
        .collect()
}

/// The names a named kind wants on the stream of `source`, from the accepted listeners and
/// clusters (and, for secrets, the static listeners' `statics`); `None` for a wildcard kind.
pub fn wanted(
    kind: Kind,
    resources: &Resources,
    source: &Source,
    statics: &[SecretRef],
) -> Option<BTreeSet<String>> {
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
                secret_refs(resources, statics)
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
#[path = "state_tests.rs"]
mod tests;
