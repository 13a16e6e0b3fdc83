//! The exact command lines the control planes launch Envoy with, run on quickshake: Envoy
//! Gateway's host mode (through func-e: `--admin-address-path`, `-- --run-id`, the admin on port
//! 0, beside stock Envoy 1.39.3 on the same line) and its Kubernetes container args, and Istio's
//! pilot-agent today and as older releases launched it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use quickshake_test_support::gateway::quickshake_command;
use serde_json::Value;

use super::{bootstrap, get, server_info};
use crate::support;
use crate::support::envoy::envoy_binary;
use crate::support::*;

/// Envoy Gateway's proxy command line (v1.9.1 `common.BuildProxyArgs`, no `--concurrency` and
/// no extra args set): the bootstrap in `--config-yaml`, then `tail`.
fn envoy_gateway_line(
    cluster: &str,
    node: &str,
    yaml: &str,
    level: &str,
    tail: &[&str],
) -> Vec<String> {
    let mut line = vec![
        "--service-cluster",
        cluster,
        "--service-node",
        node,
        "--config-yaml",
        yaml,
        "--log-level",
        level,
        "--cpuset-threads",
        "--drain-strategy",
        "immediate",
        "--component-log-level",
        "misc:error",
        "--drain-time-s",
        "60",
    ];
    line.extend(tail);
    line.into_iter().map(str::to_owned).collect()
}

/// The host-mode line as func-e runs it: func-e adds `--admin-address-path` and `-- --run-id`;
/// the bootstrap's admin is on port 0.
fn envoy_gateway_host_line(yaml: &str, address_file: &Path) -> Vec<String> {
    let file = address_file.display().to_string();
    envoy_gateway_line(
        "default/eg",
        "default-eg-5e5d0ab2",
        yaml,
        "info",
        &["--admin-address-path", &file, "--", "--run-id", "0"],
    )
}

/// A process started on a command line of its own (quickshake or stock Envoy), its output in a
/// log file; killed on drop.
struct Launched {
    child: Child,
    log: PathBuf,
}

