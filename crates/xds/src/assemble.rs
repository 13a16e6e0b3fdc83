//! From accepted resources to the configuration the data path serves: every resource parsed by
//! the configuration crate (the one parser), RDS route configurations put into the connection
//! managers that name them, SDS secrets into the TLS contexts, EDS endpoints beside their
//! clusters. Pure: no I/O beyond what parsing a resource reads (a `filename` data source).
//!
//! Every resource that cannot serve is named (a [`Fault`] each, not only the first), so one
//! update's refused resources are all known at once.
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

use crate::accept::{Fault, Refused};
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
    /// The control plane's resources it was built from besides its own (a listener's route
    /// configurations and secrets), for [`Fault::built_from`].
    pub uses: Vec<(Kind, String)>,
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

/// What is wrong with a resource the data path cannot serve (a [`Fault`]'s reason).
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

/// Resource `name` of `kind` cannot serve, for `reason`.
fn nack(kind: Kind, name: &str, reason: impl Into<NackReason>) -> Fault {
    Fault::new(kind, name, reason.into())
}

/// A listener's secret from the control plane, parsed, and the resource it came from; `None`
/// while it has not arrived (the listener warms).
fn control_plane_secret<'r>(
    resources: &'r Resources,
    sds: &SdsSecretRef,
) -> Result<Option<(&'r Value, SecretKind)>, Fault> {
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
) -> Fault {
    let why = NackReason::WrongSecret {
        path: sds.path.clone(),
        secret: sds.name.clone(),
        holds: got.what(),
        wanted,
    };
    nack(Kind::Listener, listener, why).built_from(vec![(Kind::Secret, sds.name.clone())])
}

fn each(resources: &Resources, kind: Kind) -> impl Iterator<Item = (&String, &crate::Entry)> {
    resources.get(&kind).into_iter().flatten()
}

/// Parse and resolve everything. An error names every resource that cannot serve, with the
/// field path, in the words Envoy's NACKs use ("Error adding/updating listener(s) web: ...").
/// A listener or cluster may name one of the bootstrap's static secrets, as in Envoy.
pub fn assemble(boot: &Bootstrap, resources: &Resources) -> Result<Assembled, Refused> {
    quickshake_config::with_static_secrets(boot, || assemble_in_scope(boot, resources))
}

fn assemble_in_scope(boot: &Bootstrap, resources: &Resources) -> Result<Assembled, Refused> {
    let mut out = Assembled::default();
    let mut faults = Vec::new();

    // Clusters first: routes and tcp proxies name them.
    let static_names: BTreeSet<&str> = boot.clusters.iter().map(|c| c.name.as_str()).collect();
    let mut all_clusters = Vec::new();
    for (name, e) in each(resources, Kind::Cluster) {
        if static_names.contains(name.as_str()) {
            faults.push(nack(Kind::Cluster, name, NackReason::StaticName("cluster")));
            continue;
        }
        match cluster_resource(&e.json, "") {
            Ok(c) => {
                all_clusters.push(&e.json);
                out.clusters.push(Built {
                    value: c,
                    fingerprint: fingerprint(&[&e.json]),
                    routes: 0,
                    uses: Vec::new(),
                });
            }
            Err(err) => faults.push(nack(Kind::Cluster, name, err)),
        }
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
            match cluster_load_assignment(&e.json, "") {
                Ok(eps) => {
                    let built = Built {
                        value: eps,
                        fingerprint: fingerprint(&[&e.json]),
                        routes: 0,
                        uses: Vec::new(),
                    };
                    out.endpoints.insert(b.value.name.clone(), built);
                }
                Err(err) => faults.push(nack(Kind::Endpoint, service_name, err)),
            }
        }
    }
    let mut names: Vec<String> = boot.clusters.iter().map(|c| c.name.clone()).collect();
    names.extend(out.clusters.iter().map(|b| b.value.name.clone()));

    let static_listeners: BTreeSet<&str> = boot.listeners.iter().map(|l| l.name.as_str()).collect();
    for (name, e) in each(resources, Kind::Listener) {
        if static_listeners.contains(name.as_str()) {
            let why = NackReason::StaticName("listener");
            faults.push(nack(Kind::Listener, name, why));
            continue;
        }
        match listener(resources, name, e, &names, &mut out.warming) {
            Ok(Some((l, parts, route_parts, uses))) => {
                let routes = fingerprint(&route_parts) ^ clusters_print.rotate_left(1);
                out.listeners.push(Built {
                    value: l,
                    fingerprint: fingerprint(&parts),
                    routes,
                    uses,
                });
            }
            Ok(None) => {}
            Err(f) => faults.push(f),
        }
    }
    // Static listeners whose secrets come from the control plane warm until those arrive, and
    // are rebuilt when they change, like a dynamic listener (as Envoy's static listeners do).
    // A secret of the wrong kind is the secret's fault: the listener itself is the bootstrap's.
    for l in boot
        .listeners
        .iter()
        .filter(|l| !l.control_plane_secrets().is_empty())
    {
        let mut l = l.clone();
        let mut parts = Vec::new();
        let mut uses = Vec::new();
        match secrets(
            resources,
            &l.name.clone(),
            &mut l,
            &mut parts,
            &mut uses,
            &mut out.warming,
        ) {
            Ok(true) => out.listeners.push(Built {
                value: l,
                fingerprint: fingerprint(&parts),
                routes: 0,
                uses,
            }),
            Ok(false) => {}
            Err(mut f) => {
                if f.kind == Kind::Listener {
                    if let Some((_, secret)) = f.built_from.first().cloned() {
                        f.kind = Kind::Secret;
                        f.name = secret;
                    }
                }
                faults.push(f);
            }
        }
    }
    if faults.is_empty() {
        return Ok(out);
    }
    // A route configuration or secret that two listeners use is named once.
    let mut seen = BTreeSet::new();
    faults.retain(|f| seen.insert((f.kind, f.name.clone())));
    Err(Refused(faults))
}

