//! HTTP/3 over QUIC for one request on a brand-new connection, without sockets: the QUIC
//! client configuration (on a BoringSSL context `client::tls` builds, so the TLS options are
//! those of the TCP mode), and [`Exchange`], one connection's state machine (quiche's
//! `Connection` and HTTP/3 layer): the caller moves datagrams in and out and calls
//! [`Exchange::advance`]; once the handshake is done it sends `GET path` with FIN and reads the
//! response to its end. No session is ever offered (quiche only resumes when
//! `Connection::set_session` is called, which nothing here does) and 0-RTT is never enabled,
//! so each connection is a full TLS 1.3 handshake; [`Exchange::resumed`] still reports what
//! BoringSSL says (`SSL_session_reused`, or early data) so the run can refuse otherwise.
//! Socket I/O is `client::quic`'s.

use std::net::SocketAddr;
use std::sync::Mutex;

use quiche::h3::{self, NameValue};

use crate::report::ErrorKind;

/// Largest UDP payload sent or accepted (quiche's default; fits the loopback and Ethernet).
pub const MAX_DATAGRAM: usize = 1350;
/// HTTP/3 `H3_NO_ERROR`: the application code of a clean CONNECTION_CLOSE.
const H3_NO_ERROR: u64 = 0x100;

/// How a request on a QUIC connection failed: the error kind it counts under, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H3Failure {
    pub kind: ErrorKind,
    pub msg: String,
}

fn fail(kind: ErrorKind, msg: impl Into<String>) -> H3Failure {
    H3Failure {
        kind,
        msg: msg.into(),
    }
}

/// The QUIC client configuration every connection of a run is made from: ALPN `h3`, no
/// early data, no active migration, flow control for one small response, idle timeout
/// `idle_ms` (the run's request timeout bounds each request anyway).
pub fn client_config(
    ctx: boring::ssl::SslContextBuilder,
    idle_ms: u64,
) -> Result<quiche::Config, String> {
    let e = |what: &str, err: quiche::Error| format!("QUIC setup, {what}: {err}");
    let mut c = quiche::Config::with_boring_ssl_ctx_builder(quiche::PROTOCOL_VERSION, ctx)
        .map_err(|x| e("TLS context", x))?;
    c.set_application_protos(h3::APPLICATION_PROTOCOL)
        .map_err(|x| e("ALPN", x))?;
    c.set_max_idle_timeout(idle_ms);
    c.set_max_recv_udp_payload_size(MAX_DATAGRAM);
    c.set_max_send_udp_payload_size(MAX_DATAGRAM);
    c.set_initial_max_data(1 << 20);
    c.set_initial_max_stream_data_bidi_local(1 << 20);
    c.set_initial_max_stream_data_bidi_remote(1 << 20);
    c.set_initial_max_stream_data_uni(1 << 20);
    c.set_initial_max_streams_bidi(16);
    // The server's control and QPACK streams.
    c.set_initial_max_streams_uni(16);
    c.set_disable_active_migration(true);
    Ok(c)
}

/// What every connection of a run shares: the QUIC configuration (its BoringSSL context
/// included; quiche needs it mutably to make a connection), the HTTP/3 settings and the
/// request.
pub struct H3Client {
    config: Mutex<quiche::Config>,
    h3: h3::Config,
    request: Vec<h3::Header>,
}

impl H3Client {
    /// See [`client_config`] and [`request_headers`].
    pub fn new(
        ctx: boring::ssl::SslContextBuilder,
        idle_ms: u64,
        path: &str,
        authority: &str,
    ) -> Result<H3Client, String> {
        Ok(H3Client {
            config: Mutex::new(client_config(ctx, idle_ms)?),
            h3: h3::Config::new().map_err(|e| format!("HTTP/3 setup: {e}"))?,
            request: request_headers(path, authority),
        })
    }

