//! Endpoint discovery (static, STRICT_DNS, LOGICAL_DNS, EDS) and load balancing. EDS hosts are
//! whatever [`HostSet::set_endpoints`] last installed (none at first).
//!
//! DNS clusters resolve lazily: the first request resolves inline (on the
//! worker's runtime, via `tokio::net::lookup_host`) and then starts one small
//! dedicated thread per cluster that re-resolves every `dns_refresh_rate` with
//! the blocking resolver. The thread holds only a weak reference and exits
//! once the cluster is dropped. A failed (or empty) resolution of a name keeps
//! that name's last good addresses and counts `update_failure`.
//!
//! Balancing skips hosts that failed their active health check or were ejected by outlier
//! detection (see `health`); when fewer than `healthy_panic_threshold` percent of the hosts
//! are healthy, it uses every host and counts `lb_healthy_panic` (Envoy's panic mode).

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;

use crate::hash_lb::HashTable;
use crate::health::HostHealth;
use crate::spec::{Discovery, DnsFamily, LbPolicy};
use crate::stats::ClusterStats;
use crate::UpstreamError;

/// One upstream address.
#[derive(Debug)]
pub(crate) struct Host {
    pub(crate) addr: SocketAddr,
    /// Requests in flight to this host (for least-request balancing).
    pub(crate) active_rq: AtomicU64,
    pub(crate) health: HostHealth,
    /// Service discovery removed it while its active health check passed: it stays (and takes
    /// traffic) until a check fails (Envoy's `PENDING_DYNAMIC_REMOVAL`).
    pub(crate) pending_removal: AtomicBool,
}

impl Host {
    pub(crate) fn new(addr: SocketAddr, failed_active_hc: bool) -> Self {
        Host {
            addr,
            active_rq: AtomicU64::new(0),
            health: HostHealth::new(failed_active_hc),
            pending_removal: AtomicBool::new(false),
        }
    }
}

/// How a host set is balanced and health-checked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Balancing {
    /// The cluster has active health checks: new hosts start unhealthy.
    pub(crate) health_checked: bool,
    /// Percent (Envoy's `healthy_panic_threshold`).
    pub(crate) panic_threshold: f64,
    /// Which resolved addresses of a DNS name are hosts (`dns_lookup_family`).
    pub(crate) dns_family: DnsFamily,
    /// `ignore_health_on_host_removal`: a host service discovery removes goes at once, even
    /// while its health check passes.
    pub(crate) ignore_health_on_host_removal: bool,
}

impl Default for Balancing {
    fn default() -> Self {
        Balancing {
            health_checked: false,
            panic_threshold: 50.0,
            dns_family: DnsFamily::All,
            ignore_health_on_host_removal: false,
        }
    }
}

/// The hosts of one cluster, and how to refresh them.
pub(crate) struct HostSet {
    hosts: RwLock<Arc<Vec<Arc<Host>>>>,
    /// Bumped on every membership change, so per-worker pools can prune.
    generation: AtomicU64,
    rr: AtomicUsize,
    /// The consistent-hash table last built, with the candidate list it was built for.
    hash_table: Mutex<Option<(Vec<SocketAddr>, Arc<HashTable>)>>,
    discovery: Discovery,
    names: Vec<(String, u16)>,
    refresh: Duration,
    /// Last good addresses of each entry of `names`.
    last_good: Mutex<Vec<Vec<SocketAddr>>>,
    first: tokio::sync::OnceCell<()>,
    stats: ClusterStats,
    balancing: Balancing,
}

