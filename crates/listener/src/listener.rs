//! Listeners: binding (one SO_REUSEPORT socket per worker, so a connection never crosses
//! threads), the per-listener state shared by workers (its admission filters, handshake table
//! and token buckets among it), and the swap seam for TLS contexts and listener updates.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use quickshake_config::Listener;
use quickshake_http::{open_access_logs, AccessLogger, LogRecord};
use quickshake_keyprovider::Providers;
use quickshake_stats::{Counter, Gauge, Histogram, Store};
use quickshake_tls::HandshakeStats;
use quickshake_upstream::ClusterManager;
use socket2::{Domain, Protocol, Socket, Type};

use crate::admission::ListenerAdmission;
use crate::chain::{build_chain, ChainRuntime};
use crate::error::ServerError;
use crate::handshake_limit::HandshakeTable;
use quickshake_http::BucketRegistry;

/// Envoy's stat scope for a listener address: `listener.0.0.0.0_9000.`,
/// `listener.[__]_9000.` for `[::]:9000`.
pub(crate) fn stat_scope(addr: &SocketAddr) -> String {
    let host = match addr {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()).replace(':', "_"),
    };
    format!("listener.{host}_{}.", addr.port())
}

/// Envoy's `listener.<address>.*` counters.
#[derive(Clone)]
pub struct ListenerStats {
    pub downstream_cx_total: Counter,
    pub downstream_cx_destroy: Counter,
    pub downstream_cx_active: Gauge,
    pub downstream_cx_overflow: Counter,
    pub downstream_global_cx_overflow: Counter,
    pub downstream_cx_transport_socket_connect_timeout: Counter,
    pub downstream_pre_cx_timeout: Counter,
    pub no_filter_chain_match: Counter,
    pub downstream_cx_proxy_proto_error: Counter,
    pub downstream_cx_length_ms: Histogram,
    pub ssl: HandshakeStats,
    /// quickshake: full-handshake duration (accept to finished), in ms.
    pub handshake_ms: Histogram,
}

impl ListenerStats {
    pub fn new(store: &Store, scope: &str) -> Self {
        let c = |n: &str| store.counter(&format!("{scope}{n}"));
        let buckets = quickshake_stats::DEFAULT_BUCKETS;
        ListenerStats {
            downstream_cx_total: c("downstream_cx_total"),
            downstream_cx_destroy: c("downstream_cx_destroy"),
            downstream_cx_active: store.gauge(&format!("{scope}downstream_cx_active")),
            downstream_cx_overflow: c("downstream_cx_overflow"),
            downstream_global_cx_overflow: c("downstream_global_cx_overflow"),
            downstream_cx_transport_socket_connect_timeout: c(
                "downstream_cx_transport_socket_connect_timeout",
            ),
            downstream_pre_cx_timeout: c("downstream_pre_cx_timeout"),
            no_filter_chain_match: c("no_filter_chain_match"),
            downstream_cx_proxy_proto_error: c("downstream_cx_proxy_proto_error"),
            downstream_cx_length_ms: store
                .histogram(&format!("{scope}downstream_cx_length_ms"), buckets),
            ssl: HandshakeStats::new(store, scope),
            handshake_ms: store.histogram(
                &format!("{scope}ssl.handshake_time_ms"),
                &[
                    0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 250.0, 500.0, 1000.0,
                ],
            ),
        }
    }
}

/// What every worker shares about one listener.
pub struct ListenerShared {
    pub name: String,
    pub address: SocketAddr,
    pub scope: String,
    /// Swapped whole on certificate rotation; a connection keeps the `Arc` it started with.
    pub chains: ArcSwap<Vec<Arc<ChainRuntime>>>,
    /// The listener filters that admit or refuse sockets; swapped with the chains.
    pub admission: ArcSwap<ListenerAdmission>,
    pub stats: ListenerStats,
    /// `envoy.filters.listener.proxy_protocol`: a PROXY header precedes the client's bytes.
    pub proxy_protocol: bool,
    /// Outside the global connection limit (`ignore_global_conn_limit`).
    pub ignore_global_conn_limit: bool,
    /// `traffic_direction: INBOUND` (admin `/drain_listeners?inboundonly` stops it); follows
    /// updates.
    inbound: AtomicBool,
    /// `max_connections_to_accept_per_socket_event` (0: no limit); follows updates.
    max_accept_per_event: AtomicU32,
    /// Handshakes in progress per source (`handshake_limit`), kept across updates.
    handshakes: Arc<HandshakeTable>,
    /// The token buckets of this listener's rate limit filters, by filter path.
    buckets: BucketRegistry,
    /// `access_log[]`; follows updates.
    access_logs: ArcSwap<Vec<AccessLogger>>,
}

