//! One worker's endpoint of a QUIC listener: binding, reading the socket, routing datagrams
//! to connections by destination connection ID (or to the worker a connection ID names),
//! accepting Initials, version negotiation and Retry.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quickshake_config::QuicOptions;
use quickshake_listener::{
    bind_reuseport_socket, select_chain, ListenerShared, ServerError, ServerShared,
};
use quickshake_stats::Store;
use quickshake_tls::quic::{prepare_ssl, quic_config, ChainForSni, RetryTokens, MAX_UDP_PAYLOAD};
use quinn_udp::RecvMeta;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::{mpsc, watch};

use crate::cid::{new_cid, worker_of, CID_LEN};
use crate::conn;
use crate::gso::datagrams;
use crate::shared::{Datagram, QuicShared, QuicSocket, QuicStats};
use crate::udp::{QuicIo, RECV_BATCH};

/// Handshakes in progress on one worker's endpoint above which a new client must prove its
/// address with a Retry token first.
pub const RETRY_ABOVE_HANDSHAKES: usize = 100;
/// How long a Retry token is good for.
const RETRY_TOKEN_LIFETIME: Duration = Duration::from_secs(10);
/// RFC 9000 section 14.1: a client's Initial travels in a datagram of at least 1200 bytes.
const MIN_INITIAL_DATAGRAM: usize = 1200;

/// Bind a QUIC listener once per worker (`workers` sockets sharing the port).
pub fn bind_workers(
    listener: &ListenerShared,
    opts: &QuicOptions,
    path: &str,
    workers: usize,
    store: &Store,
) -> Result<Vec<QuicSocket>, ServerError> {
    let tokens = RetryTokens::new(RETRY_TOKEN_LIFETIME)?;
    let mut senders = Vec::with_capacity(workers);
    let mut inboxes = Vec::with_capacity(workers);
    for _ in 0..workers {
        let (tx, rx) = mpsc::unbounded_channel();
        senders.push(tx);
        inboxes.push(rx);
    }
    let shared = Arc::new(QuicShared::new(
        opts.clone(),
        tokens,
        senders,
        QuicStats::new(store, &listener.scope),
    ));
    inboxes
        .into_iter()
        .enumerate()
        .map(|(worker, inbox)| {
            Ok(QuicSocket {
                socket: bind_udp(listener.address, path)?,
                shared: shared.clone(),
                inbox,
                worker,
            })
        })
        .collect()
}

/// One UDP socket with SO_REUSEPORT (each worker binds its own).
fn bind_udp(addr: SocketAddr, path: &str) -> Result<std::net::UdpSocket, ServerError> {
    let socket = bind_reuseport_socket(addr, path, Type::DGRAM, Protocol::UDP, |socket| {
        // Room for bursts of Initials while a worker is busy signing.
        let _ = socket.set_recv_buffer_size(4 << 20);
        let _ = socket.set_send_buffer_size(4 << 20);
    })?;
    Ok(socket.into())
}

/// Fail fast when the UDP port is taken by another process (see `listener::probe_port_free`).
pub fn probe_udp_port_free(addr: SocketAddr, path: &str) -> Result<(), ServerError> {
    let socket =
        Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP)).map_err(|e| {
            ServerError::Bind {
                field: format!("{path}.address"),
                address: addr,
                source: e,
            }
        })?;
    if addr.is_ipv6() {
        let _ = socket.set_only_v6(true);
    }
    socket.bind(&addr.into()).map_err(|e| ServerError::Bind {
        field: format!("{path}.address"),
        address: addr,
        source: e,
    })
}

/// Everything a connection task needs from its endpoint.
struct Endpoint {
    io: Arc<QuicIo>,
    local: SocketAddr,
    worker: usize,
    listener: Arc<ListenerShared>,
    quic: Arc<QuicShared>,
    server: Arc<ServerShared>,
    config: quiche::Config,
    /// The options `config` was made with, and how it chooses filter chains (to rebuild it
    /// when a control plane changes the options).
    config_opts: Arc<QuicOptions>,
    chains: Arc<ChainForSni>,
    /// Connection IDs → the connection's task.
    conns: HashMap<Vec<u8>, mpsc::UnboundedSender<Datagram>>,
    /// Handshakes in progress on this worker (decremented by the connection tasks).
    handshaking: Arc<AtomicUsize>,
    closed: mpsc::UnboundedSender<Vec<Vec<u8>>>,
    drain: watch::Receiver<bool>,
    draining: bool,
    out: Vec<u8>,
}