    /// A new connection carrying the run's request; see [`Exchange::connect`] (an IP address
    /// as `server_name` is not sent as SNI, see [`sni`]).
    pub fn connect(
        &self,
        server_name: &str,
        local: SocketAddr,
        peer: SocketAddr,
    ) -> Result<Exchange, H3Failure> {
        let mut config = self.config.lock().unwrap_or_else(|p| p.into_inner());
        Exchange::connect(
            &mut config,
            sni(server_name),
            local,
            peer,
            self.request.clone(),
        )
    }

    /// [`Exchange::advance`] with the run's HTTP/3 settings.
    pub fn advance(&self, ex: &mut Exchange) -> Result<Progress, H3Failure> {
        ex.advance(&self.h3)
    }
}

/// The SNI (and name quiche verifies) for `server_name`: none for an IP address, which SNI
/// cannot carry (RFC 6066) and Envoy refuses; its verification is set on the TLS context.
pub fn sni(server_name: &str) -> Option<&str> {
    let bare = server_name.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<std::net::IpAddr>()
        .is_err()
        .then_some(server_name)
}

/// The request headers of `GET path` (pseudo-headers first).
pub fn request_headers(path: &str, authority: &str) -> Vec<h3::Header> {
    vec![
        h3::Header::new(b":method", b"GET"),
        h3::Header::new(b":scheme", b"https"),
        h3::Header::new(b":authority", authority.as_bytes()),
        h3::Header::new(b":path", path.as_bytes()),
        h3::Header::new(b"user-agent", b"quickshake-bench"),
    ]
}

/// The `:status` of a response header list.
pub fn response_status<T: NameValue>(headers: &[T]) -> Result<u16, String> {
    let h = headers
        .iter()
        .find(|h| h.name() == b":status")
        .ok_or("HTTP/3 response without :status")?;
    std::str::from_utf8(h.value())
        .ok()
        .and_then(|v| v.parse::<u16>().ok())
        .filter(|s| (100..1000).contains(s))
        .ok_or_else(|| format!("bad :status {:?}", String::from_utf8_lossy(h.value())))
}

/// The TLS alert a QUIC transport error code carries (`CRYPTO_ERROR`, 0x100 + alert, RFC 9001
/// section 4.8), by name where it is a common one.
pub fn tls_alert(is_app: bool, code: u64) -> Option<String> {
    if is_app || !(0x100..0x200).contains(&code) {
        return None;
    }
    let alert = code - 0x100;
    let name = match alert {
        10 => "unexpected_message",
        40 => "handshake_failure",
        42 => "bad_certificate",
        45 => "certificate_expired",
        46 => "certificate_unknown",
        48 => "unknown_ca",
        50 => "decode_error",
        51 => "decrypt_error",
        70 => "protocol_version",
        80 => "internal_error",
        109 => "missing_extension",
        112 => "unrecognized_name",
        116 => "certificate_required",
        120 => "no_application_protocol",
        _ => return Some(alert.to_string()),
    };
    Some(format!("{alert} {name}"))
}

/// Where an exchange stands after [`Exchange::advance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The QUIC/TLS handshake is not done yet.
    Handshaking,
    /// The request is sent; the response has not ended.
    Waiting,
    /// The response ended (FIN) with this final status.
    Done(u16),
}

/// One connection carrying one request.
pub struct Exchange {
    conn: quiche::Connection,
    h3: Option<h3::Connection>,
    stream: Option<u64>,
    status: Option<u16>,
    body_bytes: u64,
    request: Vec<h3::Header>,
}

impl Exchange {
    /// A new client connection to `peer` from `local` (its Initial is ready to [`send`]).
    /// `server_name` goes into SNI and certificate verification; the source connection ID is
    /// random.
    ///
    /// [`send`]: Exchange::send
    pub fn connect(
        config: &mut quiche::Config,
        server_name: Option<&str>,
        local: SocketAddr,
        peer: SocketAddr,
        request: Vec<h3::Header>,
    ) -> Result<Exchange, H3Failure> {
        let mut scid = [0u8; quiche::MAX_CONN_ID_LEN];
        boring::rand::rand_bytes(&mut scid)
            .map_err(|e| fail(ErrorKind::Tls, format!("random connection ID: {e}")))?;
        let scid = quiche::ConnectionId::from_ref(&scid);
        let conn = quiche::connect(server_name, &scid, local, peer, config)
            .map_err(|e| fail(ErrorKind::Tls, format!("QUIC connect: {e}")))?;
        Ok(Exchange {
            conn,
            h3: None,
            stream: None,
            status: None,
            body_bytes: 0,
            request,
        })
    }