/// A listener's filter chains and admission filters, built for [`ListenerShared::update`].
pub struct ListenerUpdate {
    chains: Vec<Arc<ChainRuntime>>,
    admission: ListenerAdmission,
    inbound: bool,
    max_accept_per_event: u32,
    access_logs: Vec<AccessLogger>,
}

impl ListenerShared {
    pub fn build(
        cfg: &Listener,
        store: &Store,
        providers: &Providers,
        clusters: &ClusterManager,
    ) -> Result<Self, ServerError> {
        let scope = stat_scope(&cfg.address);
        let handshakes = HandshakeTable::new();
        let shared = ListenerShared {
            name: cfg.name.clone(),
            address: cfg.address,
            stats: ListenerStats::new(store, &scope),
            scope,
            chains: ArcSwap::from_pointee(Vec::new()),
            admission: ArcSwap::from_pointee(ListenerAdmission::none(handshakes.clone())),
            proxy_protocol: cfg.proxy_protocol,
            ignore_global_conn_limit: cfg.ignore_global_conn_limit,
            inbound: AtomicBool::new(cfg.inbound),
            max_accept_per_event: AtomicU32::new(0),
            handshakes,
            buckets: BucketRegistry::default(),
            access_logs: ArcSwap::from_pointee(Vec::new()),
        };
        let built = shared.build_update(cfg, store, providers, clusters)?;
        shared.update(built);
        Ok(shared)
    }