/// Serve one worker's socket of a QUIC listener until the gateway drains and its connections
/// have closed.
pub async fn run_endpoint(
    sock: QuicSocket,
    listener: Arc<ListenerShared>,
    server: Arc<ServerShared>,
    mut drain: watch::Receiver<bool>,
) {
    let QuicSocket {
        socket,
        shared: quic,
        mut inbox,
        worker,
    } = sock;
    let io = match QuicIo::new(socket, quic.stats.clone()) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            tracing::error!(listener = %listener.name, error = %e, "cannot register QUIC socket");
            return;
        }
    };
    let local = io.local_addr().unwrap_or(listener.address);
    tracing::debug!(
        listener = %listener.name,
        worker,
        gso_segments = io.max_segments(),
        gro_segments = io.gro_segments(),
        "QUIC socket offloads"
    );
    let chooser = listener.clone();
    let chains: Arc<ChainForSni> = Arc::new(move |sni: Option<&str>| {
        select_chain(&chooser.chains.load(), sni).and_then(|c| c.tls.clone())
    });
    let config_opts = quic.options();
    let config = match quic_config(&config_opts, chains.clone()) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(listener = %listener.name, error = %e, "cannot configure QUIC");
            return;
        }
    };
    let (closed_tx, mut closed_rx) = mpsc::unbounded_channel::<Vec<Vec<u8>>>();
    let draining = *drain.borrow();
    let mut ep = Endpoint {
        io: io.clone(),
        local,
        worker,
        listener,
        quic,
        server,
        config,
        config_opts,
        chains,
        conns: HashMap::new(),
        handshaking: Arc::new(AtomicUsize::new(0)),
        closed: closed_tx,
        drain: drain.clone(),
        draining,
        out: vec![0u8; MAX_UDP_PAYLOAD],
    };
    let mut bufs: [Vec<u8>; RECV_BATCH] = std::array::from_fn(|_| vec![0u8; io.recv_buffer_len()]);
    let mut meta = [RecvMeta::default(); RECV_BATCH];
    loop {
        tokio::select! {
            r = io.recv(&mut bufs, &mut meta) => match r {
                Ok(n) => {
                    for (buf, m) in bufs.iter().zip(&meta).take(n) {
                        // A GRO buffer holds datagrams of one sender, `stride` bytes each.
                        for data in datagrams(buf.get(..m.len).unwrap_or_default(), m.stride) {
                            let d = Datagram { data: data.to_vec(), from: m.addr, to: local };
                            ep.datagram(d, false).await;
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "QUIC socket receive failed");
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            },
            Some(d) = inbox.recv() => ep.datagram(d, true).await,
            Some(cids) = closed_rx.recv() => {
                for c in cids {
                    ep.conns.remove(&c);
                }
            }
            changed = drain.changed(), if !ep.draining => {
                if changed.is_err() || *drain.borrow() {
                    ep.draining = true;
                }
            }
        }
        if ep.draining && ep.conns.is_empty() {
            break;
        }
    }
}

impl Endpoint {
    async fn datagram(&mut self, mut d: Datagram, forwarded: bool) {
        let hdr = match quiche::Header::from_slice(&mut d.data, CID_LEN) {
            Ok(h) => h,
            Err(_) => {
                self.quic.stats.malformed_packets.inc();
                return;
            }
        };
        let dcid = hdr.dcid.as_ref().to_vec();
        if let Some(tx) = self.conns.get(&dcid) {
            let _ = tx.send(d);
            return;
        }
        if hdr.ty != quiche::Type::Initial {
            // A connection of another worker (its 4-tuple changed): pass it on.
            if let Some(w) = worker_of(&dcid, self.quic.inboxes.len()) {
                if w != self.worker && !forwarded {
                    if let Some(inbox) = self.quic.inboxes.get(w) {
                        self.quic.stats.packets_forwarded.inc();
                        let _ = inbox.send(d);
                    }
                }
            }
            return;
        }
        // Draining, or `enabled: false` (Envoy's disabled QUIC listener): no new connections.
        if self.draining || !self.quic.options().enabled {
            return;
        }
        let (scid, version) = (hdr.scid.as_ref().to_vec(), hdr.version);
        let token = hdr.token.clone().unwrap_or_default();
        if !quiche::version_is_supported(version) {
            let (s, dc) = (
                quiche::ConnectionId::from_ref(&scid),
                quiche::ConnectionId::from_ref(&dcid),
            );
            if let Ok(n) = quiche::negotiate_version(&s, &dc, &mut self.out) {
                self.io.send(&self.out[..n], d.from, n).await;
            }
            return;
        }
        if d.data.len() < MIN_INITIAL_DATAGRAM {
            self.quic.stats.malformed_packets.inc();
            return;
        }
        let odcid = if token.is_empty() {
            None
        } else {
            match self.quic.tokens.validate(&d.from, &token) {
                Some(o) => Some(o),
                None => {
                    self.quic.stats.invalid_retry_token.inc();
                    return;
                }
            }
        };
        if odcid.is_none() && self.handshaking.load(Ordering::Relaxed) >= RETRY_ABOVE_HANDSHAKES {
            self.retry(&scid, &dcid, version, d.from).await;
            return;
        }
        let listener = self.listener.clone();
        let limited = !listener.ignore_global_conn_limit;
        if !self.server.admit(limited) {
            listener.stats.downstream_cx_total.inc();
            listener.stats.downstream_cx_overflow.inc();
            listener.stats.downstream_global_cx_overflow.inc();
            return;
        }
        // After a Retry the client's destination ID is the one the Retry gave, ours.
        let own = match &odcid {
            Some(_) => dcid.clone(),
            None => new_cid(self.worker),
        };
        self.refresh_config();
        let own_id = quiche::ConnectionId::from_ref(&own);
        let odcid_id = odcid.as_deref().map(quiche::ConnectionId::from_ref);
        let mut conn = match quiche::accept(
            &own_id,
            odcid_id.as_ref(),
            self.local,
            d.from,
            &mut self.config,
        ) {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(peer = %d.from, error = %e, "QUIC accept failed");
                self.server.leave(limited);
                return;
            }
        };
        prepare_ssl(conn.as_mut());
        let (tx, rx) = mpsc::unbounded_channel();
        let mut cids = vec![own.clone()];
        if dcid != own {
            cids.push(dcid.clone());
        }
        for c in &cids {
            self.conns.insert(c.clone(), tx.clone());
        }
        let d_from = d.from;
        let _ = tx.send(d);
        self.handshaking.fetch_add(1, Ordering::Relaxed);
        let task = conn::ConnTask {
            io: self.io.clone(),
            listener,
            quic: self.quic.clone(),
            server: self.server.clone(),
            handshaking: self.handshaking.clone(),
            closed: self.closed.clone(),
            cids,
            local: self.local,
            peer: d_from,
            drain: self.drain.clone(),
        };
        tokio::spawn(task.run(conn, rx));
    }

    /// Rebuild the quiche configuration when a control plane changed the listener's
    /// `quic_options` (a configuration quiche refuses keeps the previous one, logged).
    fn refresh_config(&mut self) {
        let now = self.quic.options();
        if Arc::ptr_eq(&now, &self.config_opts) {
            return;
        }
        match quic_config(&now, self.chains.clone()) {
            Ok(c) => self.config = c,
            Err(e) => {
                tracing::error!(listener = %self.listener.name, error = %e, "cannot apply new QUIC options")
            }
        }
        self.config_opts = now;
    }

    async fn retry(&mut self, scid: &[u8], dcid: &[u8], version: u32, peer: SocketAddr) {
        let Some(token) = self.quic.tokens.mint(&peer, dcid) else {
            return;
        };
        let new_scid = new_cid(self.worker);
        let n = quiche::retry(
            &quiche::ConnectionId::from_ref(scid),
            &quiche::ConnectionId::from_ref(dcid),
            &quiche::ConnectionId::from_ref(&new_scid),
            &token,
            version,
            &mut self.out,
        );
        if let Ok(n) = n {
            self.quic.stats.retry_sent.inc();
            self.io.send(&self.out[..n], peer, n).await;
        }
    }
}
