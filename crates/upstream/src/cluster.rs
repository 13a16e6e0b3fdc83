//! The cluster manager and its clusters: building them from [`ClusterSpec`]s,
//! and each cluster's entry points (send a request, open a raw stream, take a
//! retry slot, resolve, inspect).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock, PoisonError, RwLock, Weak};
use std::time::Instant;

use http::{Request, Response};

use crate::breaker::{Breakers, Permit};
use crate::connect::{self, Connector, UpstreamStream};
use crate::error::{OverflowKind, UpstreamError};
use crate::health::HostStatus;
use crate::hosts::{Balancing, HostSet};
use crate::outlier::Detector;
use crate::pool::{Pools, RequestBody};
use crate::request::{self, UpstreamBody};
use crate::shared::Shared;
use crate::spec::{ClusterSpec, Limits, Protocol};
use crate::stats::{ClusterStats, HealthCheckStats};

/// All clusters, by name. Cloning shares them. Static clusters are built once; clusters from a
/// control plane are added, replaced and removed while the gateway runs ([`Self::upsert`],
/// [`Self::remove`]): a lookup after the change sees the new set, and whoever holds a
/// [`Cluster`] keeps it (its pools and requests in flight) until it lets go.
#[derive(Clone)]
pub struct ClusterManager {
    clusters: Arc<RwLock<Arc<HashMap<String, Cluster>>>>,
    /// Where health checks and outlier detection run, once [`Self::start_background`] is called.
    background: Arc<OnceLock<tokio::runtime::Handle>>,
}

impl std::fmt::Debug for ClusterManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterManager")
            .field("clusters", &self.names())
            .finish()
    }
}

impl ClusterManager {
    /// Builds every cluster (TLS contexts, static hosts, stats) and starts
    /// nothing: DNS resolution and connections happen on first use.
    pub fn new(
        specs: Vec<ClusterSpec>,
        store: &quickshake_stats::Store,
    ) -> Result<Self, UpstreamError> {
        let mut clusters = HashMap::with_capacity(specs.len());
        for spec in specs {
            if clusters.contains_key(&spec.name) {
                return Err(UpstreamError::Config {
                    cluster: spec.name,
                    reason: "duplicate cluster name".into(),
                });
            }
            let cluster = Cluster::new(spec, store, false)?;
            clusters.insert(cluster.name().to_owned(), cluster);
        }
        Ok(ClusterManager {
            clusters: Arc::new(RwLock::new(Arc::new(clusters))),
            background: Arc::new(OnceLock::new()),
        })
    }

    /// Starts the clusters' active health checks and outlier detection on `handle` (one task
    /// per cluster and kind, ending with their cluster); clusters added later start theirs
    /// there too. Only the first call counts.
    pub fn start_background(&self, handle: tokio::runtime::Handle) {
        if self.background.set(handle.clone()).is_err() {
            return;
        }
        for c in self.current().values() {
            c.spawn_background(&handle);
        }
    }

    fn current(&self) -> Arc<HashMap<String, Cluster>> {
        self.clusters
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The cluster `name`.
    pub fn cluster(&self, name: &str) -> Option<Cluster> {
        self.current().get(name).cloned()
    }

    /// Names of all clusters, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.current().keys().cloned().collect();
        v.sort_unstable();
        v
    }

    /// Build a cluster and put it in place of the one of the same name, if any.
    pub fn upsert(
        &self,
        spec: ClusterSpec,
        store: &quickshake_stats::Store,
    ) -> Result<Cluster, UpstreamError> {
        let cluster = Cluster::new(spec, store, true)?;
        if let Some(h) = self.background.get() {
            cluster.spawn_background(h);
        }
        let mut guard = self
            .clusters
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut next = HashMap::clone(&guard);
        next.insert(cluster.name().to_owned(), cluster.clone());
        *guard = Arc::new(next);
        Ok(cluster)
    }

