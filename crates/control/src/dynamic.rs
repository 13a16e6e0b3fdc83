//! Configuration from a control plane, applied while the gateway serves: the xDS client's
//! [`Sink`]. Each accepted update is assembled into listeners and clusters
//! ([`quickshake_xds::assemble`]) and reconciled with what runs, by fingerprint:
//! - a new or changed cluster is built and put in place; a removed one goes (requests holding
//!   it finish); EDS endpoints replace a cluster's hosts without rebuilding it;
//! - a new listener is bound on every worker; when only its routes changed (RDS, or the
//!   clusters they name), the running connection managers get the new route tables, so the next
//!   request on an open connection uses them; a listener changed otherwise at the same address
//!   gets new filter chains in place (open connections keep theirs, as with certificate
//!   rotation); one that moved or was removed stops accepting, and its connections finish.
//!
//! Resource by resource, as Envoy's LDS and CDS: every listener or cluster that does not parse
//! or build is named in the refusal ([`Refused`], the NACK's text) and nothing is changed for
//! it; the client then puts those resources back to their accepted versions and applies again
//! ([`quickshake_xds::accept::settle`]), so the rest of the update serves and the refused ones
//! keep running as they were. Whatever is refused, the checks come before anything is touched,
//! so a refused set changes nothing beyond what the set without the refused resources changes.
//! What runs is published in a [`ListenerView`] for the admin endpoint's `/listeners`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use quickshake_config::{
    check_listener_addresses, Bootstrap, ConfigError, Listener, QuicOptions, RouteSource,
};
use quickshake_http::{HttpError, RouteTable};
use quickshake_keyprovider::Providers;
use quickshake_listener::{ListenerShared, Network, ServerError};
use quickshake_server::{ListenerStop, Workers};
use quickshake_stats::Store;
use quickshake_upstream::{ClusterManager, UpstreamError};
use quickshake_xds::assemble::{assemble, Assembled};
use quickshake_xds::{Fault, Kind, Refused, Resources, Sink};

use crate::clusters;

/// Why one listener or cluster of an xDS update cannot serve (a [`Fault`]'s reason; the fault
/// names the resource, the reason the field path).
#[derive(Debug, thiserror::Error)]
pub(crate) enum DynamicError {
    /// Static and dynamic listeners together fail the bootstrap's address check.
    #[error(transparent)]
    Addresses(Box<ConfigError>),
    /// The cluster's specification does not build.
    #[error(transparent)]
    Cluster(Box<ServerError>),
    #[error(transparent)]
    ClusterUpsert(Box<UpstreamError>),
    /// A route configuration's table (only routes changed).
    #[error(transparent)]
    Routes(HttpError),
    #[error(transparent)]
    Listener(Box<ServerError>),
}

fn fault(kind: Kind, name: &str, e: DynamicError) -> Fault {
    Fault::new(kind, name, e)
}

/// The listeners added over xDS that run now (name, address), by name; shared with the admin
/// endpoint, updated after every applied update.
#[derive(Clone, Default)]
pub struct ListenerView(Arc<arc_swap::ArcSwap<Vec<(String, SocketAddr)>>>);

impl ListenerView {
    pub fn load(&self) -> Arc<Vec<(String, SocketAddr)>> {
        self.0.load_full()
    }
}

struct Active {
    address: SocketAddr,
    /// A QUIC listener's options (a change applies in place, to new connections).
    quic: Option<QuicOptions>,
    fingerprint: u64,
    routes: u64,
    shared: Arc<ListenerShared>,
    stop: ListenerStop,
}

/// The running dynamic configuration.
pub struct DynamicConfig {
    boot: Bootstrap,
    workers: Workers,
    store: Store,
    providers: Arc<Providers>,
    clusters: ClusterManager,
    listeners: HashMap<String, Active>,
    cluster_prints: HashMap<String, u64>,
    endpoint_prints: HashMap<String, u64>,
    warming_logged: Vec<(String, String)>,
    warming: bool,
    view: ListenerView,
}

impl DynamicConfig {
    pub fn new(
        boot: Bootstrap,
        workers: Workers,
        store: Store,
        providers: Arc<Providers>,
        clusters: ClusterManager,
    ) -> Self {
        DynamicConfig {
            boot,
            workers,
            store,
            providers,
            clusters,
            listeners: HashMap::new(),
            cluster_prints: HashMap::new(),
            endpoint_prints: HashMap::new(),
            warming_logged: Vec::new(),
            warming: false,
            view: ListenerView::default(),
        }
    }

    /// What `/listeners` shows of the listeners this configuration runs.
    pub fn listener_view(&self) -> ListenerView {
        self.view.clone()
    }

    fn publish(&self) {
        let mut running: Vec<(String, SocketAddr)> = self
            .listeners
            .iter()
            .map(|(name, act)| (name.clone(), act.address))
            .collect();
        running.sort();
        self.view.0.store(Arc::new(running));
    }

