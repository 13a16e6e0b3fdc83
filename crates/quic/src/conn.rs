//! One QUIC connection: a task on its worker that owns the quiche connection, feeds it the
//! datagrams its endpoint routes here, drives the handshake (again whenever a provider's key
//! operation completes: the `Ssl`'s waker notifies this task), then serves HTTP/3: each request
//! runs in its own task ([`respond`]), its response comes back here to be written as its body
//! streams in. Its packets go out through [`QuicIo`], several per GSO send where they fit
//! ([`plan`]).
//! It ends on close, idle timeout, handshake timeout, or drain (GOAWAY, then
//! CONNECTION_CLOSE once the requests in flight are answered).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Response;
use quiche::h3::{self, Header};
use quickshake_http::{ConnInfo, HttpRuntime};
use quickshake_listener::{select_chain, ListenerShared, Network, ServerShared};
use quickshake_tls::quic::{record_failure, set_waker, MAX_UDP_PAYLOAD};
use tokio::sync::{mpsc, watch, Notify};

use crate::gso::plan;
use crate::h3::{request, H3Body};
use crate::respond::{respond, Head, Outgoing, Progress};
use crate::shared::{Datagram, QuicShared};
use crate::udp::QuicIo;

/// HTTP/3's H3_NO_ERROR and H3_GENERAL_PROTOCOL_ERROR (RFC 9114 section 8.1).
const H3_NO_ERROR: u64 = 0x100;
const H3_GENERAL_PROTOCOL_ERROR: u64 = 0x101;
/// QUIC's transport error for a handshake that did not finish in time.
const CONNECTION_REFUSED: u64 = 0x2;

/// Wakes the connection task when a provider's operation completes.
struct NotifyWaker(Arc<Notify>);

impl Wake for NotifyWaker {
    fn wake(self: Arc<Self>) {
        self.0.notify_one();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.notify_one();
    }
}

/// What the connection task is given by its endpoint.
pub(crate) struct ConnTask {
    pub io: Arc<QuicIo>,
    pub listener: Arc<ListenerShared>,
    pub quic: Arc<QuicShared>,
    pub server: Arc<ServerShared>,
    pub handshaking: Arc<AtomicUsize>,
    pub closed: mpsc::UnboundedSender<Vec<Vec<u8>>>,
    pub cids: Vec<Vec<u8>>,
    pub local: SocketAddr,
    pub peer: SocketAddr,
    pub drain: watch::Receiver<bool>,
}

/// The HTTP side, once the handshake is done.
struct Serving {
    h3: h3::Connection,
    rt: Arc<HttpRuntime>,
    info: Arc<ConnInfo>,
    bodies: HashMap<u64, mpsc::UnboundedSender<Bytes>>,
    /// Responses being written.
    pending: Vec<Outgoing>,
    /// Where request tasks send their responses' heads, and what wakes this task when they
    /// have sent something.
    heads: mpsc::UnboundedSender<Head>,
    wake: Arc<Notify>,
    /// Requests received and not yet fully answered.
    in_flight: usize,
    /// Streams whose response is written but not yet acknowledged (quiche forgets a stream
    /// once both sides are done and acknowledged): a drain closes the connection only after
    /// them, since closing discards unsent and unacknowledged stream data.
    unacked: Vec<u64>,
    goaway_sent: bool,
    /// The stream ID after the highest request stream received (for GOAWAY).
    next_stream: u64,
}

