//! `openssl s_client` as a client: one request, session resumption, a captured ClientHello.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `openssl s_client` with `stdin` as input, bounded.
pub fn s_client(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new("timeout")
        .arg("10")
        .arg("openssl")
        .arg("s_client")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl is installed");
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin.as_bytes());
    }
    child.wait_with_output().expect("s_client output")
}

/// `s_client` to `port` offering the session in `sess_in` (if any) and saving the new one to
/// `sess_out` (if any), with a request so that TLS 1.3's post-handshake ticket arrives first.
/// Returns whether the session was reused.
pub fn s_client_session(
    port: u16,
    tls: &str,
    sess_in: Option<&Path>,
    sess_out: Option<&Path>,
) -> bool {
    s_client_session_with(port, tls, sess_in, sess_out, &[])
}

/// [`s_client_session`] with more `s_client` arguments (a client certificate).
pub fn s_client_session_with(
    port: u16,
    tls: &str,
    sess_in: Option<&Path>,
    sess_out: Option<&Path>,
    extra: &[&str],
) -> bool {
    let connect = format!("127.0.0.1:{port}");
    let mut args = vec![
        "-connect".to_string(),
        connect,
        "-servername".into(),
        "localhost".into(),
        tls.into(),
        "-ign_eof".into(),
    ];
    if let Some(p) = sess_in {
        args.extend(["-sess_in".into(), p.display().to_string()]);
    }
    if let Some(p) = sess_out {
        args.extend(["-sess_out".into(), p.display().to_string()]);
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = s_client(
        &args,
        "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("200 OK"), "no response from {port}:\n{text}");
    if let Some(p) = sess_out {
        assert!(p.exists(), "no session saved from {port}:\n{text}");
    }
    let reused = text.lines().any(|l| l.starts_with("Reused, "));
    let new = text.lines().any(|l| l.starts_with("New, "));
    assert!(reused != new, "{text}");
    reused
}

/// A real ClientHello: let `openssl s_client` connect to a local socket and keep what it sends.
pub fn capture_client_hello() -> Vec<u8> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    let mut child = std::process::Command::new("timeout")
        .args(["10", "openssl", "s_client", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["-servername", "localhost"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("openssl s_client");
    let (mut s, _) = l.accept().expect("accept s_client");
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .expect("timeout");
    let mut hello = Vec::new();
    let mut buf = [0u8; 4096];
    // A TLS record: 5-byte header, then the length it announces.
    while hello.len() < 5 || hello.len() < 5 + usize::from(u16::from_be_bytes([hello[3], hello[4]]))
    {
        let n = s.read(&mut buf).expect("read ClientHello");
        assert!(n > 0, "s_client closed early");
        hello.extend_from_slice(&buf[..n]);
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(hello[0], 0x16, "a handshake record");
    assert_eq!(hello[5], 0x01, "a ClientHello");
    assert!(hello.len() > 100, "ClientHello of {} bytes", hello.len());
    hello
}