    /// The bootstrap's listener address check, over static and dynamic listeners together: the
    /// listeners running unchanged first, then each other one in turn, so a listener that
    /// takes an address already in use is the one named.
    fn check_addresses(&self, a: &Assembled) -> Vec<Fault> {
        let unchanged = |b: &&quickshake_xds::assemble::Built<Listener>| {
            self.listeners
                .get(&b.value.name)
                .is_some_and(|act| act.fingerprint == b.fingerprint)
        };
        let (first, rest): (Vec<_>, Vec<_>) = a.listeners.iter().partition(unchanged);
        let mut taken: Vec<&Listener> = Vec::new();
        let mut faults = Vec::new();
        for b in first.into_iter().chain(rest) {
            let l = &b.value;
            // Static listeners with secrets from the control plane run as assembled ones.
            let statics = self.boot.listeners.iter();
            let statics = statics.filter(|s| s.control_plane_secrets().is_empty());
            let all = statics.chain(taken.iter().copied());
            match check_listener_addresses(all.chain([l]), self.boot.admin.as_ref()) {
                Ok(()) => taken.push(l),
                Err(e) => faults.push(fault(
                    Kind::Listener,
                    &l.name,
                    DynamicError::Addresses(Box::new(e)),
                )),
            }
        }
        faults
    }

    /// Put the update's clusters in place; a cluster that does not build is named and left as it
    /// was, and then nothing is removed (the set is applied again without it).
    fn apply_clusters(&mut self, a: &Assembled) -> Vec<Fault> {
        let mut faults = Vec::new();
        for b in &a.clusters {
            let c = &b.value;
            if self.cluster_prints.get(&c.name) == Some(&b.fingerprint) {
                continue;
            }
            let spec = match clusters::spec(c) {
                Ok(spec) => spec,
                Err(e) => {
                    let why = DynamicError::Cluster(Box::new(e));
                    faults.push(fault(Kind::Cluster, &c.name, why));
                    continue;
                }
            };
            if let Err(e) = self.clusters.upsert(spec, &self.store) {
                let why = DynamicError::ClusterUpsert(Box::new(e));
                faults.push(fault(Kind::Cluster, &c.name, why));
                continue;
            }
            self.cluster_prints.insert(c.name.clone(), b.fingerprint);
            self.endpoint_prints.remove(&c.name);
            tracing::info!(cluster = %c.name, "cluster added or updated");
        }
        if !faults.is_empty() {
            return faults;
        }
        let gone: Vec<String> = self
            .cluster_prints
            .keys()
            .filter(|n| !a.clusters.iter().any(|b| &b.value.name == *n))
            .cloned()
            .collect();
        for name in gone {
            self.clusters.remove(&name);
            self.cluster_prints.remove(&name);
            self.endpoint_prints.remove(&name);
            tracing::info!(cluster = %name, "cluster removed");
        }
        for (name, b) in &a.endpoints {
            if self.endpoint_prints.get(name) == Some(&b.fingerprint) {
                continue;
            }
            let Some(cluster) = self.clusters.cluster(name) else {
                continue;
            };
            // A bootstrap cluster fed by EDS is not among the update's clusters.
            let config = a.clusters.iter().map(|c| &c.value);
            let config = config.chain(&self.boot.clusters).find(|c| &c.name == name);
            let hosts = clusters::eds_hosts(config, &b.value);
            tracing::info!(cluster = %name, endpoints = hosts.len(), "endpoints updated");
            cluster.set_endpoints_with_sockets(hosts);
            self.endpoint_prints.insert(name.clone(), b.fingerprint);
        }
        Vec::new()
    }