    /// Take a cluster out; whether it was there.
    pub fn remove(&self, name: &str) -> bool {
        let mut guard = self
            .clusters
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if !guard.contains_key(name) {
            return false;
        }
        let mut next = HashMap::clone(&guard);
        next.remove(name);
        *guard = Arc::new(next);
        true
    }
}

/// One upstream cluster. Cloning shares it.
#[derive(Clone)]
pub struct Cluster {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.shared.name)
            .field("protocol", &self.shared.protocol)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    fn new(
        spec: ClusterSpec,
        store: &quickshake_stats::Store,
        added_via_api: bool,
    ) -> Result<Self, UpstreamError> {
        let stats = ClusterStats::new(store, &spec.name);
        let health_check = spec
            .health_check
            .map(|hc| (hc, HealthCheckStats::new(stats.scope())));
        let outlier = spec.outlier.map(|o| Detector::new(o, stats.scope()));
        let tls = spec
            .tls
            .as_ref()
            .map(|t| connect::client_tls(&spec.name, t, spec.protocol))
            .transpose()?;
        let matched = spec
            .socket_matches
            .iter()
            .map(|t| {
                t.as_ref()
                    .map(|t| connect::client_tls(&spec.name, t, spec.protocol))
                    .transpose()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let hosts = HostSet::new(
            &spec.name,
            spec.discovery,
            spec.endpoints,
            spec.dns_refresh_rate,
            stats.clone(),
            Balancing {
                health_checked: health_check.is_some(),
                panic_threshold: spec.healthy_panic_threshold,
                dns_family: spec.dns_family,
                ignore_health_on_host_removal: spec.ignore_health_on_host_removal,
            },
        )?;
        let breakers = Breakers::new(spec.limits);
        let host_sockets = spec.host_sockets;
        let cluster = Cluster {
            shared: Arc::new(Shared {
                name: spec.name,
                lb: spec.lb,
                protocol: spec.protocol,
                http2_windows: spec.http2_windows,
                hosts: Arc::new(hosts),
                connector: Connector {
                    timeout: spec.connect_timeout,
                    tls,
                    matched,
                    by_host: Default::default(),
                    breakers: breakers.clone(),
                    stats: stats.clone(),
                },
                breakers,
                stats,
                pools: Pools::new(spec.idle_timeout, spec.max_requests_per_connection),
                limits: spec.limits,
                health_check,
                outlier,
                added_via_api,
            }),
        };
        cluster.shared.connector.set_host_sockets(host_sockets);
        Ok(cluster)
    }

    /// Spawns this cluster's health-check and outlier-detection loops on `rt`.
    fn spawn_background(&self, rt: &tokio::runtime::Handle) {
        let weak = Arc::downgrade(&self.shared);
        if let Some((spec, stats)) = &self.shared.health_check {
            rt.spawn(crate::health_check::run(
                weak.clone(),
                spec.clone(),
                stats.clone(),
            ));
        }
        if let Some(d) = &self.shared.outlier {
            rt.spawn(outlier_loop(weak, d.spec.interval));
        }
    }

    /// Sends one request to an endpoint chosen by the load balancer, over a
    /// pooled connection of this worker (opened if needed).
    ///
    /// The request may come in any downstream form (origin-form with `Host`,
    /// or a URI with an authority from HTTP/2, HTTP/3 or an absolute-form
    /// target): HTTP/1.1 sends origin-form with `Host` from the authority
    /// ([`crate::to_h1_form`]); HTTP/2 keeps a URI's `:scheme`/`:authority` and
    /// completes an origin-form one with the cluster's scheme and `Host`. Charges `upstream_rq_total`, `upstream_rq_<code>` and
    /// `upstream_rq_<N>xx` for the response (do not charge those again), and
    /// `upstream_rq_time` when the returned body ends. A stale pooled HTTP/1.1
    /// connection that never took the request is skipped transparently; every
    /// other failure is returned for the router to retry or answer.
    pub async fn send(
        &self,
        req: Request<RequestBody>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        request::send(&self.shared, req).await
    }

    /// Opens a raw stream (TLS when the cluster has a TLS context) to an
    /// endpoint chosen by the load balancer, for TCP proxying and upgrades.
    /// Charges `upstream_cx_*` and `max_connections`, not requests.
    pub async fn connect(&self) -> Result<UpstreamStream, UpstreamError> {
        let sh = &self.shared;
        sh.hosts.ensure_resolved().await;
        let host = sh
            .hosts
            .pick(sh.lb, None)
            .ok_or(UpstreamError::NoHealthyEndpoint)?;
        sh.connector.open(&host).await
    }

    /// Takes a `max_retries` slot for one retry, held until the permit drops;
    /// on overflow counts `upstream_rq_retry_overflow` and fails. It does not
    /// count `upstream_rq_retry`: the router does (`stats().rq_retry.inc()`).
    pub fn try_retry(&self) -> Result<Permit, UpstreamError> {
        self.shared
            .breakers
            .acquire(OverflowKind::Retries, &self.shared.stats)
    }

    /// Resolves a DNS cluster now if it never was (a no-op otherwise, and for
    /// static clusters); [`Cluster::send`] and [`Cluster::connect`] do it themselves.
    pub async fn resolve(&self) {
        self.shared.hosts.ensure_resolved().await;
    }

    /// EDS: replaces the cluster's hosts (see `HostSet::set_endpoints`); all use the
    /// cluster's `transport_socket`.
    pub fn set_endpoints(&self, addrs: Vec<SocketAddr>) {
        self.set_endpoints_with_sockets(addrs.into_iter().map(|a| (a, None)).collect());
    }

    /// EDS: replaces the cluster's hosts, each with the `transport_socket_matches` entry it
    /// uses (an index into [`ClusterSpec::socket_matches`]; `None`: the cluster's `tls`).
    /// Pooled connections of a host that stays keep the socket they were opened with.
    pub fn set_endpoints_with_sockets(&self, hosts: Vec<(SocketAddr, Option<usize>)>) {
        self.shared
            .connector
            .set_host_sockets(hosts.iter().filter_map(|(a, i)| Some((*a, (*i)?))));
        self.shared
            .hosts
            .set_endpoints(hosts.into_iter().map(|(a, _)| a).collect());
    }

    /// The current members (for `/clusters`-style output).
    pub fn endpoints(&self) -> Vec<SocketAddr> {
        self.shared
            .hosts
            .snapshot()
            .iter()
            .map(|h| h.addr)
            .collect()
    }

    pub fn name(&self) -> &str {
        &self.shared.name
    }

    pub fn protocol(&self) -> Protocol {
        self.shared.protocol
    }

    /// Whether connections use TLS.
    pub fn is_tls(&self) -> bool {
        self.shared.connector.tls.is_some()
    }

    pub fn stats(&self) -> &ClusterStats {
        &self.shared.stats
    }

    /// Every host with its health flags and counters (for `/clusters`).
    pub fn host_statuses(&self) -> Vec<HostStatus> {
        self.shared
            .hosts
            .snapshot()
            .iter()
            .map(|h| {
                let active = h.active_rq.load(std::sync::atomic::Ordering::Relaxed);
                HostStatus::of(h.addr, &h.health, active)
            })
            .collect()
    }

    /// The default-priority circuit breakers.
    pub fn limits(&self) -> Limits {
        self.shared.limits
    }

    pub fn has_outlier_detection(&self) -> bool {
        self.shared.outlier.is_some()
    }

    /// Whether a control plane (CDS) added it.
    pub fn added_via_api(&self) -> bool {
        self.shared.added_via_api
    }
}

/// Outlier detection's periodic pass, every `interval` until the cluster is dropped.
async fn outlier_loop(cluster: Weak<Shared>, interval: std::time::Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(sh) = cluster.upgrade() else { return };
        if let Some(d) = &sh.outlier {
            d.on_interval(&sh.hosts, Instant::now());
        }
    }
}
