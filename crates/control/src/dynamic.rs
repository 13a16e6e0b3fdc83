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
//! Nothing changes unless the whole update builds: an error is returned for the NACK and the
//! previous configuration keeps serving. What runs is published in a [`ListenerView`] for the
//! admin endpoint's `/listeners`.

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
use quickshake_xds::{Resources, Sink, SinkError};

use crate::clusters;

/// Why an xDS update was refused (the NACK's `error_detail`): each names the listener or
/// cluster at fault, as Envoy's messages do.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DynamicError {
    /// Static and dynamic listeners together fail the bootstrap's address check.
    #[error("Error adding/updating listener(s) {listener}: {source}")]
    Addresses {
        listener: String,
        source: Box<ConfigError>,
    },
    #[error("Error adding/updating cluster(s) {cluster}: {source}")]
    Cluster {
        cluster: String,
        source: Box<ServerError>,
    },
    #[error("Error adding/updating cluster(s) {cluster}: {source}")]
    ClusterUpsert {
        cluster: String,
        source: Box<UpstreamError>,
    },
    /// A listener's route table (only its routes changed).
    #[error("Error adding/updating listener(s) {listener}: {source}")]
    Routes { listener: String, source: HttpError },
    #[error("Error adding/updating listener(s) {listener}: {source}")]
    Listener {
        listener: String,
        source: Box<ServerError>,
    },
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

    /// The bootstrap's listener address check, over static and dynamic listeners together.
    fn check_addresses(&self, a: &Assembled) -> Result<(), DynamicError> {
        let dynamic = a.listeners.iter().map(|b| &b.value);
        check_listener_addresses(
            self.boot.listeners.iter().chain(dynamic),
            self.boot.admin.as_ref(),
        )
        .map_err(|e| {
            let name = a
                .listeners
                .iter()
                .find(|b| e.path().is_some_and(|p| p.starts_with(&b.value.path)))
                .map_or("", |b| b.value.name.as_str());
            DynamicError::Addresses {
                listener: name.to_owned(),
                source: Box::new(e),
            }
        })
    }

    fn apply_clusters(&mut self, a: &Assembled) -> Result<(), DynamicError> {
        for b in &a.clusters {
            let c = &b.value;
            if self.cluster_prints.get(&c.name) == Some(&b.fingerprint) {
                continue;
            }
            let spec = clusters::spec(c).map_err(|e| DynamicError::Cluster {
                cluster: c.name.clone(),
                source: Box::new(e),
            })?;
            self.clusters
                .upsert(spec, &self.store)
                .map_err(|e| DynamicError::ClusterUpsert {
                    cluster: c.name.clone(),
                    source: Box::new(e),
                })?;
            self.cluster_prints.insert(c.name.clone(), b.fingerprint);
            self.endpoint_prints.remove(&c.name);
            tracing::info!(cluster = %c.name, "cluster added or updated");
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
            let addrs = b
                .value
                .iter()
                .filter_map(|e| {
                    let ip: std::net::IpAddr = e.host.trim_matches(['[', ']']).parse().ok()?;
                    Some(SocketAddr::new(ip, e.port))
                })
                .collect::<Vec<_>>();
            tracing::info!(cluster = %name, endpoints = addrs.len(), "endpoints updated");
            cluster.set_endpoints(addrs);
            self.endpoint_prints.insert(name.clone(), b.fingerprint);
        }
        Ok(())
    }

    fn apply_listeners(&mut self, a: &Assembled) -> Result<(), DynamicError> {
        let err = |l: &Listener| {
            let listener = l.name.clone();
            move |e| DynamicError::Listener {
                listener,
                source: Box::new(e),
            }
        };
        // Build everything that changed before touching what runs.
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
                    let running = act.shared.chains.load_full();
                    let mut new = Vec::new();
                    for (chain, fc) in running.iter().zip(&l.filter_chains) {
                        if let (Network::Http(rt), Some(hcm)) = (&chain.network, fc.http()) {
                            if let RouteSource::Static(rc) = &hcm.routes {
                                let table = RouteTable::build(
                                    rc.clone(),
                                    &self.clusters,
                                    &format!("{}.route_config", hcm.path),
                                )
                                .map_err(|source| {
                                    DynamicError::Routes {
                                        listener: l.name.clone(),
                                        source,
                                    }
                                })?;
                                new.push((rt.clone(), table));
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
                    let update = act
                        .shared
                        .build_update(l, &self.store, &self.providers, &self.clusters)
                        .map_err(err(l))?;
                    in_place.push((
                        l.name.clone(),
                        update,
                        (b.fingerprint, b.routes),
                        l.quic.clone(),
                    ));
                }
                _ => {
                    let shared =
                        ListenerShared::build(l, &self.store, &self.providers, &self.clusters)
                            .map_err(err(l))?;
                    fresh.push((l.clone(), Arc::new(shared), (b.fingerprint, b.routes)));
                }
            }
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
        for (l, shared, print) in fresh {
            // A listener that moved: stop the old one first, so the address is its own.
            self.listeners.remove(&l.name);
            let stop = self
                .workers
                .listen(&l, shared.clone(), &self.store)
                .map_err(err(&l))?;
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
        Ok(())
    }

    /// Apply an assembled update: nothing changes unless all of it builds.
    fn apply_assembled(&mut self, a: &Assembled) -> Result<(), DynamicError> {
        self.check_addresses(a)?;
        self.warming = !a.warming.is_empty();
        for w in &a.warming {
            if !self.warming_logged.contains(w) {
                tracing::info!(listener = %w.0, waiting_for = %w.1, "listener warming");
                self.warming_logged.push(w.clone());
            }
        }
        self.apply_clusters(a)?;
        let applied = self.apply_listeners(a);
        // A listener that failed to bind may have stopped its predecessor: publish either way.
        self.publish();
        applied
    }
}

impl Sink for DynamicConfig {
    fn apply(&mut self, resources: &Resources) -> Result<(), SinkError> {
        let a = assemble(&self.boot, resources)?;
        Ok(self.apply_assembled(&a)?)
    }

    fn warming(&self) -> bool {
        self.warming
    }
}
