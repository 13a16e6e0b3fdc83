//! Plain clients: HTTP/1.1 over a socket (the admin endpoint), curl, reading responses and
//! closes byte-exactly, and polling.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Plain HTTP/1.1 to the admin port.
pub fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    http_request(port, "GET", path)
}

pub fn http_request(port: u16, method: &str, path: &str) -> std::io::Result<(u16, String)> {
    http_exchange(
        port,
        &format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"),
    )
}

/// Sends `request` (a whole HTTP/1 request that asks the server to close) to
/// `127.0.0.1:port` and reads until the server closes: the status (0 when there is none) and
/// the body.
pub fn http_exchange(port: u16, request: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(request.as_bytes())?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// Run curl with a 10 s cap.
pub fn curl(args: &[&str]) -> Output {
    Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .output()
        .expect("curl is installed (scripts/setup)")
}

/// `curl` GET of `url` trusting `testdata/certs/<ca>`, body discarded: stdout is the HTTP status
/// (`000` when there was no response).
pub fn curl_status(url: &str, ca: &str) -> Output {
    curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--cacert",
        &crate::paths::cert(ca),
        url,
    ])
}

/// The HTTP status [`curl_status`] gets, as text (`200`, `000`).
pub fn curl_code(url: &str, ca: &str) -> String {
    String::from_utf8_lossy(&curl_status(url, ca).stdout).into_owned()
}

/// Poll until `f` is true (5 s max).
pub fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("timed out waiting for: {what}");
}

/// One HTTP/1.1 response read byte-exactly (so pipelined responses stay apart): status and
/// head, the Content-Length body consumed; `None` at EOF or error before a full response.
/// The `content-length` of a request or response head (0 when absent or unreadable).
pub fn content_length(head: &str) -> usize {
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0)
}

pub fn read_http1_response(s: &mut impl Read) -> Option<(u16, String)> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => return None,
        }
    }
    let head = String::from_utf8_lossy(&buf).to_string();
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    let len = content_length(&head);
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).ok()?;
    Some((code, head))
}

/// Reads from `s` until the bytes read hold a whole request or response head (through the blank
/// line); `None` at EOF or error first. What follows the head in the last read is kept too.
pub fn read_head(s: &mut impl Read) -> Option<Vec<u8>> {
    let (mut head, mut buf) = (Vec::new(), [0u8; 4096]);
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    Some(head)
}

/// Read until the peer closes (EOF or reset); `None` if it is still open after the read timeout.
pub fn closed_within(s: &mut impl Read) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return None
            }
            Err(_) => return Some(started.elapsed()),
        }
    }
}
