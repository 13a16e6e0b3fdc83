//! From accepted resources to the configuration the data path serves: every resource parsed by
//! the configuration crate (the one parser), RDS route configurations put into the connection
//! managers that name them, SDS secrets into the TLS contexts, EDS endpoints beside their
//! clusters. Pure: no I/O beyond what parsing a resource reads (a `filename` data source).
//!
//! Warming, as Envoy does it: a listener whose route configuration or secret has not arrived
//! is left out (it is not served yet) and listed in [`Assembled::warming`]; an EDS cluster
//! serves with no endpoints (503 `UH`) until its assignment arrives.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use quickshake_config::{
    cluster_load_assignment, cluster_resource, listener_resource, route_configuration,
    secret_resource, Bootstrap, Cluster, ClusterDiscovery, Endpoint, Listener, NetworkFilter,
    RouteConfig, RouteSource, SdsSecretRef, SecretKind,
};
use serde_json::Value;

use crate::kind::Kind;
use crate::state::Resources;

/// A parsed resource and a fingerprint of everything it was built from: equal fingerprints
/// mean nothing to rebuild. For a listener, `fingerprint` covers the listener and its secrets,
/// `routes` its route configurations and the clusters they may name: when only `routes`
/// changed, the new route tables can be installed in the running connection managers.
#[derive(Debug, Clone)]
pub struct Built<T> {
    pub value: T,
    pub fingerprint: u64,
    pub routes: u64,
}

/// What the data path should serve besides the static bootstrap.
#[derive(Debug, Clone, Default)]
pub struct Assembled {
    pub listeners: Vec<Built<Listener>>,
    pub clusters: Vec<Built<Cluster>>,
    /// EDS clusters' endpoints, by cluster name.
    pub endpoints: BTreeMap<String, Built<Vec<Endpoint>>>,
    /// Listeners waiting for a route configuration or secret: `(name, what)`.
    pub warming: Vec<(String, String)>,
}

fn fingerprint(parts: &[&Value]) -> u64 {
    let mut h = DefaultHasher::new();
    for p in parts {
        p.to_string().hash(&mut h);
    }
    h.finish()
}

/// Why a set of resources cannot be served: the resource and why, displayed in the words
/// Envoy's NACKs use ("Error adding/updating listener(s) web: ..."), the message the control
/// plane gets back.
#[derive(Debug, thiserror::Error)]
#[error("Error adding/updating {}(s) {name}: {reason}", kind.noun())]
pub struct Nack {
    pub kind: Kind,
    pub name: String,
    #[source]
    pub reason: NackReason,
}

