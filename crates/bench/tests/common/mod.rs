//! Helpers for the socket tests: certificates, `openssl s_server`, running the binary.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Kills the child when dropped.
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn wait_listening(port: u16) {
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "server on {port} never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
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

pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!("bad JSON ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr)
        })
    }
}

/// Runs the benchmark binary, killed after `limit`.
pub fn bench(args: &[&str], limit: Duration) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_quickshake-bench"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn quickshake-bench");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("wait");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
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
