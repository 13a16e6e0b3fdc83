//! Envoy 1.39.3 (installed into `.venv` by `scripts/setup-envoy`, the install bench/run uses)
//! run on a bootstrap, as the reference data plane of the xDS tests.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::{curl, http_get};

/// The envoy binary, installed (or found) once per test process.
pub fn envoy_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let root = quickshake_test_support::paths::workspace_root();
        let out = Command::new(root.join("scripts/setup-envoy"))
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/setup-envoy");
        assert!(out.status.success(), "scripts/setup-envoy failed");
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// `envoy --mode validate` on a bootstrap (YAML): whether Envoy accepts it, and its output
/// (the reason when it does not).
pub fn validate(bootstrap: &str) -> (bool, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("bootstrap.yaml");
    std::fs::write(&cfg, bootstrap).expect("write bootstrap");
    let out = Command::new("timeout")
        .arg("20")
        .arg(envoy_binary())
        .args(["--mode", "validate", "-c"])
        .arg(&cfg)
        .output()
        .expect("run envoy --mode validate");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// A running Envoy; killed on drop.
pub struct Envoy {
    child: Option<Child>,
    pub admin: u16,
    /// Holds the bootstrap and the log.
    _dir: tempfile::TempDir,
    log: PathBuf,
}

impl Envoy {
    /// Start on `bootstrap` (YAML) whose admin listens on 127.0.0.1:`admin`, one worker, and
    /// wait until `/ready` says LIVE (initial LDS/CDS fetched or timed out).
    pub fn start(bootstrap: &str, admin: u16) -> Envoy {
        Self::start_with_args(bootstrap, admin, &[])
    }

    /// [`Envoy::start`] with extra command-line arguments (`--file-flush-interval-msec 50`:
    /// access log files are otherwise flushed every 10 s).
    pub fn start_with_args(bootstrap: &str, admin: u16, args: &[&str]) -> Envoy {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = dir.path().join("bootstrap.yaml");
        std::fs::write(&cfg, bootstrap).expect("write bootstrap");
        let log = dir.path().join("envoy.log");
        let logf = std::fs::File::create(&log).expect("envoy log");
        let child = Command::new(envoy_binary())
            .arg("-c")
            .arg(&cfg)
            .args(["--concurrency", "1", "--disable-hot-restart"])
            .args([
                "--log-level",
                "info",
                "--component-log-level",
                "config:debug",
            ])
            .args(args)
            .stdout(logf.try_clone().expect("clone log"))
            .stderr(logf)
            .spawn()
            .expect("spawn envoy (scripts/setup-envoy)");
        let mut envoy = Envoy {
            child: Some(child),
            admin,
            _dir: dir,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(Ok(Some(st))) = envoy.child.as_mut().map(|c| c.try_wait()) {
                panic!("envoy exited ({st}):\n{}", envoy.log_text());
            }
            if let Ok((200, body)) = http_get(admin, "/ready") {
                if body.contains("LIVE") {
                    return envoy;
                }
            }
            assert!(
                Instant::now() < deadline,
                "envoy not ready after 20 s:\n{}",
                envoy.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// An admin page's body, through curl (Envoy's admin answers chunked).
    pub fn admin_get(&self, path: &str) -> String {
        let out = curl(&[&format!("http://127.0.0.1:{}{path}", self.admin)]);
        assert!(
            out.status.success(),
            "envoy admin {path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// Every `name: value` line of `/stats`.
    pub fn stats(&self) -> HashMap<String, String> {
        self.admin_get("/stats")
            .lines()
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// `/config_dump` as JSON.
    pub fn config_dump(&self) -> serde_json::Value {
        serde_json::from_str(&self.admin_get("/config_dump")).expect("config_dump JSON")
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
