//! Loopback ports.

use std::net::{TcpListener, TcpStream};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A port nothing listens on now, never handed out before in this test process: the kernel may
/// give the same ephemeral port to two binds in a row once the first is closed, and a gateway
/// started on two equal ports (listener and admin) refuses its config.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("bind an ephemeral port");
        let mut given = GIVEN.lock().unwrap_or_else(PoisonError::into_inner);
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// Waits (10 s at most) until something accepts TCP connections on `127.0.0.1:port`.
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