    /// Build `cfg`'s filter chains (certificates are loaded here) and admission filters for
    /// this listener. A rate limit filter whose settings did not change keeps its bucket (its
    /// tokens), as the handshake table keeps its counts.
    pub fn build_update(
        &self,
        cfg: &Listener,
        store: &Store,
        providers: &Providers,
        clusters: &ClusterManager,
    ) -> Result<ListenerUpdate, ServerError> {
        let chains = cfg
            .filter_chains
            .iter()
            .map(|fc| {
                build_chain(fc, store, providers, clusters, &self.scope, &self.buckets)
                    .map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let admission = ListenerAdmission::build(
            &cfg.limits,
            store,
            &self.scope,
            &self.buckets,
            self.handshakes.clone(),
        );
        Ok(ListenerUpdate {
            chains,
            admission,
            inbound: cfg.inbound,
            max_accept_per_event: cfg.max_connections_to_accept_per_socket_event.unwrap_or(0),
            access_logs: open_access_logs(&cfg.access_logs, &cfg.path)?,
        })
    }

    /// Put new filter chains (new TLS contexts) and admission filters in place without
    /// touching open connections.
    pub fn update(&self, u: ListenerUpdate) {
        self.admission.store(Arc::new(u.admission));
        self.chains.store(Arc::new(u.chains));
        self.inbound.store(u.inbound, Ordering::Relaxed);
        self.max_accept_per_event
            .store(u.max_accept_per_event, Ordering::Relaxed);
        self.access_logs.store(Arc::new(u.access_logs));
    }

    /// Write the listener's access logs for a connection it did not serve (Envoy's
    /// `emitLogs` for a socket that never became a connection): no filter chain matched
    /// (`no_chain`: response flag `NR`, details `filter_chain_not_found`) or its listener
    /// filters timed out. `started`: when it was accepted.
    pub fn log_unserved(
        &self,
        started: std::time::SystemTime,
        peer: SocketAddr,
        local: &str,
        sni: Option<&str>,
        no_chain: bool,
    ) {
        let logs = self.access_logs.load();
        if logs.is_empty() {
            return;
        }
        let start = started
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let duration_ms = started
            .elapsed()
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let r = LogRecord {
            start,
            duration_ms,
            downstream_remote_address: peer.to_string(),
            downstream_local_address: local.to_owned(),
            requested_server_name: sni.map(str::to_owned),
            response_flags: no_chain.then_some("NR"),
            response_code_details: no_chain.then_some("filter_chain_not_found"),
            ..Default::default()
        };
        for l in logs.iter() {
            l.log(&r);
        }
    }

    /// `max_connections_to_accept_per_socket_event`: how many connections the accept loop
    /// takes in a row before it lets the worker's other tasks run; `None` when not set (all
    /// that are pending, within tokio's cooperative budget).
    pub fn max_accept_per_event(&self) -> Option<u32> {
        Some(self.max_accept_per_event.load(Ordering::Relaxed)).filter(|n| *n > 0)
    }

    /// `traffic_direction: INBOUND`.
    pub fn inbound(&self) -> bool {
        self.inbound.load(Ordering::Relaxed)
    }
}

/// Bind one listening socket with SO_REUSEPORT (each worker binds its own).
pub fn bind_reuseport(
    addr: SocketAddr,
    listener_path: &str,
) -> Result<std::net::TcpListener, ServerError> {
    let socket = bind_reuseport_socket(addr, listener_path, Type::STREAM, Protocol::TCP, |_| {})?;
    socket
        .listen(4096)
        .map_err(bind_error(addr, listener_path))?;
    Ok(socket.into())
}

/// A non-blocking socket of `ty` bound to `addr` with SO_REUSEPORT (IPv6 only for an IPv6
/// address), `tune`d before the bind: what TCP and QUIC listeners' per-worker sockets share.
pub fn bind_reuseport_socket(
    addr: SocketAddr,
    listener_path: &str,
    ty: Type,
    protocol: Protocol,
    tune: impl FnOnce(&Socket),
) -> Result<Socket, ServerError> {
    let err = bind_error(addr, listener_path);
    let socket = Socket::new(Domain::for_address(addr), ty, Some(protocol)).map_err(&err)?;
    socket.set_reuse_address(true).map_err(&err)?;
    socket.set_reuse_port(true).map_err(&err)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true).map_err(&err)?;
    }
    tune(&socket);
    socket.set_nonblocking(true).map_err(&err)?;
    socket.bind(&addr.into()).map_err(&err)?;
    Ok(socket)
}

fn bind_error(addr: SocketAddr, listener_path: &str) -> impl Fn(std::io::Error) -> ServerError {
    let field = format!("{listener_path}.address");
    move |e| ServerError::Bind {
        field: field.clone(),
        address: addr,
        source: e,
    }
}

/// Fail fast with a clear message when the port is already taken by another process: a plain
/// bind without SO_REUSEPORT (released at once) is refused where our reuseport bind would
/// silently share the port with an unrelated reuseport server.
pub fn probe_port_free(addr: SocketAddr, listener_path: &str) -> Result<(), ServerError> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(|e| ServerError::Bind {
            field: format!("{listener_path}.address"),
            address: addr,
            source: e,
        })?;
    let _ = socket.set_reuse_address(true);
    if addr.is_ipv6() {
        let _ = socket.set_only_v6(true);
    }
    socket.bind(&addr.into()).map_err(|e| ServerError::Bind {
        field: format!("{listener_path}.address"),
        address: addr,
        source: e,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn envoy_scope_names() {
        assert_eq!(
            super::stat_scope(&"0.0.0.0:9000".parse().unwrap()),
            "listener.0.0.0.0_9000."
        );
        assert_eq!(
            super::stat_scope(&"[::]:9000".parse().unwrap()),
            "listener.[__]_9000."
        );
        assert_eq!(
            super::stat_scope(&"[::1]:443".parse().unwrap()),
            "listener.[__1]_443."
        );
    }
}