impl ConnTask {
    pub(crate) async fn run(
        self,
        mut conn: quiche::Connection,
        mut rx: mpsc::UnboundedReceiver<Datagram>,
    ) {
        let started = Instant::now();
        let notify = Arc::new(Notify::new());
        let waker = Waker::from(Arc::new(NotifyWaker(notify.clone())));
        let deadline = started + self.quic.options().crypto_handshake_timeout;
        let (heads_tx, mut heads_rx) = mpsc::unbounded_channel::<Head>();
        let mut drain = self.drain.clone();
        let mut draining = *drain.borrow();
        let mut serving: Option<Serving> = None;
        let mut handshake_open = true;
        let mut first = true;
        let mut out = vec![0u8; self.io.max_segments() * MAX_UDP_PAYLOAD];
        let peer = self.peer;
        loop {
            // The waker on the `Ssl` before every drive (boring's async key callbacks poll
            // the provider's future with it).
            set_waker(conn.as_mut(), &waker);
            let timeout = conn.timeout().unwrap_or(Duration::from_secs(3600));
            tokio::select! {
                d = rx.recv() => {
                    let Some(d) = d else { break };
                    let ok = self.recv(&mut conn, d);
                    if first && !ok {
                        // A first Initial that does not decrypt: no connection.
                        self.quic.stats.malformed_packets.inc();
                        break;
                    }
                    if first {
                        // A connection from here on (Envoy's QUIC stack makes its session once
                        // the first Initial decrypts).
                        first = false;
                        self.listener.stats.downstream_cx_total.inc();
                        self.listener.stats.downstream_cx_active.inc();
                    }
                    while let Ok(d) = rx.try_recv() {
                        self.recv(&mut conn, d);
                    }
                }
                Some(head) = heads_rx.recv() => {
                    if let Some(s) = serving.as_mut() {
                        s.pending.push(Outgoing::new(head));
                        while let Ok(head) = heads_rx.try_recv() {
                            s.pending.push(Outgoing::new(head));
                        }
                    }
                }
                () = notify.notified() => {}
                () = tokio::time::sleep(timeout) => conn.on_timeout(),
                () = tokio::time::sleep_until(deadline.into()), if handshake_open => {
                    self.listener.stats.downstream_cx_transport_socket_connect_timeout.inc();
                    let _ = conn.close(false, CONNECTION_REFUSED, b"handshake timeout");
                }
                changed = drain.changed(), if !draining => {
                    draining = changed.is_err() || *drain.borrow();
                }
            }
            if handshake_open && conn.is_established() {
                handshake_open = false;
                self.handshaking.fetch_sub(1, Ordering::Relaxed);
                serving = self.established(&mut conn, started, peer, &heads_tx, &notify);
                if serving.is_none() {
                    let _ = conn.close(false, CONNECTION_REFUSED, b"no filter chain");
                }
            }
            if let Some(s) = serving.as_mut() {
                s.serve(&mut conn, draining);
            }
            self.flush(&mut conn, &mut out).await;
            if conn.is_closed() {
                break;
            }
        }
        // Flush a CONNECTION_CLOSE quiche may still hold.
        self.flush(&mut conn, &mut out).await;
        self.finish(&mut conn, handshake_open, serving.as_ref(), started, !first);
    }

    /// Feed one datagram; `false` when quiche refused it.
    fn recv(&self, conn: &mut quiche::Connection, mut d: Datagram) -> bool {
        let info = quiche::RecvInfo {
            from: d.from,
            to: d.to,
        };
        conn.recv(&mut d.data, info).is_ok()
    }

    /// Send all quiche has to send: packets written one after another into `out` (room for
    /// the socket's GSO segment limit), then sent in as few GSO sends as they fit.
    async fn flush(&self, conn: &mut quiche::Connection, out: &mut [u8]) {
        let max = self
            .io
            .max_segments()
            .min(out.len() / MAX_UDP_PAYLOAD)
            .max(1);
        let mut packets = Vec::with_capacity(max);
        loop {
            packets.clear();
            let mut len = 0;
            let mut done = false;
            while packets.len() < max {
                let Some(room) = out.get_mut(len..len + MAX_UDP_PAYLOAD) else {
                    break;
                };
                match conn.send(room) {
                    Ok((n, info)) => {
                        packets.push((n, info.to));
                        len += n;
                    }
                    Err(_) => {
                        done = true;
                        break;
                    }
                }
            }
            for b in plan(&packets, max) {
                if let Some(data) = out.get(b.start..b.start + b.len) {
                    self.io.send(data, b.to, b.segment).await;
                }
            }
            if done || packets.is_empty() {
                return;
            }
        }
    }

    /// The handshake is done: count it, choose the filter chain by SNI, start HTTP/3.
    fn established(
        &self,
        conn: &mut quiche::Connection,
        started: Instant,
        peer: SocketAddr,
        heads: &mpsc::UnboundedSender<Head>,
        wake: &Arc<Notify>,
    ) -> Option<Serving> {
        let stats = &self.listener.stats;
        stats
            .handshake_ms
            .record(started.elapsed().as_secs_f64() * 1000.0);
        let ssl: &mut boring::ssl::SslRef = conn.as_mut();
        stats.ssl.record_success(ssl);
        let version = ssl.version_str().to_string();
        // The client's certificate, for `x-forwarded-client-cert`.
        let tls_peer = quickshake_http::TlsPeer::from_ssl(ssl);
        let sni = conn.server_name().map(str::to_ascii_lowercase);
        let chain = select_chain(&self.listener.chains.load(), sni.as_deref())?;
        let Network::Http(rt) = &chain.network else {
            return None;
        };
        let mut cfg = h3::Config::new().ok()?;
        cfg.set_max_field_section_size(rt.max_request_headers_bytes as u64);
        let h3 = h3::Connection::with_transport(conn, &cfg).ok()?;
        let s = &rt.stats;
        s.downstream_cx_total.inc();
        s.downstream_cx_ssl_total.inc();
        s.downstream_cx_http3_total.inc();
        s.downstream_cx_active.inc();
        Some(Serving {
            h3,
            rt: rt.clone(),
            info: ConnInfo::with_tls_peer(
                peer,
                self.local.to_string(),
                sni,
                Some(version),
                tls_peer,
            ),
            bodies: HashMap::new(),
            pending: Vec::new(),
            heads: heads.clone(),
            wake: wake.clone(),
            in_flight: 0,
            unacked: Vec::new(),
            goaway_sent: false,
            next_stream: 0,
        })
    }

