//! End-to-end: the seed configuration runs and serves, HTTP/1.1 and HTTP/2 through curl, the
//! access log, and the admin endpoint (stats, prometheus, filter, /certs, /config_dump
//! redaction, health check, /quitquitquit, SIGTERM drain).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support;
use crate::support::*;

/// The seed fixture with its /etc/ssl paths and fixed ports turned into template placeholders.
fn seed_template() -> String {
    let text = std::fs::read_to_string(testdata("configs/seed-000-envoy.yaml")).expect("seed");
    let out = text
        .replace("/etc/ssl/cert.pem", "{{CERTS}}/rsa2048.cert.pem")
        .replace("/etc/ssl/key.pem", "{{CERTS}}/rsa2048.key.pem")
        .replace("port_value: 9000", "port_value: {{PORT}}")
        .replace("port_value: 9001", "port_value: {{ADMIN}}");
    assert!(
        out.contains("{{PORT}}") && out.contains("{{ADMIN}}"),
        "seed rewrite"
    );
    assert!(
        !out.lines()
            .any(|l| !l.trim_start().starts_with('#') && l.contains("/etc/ssl")),
        "seed rewrite"
    );
    out
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn both(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// curl's status code for a URL (`-w %{http_code}`), with `extra` arguments.
fn curl_code(extra: &[&str], url: &str) -> String {
    let mut args: Vec<&str> = vec!["-o", "/dev/null", "-w", "%{http_code}"];
    args.extend_from_slice(extra);
    args.push(url);
    let out = curl(&args);
    stdout(&out)
}

fn cacert() -> String {
    cert("rsa2048.cert.pem")
}

#[test]
fn seed_config_serves_200() {
    let _lock = support::shared();
    let gw = Gateway::start(&seed_template(), &["--concurrency", "2"]);
    let ca = cacert();
    let out = curl(&[
        "-i",
        "--cacert",
        &ca,
        &format!("https://localhost:{}/", gw.port),
    ]);
    assert!(out.status.success(), "curl failed: {}", both(&out));
    let text = stdout(&out);
    let status_line = text.lines().next().unwrap_or_default();
    assert!(status_line.contains(" 200"), "status line: {status_line}");
    // The seed binds 0.0.0.0, so the stat scope is listener.0.0.0.0_<port>.
    let scope = gw.scope("0.0.0.0");
    eventually("the seed listener counted the handshake", || {
        gw.counter(&format!("{scope}ssl.handshake")) >= 1
    });
    assert!(gw.counter(&format!("{scope}downstream_cx_total")) >= 1);
    assert!(gw.counter("http.ingress_http.downstream_rq_2xx") >= 1);
}

#[test]
fn seed_config_validate_mode() {
    let _lock = support::shared();
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("seed.yaml");
    let (port, admin) = (free_port(), free_port());
    std::fs::write(&cfg, render(&seed_template(), port, 0, admin, dir.path())).expect("write");
    let out = Command::new("timeout")
        .arg("20")
        .arg(binary())
        .arg("-c")
        .arg(&cfg)
        .args(["--mode", "validate"])
        .output()
        .expect("run quickshake");
    assert_eq!(out.status.code(), Some(0), "validate: {}", both(&out));
    assert!(
        stdout(&out).contains("OK"),
        "validate output: {}",
        both(&out)
    );
    // Validation binds nothing: the port is still free.
    std::net::TcpListener::bind(("0.0.0.0", port)).expect("validate must not bind");
}

fn h2_template(hcm_extra: &str) -> String {
    direct_response_config(&plain_cert("rsa2048"), "", hcm_extra)
}

#[test]
fn http1_and_http2_with_stats() {
    let _lock = support::shared();
    let gw = Gateway::start(&h2_template(""), &["--concurrency", "2"]);
    let ca = cacert();
    let url = gw.url("/");

    let h1 = curl(&[
        "--http1.1",
        "--cacert",
        &ca,
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{http_version}",
        &url,
    ]);
    assert_eq!(stdout(&h1), "200 1.1", "http1.1: {}", both(&h1));

    let h2_before = gw.counter("http.ingress_http.downstream_cx_http2_total");
    let h2 = curl(&[
        "--http2",
        "--cacert",
        &ca,
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{http_version}",
        &url,
    ]);
    assert_eq!(stdout(&h2), "200 2", "http2: {}", both(&h2));

    // The body of the direct response comes through on both.
    let body = curl(&["--http2", "--cacert", &ca, &url]);
    assert_eq!(stdout(&body), "hello from quickshake");

    eventually("http2 connection counted", || {
        gw.counter("http.ingress_http.downstream_cx_http2_total") >= h2_before + 2
    });
    assert!(gw.counter("http.ingress_http.downstream_cx_http1_total") >= 1);
    assert!(gw.counter("http.ingress_http.downstream_rq_http2_total") >= 2);
    assert!(gw.counter("http.ingress_http.downstream_rq_http1_total") >= 1);
    assert!(gw.counter("http.ingress_http.downstream_rq_total") >= 3);
    assert!(gw.counter("http.ingress_http.downstream_rq_2xx") >= 3);
    let scope = gw.scope("127.0.0.1");
    assert!(gw.counter(&format!("{scope}ssl.handshake")) >= 3);
}

#[test]
fn access_log_records_each_request() {
    let _lock = support::shared();
    let hcm_extra = r#"          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: {{DIR}}/access.log"#;
    let gw = Gateway::start(&h2_template(hcm_extra), &["--concurrency", "1"]);
    let ca = cacert();
    assert_eq!(
        curl_code(
            &["--http1.1", "--cacert", &ca, "-A", "qs-test-h1"],
            &gw.url("/one?x=1")
        ),
        "200"
    );
    assert_eq!(
        curl_code(
            &["--http2", "--cacert", &ca, "-A", "qs-test-h2"],
            &gw.url("/two")
        ),
        "200"
    );
    assert_eq!(
        curl_code(
            &["--http1.1", "--cacert", &ca, "-X", "POST", "-d", "abc"],
            &gw.url("/three")
        ),
        "200"
    );
    let log_path = gw.dir.path().join("access.log");
    let mut lines = Vec::new();
    eventually("three access log lines", || {
        lines = std::fs::read_to_string(&log_path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        lines.len() >= 3
    });
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let authority = format!("\"localhost:{}\"", gw.port);
    let expect = [
        ("\"GET /one?x=1 HTTP/1.1\" 200 ", "\"qs-test-h1\""),
        ("\"GET /two HTTP/2\" 200 ", "\"qs-test-h2\""),
        ("\"POST /three HTTP/1.1\" 200 ", "\"curl/"),
    ];
    for (line, (req, agent)) in lines.iter().zip(expect) {
        // [START_TIME] "METHOD PATH PROTOCOL" CODE FLAGS RX TX DURATION UPSTREAM_TIME "XFF" "UA" "ID" "AUTHORITY" "UPSTREAM"
        assert!(line.starts_with('['), "{line}");
        let close = line.find("] ").expect("] after START_TIME");
        let ts = &line[1..close];
        assert!(
            ts.len() >= 20 && ts.as_bytes()[4] == b'-' && ts.contains('T'),
            "START_TIME {ts} in {line}"
        );
        let rest = &line[close + 2..];
        assert!(rest.starts_with(req), "expected {req} in {line}");
        assert!(rest.contains(agent), "expected {agent} in {line}");
        assert!(rest.contains(&authority), "expected {authority} in {line}");
        assert!(rest.ends_with("\"-\""), "UPSTREAM_HOST at the end: {line}");
        // Fields after the status code: flags, bytes received, bytes sent, duration.
        let after = &rest[req.len()..];
        let fields: Vec<&str> = after.split(' ').collect();
        assert_eq!(fields[0], "-", "RESPONSE_FLAGS in {line}");
        assert!(fields[1].parse::<u64>().is_ok(), "BYTES_RECEIVED in {line}");
        assert_eq!(
            fields[2],
            "hello from quickshake".len().to_string(),
            "BYTES_SENT in {line}"
        );
        assert!(fields[3].parse::<u64>().is_ok(), "DURATION in {line}");
    }
    // The POST carried a 3-byte body.
    assert!(lines[2].contains("\" 200 - 3 21 "), "{}", lines[2]);
}

#[test]
fn admin_prometheus_and_filter() {
    let _lock = support::shared();
    let gw = Gateway::start(&h2_template(""), &["--concurrency", "1"]);
    assert_eq!(curl_code(&["--cacert", &cacert()], &gw.url("/")), "200");
    let scope = gw.scope("127.0.0.1");
    eventually("handshake counted", || {
        gw.counter(&format!("{scope}ssl.handshake")) >= 1
    });
    let label = format!(
        "envoy_listener_ssl_handshake{{envoy_listener_address=\"127.0.0.1_{}\"}}",
        gw.port
    );
    for path in ["/stats?format=prometheus", "/stats/prometheus"] {
        let (code, body) = gw.admin_get(path);
        assert_eq!(code, 200, "{path}");
        let line = body
            .lines()
            .find(|l| l.starts_with(&label))
            .unwrap_or_else(|| panic!("{label} not in {path}:\n{body}"));
        let value: u64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("value of {line}"));
        assert!(value >= 1, "{line}");
        assert!(
            body.contains("# TYPE envoy_listener_ssl_handshake counter"),
            "TYPE line in {path}"
        );
    }

    let (code, body) = gw.admin_get("/stats?filter=ssl");
    assert_eq!(code, 200);
    let names: Vec<&str> = body
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_once(':').map_or(l, |(n, _)| n))
        .collect();
    assert!(!names.is_empty(), "no ssl stats");
    for n in &names {
        assert!(n.contains("ssl"), "/stats?filter=ssl shows {n}:\n{body}");
    }
    assert!(
        names.contains(&format!("{scope}ssl.handshake").as_str()),
        "{body}"
    );
    assert!(
        !body.contains("downstream_rq_total"),
        "non-ssl stat leaked:\n{body}"
    );
    // The full page has more than the ssl ones.
    let (_, all) = gw.admin_get("/stats");
    assert!(all.contains("http.ingress_http.downstream_rq_total"));
}

fn openssl_serial(file: &str) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-serial", "-in", file])
        .output()
        .expect("openssl x509");
    let text = stdout(&out);
    text.trim()
        .strip_prefix("serial=")
        .unwrap_or_else(|| panic!("openssl serial output: {text}"))
        .to_ascii_lowercase()
}

