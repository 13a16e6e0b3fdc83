//! Certificate rotation without restarts, as Kubernetes mounts Secrets: files reached through a
//! `..data` symlink that is swapped atomically (Envoy's `watched_directory`). New handshakes get
//! the new pair while the load generator runs and none fails; a corrupt replacement is rejected
//! and the old pair keeps serving.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support;
use crate::support::providers::batching_cert;
use crate::support::tls_client::peer_serial;
use crate::support::{bench_binary, cert, direct_response_config, eventually, Gateway};

const ENV: [(&str, &str); 1] = [("QUICKSHAKE_RELOAD_INTERVAL_MS", "100")];

fn serial_of(name: &str) -> String {
    let out = Command::new("openssl")
        .args([
            "x509",
            "-noout",
            "-serial",
            "-in",
            &cert(&format!("{name}.cert.pem")),
        ])
        .output()
        .expect("openssl x509");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .trim_start_matches("serial=")
        .to_lowercase()
}

/// Make `dir/..<version>/{tls.crt,tls.key}` and point `dir/..data` at it atomically, as the
/// kubelet does; `dir/tls.crt` and `dir/tls.key` are symlinks through `..data`.
fn publish(dir: &Path, version: &str, cert_pem: &[u8], key_pem: &[u8]) {
    let v = dir.join(format!("..{version}"));
    std::fs::create_dir_all(&v).expect("version dir");
    std::fs::write(v.join("tls.crt"), cert_pem).expect("cert");
    std::fs::write(v.join("tls.key"), key_pem).expect("key");
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    symlink(format!("..{version}"), &tmp).expect("symlink");
    std::fs::rename(&tmp, dir.join("..data")).expect("atomic swap");
    for f in ["tls.crt", "tls.key"] {
        if std::fs::symlink_metadata(dir.join(f)).is_err() {
            symlink(format!("..data/{f}"), dir.join(f)).expect("file symlink");
        }
    }
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(cert(name)).expect("test cert")
}

fn start(provider: bool) -> (Gateway, std::path::PathBuf) {
    let secret = tempfile::tempdir().expect("tempdir").keep();
    publish(
        &secret,
        "v1",
        &read("rsa2048.cert.pem"),
        &read("rsa2048.key.pem"),
    );
    let crt = secret.join("tls.crt").display().to_string();
    let key = secret.join("tls.key").display().to_string();
    let entry = if provider {
        batching_cert("rsa2048", &[("engine", "software")])
            .replace("{{CERTS}}/rsa2048.cert.pem", &crt)
            .replace("{{CERTS}}/rsa2048.key.pem", &key)
    } else {
        format!("            - certificate_chain: {{ filename: {crt} }}\n              private_key: {{ filename: {key} }}\n")
    };
    let entry = format!(
        "{entry}              watched_directory: {{ path: {} }}\n",
        secret.display()
    );
    let gw = Gateway::start_with_env(
        &direct_response_config(&entry, "", ""),
        &["--concurrency", "1"],
        &ENV,
    );
    (gw, secret)
}

fn bench_in_background(gw: &Gateway, seconds: u32) -> std::thread::JoinHandle<serde_json::Value> {
    let (port, admin) = (gw.port, gw.admin);
    std::thread::spawn(move || {
        let out = Command::new("timeout")
            .arg("60")
            .arg(bench_binary())
            .args(["-c", "4", "-d", &format!("{seconds}s"), "--json", "-k"])
            .arg("--server-stats")
            .arg(format!("http://127.0.0.1:{admin}"))
            .arg(format!("https://localhost:{port}/"))
            .output()
            .expect("bench");
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("bench JSON: {e}: {}", String::from_utf8_lossy(&out.stdout)))
    })
}

fn rotate_under_load(provider: bool) {
    let (gw, secret) = start(provider);
    let scope = gw.scope("127.0.0.1");
    assert_eq!(peer_serial(gw.port).expect("serial"), serial_of("rsa2048"));
    let load = bench_in_background(&gw, 3);
    std::thread::sleep(Duration::from_millis(800));
    publish(
        &secret,
        "v2",
        &read("other.cert.pem"),
        &read("other.key.pem"),
    );
    eventually("reload", || {
        gw.counter(&format!("{scope}ssl.context_reload_success")) >= 1
    });
    assert_eq!(
        peer_serial(gw.port).expect("serial"),
        serial_of("other"),
        "new connections get the new pair"
    );
    let (_, certs) = gw.admin_get("/certs");
    assert!(
        certs.to_lowercase().contains(&serial_of("other")),
        "/certs shows the new pair: {certs}"
    );
    let report = load.join().expect("bench thread");
    assert_eq!(
        report["errors"]["total"], 0,
        "no failed handshake during rotation: {report}"
    );
    assert!(report["handshakes"].as_u64().unwrap_or(0) > 10, "{report}");

    // A half-written certificate: rejected, counted, and the current pair keeps serving.
    let good = read("rsa2048.cert.pem");
    publish(
        &secret,
        "v3",
        &good[..good.len() / 2],
        &read("rsa2048.key.pem"),
    );
    eventually("rejection", || {
        gw.counter(&format!("{scope}ssl.context_reload_rejected")) >= 1
    });
    assert_eq!(peer_serial(gw.port).expect("serial"), serial_of("other"));
    // A certificate with the wrong key: rejected too.
    publish(
        &secret,
        "v4",
        &read("rsa2048.cert.pem"),
        &read("other.key.pem"),
    );
    eventually("rejection", || {
        gw.counter(&format!("{scope}ssl.context_reload_rejected")) >= 2
    });
    assert_eq!(peer_serial(gw.port).expect("serial"), serial_of("other"));
    assert!(
        gw.log_text().contains("reload rejected"),
        "logged: {}",
        gw.log_text()
    );
    let _ = std::fs::remove_dir_all(secret);
}

#[test]
fn rotating_a_plain_certificate_under_load() {
    let _lock = support::shared();
    rotate_under_load(false);
}

#[test]
fn rotating_a_provider_held_certificate_under_load() {
    let _lock = support::shared();
    rotate_under_load(true);
}