    /// The next datagram to send into `out`, `None` when there is nothing to send now.
    pub fn send(&mut self, out: &mut [u8]) -> Result<Option<usize>, H3Failure> {
        match self.conn.send(out) {
            Ok((n, _)) => Ok(Some(n)),
            Err(quiche::Error::Done) => Ok(None),
            Err(e) => Err(self.failure(format!("QUIC send: {e}"))),
        }
    }

    /// Feeds one received datagram.
    pub fn recv(
        &mut self,
        datagram: &mut [u8],
        from: SocketAddr,
        to: SocketAddr,
    ) -> Result<(), H3Failure> {
        match self.conn.recv(datagram, quiche::RecvInfo { from, to }) {
            Ok(_) | Err(quiche::Error::Done) => Ok(()),
            Err(e) => Err(self.failure(format!("QUIC recv: {e}"))),
        }
    }

    /// When [`on_timeout`](Exchange::on_timeout) is due, from now.
    pub fn timeout(&self) -> Option<std::time::Duration> {
        self.conn.timeout()
    }

    pub fn on_timeout(&mut self) {
        self.conn.on_timeout();
    }

    pub fn is_established(&self) -> bool {
        self.conn.is_established()
    }

    /// Whether the handshake was anything but full: a resumed session or early data.
    pub fn resumed(&self) -> bool {
        self.conn.is_resumed() || self.conn.is_in_early_data()
    }

    /// Body bytes of the response read so far.
    pub fn body_bytes(&self) -> u64 {
        self.body_bytes
    }

    /// Moves the exchange on after I/O: once the handshake is done, opens HTTP/3 and sends the
    /// request; then reads response events until the stream ends. A closed or closing
    /// connection before the response ended is a failure (a TLS one during the handshake).
    pub fn advance(&mut self, config: &h3::Config) -> Result<Progress, H3Failure> {
        if self.conn.is_closed() || self.conn.is_draining() {
            return Err(self.failure("connection closed".into()));
        }
        if !self.conn.is_established() {
            return Ok(Progress::Handshaking);
        }
        if self.h3.is_none() {
            let mut h3 = h3::Connection::with_transport(&mut self.conn, config)
                .map_err(|e| fail(ErrorKind::Http, format!("HTTP/3 setup: {e}")))?;
            let id = h3
                .send_request(&mut self.conn, &self.request, true)
                .map_err(|e| fail(ErrorKind::Http, format!("HTTP/3 request: {e}")))?;
            self.stream = Some(id);
            self.h3 = Some(h3);
        }
        let Some(h3) = self.h3.as_mut() else {
            return Ok(Progress::Waiting);
        };
        let mut scratch = [0u8; 4096];
        loop {
            match h3.poll(&mut self.conn) {
                Ok((id, h3::Event::Headers { list, .. })) if Some(id) == self.stream => {
                    let status = response_status(&list).map_err(|m| fail(ErrorKind::Http, m))?;
                    // Interim (1xx) heads are skipped; the final status is the first other.
                    if self.status.is_none() && !(100..200).contains(&status) {
                        self.status = Some(status);
                    }
                }
                Ok((id, h3::Event::Data)) => loop {
                    match h3.recv_body(&mut self.conn, id, &mut scratch) {
                        Ok(n) => self.body_bytes += n as u64,
                        Err(h3::Error::Done) => break,
                        Err(e) => {
                            return Err(fail(ErrorKind::Io, format!("HTTP/3 body: {e}")));
                        }
                    }
                },
                Ok((id, h3::Event::Finished)) if Some(id) == self.stream => {
                    return match self.status {
                        Some(s) => Ok(Progress::Done(s)),
                        None => Err(fail(ErrorKind::Http, "response ended without headers")),
                    };
                }
                Ok((id, h3::Event::Reset(code))) if Some(id) == self.stream => {
                    return Err(fail(
                        ErrorKind::Io,
                        format!("server reset the request stream (error 0x{code:x})"),
                    ));
                }
                Ok(_) => {}
                Err(h3::Error::Done) => return Ok(Progress::Waiting),
                Err(e) => return Err(fail(ErrorKind::Http, format!("HTTP/3: {e}"))),
            }
        }
    }