impl HostSet {
    /// Static clusters get their hosts now; DNS clusters start empty.
    pub(crate) fn new(
        cluster: &str,
        discovery: Discovery,
        names: Vec<(String, u16)>,
        refresh: Duration,
        stats: ClusterStats,
        balancing: Balancing,
    ) -> Result<Self, UpstreamError> {
        let mut initial = Vec::new();
        if discovery == Discovery::Eds && !names.is_empty() {
            return Err(UpstreamError::Config {
                cluster: cluster.to_owned(),
                reason: "an EDS cluster starts without endpoints".into(),
            });
        }
        if discovery == Discovery::Static {
            for (h, p) in &names {
                let ip: IpAddr = h
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse()
                    .map_err(|_| UpstreamError::Config {
                        cluster: cluster.to_owned(),
                        reason: format!("STATIC endpoint {h:?} is not an IP address"),
                    })?;
                initial.push(SocketAddr::new(ip, *p));
            }
        }
        let set = HostSet {
            hosts: RwLock::new(Arc::new(Vec::new())),
            generation: AtomicU64::new(0),
            rr: AtomicUsize::new(0),
            hash_table: Mutex::new(None),
            last_good: Mutex::new(vec![Vec::new(); names.len()]),
            discovery,
            names,
            refresh,
            first: tokio::sync::OnceCell::new(),
            stats,
            balancing,
        };
        set.install(initial);
        Ok(set)
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub(crate) fn snapshot(&self) -> Arc<Vec<Arc<Host>>> {
        self.hosts
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// EDS: replaces the hosts with `addrs` (duplicates dropped), keeping the counters of those
    /// that stay; a change bumps the generation so per-worker pools drop connections to hosts
    /// that left. Counts `update_attempt` and `update_success`.
    pub(crate) fn set_endpoints(&self, addrs: Vec<SocketAddr>) {
        self.stats.update_attempt.inc();
        self.stats.update_success.inc();
        self.install(addrs);
    }

    /// Replaces the membership with the hosts service discovery gives (`addrs`), keeping the
    /// `Host` (and its counters) of addresses that stay. As in Envoy, a host of an actively
    /// health-checked cluster that discovery dropped stays while its health check passes,
    /// unless `ignore_health_on_host_removal` (see [`HostSet::drop_failed_pending`]).
    fn install(&self, addrs: Vec<SocketAddr>) {
        let mut guard = self.hosts.write().unwrap_or_else(PoisonError::into_inner);
        let changed = self.replace(&mut guard, addrs);
        drop(guard);
        if let Some(n) = changed {
            self.membership_changed(n);
        }
    }

    /// Removes the hosts pending removal whose health check has failed (Envoy removes them
    /// then); called when a host's health changed.
    pub(crate) fn drop_failed_pending(&self) {
        let mut guard = self.hosts.write().unwrap_or_else(PoisonError::into_inner);
        let pending = |h: &Host| h.pending_removal.load(Ordering::Relaxed);
        if !guard
            .iter()
            .any(|h| pending(h) && h.health.failed_active_hc())
        {
            return;
        }
        let discovered = guard
            .iter()
            .filter(|h| !pending(h))
            .map(|h| h.addr)
            .collect();
        let changed = self.replace(&mut guard, discovered);
        drop(guard);
        if let Some(n) = changed {
            self.membership_changed(n);
        }
    }

    /// Puts the membership for `addrs` (the discovered hosts, then those kept pending
    /// removal) in `slot`; its size when it changed.
    fn replace(&self, slot: &mut Arc<Vec<Arc<Host>>>, mut addrs: Vec<SocketAddr>) -> Option<usize> {
        let mut seen = std::collections::HashSet::new();
        addrs.retain(|a| seen.insert(*a));
        let old = slot.clone();
        let discovered = addrs.len();
        if self.balancing.health_checked && !self.balancing.ignore_health_on_host_removal {
            let kept = old
                .iter()
                .filter(|h| !seen.contains(&h.addr) && !h.health.failed_active_hc())
                .map(|h| h.addr)
                .collect::<Vec<_>>();
            addrs.extend(kept);
        }
        let new: Vec<Arc<Host>> = addrs
            .into_iter()
            .map(|a| {
                old.iter()
                    .find(|h| h.addr == a)
                    .cloned()
                    .unwrap_or_else(|| Arc::new(Host::new(a, self.balancing.health_checked)))
            })
            .collect();
        for (i, h) in new.iter().enumerate() {
            h.pending_removal.store(i >= discovered, Ordering::Relaxed);
        }
        let same = old.len() == new.len() && old.iter().zip(&new).all(|(a, b)| a.addr == b.addr);
        if same && !old.is_empty() {
            return None;
        }
        let n = new.len();
        *slot = Arc::new(new);
        Some(n)
    }

    /// Counts a membership change of `n` hosts.
    fn membership_changed(&self, n: usize) {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.stats.membership_total.set(n);
        self.stats.membership_change.inc();
        self.health_changed();
    }

    /// Recounts `membership_healthy` after a host's health changed.
    pub(crate) fn health_changed(&self) {
        let healthy = self
            .snapshot()
            .iter()
            .filter(|h| h.health.is_healthy())
            .count();
        self.stats
            .membership_healthy
            .set(i64::try_from(healthy).unwrap_or(i64::MAX));
    }

    /// Applies one round of per-name results (`None`: that name failed).
    fn apply(&self, results: Vec<Option<Vec<SocketAddr>>>) {
        let all = {
            let mut last = self
                .last_good
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            for (i, r) in results.into_iter().enumerate() {
                self.stats.update_attempt.inc();
                // A name with no address of the wanted family failed, as Envoy's resolver
                // answers it (no data).
                match r.map(|addrs| self.balancing.dns_family.select(addrs)) {
                    Some(mut addrs) if !addrs.is_empty() => {
                        if self.discovery == Discovery::LogicalDns {
                            addrs.truncate(1);
                        }
                        self.stats.update_success.inc();
                        if let Some(slot) = last.get_mut(i) {
                            *slot = addrs;
                        }
                    }
                    _ => self.stats.update_failure.inc(),
                }
            }
            last.concat()
        };
        self.install(all);
    }

    /// Resolves DNS clusters on first use and starts their refresh thread.
    pub(crate) async fn ensure_resolved(self: &Arc<Self>) {
        if matches!(self.discovery, Discovery::Static | Discovery::Eds) {
            return;
        }
        self.first
            .get_or_init(|| async {
                let mut results = Vec::with_capacity(self.names.len());
                for (h, p) in &self.names {
                    let r = match tokio::net::lookup_host((h.as_str(), *p)).await {
                        Ok(it) => Some(it.collect::<Vec<_>>()),
                        Err(e) => {
                            tracing::warn!(host = %h, error = %e, "upstream DNS resolution failed");
                            None
                        }
                    };
                    results.push(r);
                }
                self.apply(results);
                self.start_refresh();
            })
            .await;
    }

    fn start_refresh(self: &Arc<Self>) {
        let weak: Weak<HostSet> = Arc::downgrade(self);
        let every = self.refresh.max(Duration::from_millis(10));
        let spawned = std::thread::Builder::new()
            .name("upstream-dns".into())
            .spawn(move || loop {
                std::thread::sleep(every);
                let Some(set) = weak.upgrade() else { return };
                let results = set
                    .names
                    .iter()
                    .map(|(h, p)| match (h.as_str(), *p).to_socket_addrs() {
                        Ok(it) => Some(it.collect()),
                        Err(e) => {
                            tracing::warn!(host = %h, error = %e, "upstream DNS refresh failed");
                            None
                        }
                    })
                    .collect();
                set.apply(results);
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the upstream DNS refresh thread");
        }
    }

    /// Picks a healthy host (any host in panic mode), or `None` when there is none. When every
    /// host is healthy (the usual case) this allocates nothing. `hash` is the request's hash
    /// for the consistent-hash policies.
    pub(crate) fn pick(&self, lb: LbPolicy, hash: Option<u64>) -> Option<Arc<Host>> {
        let hosts = self.snapshot();
        if hosts.iter().all(|h| h.health.is_healthy()) {
            return self.choose(lb, hash, hosts.len(), |i| hosts.get(i));
        }
        let healthy: Vec<&Arc<Host>> = hosts.iter().filter(|h| h.health.is_healthy()).collect();
        let percent = 100.0 * healthy.len() as f64 / hosts.len() as f64;
        if percent < self.balancing.panic_threshold {
            self.stats.lb_healthy_panic.inc();
            return self.choose(lb, hash, hosts.len(), |i| hosts.get(i));
        }
        self.choose(lb, hash, healthy.len(), |i| healthy.get(i).copied())
    }

    /// Balances over `n` candidates, `get(i)` being the i-th.
    fn choose<'a>(
        &self,
        lb: LbPolicy,
        hash: Option<u64>,
        n: usize,
        get: impl Fn(usize) -> Option<&'a Arc<Host>>,
    ) -> Option<Arc<Host>> {
        match n {
            0 => None,
            1 => get(0).cloned(),
            _ => match lb {
                LbPolicy::RoundRobin => get(self.rr.fetch_add(1, Ordering::Relaxed) % n).cloned(),
                LbPolicy::LeastRequest => {
                    let r = random();
                    let a = (r % n as u64) as usize;
                    let b = (a + 1 + ((r >> 32) % (n as u64 - 1)) as usize) % n;
                    let (ha, hb) = (get(a)?, get(b)?);
                    let load = |h: &Host| h.active_rq.load(Ordering::Relaxed);
                    Some(if load(hb) < load(ha) { hb } else { ha }.clone())
                }
                // Envoy: without a hash, a consistent-hash policy picks a random host.
                LbPolicy::RingHash { .. } | LbPolicy::Maglev { .. } => {
                    let i = match hash {
                        Some(h) => self.hash_table(lb, n, &get)?.lookup(h)?,
                        None => (random() % n as u64) as usize,
                    };
                    get(i).cloned()
                }
            },
        }
    }

    /// The consistent-hash table over the `n` candidates, rebuilt when they changed.
    fn hash_table<'a>(
        &self,
        lb: LbPolicy,
        n: usize,
        get: &impl Fn(usize) -> Option<&'a Arc<Host>>,
    ) -> Option<Arc<HashTable>> {
        let addrs: Vec<SocketAddr> = (0..n)
            .map(|i| get(i).map(|h| h.addr))
            .collect::<Option<_>>()?;
        let mut cached = self
            .hash_table
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((a, t)) = cached.as_ref() {
            if *a == addrs {
                return Some(t.clone());
            }
        }
        let table = Arc::new(match lb {
            LbPolicy::RingHash {
                min_ring_size,
                max_ring_size,
            } => HashTable::ring(&addrs, min_ring_size, max_ring_size),
            LbPolicy::Maglev { table_size } => HashTable::maglev(&addrs, table_size),
            LbPolicy::RoundRobin | LbPolicy::LeastRequest => return None,
        });
        *cached = Some((addrs, table.clone()));
        Some(table)
    }
}

/// A per-thread xorshift generator, seeded from the OS-seeded `RandomState`.
pub(crate) fn random() -> u64 {
    thread_local! {
        static STATE: Cell<u64> = Cell::new(RandomState::new().hash_one(std::thread::current().id()) | 1);
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        x
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(n: usize) -> HostSet {
        let names = (0..n)
            .map(|i| ("127.0.0.1".to_string(), 1000 + i as u16))
            .collect();
        let stats = ClusterStats::new(&quickshake_stats::Store::new(), "t");
        HostSet::new(
            "t",
            Discovery::Static,
            names,
            Duration::from_secs(1),
            stats,
            Balancing::default(),
        )
        .expect("set")
    }

    #[test]
    fn round_robin_cycles() {
        let s = set(3);
        let ports: Vec<u16> = (0..6)
            .map(|_| {
                s.pick(LbPolicy::RoundRobin, None)
                    .map(|h| h.addr.port())
                    .unwrap_or(0)
            })
            .collect();
        assert_eq!(ports, [1000, 1001, 1002, 1000, 1001, 1002]);
    }

    #[test]
    fn least_request_avoids_busy_host() {
        let s = set(2);
        let hosts = s.snapshot();
        hosts[0].active_rq.store(10, Ordering::Relaxed);
        for _ in 0..20 {
            let h = s.pick(LbPolicy::LeastRequest, None).map(|h| h.addr.port());
            assert_eq!(h, Some(1001));
        }
    }

    /// Envoy's default: a host EDS (or DNS) drops stays while its active health check passes,
    /// and goes when a check fails; with `ignore_health_on_host_removal`, or when it is
    /// failing already, it goes at once.
    #[test]
    fn removed_hosts_stay_while_healthy() {
        for ignore in [false, true] {
            let s = HostSet::new(
                "e",
                Discovery::Eds,
                vec![],
                Duration::from_secs(1),
                ClusterStats::new(&quickshake_stats::Store::new(), "e"),
                Balancing {
                    health_checked: true,
                    ignore_health_on_host_removal: ignore,
                    ..Balancing::default()
                },
            )
            .expect("set");
            let [a, b, c]: [SocketAddr; 3] =
                ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"].map(|x| x.parse().expect("addr"));
            s.set_endpoints(vec![a, b, c]);
            for h in s.snapshot().iter().filter(|h| h.addr != c) {
                h.health.set_failed_active_hc(false);
            }
            s.set_endpoints(vec![a]);
            let addrs = |s: &HostSet| s.snapshot().iter().map(|h| h.addr).collect::<Vec<_>>();
            if ignore {
                assert_eq!(addrs(&s), [a]);
                continue;
            }
            // b (healthy) stays pending removal; c (never passed a check) is gone.
            assert_eq!(addrs(&s), [a, b]);
            s.set_endpoints(vec![a]);
            assert_eq!(addrs(&s), [a, b], "still pending");
            s.drop_failed_pending();
            assert_eq!(addrs(&s), [a, b], "still healthy");
            s.snapshot()[1].health.set_failed_active_hc(true);
            s.drop_failed_pending();
            assert_eq!(addrs(&s), [a]);
            // A pending host that discovery gives back is an ordinary host again.
            s.set_endpoints(vec![a, b]);
            s.set_endpoints(vec![a, b]);
            assert!(s
                .snapshot()
                .iter()
                .all(|h| !h.pending_removal.load(Ordering::Relaxed)));
        }
    }

    #[test]
    fn static_rejects_names() {
        let stats = ClusterStats::new(&quickshake_stats::Store::new(), "t");
        let r = HostSet::new(
            "t",
            Discovery::Static,
            vec![("example.com".into(), 80)],
            Duration::from_secs(1),
            stats,
            Balancing::default(),
        );
        assert!(matches!(r, Err(UpstreamError::Config { .. })));
    }

    #[test]
    fn eds_starts_empty_and_takes_endpoints() {
        let stats = ClusterStats::new(&quickshake_stats::Store::new(), "e");
        let s = HostSet::new(
            "e",
            Discovery::Eds,
            vec![],
            Duration::from_secs(1),
            stats.clone(),
            Balancing::default(),
        )
        .expect("set");
        assert!(s.pick(LbPolicy::RoundRobin, None).is_none());
        let g0 = s.generation();
        let a: SocketAddr = "10.0.0.1:80".parse().expect("addr");
        let b: SocketAddr = "10.0.0.2:80".parse().expect("addr");
        s.set_endpoints(vec![a, b, a]);
        assert_eq!(s.snapshot().len(), 2);
        assert!(s.generation() > g0);
        let g1 = s.generation();
        s.set_endpoints(vec![a, b]);
        assert_eq!(s.generation(), g1, "same hosts: no change");
        s.set_endpoints(vec![b]);
        assert!(s.generation() > g1);
        assert_eq!(s.pick(LbPolicy::RoundRobin, None).map(|h| h.addr), Some(b));
        s.set_endpoints(vec![]);
        assert!(s.pick(LbPolicy::RoundRobin, None).is_none());
        assert_eq!(stats.membership_total.value(), 0);
        assert!(HostSet::new(
            "e",
            Discovery::Eds,
            vec![("10.0.0.1".into(), 80)],
            Duration::from_secs(1),
            ClusterStats::new(&quickshake_stats::Store::new(), "e2"),
            Balancing::default(),
        )
        .is_err());
    }

    #[test]
    fn failure_keeps_last_good() {
        let stats = ClusterStats::new(&quickshake_stats::Store::new(), "d");
        let s = HostSet::new(
            "d",
            Discovery::StrictDns,
            vec![("a".into(), 1), ("b".into(), 2)],
            Duration::from_secs(1),
            stats.clone(),
            Balancing::default(),
        )
        .expect("set");
        let a: SocketAddr = "10.0.0.1:1".parse().expect("addr");
        let b: SocketAddr = "10.0.0.2:2".parse().expect("addr");
        s.apply(vec![Some(vec![a]), Some(vec![b])]);
        assert_eq!(s.snapshot().len(), 2);
        s.apply(vec![None, Some(vec![])]);
        assert_eq!(s.snapshot().len(), 2);
        assert_eq!(stats.update_success.value(), 2);
        assert_eq!(stats.update_failure.value(), 2);
        assert_eq!(stats.membership_healthy.value(), 2);
    }

    #[test]
    fn unhealthy_hosts_are_skipped_until_panic() {
        let s = set(3);
        let hosts = s.snapshot();
        hosts[0].health.set_failed_active_hc(true);
        for _ in 0..6 {
            let p = s.pick(LbPolicy::RoundRobin, None).map(|h| h.addr.port());
            assert_ne!(p, Some(1000));
        }
        hosts[1].health.set_failed_outlier(true);
        // One of three healthy (33% < 50%): panic, every host is used.
        let ports: std::collections::HashSet<u16> = (0..6)
            .filter_map(|_| s.pick(LbPolicy::RoundRobin, None).map(|h| h.addr.port()))
            .collect();
        assert_eq!(ports.len(), 3);
        assert!(s.stats.lb_healthy_panic.value() >= 6);
    }
}