impl Launched {
    fn spawn(mut cmd: Command, log: PathBuf) -> Launched {
        let logf = std::fs::File::create(&log).expect("log file");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(logf.try_clone().expect("clone log"))
            .stderr(logf)
            .spawn()
            .expect("spawn");
        Launched { child, log }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (20 s at most) until `file` holds an admin address (as func-e polls it) and the
    /// admin endpoint there says LIVE; the file's bytes.
    fn admin_address(&mut self, file: &Path) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "exited ({status}) before it was ready:\n{}",
                    self.log_text()
                );
            }
            if let Ok(text) = std::fs::read_to_string(file) {
                let out = curl(&[&format!("http://{}/ready", text.trim())]);
                if String::from_utf8_lossy(&out.stdout).contains("LIVE") {
                    return text;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no admin address in {} after 20 s:\n{}",
                file.display(),
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `IP:PORT` (`[IPv6]:PORT`) with a port the kernel chose: the port.
fn bound_port(address: &str, ip: &str) -> u16 {
    let host = if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.to_owned()
    };
    let port = address
        .strip_prefix(&format!("{host}:"))
        .unwrap_or_else(|| panic!("{address:?} is not {host}:PORT"));
    assert!(
        port.bytes().all(|b| b.is_ascii_digit()),
        "{address:?}: the port alone, no newline"
    );
    let port: u16 = port.parse().expect("a port");
    assert_ne!(port, 0, "{address:?}");
    port
}

/// Envoy Gateway's exact host-mode line starts quickshake with the admin on port 0: the bound
/// address is written to `--admin-address-path` in the bytes stock Envoy 1.39.3 writes for the
/// same bootstrap and flags (`IP:PORT`, `[IPv6]:PORT`, no newline), the admin answers there, the
/// log names it as Envoy's does, the listener serves, and `-- --run-id 0` is ignored.
#[test]
fn envoy_gateway_host_line_with_admin_port_0() {
    let _lock = support::shared();
    // IPv6 where the machine has a loopback for it (some CI containers have none).
    let ipv6 = std::net::TcpListener::bind("[::1]:0").is_ok();
    if !ipv6 {
        eprintln!("no IPv6 loopback: the [::1]:PORT case is not run");
    }
    for ip in ["127.0.0.1", "::1"]
        .into_iter()
        .filter(|ip| ipv6 || !ip.contains(':'))
    {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let yaml = render(&bootstrap(), port, 0, 0, dir.path()).replace(
            "address: 127.0.0.1, port_value: 0 }",
            &format!("address: \"{ip}\", port_value: 0 }}"),
        );
        assert!(yaml.contains(&format!("\"{ip}\", port_value: 0")), "{yaml}");

        let qs_file = dir.path().join("quickshake-admin-address.txt");
        let mut cmd = quickshake_command();
        cmd.args(envoy_gateway_host_line(&yaml, &qs_file));
        let mut qs = Launched::spawn(cmd, dir.path().join("quickshake.log"));
        let qs_address = qs.admin_address(&qs_file);
        let qs_port = bound_port(&qs_address, ip);
        assert!(
            qs.log_text()
                .contains(&format!("admin address: {qs_address}")),
            "{}",
            qs.log_text()
        );
        assert_eq!(
            get(port),
            ("200".to_owned(), "hello from quickshake".to_owned())
        );
        let out = curl(&[&format!("http://{qs_address}/server_info")]);
        let info: Value = serde_json::from_slice(&out.stdout).expect("server_info JSON");
        let o = &info["command_line_options"];
        assert_eq!(
            o["admin_address_path"],
            qs_file.display().to_string(),
            "{o}"
        );
        assert_eq!(o["drain_time"], "60s", "{o}");
        assert_eq!(o["drain_strategy"], "Immediate", "{o}");
        assert_eq!(info["node"]["id"], "default-eg-5e5d0ab2", "{info}");
        drop(qs);

        // Stock Envoy, the same bootstrap (its listener on another port) and the same line.
        let envoy_yaml = yaml.replace(&port.to_string(), &free_port().to_string());
        let envoy_file = dir.path().join("envoy-admin-address.txt");
        let mut cmd = Command::new(envoy_binary());
        cmd.args(envoy_gateway_host_line(&envoy_yaml, &envoy_file));
        let mut envoy = Launched::spawn(cmd, dir.path().join("envoy.log"));
        let envoy_address = envoy.admin_address(&envoy_file);
        let envoy_port = bound_port(&envoy_address, ip);
        assert!(
            envoy
                .log_text()
                .contains(&format!("admin address: {envoy_address}")),
            "{}",
            envoy.log_text()
        );
        // The same bytes but for the port the kernel chose.
        assert_eq!(
            qs_address.replace(&qs_port.to_string(), "PORT"),
            envoy_address.replace(&envoy_port.to_string(), "PORT"),
            "quickshake {qs_address:?}, Envoy {envoy_address:?}"
        );
    }
}

/// pilot-agent's command line today (`pkg/envoy/proxy.go` `args()` with the optional
/// `--file-flush-min-size-kb`, `--skip-deprecated-logs`, `--enable-core-dump`, a bootstrap
/// override in `--config-yaml`) and as Istio 1.15 passed it (`--restart-epoch`,
/// `--parent-shutdown-time-s`, `--log-format`): both serve, and `/server_info` shows the flags
/// under Envoy's names.
#[test]
fn pilot_agent_command_lines_serve() {
    let _lock = support::shared();
    let today = [
        "--drain-time-s",
        "45",
        "--drain-strategy",
        "immediate",
        "--local-address-ip-version",
        "v4",
        "--file-flush-interval-msec",
        "1000",
        "--disable-hot-restart",
        "--allow-unknown-static-fields",
        "--file-flush-min-size-kb",
        "32",
        "-l",
        "warning",
        "--component-log-level",
        "misc:error",
        "--skip-deprecated-logs",
        "--enable-core-dump",
        "--config-yaml",
        r#"{"node":{"id":"router~10.1.2.3~ingress.istio-system~istio-system.svc.cluster.local"}}"#,
        "--concurrency",
        "1",
    ];
    let mut gw = Gateway::start(&bootstrap(), &today);
    curl_ok(&gw);
    let info = server_info(&gw);
    assert_eq!(
        info["node"]["id"], "router~10.1.2.3~ingress.istio-system~istio-system.svc.cluster.local",
        "{info}"
    );
    let o = &info["command_line_options"];
    assert_eq!(o["skip_deprecated_logs"], true, "{o}");
    assert_eq!(o["enable_core_dump"], true, "{o}");
    assert_eq!(o["file_flush_min_size"], 32, "{o}");
    assert_eq!(o["restart_epoch"], 0, "{o}");
    assert_eq!(o["parent_shutdown_time"], "900s", "{o}");
    assert_eq!(o["admin_address_path"], "", "{o}");
    gw.assert_terminates_cleanly_within(Duration::from_secs(6));

    let istio_1_15 = [
        "--restart-epoch",
        "0",
        "--drain-time-s",
        "45",
        "--drain-strategy",
        "immediate",
        "--parent-shutdown-time-s",
        "60",
        "--local-address-ip-version",
        "v4",
        "--file-flush-interval-msec",
        "1000",
        "--disable-hot-restart",
        "--log-format",
        "%Y-%m-%dT%T.%fZ\t%l\tenvoy %n\t%v",
        "--concurrency",
        "1",
    ];
    let mut gw = Gateway::start(&bootstrap(), &istio_1_15);
    curl_ok(&gw);
    let o = &server_info(&gw)["command_line_options"];
    assert_eq!(o["restart_epoch"], 0, "{o}");
    assert_eq!(o["parent_shutdown_time"], "60s", "{o}");
    gw.assert_terminates_cleanly_within(Duration::from_secs(6));
}

/// Envoy Gateway's Kubernetes container args (`expectedProxyContainers`' golden deployment:
/// `--log-level warn`, no `--admin-address-path`, nothing after `--`) and arguments after `--`
/// that would be flags or a subcommand are ignored, as Envoy ignores them.
#[test]
fn envoy_gateway_kubernetes_args_and_the_tail_after_double_dash() {
    let _lock = support::shared();
    let yaml = bootstrap();
    let line = envoy_gateway_line(
        "default",
        "envoy-default-eg-e41e7b31-6f5d8c7b9-x2x7q",
        &yaml,
        "warn",
        &[
            "--", "--run-id", "7", "--mode", "validate", "doctor", "--bogus",
        ],
    );
    let line: Vec<&str> = line.iter().map(String::as_str).collect();
    let gw = Gateway::start_argv(&[], &line);
    curl_ok(&gw);
    let o = &server_info(&gw)["command_line_options"];
    assert_eq!(o["mode"], "Serve", "{o}");
    assert_eq!(o["log_level"], "warn", "{o}");
}