    /// Closes the connection cleanly (`H3_NO_ERROR`); [`send`](Exchange::send) then yields
    /// the CONNECTION_CLOSE.
    pub fn close(&mut self) {
        // Err(Done): already closed, nothing to do.
        let _ = self.conn.close(true, H3_NO_ERROR, b"");
    }

    /// A failure with the connection's own account of why it ended, when it has one; during
    /// the handshake it counts as a TLS failure.
    fn failure(&self, what: String) -> H3Failure {
        let kind = if self.conn.is_established() {
            ErrorKind::Io
        } else {
            ErrorKind::Tls
        };
        let detail = |who: &str, e: &quiche::ConnectionError| {
            format!(
                ", {who} closed it: {} error 0x{:x}{} {:?}",
                if e.is_app { "application" } else { "transport" },
                e.error_code,
                tls_alert(e.is_app, e.error_code)
                    .map(|a| format!(" (TLS alert {a})"))
                    .unwrap_or_default(),
                String::from_utf8_lossy(&e.reason)
            )
        };
        let why = if let Some(e) = self.conn.peer_error() {
            detail("peer", e)
        } else if let Some(e) = self.conn.local_error() {
            detail("client", e)
        } else if self.conn.is_timed_out() {
            ", idle timeout".to_string()
        } else {
            String::new()
        };
        fail(kind, format!("{what}{why}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boring::ssl::{SslContextBuilder, SslMethod, SslVerifyMode, SslVersion};
    use quickshake_test_support::paths::cert;

    fn client_ctx(verify: bool) -> SslContextBuilder {
        let mut b = SslContextBuilder::new(SslMethod::tls()).unwrap();
        b.set_min_proto_version(Some(SslVersion::TLS1_3)).unwrap();
        if verify {
            b.set_verify(SslVerifyMode::PEER);
        } else {
            b.set_verify(SslVerifyMode::NONE);
        }
        b
    }

    fn server_config() -> quiche::Config {
        let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION).unwrap();
        c.load_cert_chain_from_pem_file(&cert("rsa2048.cert.pem"))
            .unwrap();
        c.load_priv_key_from_pem_file(&cert("rsa2048.key.pem"))
            .unwrap();
        c.set_application_protos(h3::APPLICATION_PROTOCOL).unwrap();
        c.set_initial_max_data(1 << 20);
        c.set_initial_max_stream_data_bidi_remote(1 << 20);
        c.set_initial_max_stream_data_uni(1 << 20);
        c.set_initial_max_streams_bidi(16);
        c.set_initial_max_streams_uni(16);
        c
    }

    /// A quiche HTTP/3 server in memory, answering every request with `status` and "ok".
    struct Server {
        conn: quiche::Connection,
        h3: Option<h3::Connection>,
        status: &'static [u8],
    }

    impl Server {
        fn step(&mut self) {
            if !self.conn.is_established() {
                return;
            }
            let h3 = self.h3.get_or_insert_with(|| {
                h3::Connection::with_transport(&mut self.conn, &h3::Config::new().unwrap()).unwrap()
            });
            while let Ok((id, ev)) = h3.poll(&mut self.conn) {
                if let h3::Event::Headers { .. } = ev {
                    let head = [
                        h3::Header::new(b":status", self.status),
                        h3::Header::new(b"content-length", b"2"),
                    ];
                    h3.send_response(&mut self.conn, id, &head, false).unwrap();
                    h3.send_body(&mut self.conn, id, b"ok", true).unwrap();
                }
            }
        }
    }

    /// Runs a client exchange against the in-memory server until it ends.
    fn run(verify: bool, status: &'static [u8]) -> (Result<Progress, H3Failure>, Exchange) {
        let (ca, sa): (SocketAddr, SocketAddr) = (
            "127.0.0.1:1000".parse().unwrap(),
            "127.0.0.1:2000".parse().unwrap(),
        );
        let mut cc = client_config(client_ctx(verify), 5_000).unwrap();
        let mut ex = Exchange::connect(
            &mut cc,
            Some("localhost"),
            ca,
            sa,
            request_headers("/x", "localhost:2000"),
        )
        .unwrap();
        let mut sc = server_config();
        let mut server: Option<Server> = None;
        let h3c = h3::Config::new().unwrap();
        let mut buf = [0u8; 65536];
        for _ in 0..100 {
            while let Some(n) = ex.send(&mut buf).unwrap_or(None) {
                let s = server.get_or_insert_with(|| {
                    let scid = quiche::ConnectionId::from_ref(&[7u8; 16]);
                    Server {
                        conn: quiche::accept(&scid, None, sa, ca, &mut sc).unwrap(),
                        h3: None,
                        status,
                    }
                });
                let _ = s
                    .conn
                    .recv(&mut buf[..n], quiche::RecvInfo { from: ca, to: sa });
            }
            if let Some(s) = server.as_mut() {
                s.step();
                while let Ok((n, _)) = s.conn.send(&mut buf) {
                    if let Err(e) = ex.recv(&mut buf[..n], sa, ca) {
                        return (Err(e), ex);
                    }
                }
            }
            match ex.advance(&h3c) {
                Ok(Progress::Done(s)) => return (Ok(Progress::Done(s)), ex),
                Ok(_) => {}
                Err(e) => return (Err(e), ex),
            }
        }
        (Ok(Progress::Waiting), ex)
    }

    #[test]
    fn full_handshake_then_response() {
        let (r, mut ex) = run(false, b"200");
        assert_eq!(r, Ok(Progress::Done(200)));
        assert!(!ex.resumed());
        assert_eq!(ex.body_bytes(), 2);
        ex.close();
        let mut out = [0u8; MAX_DATAGRAM];
        assert!(
            matches!(ex.send(&mut out), Ok(Some(_))),
            "CONNECTION_CLOSE to send"
        );
    }

    #[test]
    fn status_is_reported() {
        assert_eq!(run(false, b"503").0, Ok(Progress::Done(503)));
    }

    #[test]
    fn untrusted_certificate_is_a_tls_failure() {
        let (r, ex) = run(true, b"200");
        let e = r.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Tls, "{e:?}");
        assert!(e.msg.contains("unknown_ca"), "{e:?}");
        assert!(!ex.is_established());
    }

    #[test]
    fn headers_and_status() {
        let h = request_headers("/p?q=1", "h:443");
        let names: Vec<&[u8]> = h.iter().map(|h| h.name()).collect();
        assert_eq!(
            names,
            [
                &b":method"[..],
                b":scheme",
                b":authority",
                b":path",
                b"user-agent"
            ]
        );
        assert_eq!(h[3].value(), b"/p?q=1");
        let ok = [h3::Header::new(b":status", b"204")];
        assert_eq!(response_status(&ok), Ok(204));
        assert!(response_status(&[h3::Header::new(b":status", b"2x")]).is_err());
        assert!(response_status(&[h3::Header::new(b":status", b"42")]).is_err());
        assert!(response_status::<h3::Header>(&[]).is_err());
        assert_eq!(sni("localhost"), Some("localhost"));
        assert_eq!(sni("127.0.0.1"), None);
        assert_eq!(sni("::1"), None);
        assert_eq!(tls_alert(false, 0x130).as_deref(), Some("48 unknown_ca"));
        assert_eq!(tls_alert(false, 0x1ff).as_deref(), Some("255"));
        assert_eq!(tls_alert(true, 0x130), None);
        assert_eq!(tls_alert(false, 0x0a), None);
    }
}