    /// Put the update's listeners in place. Everything that changed is built before anything
    /// running is touched: a listener that does not build is named and nothing changes; one
    /// that does not bind is named and the others are applied.
    fn apply_listeners(&mut self, a: &Assembled) -> Vec<Fault> {
        // A listener that does not build may not build because of a route configuration or
        // secret it uses (`built_from`): an RDS or SDS update then refuses that one.
        let err = |l: &Listener, uses: &[(Kind, String)], e| {
            fault(Kind::Listener, &l.name, DynamicError::Listener(Box::new(e)))
                .built_from(uses.to_vec())
        };
        let mut faults = Vec::new();
        let mut in_place = Vec::new();
        let mut fresh = Vec::new();
        let mut tables = Vec::new();
        for b in &a.listeners {
            let l = &b.value;
            match self.listeners.get(&l.name) {
                Some(act) if act.fingerprint == b.fingerprint && act.routes == b.routes => {}
                Some(act) if act.fingerprint == b.fingerprint => {
                    // Only routes (or the clusters they name) changed: new route tables for the
                    // running connection managers, so requests on open connections see them too.
                    // A table that does not build names its route configuration.
                    let running = act.shared.chains.load_full();
                    let mut new = Vec::new();
                    for (chain, fc) in running.iter().zip(&l.filter_chains) {
                        if let (Network::Http(rt), Some(hcm)) = (&chain.network, fc.http()) {
                            if let RouteSource::Static(rc) = &hcm.routes {
                                match RouteTable::build(
                                    rc.clone(),
                                    &self.clusters,
                                    &format!("{}.route_config", hcm.path),
                                ) {
                                    Ok(table) => new.push((rt.clone(), table)),
                                    Err(e) => faults.push(fault(
                                        Kind::Route,
                                        &rc.name,
                                        DynamicError::Routes(e),
                                    )),
                                }
                            }
                        }
                    }
                    tables.push((l.name.clone(), new, b.routes));
                }
                Some(act)
                    if act.address == l.address
                        && act.quic.is_some() == l.quic.is_some()
                        && act.shared.proxy_protocol == l.proxy_protocol
                        && act.shared.ignore_global_conn_limit == l.ignore_global_conn_limit =>
                {
                    let update = match act.shared.build_update(
                        l,
                        &self.store,
                        &self.providers,
                        &self.clusters,
                    ) {
                        Ok(update) => update,
                        Err(e) => {
                            faults.push(err(l, &b.uses, e));
                            continue;
                        }
                    };
                    in_place.push((
                        l.name.clone(),
                        update,
                        (b.fingerprint, b.routes),
                        l.quic.clone(),
                    ));
                }
                _ => {
                    let shared = match ListenerShared::build(
                        l,
                        &self.store,
                        &self.providers,
                        &self.clusters,
                    ) {
                        Ok(shared) => shared,
                        Err(e) => {
                            faults.push(err(l, &b.uses, e));
                            continue;
                        }
                    };
                    let print = (b.fingerprint, b.routes);
                    fresh.push((l.clone(), Arc::new(shared), print, &b.uses));
                }
            }
        }
        if !faults.is_empty() {
            return faults;
        }
        for (name, new, routes) in tables {
            for (rt, table) in new {
                rt.set_routes(table);
            }
            if let Some(act) = self.listeners.get_mut(&name) {
                act.routes = routes;
            }
            tracing::info!(listener = %name, "routes updated; open connections use them for new requests");
        }
        for (name, update, print, quic) in in_place {
            if let Some(act) = self.listeners.get_mut(&name) {
                act.shared.update(update);
                if let Some(q) = quic.filter(|q| act.quic.as_ref() != Some(q)) {
                    act.stop.set_quic_options(&q);
                    act.quic = Some(q);
                }
                (act.fingerprint, act.routes) = print;
                tracing::info!(listener = %name, "listener updated in place; open connections keep their filter chains");
            }
        }
        let gone: Vec<String> = self
            .listeners
            .keys()
            .filter(|n| !a.listeners.iter().any(|b| &b.value.name == *n))
            .cloned()
            .collect();
        for name in gone {
            // Dropping the stop handle stops its accept loops.
            self.listeners.remove(&name);
            tracing::info!(listener = %name, "listener removed; its connections finish");
        }
        for (l, shared, print, uses) in fresh {
            // A listener that moved: stop the old one first, so the address is its own.
            self.listeners.remove(&l.name);
            let stop = match self.workers.listen(&l, shared.clone(), &self.store) {
                Ok(stop) => stop,
                Err(e) => {
                    faults.push(err(&l, uses, e));
                    continue;
                }
            };
            tracing::info!(listener = %l.name, address = %l.address, "listener added");
            self.listeners.insert(
                l.name.clone(),
                Active {
                    address: l.address,
                    quic: l.quic.clone(),
                    fingerprint: print.0,
                    routes: print.1,
                    shared,
                    stop,
                },
            );
        }
        faults
    }

    /// Apply an assembled update, or name each listener and cluster that cannot serve.
    fn apply_assembled(&mut self, a: &Assembled) -> Result<(), Refused> {
        let faults = self.check_addresses(a);
        if !faults.is_empty() {
            return Err(Refused(faults));
        }
        self.warming = !a.warming.is_empty();
        for w in &a.warming {
            if !self.warming_logged.contains(w) {
                tracing::info!(listener = %w.0, waiting_for = %w.1, "listener warming");
                self.warming_logged.push(w.clone());
            }
        }
        let faults = self.apply_clusters(a);
        if !faults.is_empty() {
            return Err(Refused(faults));
        }
        let faults = self.apply_listeners(a);
        // A listener that failed to bind may have stopped its predecessor: publish either way.
        self.publish();
        if faults.is_empty() {
            Ok(())
        } else {
            Err(Refused(faults))
        }
    }
}

impl Sink for DynamicConfig {
    fn apply(&mut self, resources: &Resources) -> Result<(), Refused> {
        let a = assemble(&self.boot, resources)?;
        self.apply_assembled(&a)
    }

    fn warming(&self) -> bool {
        self.warming
    }
}