/// A listener as it serves, with its route configurations and secrets in, and what it was
/// built from (`(parts, route_parts)`, the JSON for its fingerprints; `uses`, the resources by
/// name); `None` while it warms (the reason pushed on `warming`).
#[allow(clippy::type_complexity)]
fn listener<'r>(
    resources: &'r Resources,
    name: &str,
    e: &'r crate::Entry,
    names: &[String],
    warming: &mut Vec<(String, String)>,
) -> Result<
    Option<(
        Listener,
        Vec<&'r Value>,
        Vec<&'r Value>,
        Vec<(Kind, String)>,
    )>,
    Fault,
> {
    let mut l = listener_resource(&e.json, names).map_err(|err| nack(Kind::Listener, name, err))?;
    l.name = name.to_owned();
    l.path = format!("listener '{name}'");
    let mut parts: Vec<&Value> = vec![&e.json];
    let mut route_parts: Vec<&Value> = Vec::new();
    let mut uses = Vec::new();
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
                        uses.push((Kind::Route, rds_name));
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
                        warming
                            .push((name.to_owned(), format!("route configuration '{rds_name}'")));
                        return Ok(None);
                    }
                }
            }
        }
    }
    if !secrets(resources, name, &mut l, &mut parts, &mut uses, warming)? {
        return Ok(None);
    }
    Ok(Some((l, parts, route_parts, uses)))
}

/// Put a listener's secrets from the control plane in place of their references (pushing
/// what they were built from on `parts` and `uses`); `false` while one has not arrived (the
/// reason pushed on `warming`).
fn secrets<'r>(
    resources: &'r Resources,
    name: &str,
    l: &mut Listener,
    parts: &mut Vec<&'r Value>,
    uses: &mut Vec<(Kind, String)>,
    warming: &mut Vec<(String, String)>,
) -> Result<bool, Fault> {
    for chain in &mut l.filter_chains {
        let Some(tls) = &mut chain.tls else { continue };
        let mut kept = Vec::new();
        for sds in std::mem::take(&mut tls.sds_certificates) {
            if sds.file().is_some() {
                kept.push(sds);
                continue;
            }
            let Some((json, kind)) = control_plane_secret(resources, &sds)? else {
                warming.push((name.to_owned(), format!("secret '{}'", sds.name)));
                return Ok(false);
            };
            let SecretKind::TlsCertificate(mut cert) = kind else {
                return Err(wrong_secret(name, &sds, &kind, "a tls_certificate"));
            };
            cert.path = format!("{} (secret '{}')", sds.path, sds.name);
            tls.certificates.push(*cert);
            parts.push(json);
            uses.push((Kind::Secret, sds.name.clone()));
        }
        tls.sds_certificates = kept;
        // Session ticket keys from the control plane replace the reference; a rotated key set
        // changes the listener's fingerprint, so its TLS contexts are rebuilt in place.
        if let Some(sds) = tls.session_ticket_keys_sds.take_if(|r| r.file().is_none()) {
            let Some((json, kind)) = control_plane_secret(resources, &sds)? else {
                warming.push((name.to_owned(), format!("secret '{}'", sds.name)));
                return Ok(false);
            };
            let SecretKind::SessionTicketKeys(keys) = kind else {
                return Err(wrong_secret(name, &sds, &kind, "session_ticket_keys"));
            };
            tls.session_ticket_keys = keys;
            parts.push(json);
            uses.push((Kind::Secret, sds.name.clone()));
        }
    }
    Ok(true)
}