#[test]
fn admin_certs_shows_serial() {
    let _lock = support::shared();
    let certs = format!("{}\n{}", plain_cert("rsa2048"), plain_cert("ecdsa-p256"));
    let gw = Gateway::start(
        &direct_response_config(&certs, "", ""),
        &["--concurrency", "1"],
    );
    let (code, body) = gw.admin_get("/certs");
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&body).expect("/certs is JSON");
    let chain = v["certificates"][0]["cert_chain"]
        .as_array()
        .unwrap_or_else(|| panic!("cert_chain in {body}"));
    assert_eq!(chain.len(), 2, "{body}");
    for (entry, name) in chain.iter().zip(["rsa2048", "ecdsa-p256"]) {
        let file = cert(&format!("{name}.cert.pem"));
        let want = openssl_serial(&file);
        let got = entry["serial_number"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_lowercase();
        assert_eq!(got, want, "serial of {name} in {body}");
        assert!(
            entry["path"]
                .as_str()
                .unwrap_or_default()
                .ends_with(&format!("{name}.cert.pem")),
            "{body}"
        );
    }
    assert!(!body.contains("PRIVATE KEY"));
}

#[test]
fn admin_config_dump_redacts_inline_key() {
    let _lock = support::shared();
    let key_pem =
        std::fs::read_to_string(certs_dir().join("rsa2048.key.pem")).expect("read key pem");
    let mut certificate = String::from(
        "            - certificate_chain: { filename: {{CERTS}}/rsa2048.cert.pem }\n              private_key:\n                inline_string: |\n",
    );
    for line in key_pem.lines() {
        certificate.push_str("                  ");
        certificate.push_str(line);
        certificate.push('\n');
    }
    let gw = Gateway::start(
        &direct_response_config(certificate.trim_end(), "", ""),
        &["--concurrency", "1"],
    );
    // The inline key really is in use.
    assert_eq!(curl_code(&["--cacert", &cacert()], &gw.url("/")), "200");
    let (code, dump) = gw.admin_get("/config_dump");
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&dump).expect("config_dump is JSON");
    assert!(dump.contains("[redacted]"), "{dump}");
    assert!(dump.contains("rsa2048.cert.pem"), "file names stay: {dump}");
    let body_lines: Vec<&str> = key_pem
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() >= 16)
        .collect();
    assert!(body_lines.len() > 10, "a real key");
    for l in body_lines {
        assert!(!dump.contains(l), "key line {l} in /config_dump");
    }
    assert!(!dump.contains("BEGIN PRIVATE KEY") && !dump.contains("BEGIN RSA PRIVATE KEY"));
    let text = v.to_string();
    assert!(text.contains("BootstrapConfigDump"), "{text}");
}