    fn finish(
        &self,
        conn: &mut quiche::Connection,
        handshake_open: bool,
        serving: Option<&Serving>,
        started: Instant,
        counted: bool,
    ) {
        if handshake_open {
            self.handshaking.fetch_sub(1, Ordering::Relaxed);
            // A handshake that got far enough to fail (not a dropped first packet).
            if let Some(code) = conn.local_error().filter(|e| counted && !e.is_app) {
                let code = code.error_code;
                record_failure(&self.listener.stats.ssl, conn.as_mut(), code);
            }
        }
        if conn.is_timed_out() {
            self.quic.stats.idle_timeout.inc();
            if let Some(s) = serving {
                s.rt.stats.downstream_cx_idle_timeout.inc();
            }
        }
        if let Some(s) = serving {
            s.rt.stats.downstream_cx_active.dec();
            s.rt.stats.downstream_cx_destroy.inc();
        }
        let stats = &self.listener.stats;
        if counted {
            stats.downstream_cx_active.dec();
            stats.downstream_cx_destroy.inc();
            stats
                .downstream_cx_length_ms
                .record(started.elapsed().as_secs_f64() * 1000.0);
        }
        self.server.leave(!self.listener.ignore_global_conn_limit);
        let _ = self.closed.send(self.cids.clone());
    }
}

impl Serving {
    /// Read HTTP/3 events, start requests, write responses; on drain, GOAWAY then close once
    /// nothing is in flight.
    fn serve(&mut self, conn: &mut quiche::Connection, draining: bool) {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match self.h3.poll(conn) {
                Ok((stream, h3::Event::Headers { list, more_frames })) => {
                    self.info.touch();
                    self.start(stream, &list, more_frames, draining);
                }
                Ok((stream, h3::Event::Data)) => {
                    while let Ok(n) = self.h3.recv_body(conn, stream, &mut buf) {
                        if let Some(tx) = self.bodies.get(&stream) {
                            let _ = tx.send(Bytes::copy_from_slice(&buf[..n]));
                        }
                    }
                }
                Ok((stream, h3::Event::Finished | h3::Event::Reset(_))) => {
                    self.bodies.remove(&stream);
                }
                Ok((_, h3::Event::GoAway | h3::Event::PriorityUpdate)) => {}
                Err(h3::Error::Done) => break,
                Err(e) => {
                    tracing::debug!(peer = %self.info.peer, error = %e, "HTTP/3 error");
                    self.rt.stats.downstream_cx_protocol_error.inc();
                    let _ = conn.close(true, H3_GENERAL_PROTOCOL_ERROR, b"");
                    return;
                }
            }
        }
        self.write(conn);
        // `stream_capacity` fails for a stream quiche has forgotten: answered and acknowledged.
        self.unacked.retain(|s| conn.stream_capacity(*s).is_ok());
        if draining && !self.goaway_sent {
            self.goaway_sent = true;
            // The first stream not served: every request received so far is answered.
            let _ = self.h3.send_goaway(conn, self.next_stream);
        }
        if self.goaway_sent && self.in_flight == 0 && self.unacked.is_empty() && !conn.is_closed() {
            let _ = conn.close(true, H3_NO_ERROR, b"");
        }
    }

    fn start(&mut self, stream: u64, fields: &[Header], more_frames: bool, draining: bool) {
        self.in_flight += 1;
        self.next_stream = self.next_stream.max(stream + 4);
        let body = if more_frames {
            let (tx, body) = H3Body::channel();
            self.bodies.insert(stream, tx);
            body
        } else {
            H3Body::empty()
        };
        let req = match request(fields, body) {
            Ok(r) => r,
            Err(m) => {
                tracing::debug!(peer = %self.info.peer, reason = m.0, "malformed HTTP/3 request");
                self.rt.stats.downstream_rq_xx[3].inc();
                let mut resp = Response::new(());
                *resp.status_mut() = http::StatusCode::BAD_REQUEST;
                self.pending
                    .push(Outgoing::new(Head::bodiless(stream, &resp)));
                return;
            }
        };
        tokio::spawn(respond(
            req,
            self.rt.clone(),
            self.info.clone(),
            draining,
            stream,
            self.heads.clone(),
            self.wake.clone(),
        ));
    }

    /// Write what flow control lets through; a response leaves `pending` once all of it is
    /// written (or its stream is reset).
    fn write(&mut self, conn: &mut quiche::Connection) {
        let h3 = &mut self.h3;
        let before = self.pending.len();
        let unacked = &mut self.unacked;
        self.pending.retain_mut(|p| match p.write(h3, conn) {
            Progress::Blocked => true,
            Progress::Done => {
                unacked.push(p.stream);
                false
            }
            Progress::Failed => false,
        });
        let done = before - self.pending.len();
        self.in_flight = self.in_flight.saturating_sub(done);
        if done > 0 {
            self.info.touch();
        }
    }
}
