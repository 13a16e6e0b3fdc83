//! Helpers of the bench's socket tests: certificates, `openssl s_server`, running the binary,
//! a fake admin endpoint (ports and processes come from `quickshake-test-support`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use quickshake_test_support::net::{free_port, wait_listening};
pub use quickshake_test_support::process::{run_bounded, KillOnDrop as Server, Run};

pub struct Certs {
    pub dir: tempfile::TempDir,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A self-signed RSA-2048 certificate for `localhost`.
pub fn make_certs() -> Certs {
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
        ])
        .args(["-addext", "subjectAltName=DNS:localhost", "-days", "2"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("run openssl req");
    assert!(
        out.status.success(),
        "openssl req: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Certs { dir, cert, key }
}

/// `openssl s_server -www` on a free port, with the given extra flags.
pub fn s_server(certs: &Certs, extra: &[&str]) -> (Server, u16) {
    let port = free_port();
    let child = Command::new("openssl")
        .arg("s_server")
        .args(["-accept", &port.to_string(), "-www", "-quiet"])
        .arg("-cert")
        .arg(&certs.cert)
        .arg("-key")
        .arg(&certs.key)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn openssl s_server");
    let server = Server(child);
    wait_listening(port);
    (server, port)
}

/// Runs the benchmark binary, killed after `limit`.
pub fn bench(args: &[&str], limit: Duration) -> Run {
    run_bounded(
        Command::new(env!("CARGO_BIN_EXE_quickshake-bench")).args(args),
        limit,
    )
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// A fake admin endpoint: each GET returns the next page of `pages` (the last one repeats).
pub fn fake_stats(pages: Vec<String>) -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for (i, s) in l.incoming().enumerate() {
            let Ok(mut s) = s else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let body = &pages[i.min(pages.len() - 1)];
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// A stats page with one listener's handshake, session_reused and X25519 counters.
pub fn page(handshakes: u64, reused: u64) -> String {
    format!(
        "listener.127.0.0.1_1.ssl.handshake: {handshakes}\n\
         listener.127.0.0.1_1.ssl.session_reused: {reused}\n\
         listener.127.0.0.1_1.ssl.curves.X25519: {handshakes}\n\
         cluster.x.ssl.handshake: 5\n"
    )
}