#[test]
fn admin_healthcheck_fail_requires_post() {
    let _lock = support::shared();
    let gw = Gateway::start(&h2_template(""), &["--concurrency", "1"]);
    let (code, _) = gw.admin_get("/healthcheck/fail");
    assert_eq!(code, 405, "GET on a mutating endpoint");
    assert_eq!(gw.counter("server.health_check_failed"), 0);
    let (code, body) = gw.admin_post("/healthcheck/fail");
    assert_eq!(code, 200, "{body}");
    assert_eq!(gw.counter("server.health_check_failed"), 1);
    let (code, _) = gw.admin_post("/healthcheck/ok");
    assert_eq!(code, 200);
    assert_eq!(gw.counter("server.health_check_failed"), 0);
    // Serving is not affected.
    assert_eq!(curl_code(&["--cacert", &cacert()], &gw.url("/")), "200");
    let (code, info) = gw.admin_get("/server_info");
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&info).expect("server_info JSON");
    assert_eq!(v["state"], "LIVE", "{info}");
}

/// Is the process gone (a zombie waiting for us, or reaped)?
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .map(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'))
            .unwrap_or(false),
    }
}

#[test]
fn admin_quitquitquit_exits_zero() {
    let _lock = support::shared();
    let mut gw = Gateway::start(
        &h2_template(""),
        &["--concurrency", "2", "--drain-time-s", "3"],
    );
    assert_eq!(curl_code(&["--cacert", &cacert()], &gw.url("/")), "200");
    let (code, _) = gw.admin_get("/quitquitquit");
    assert_eq!(code, 405, "GET /quitquitquit must be refused");
    let (code, _) = gw.admin_post("/quitquitquit");
    assert_eq!(code, 200);
    let pid = gw.pid();
    let deadline = Instant::now() + Duration::from_secs(8);
    while !exited(pid) {
        assert!(
            Instant::now() < deadline,
            "still running 8 s after /quitquitquit:\n{}",
            gw.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Reap it (the SIGTERM lands on an exited process) and read its status.
    let status = gw.terminate().expect("exit status");
    assert!(status.success(), "exit status {status}: {}", gw.log_text());
}

#[test]
fn sigterm_drains_and_exits_zero() {
    let _lock = support::shared();
    let mut gw = Gateway::start(
        &h2_template(""),
        &["--concurrency", "2", "--drain-time-s", "3"],
    );
    assert_eq!(curl_code(&["--cacert", &cacert()], &gw.url("/")), "200");
    gw.assert_terminates_cleanly_within(Duration::from_secs(5));
    let log = gw.log_text();
    assert!(log.contains("draining"), "{log}");
}

#[test]
fn sigterm_with_an_open_connection_exits_within_drain_time() {
    let _lock = support::shared();
    let mut gw = Gateway::start(
        &h2_template(""),
        &["--concurrency", "1", "--drain-time-s", "2"],
    );
    // An idle raw connection still in its handshake keeps the drain waiting, at most drain-time.
    let held = std::net::TcpStream::connect(("127.0.0.1", gw.port)).expect("connect");
    let scope = gw.scope("127.0.0.1");
    eventually("held connection accepted", || {
        gw.counter(&format!("{scope}downstream_cx_active")) == 1
    });
    gw.assert_terminates_cleanly_within(Duration::from_secs(6));
    drop(held);
}

#[test]
fn http10_request_counts_as_http1() {
    let _lock = support::shared();
    let gw = Gateway::start(&h2_template(""), &["--concurrency", "1"]);
    let out = curl(&[
        "--http1.0",
        "--cacert",
        &cacert(),
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &gw.url("/"),
    ]);
    assert_eq!(stdout(&out), "200", "{}", both(&out));
    eventually("request counted", || {
        gw.counter("http.ingress_http.downstream_rq_total") == 1
    });
    assert_eq!(gw.counter("http.ingress_http.downstream_rq_http1_total"), 1);
}

#[test]
fn admin_config_dump_redacts_inline_ticket_keys() {
    let _lock = support::shared();
    let out = Command::new("openssl")
        .args(["base64", "-A", "-in"])
        .arg(certs_dir().join("ticket.key"))
        .output()
        .expect("openssl base64");
    let b64 = stdout(&out).trim().to_string();
    assert!(b64.len() >= 100, "base64 of 80 bytes: {b64}");
    let extra =
        format!("          session_ticket_keys: {{ keys: [ {{ inline_bytes: \"{b64}\" }} ] }}");
    let gw = Gateway::start(
        &direct_response_config(&plain_cert("rsa2048"), &extra, ""),
        &["--concurrency", "1"],
    );
    assert_eq!(curl_code(&["--cacert", &cacert()], &gw.url("/")), "200");
    let (code, dump) = gw.admin_get("/config_dump");
    assert_eq!(code, 200);
    assert!(!dump.contains(&b64), "ticket key in /config_dump");
    assert!(!dump.contains(&b64[..40]), "ticket key in /config_dump");
    assert!(dump.contains("[redacted]"), "{dump}");
}
