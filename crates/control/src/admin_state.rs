//! What the admin endpoint shows of a running gateway: stats, `/server_info`, `/certs`,
//! `/config_dump` (keys redacted by the config crate), readiness, health-check failure,
//! `/quitquitquit`, `/drain_listeners` (listeners stopped, the process running on),
//! `/listeners` (static and xDS), `/logging` (through the binary's [`LogControl`]), `/runtime`
//! and `/clusters` (the upstream clusters and their hosts' health).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use quickshake_admin::{
    AdminState, ClusterStatus, DrainListeners, HostStatus, ListenerInfo, LogControl, RuntimeLayer,
    Thresholds,
};
use quickshake_http::time::{rfc3339_now, timestamp_json};
use quickshake_listener::ListenerShared;
use quickshake_server::{DrainHandle, StoppedListeners};
use quickshake_stats::Store;
use serde_json::{json, Value};

use crate::dynamic::ListenerView;

/// The running gateway as the admin endpoint sees it.
pub struct GatewayAdmin {
    pub store: Store,
    pub listeners: Vec<Arc<ListenerShared>>,
    pub config_dump: Value,
    /// `{concurrency, config_path, log_level, ...}` as `/server_info`'s `command_line_options`.
    pub command_line_options: Value,
    /// Extra `/config_dump` sections (e.g. private key providers and their engines), computed
    /// when asked so they follow reloads.
    pub extra_dump: Option<Box<dyn Fn() -> Vec<Value> + Send + Sync>>,
    pub drain: DrainHandle,
    /// The bootstrap's `node` after the `--service-*` flags, as `/server_info`'s `node`.
    pub node: quickshake_config::Node,
    /// Whether initialization is done (with xDS: LDS and CDS answered, or their
    /// `initial_fetch_timeout` passed); `None`: from the start. Until then the state is
    /// `INITIALIZING` and `/ready` answers 503, as Envoy's.
    pub initialized: Option<Box<dyn Fn() -> bool + Send + Sync>>,
    pub health_check_failed: AtomicBool,
    /// The listeners a graceful `/drain_listeners` has started draining.
    graceful_drain: Mutex<StoppedListeners>,
    /// The listeners added over xDS, after the static ones in `/listeners`.
    pub dynamic_listeners: Option<ListenerView>,
    /// The log levels `/logging` lists and changes; the binary owns the subscriber.
    pub logging: Option<Arc<dyn LogControl>>,
    /// `layered_runtime`'s layers with the keys quickshake reads, for `/runtime`.
    pub runtime: Vec<RuntimeLayer>,
    /// The upstream clusters `/clusters` shows (none: an empty answer).
    pub clusters: Option<quickshake_upstream::ClusterManager>,
    pub started: Instant,
    pub started_epoch: u64,
}

impl GatewayAdmin {
    pub fn new(
        store: Store,
        listeners: Vec<Arc<ListenerShared>>,
        config_dump: Value,
        command_line_options: Value,
        drain: DrainHandle,
    ) -> Self {
        let started_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        store.gauge("server.live").set(1);
        GatewayAdmin {
            store,
            listeners,
            config_dump,
            command_line_options,
            extra_dump: None,
            drain,
            node: quickshake_config::Node::default(),
            initialized: None,
            health_check_failed: AtomicBool::new(false),
            graceful_drain: Mutex::new(StoppedListeners::None),
            dynamic_listeners: None,
            logging: None,
            runtime: Vec::new(),
            clusters: None,
            started: Instant::now(),
            started_epoch,
        }
    }

    /// Envoy's `serverState`: INITIALIZING until initialized, then DRAINING while health checks
    /// fail (`/healthcheck/fail`), else LIVE; DRAINING too once the process drains (SIGTERM,
    /// `/quitquitquit`). `/drain_listeners` leaves it LIVE, as Envoy's does.
    fn state(&self) -> &'static str {
        if self.drain.is_draining() {
            "DRAINING"
        } else if self.initialized.as_ref().is_some_and(|f| !f()) {
            "INITIALIZING"
        } else if self.health_check_failed.load(Ordering::Relaxed) {
            "DRAINING"
        } else {
            "LIVE"
        }
    }
}

impl AdminState for GatewayAdmin {
    fn stats(&self) -> &Store {
        self.store
            .gauge("server.uptime")
            .set(self.started.elapsed().as_secs() as i64);
        &self.store
    }

    fn server_info(&self) -> Value {
        json!({
            "version": format!("quickshake/{}/RELEASE/BoringSSL", env!("CARGO_PKG_VERSION")),
            "state": self.state(),
            "hot_restart_version": "disabled",
            "command_line_options": self.command_line_options,
            "uptime_current_epoch": format!("{}s", self.started.elapsed().as_secs()),
            "uptime_all_epochs": format!("{}s", self.started.elapsed().as_secs()),
            "node": {
                "id": self.node.id,
                "cluster": self.node.cluster,
                "locality": {"zone": self.node.zone},
            },
            "started_epoch_seconds": self.started_epoch,
        })
    }

    fn certs(&self) -> Value {
        let mut certs = Vec::new();
        for l in &self.listeners {
            for chain in l.chains.load().iter() {
                let Some(tls) = &chain.tls else { continue };
                certs.push(json!({
                    "listener": l.name,
                    "server_names": chain.server_names,
                    "ca_cert": [],
                    "cert_chain": tls.certs.iter().map(|c| {
                        let mut v = c.info.to_json();
                        if let (Some(obj), Some(p)) = (v.as_object_mut(), &c.provider) {
                            obj.insert("private_key_provider".into(), json!(p));
                        }
                        if let (Some(obj), Some(o)) = (v.as_object_mut(), &c.ocsp) {
                            obj.insert("ocsp_details".into(), ocsp_details(o));
                        }
                        v
                    }).collect::<Vec<_>>(),
                }));
            }
        }
        json!({ "certificates": certs })
    }

