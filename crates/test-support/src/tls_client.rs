//! A blocking BoringSSL client for tests that need precise timing of concurrent handshakes:
//! one full handshake per call, no session reuse, then one HTTP/1.1 request.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use boring::ssl::{
    SslConnector, SslMethod, SslOptions, SslSessionCacheMode, SslVerifyMode, SslVersion,
};

/// What a client may offer.
#[derive(Clone, Default)]
pub struct ClientOpts {
    pub tls12: bool,
    pub cipher: Option<String>,
    pub sigalgs: Option<String>,
}

/// One handshake and request; the handshake duration and the HTTP status line.
pub fn handshake(port: u16, opts: &ClientOpts) -> Result<(Duration, String), String> {
    handshake_with(&connector(opts)?, port)
}

/// A client configuration, built once (building reads the system trust store).
pub fn connector(opts: &ClientOpts) -> Result<SslConnector, String> {
    connector_with_groups(opts, "X25519:P-256")
}

/// [`connector`] offering the key-exchange `groups` (BoringSSL's names), in that order.
pub fn connector_with_groups(opts: &ClientOpts, groups: &str) -> Result<SslConnector, String> {
    let mut b = SslConnector::builder(SslMethod::tls()).map_err(|e| e.to_string())?;
    b.set_verify(SslVerifyMode::NONE);
    b.set_options(SslOptions::NO_TICKET);
    b.set_session_cache_mode(SslSessionCacheMode::OFF);
    if opts.tls12 {
        b.set_max_proto_version(Some(SslVersion::TLS1_2))
            .map_err(|e| e.to_string())?;
    }
    if let Some(c) = &opts.cipher {
        b.set_cipher_list(c).map_err(|e| e.to_string())?;
    }
    if let Some(s) = &opts.sigalgs {
        b.set_sigalgs_list(s).map_err(|e| e.to_string())?;
    }
    b.set_curves_list(groups).map_err(|e| e.to_string())?;
    Ok(b.build())
}

/// One handshake and request with a prepared connector.
pub fn handshake_with(connector: &SslConnector, port: u16) -> Result<(Duration, String), String> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut tls = connector
        .connect("localhost", tcp)
        .map_err(|e| e.to_string())?;
    let took = start.elapsed();
    tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 256];
    let n = tls.read(&mut buf).map_err(|e| e.to_string())?;
    let status = String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    Ok((took, status))
}

/// `n` handshakes started together (threads released by a barrier).
pub fn concurrent(
    port: u16,
    n: usize,
    opts: &ClientOpts,
) -> Vec<Result<(Duration, String), String>> {
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(n));
    let conn = match connector(opts) {
        Ok(c) => c,
        Err(e) => return vec![Err(e); n],
    };
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let (b, c) = (barrier.clone(), conn.clone());
            std::thread::spawn(move || {
                b.wait();
                handshake_with(&c, port)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| {
            h.join()
                .unwrap_or_else(|_| Err("client thread panicked".into()))
        })
        .collect()
}

/// `n` closed-loop clients doing full handshakes for `duration`; completed handshakes.
pub fn closed_loop(
    port: u16,
    n: usize,
    duration: Duration,
    opts: &ClientOpts,
) -> Result<usize, String> {
    closed_loop_with(&connector(opts)?, port, n, duration)
}

/// [`closed_loop`] with a prepared connector.
pub fn closed_loop_with(
    conn: &SslConnector,
    port: u16,
    n: usize,
    duration: Duration,
) -> Result<usize, String> {
    let stop = Instant::now() + duration;
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let c = conn.clone();
            std::thread::spawn(move || {
                let mut done = 0;
                while Instant::now() < stop {
                    handshake_with(&c, port)?;
                    done += 1;
                }
                Ok::<usize, String>(done)
            })
        })
        .collect();
    let mut total = 0;
    for h in handles {
        total += h
            .join()
            .map_err(|_| "client thread panicked".to_string())??;
    }
    Ok(total)
}

/// The serial number (lower-case hex) of the certificate a new connection gets.
pub fn peer_serial(port: u16) -> Result<String, String> {
    let c = connector(&ClientOpts::default())?;
    let tcp = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let tls = c.connect("localhost", tcp).map_err(|e| e.to_string())?;
    let cert = tls.ssl().peer_certificate().ok_or("no peer certificate")?;
    let bn = cert.serial_number().to_bn().map_err(|e| e.to_string())?;
    let hex = bn.to_hex_str().map_err(|e| e.to_string())?;
    Ok(hex.to_string().to_lowercase())
}