/// What is wrong with the resource a [`Nack`] names.
#[derive(Debug, thiserror::Error)]
pub enum NackReason {
    /// The resource does not parse or is not one quickshake serves.
    #[error(transparent)]
    Config(#[from] quickshake_config::ConfigError),
    /// A static resource of the bootstrap has this name (`"cluster"`, `"listener"`).
    #[error("a static {0} has this name")]
    StaticName(&'static str),
    /// A listener's secret reference names a secret of another kind.
    #[error("{path}: secret '{secret}' holds {holds}, not {wanted}")]
    WrongSecret {
        path: String,
        secret: String,
        holds: &'static str,
        wanted: &'static str,
    },
}

/// The NACK's text, for sinks that answer with a message.
/// A NACK of `kind` resource `name`.
fn nack(kind: Kind, name: &str, reason: impl Into<NackReason>) -> Nack {
    Nack {
        kind,
        name: name.to_owned(),
        reason: reason.into(),
    }
}

/// A listener's secret from the control plane, parsed, and the resource it came from; `None`
/// while it has not arrived (the listener warms).
fn control_plane_secret<'r>(
    resources: &'r Resources,
    sds: &SdsSecretRef,
) -> Result<Option<(&'r Value, SecretKind)>, Nack> {
    let Some(s) = resources.get(&Kind::Secret).and_then(|m| m.get(&sds.name)) else {
        return Ok(None);
    };
    let (_, kind) =
        secret_resource(&s.json, "").map_err(|err| nack(Kind::Secret, &sds.name, err))?;
    Ok(Some((&s.json, kind)))
}

/// The NACK for a listener whose secret reference names a secret of another kind.
fn wrong_secret(
    listener: &str,
    sds: &SdsSecretRef,
    got: &SecretKind,
    wanted: &'static str,
) -> Nack {
    let why = NackReason::WrongSecret {
        path: sds.path.clone(),
        secret: sds.name.clone(),
        holds: got.what(),
        wanted,
    };
    nack(Kind::Listener, listener, why)
}

fn each(resources: &Resources, kind: Kind) -> impl Iterator<Item = (&String, &crate::Entry)> {
    resources.get(&kind).into_iter().flatten()
}

/// Parse and resolve everything. An error names the resource and the field path, in the words
/// Envoy's NACKs use ("Error adding/updating listener(s) web: ...").
pub fn assemble(boot: &Bootstrap, resources: &Resources) -> Result<Assembled, Nack> {
    let mut out = Assembled::default();

    // Clusters first: routes and tcp proxies name them.
    let static_names: BTreeSet<&str> = boot.clusters.iter().map(|c| c.name.as_str()).collect();
    let mut all_clusters = Vec::new();
    for (name, e) in each(resources, Kind::Cluster) {
        if static_names.contains(name.as_str()) {
            return Err(nack(Kind::Cluster, name, NackReason::StaticName("cluster")));
        }
        let c = cluster_resource(&e.json, "").map_err(|err| nack(Kind::Cluster, name, err))?;
        all_clusters.push(&e.json);
        out.clusters.push(Built {
            value: c,
            fingerprint: fingerprint(&[&e.json]),
            routes: 0,
        });
    }
    let clusters_print = fingerprint(&all_clusters);
    for b in &out.clusters {
        if let ClusterDiscovery::Eds { service_name, .. } = &b.value.discovery {
            let Some(e) = resources
                .get(&Kind::Endpoint)
                .and_then(|m| m.get(service_name))
            else {
                continue;
            };
            let eps = cluster_load_assignment(&e.json, "")
                .map_err(|err| nack(Kind::Endpoint, service_name, err))?;
            out.endpoints.insert(
                b.value.name.clone(),
                Built {
                    value: eps,
                    fingerprint: fingerprint(&[&e.json]),
                    routes: 0,
                },
            );
        }
    }
    let mut names: Vec<String> = boot.clusters.iter().map(|c| c.name.clone()).collect();
    names.extend(out.clusters.iter().map(|b| b.value.name.clone()));

    let static_listeners: BTreeSet<&str> = boot.listeners.iter().map(|l| l.name.as_str()).collect();
    'listeners: for (name, e) in each(resources, Kind::Listener) {
        if static_listeners.contains(name.as_str()) {
            return Err(nack(
                Kind::Listener,
                name,
                NackReason::StaticName("listener"),
            ));
        }
        let mut l =
            listener_resource(&e.json, &names).map_err(|err| nack(Kind::Listener, name, err))?;
        l.name.clone_from(name);
        l.path = format!("listener '{name}'");
        let mut parts: Vec<&Value> = vec![&e.json];
        let mut route_parts: Vec<&Value> = Vec::new();
        for chain in &mut l.filter_chains {
            if let NetworkFilter::Http(hcm) = &mut chain.network {
                if let RouteSource::Rds {
                    route_config_name,
                    config_source,
                } = &hcm.routes
                {
                    let rds_name = route_config_name.clone();
                    let deadline = config_source.initial_fetch_deadline();
                    match resources.get(&Kind::Route).and_then(|m| m.get(&rds_name)) {
                        Some(r) => {
                            let rc = route_configuration(&r.json, "")
                                .map_err(|err| nack(Kind::Route, &rds_name, err))?;
                            route_parts.push(&r.json);
                            hcm.routes = RouteSource::Static(rc);
                        }
                        // Envoy serves a warming listener once its route configuration's
                        // initial_fetch_timeout has passed: with no routes (404) until it comes.
                        None if deadline
                            .is_some_and(|d| e.last_updated.elapsed().unwrap_or_default() >= d) =>
                        {
                            hcm.routes = RouteSource::Static(RouteConfig {
                                name: rds_name,
                                ..RouteConfig::default()
                            });
                        }
                        None => {
                            out.warming
                                .push((name.clone(), format!("route configuration '{rds_name}'")));
                            continue 'listeners;
                        }
                    }
                }
            }
            let Some(tls) = &mut chain.tls else { continue };
            let mut kept = Vec::new();
            for sds in std::mem::take(&mut tls.sds_certificates) {
                if sds.file().is_some() {
                    kept.push(sds);
                    continue;
                }
                let Some((json, kind)) = control_plane_secret(resources, &sds)? else {
                    out.warming
                        .push((name.clone(), format!("secret '{}'", sds.name)));
                    continue 'listeners;
                };
                let SecretKind::TlsCertificate(mut cert) = kind else {
                    return Err(wrong_secret(name, &sds, &kind, "a tls_certificate"));
                };
                cert.path = format!("{} (secret '{}')", sds.path, sds.name);
                tls.certificates.push(*cert);
                parts.push(json);
            }
            tls.sds_certificates = kept;
            // Session ticket keys from the control plane replace the reference; a rotated key set
            // changes the listener's fingerprint, so its TLS contexts are rebuilt in place.
            if let Some(sds) = tls.session_ticket_keys_sds.take_if(|r| r.file().is_none()) {
                let Some((json, kind)) = control_plane_secret(resources, &sds)? else {
                    out.warming
                        .push((name.clone(), format!("secret '{}'", sds.name)));
                    continue 'listeners;
                };
                let SecretKind::SessionTicketKeys(keys) = kind else {
                    return Err(wrong_secret(name, &sds, &kind, "session_ticket_keys"));
                };
                tls.session_ticket_keys = keys;
                parts.push(json);
            }
        }
        let routes = fingerprint(&route_parts) ^ clusters_print.rotate_left(1);
        out.listeners.push(Built {
            value: l,
            fingerprint: fingerprint(&parts),
            routes,
        });
    }
    Ok(out)
}