    fn config_dump(&self) -> Value {
        let mut dump = self.config_dump.clone();
        if let Some(configs) = dump.get_mut("configs").and_then(Value::as_array_mut) {
            if let Some(extra) = &self.extra_dump {
                configs.extend(extra());
            }
        }
        dump
    }

    fn is_live(&self) -> bool {
        let state = self.state();
        // Envoy's `server.state`: 0 LIVE, 1 DRAINING, 3 INITIALIZING.
        self.store.gauge("server.state").set(match state {
            "LIVE" => 0,
            "DRAINING" => 1,
            _ => 3,
        });
        state == "LIVE"
    }

    fn set_health_check_failed(&self, failed: bool) {
        self.health_check_failed.store(failed, Ordering::Relaxed);
        self.store
            .gauge("server.health_check_failed")
            .set(i64::from(failed));
        // Envoy's `failHealthcheck`: `server.live` follows.
        self.store.gauge("server.live").set(i64::from(!failed));
    }

    fn quit(&self) {
        self.drain.drain();
    }

    /// Envoy's `handlerDrainListeners`: without `graceful` the listeners stop at once; with it
    /// they go on accepting for the drain time (`--drain-time-s`), then stop unless
    /// `skip_exit`. A graceful drain already running for these listeners is not restarted.
    /// The process goes on either way.
    fn drain_listeners(&self, d: DrainListeners) {
        let which = if d.inbound_only {
            StoppedListeners::InboundOnly
        } else {
            StoppedListeners::All
        };
        if !d.graceful {
            self.drain.stop_listeners(which);
            return;
        }
        {
            let Ok(mut started) = self.graceful_drain.lock() else {
                return;
            };
            if *started >= which {
                return;
            }
            *started = which;
        }
        if d.skip_exit {
            return;
        }
        let (drain, wait) = (self.drain.clone(), self.drain.drain_time());
        let spawned = std::thread::Builder::new()
            .name("drain-listeners".into())
            .spawn(move || {
                std::thread::sleep(wait);
                drain.stop_listeners(which);
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot time the graceful drain; stopping the listeners now");
            self.drain.stop_listeners(which);
        }
    }

    fn listeners(&self) -> Vec<ListenerInfo> {
        let info = |name: &str, address: SocketAddr| ListenerInfo {
            name: name.to_owned(),
            addresses: vec![address],
        };
        let mut all: Vec<ListenerInfo> = self
            .listeners
            .iter()
            .map(|l| info(&l.name, l.address))
            .collect();
        if let Some(view) = &self.dynamic_listeners {
            all.extend(view.load().iter().map(|(name, a)| info(name, *a)));
        }
        all
    }

    fn log_control(&self) -> Option<&dyn LogControl> {
        self.logging.as_deref()
    }

    fn runtime_layers(&self) -> Vec<RuntimeLayer> {
        self.runtime.clone()
    }

    fn clusters(&self) -> Vec<ClusterStatus> {
        let Some(m) = &self.clusters else {
            return Vec::new();
        };
        m.names()
            .iter()
            .filter_map(|n| m.cluster(n))
            .map(|c| cluster_status(&c))
            .collect()
    }
}

/// `/runtime`'s view of `layered_runtime` (the keys quickshake reads, per layer).
pub fn runtime_layers(layers: &[quickshake_config::RuntimeLayer]) -> Vec<RuntimeLayer> {
    layers
        .iter()
        .map(|l| RuntimeLayer {
            name: l.name.clone(),
            admin: l.admin,
            values: l.values.iter().cloned().collect(),
        })
        .collect()
}

/// One cluster for `/clusters`. HIGH-priority thresholds are Envoy's defaults: quickshake
/// routes at DEFAULT priority only.
fn cluster_status(c: &quickshake_upstream::Cluster) -> ClusterStatus {
    let l = c.limits();
    ClusterStatus {
        name: c.name().to_owned(),
        added_via_api: c.added_via_api(),
        outlier_detection: c.has_outlier_detection(),
        default_priority: Thresholds {
            max_connections: u64::from(l.max_connections),
            max_pending_requests: u64::from(l.max_pending_requests),
            max_requests: u64::from(l.max_requests),
            max_retries: u64::from(l.max_retries),
        },
        high_priority: Thresholds::default(),
        hosts: c
            .host_statuses()
            .into_iter()
            .map(|h| HostStatus {
                address: h.addr,
                failed_active_hc: h.failed_active_hc,
                failed_outlier_check: h.failed_outlier_check,
                cx_active: h.cx_active,
                cx_connect_fail: h.cx_connect_fail,
                cx_total: h.cx_total,
                rq_active: h.rq_active,
                rq_error: h.rq_error,
                rq_pending_active: 0,
                rq_success: h.rq_success,
                rq_timeout: h.rq_timeout,
                rq_total: h.rq_total,
            })
            .collect(),
    }
}

/// Envoy's `ocsp_details` of `/certs`: the staple's thisUpdate and nextUpdate (the current time
/// when it has none, as Envoy's `getNextUpdate` gives).
fn ocsp_details(o: &quickshake_tls::OcspDetails) -> Value {
    json!({
        "valid_from": timestamp_json(o.valid_from),
        "expiration": o.expiration.map_or_else(rfc3339_now, timestamp_json),
    })
}
