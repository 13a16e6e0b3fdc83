//! The xDS control plane of the xDS tests: `tests/xds-control-plane` (Go, go-control-plane),
//! built once per test process by `scripts/build-xds-control-plane`, run on free ports, driven
//! through its admin API (`PUT /snapshot`, `GET /status`; see its main.go and status.go).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::free_port;

/// The control plane's binary, built (or found up to date) once per test process.
pub fn control_plane_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let root = quickshake_test_support::paths::workspace_root();
        let out = Command::new(root.join("scripts/build-xds-control-plane"))
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/build-xds-control-plane");
        assert!(
            out.status.success(),
            "scripts/build-xds-control-plane failed"
        );
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        assert!(path.exists(), "{} missing", path.display());
        path
    })
}

/// A running control plane; killed on drop.
pub struct ControlPlane {
    child: Option<Child>,
    /// The xDS gRPC port (TCP), if it listens on one.
    pub grpc_port: Option<u16>,
    /// The xDS gRPC unix socket, if it listens on one.
    pub grpc_unix: Option<PathBuf>,
    /// The admin API's port.
    pub http_port: u16,
    /// Serves xDS over mTLS (certificate `rsa2048`, client certificates from `client-ca`).
    pub mtls: bool,
    dir: tempfile::TempDir,
    starts: u32,
}

impl ControlPlane {
    /// xDS on a free TCP port.
    pub fn start_tcp() -> ControlPlane {
        Self::start(Some(free_port()), false)
    }

    /// xDS on a TCP port over mTLS, as Envoy Gateway serves it: the server certificate is
    /// `testdata/certs/rsa2048` (localhost), client certificates must chain to `client-ca`.
    pub fn start_tcp_mtls() -> ControlPlane {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cp = ControlPlane {
            child: None,
            grpc_port: Some(free_port()),
            grpc_unix: None,
            http_port: free_port(),
            mtls: true,
            dir,
            starts: 0,
        };
        cp.spawn();
        cp
    }

    /// xDS on a unix socket in a temporary directory.
    pub fn start_unix() -> ControlPlane {
        Self::start(None, true)
    }

    fn start(grpc_port: Option<u16>, unix: bool) -> ControlPlane {
        let dir = tempfile::tempdir().expect("tempdir");
        let grpc_unix = unix.then(|| dir.path().join("xds.sock"));
        let mut cp = ControlPlane {
            child: None,
            grpc_port,
            grpc_unix,
            http_port: free_port(),
            mtls: false,
            dir,
            starts: 0,
        };
        cp.spawn();
        cp
    }

    fn spawn(&mut self) {
        self.starts += 1;
        let log = self
            .dir
            .path()
            .join(format!("control-plane.{}.log", self.starts));
        let logf = std::fs::File::create(&log).expect("control plane log");
        let mut cmd = Command::new(control_plane_binary());
        cmd.arg("--http-addr")
            .arg(format!("127.0.0.1:{}", self.http_port));
        if let Some(p) = self.grpc_port {
            cmd.arg("--grpc-addr").arg(format!("127.0.0.1:{p}"));
        }
        if let Some(s) = &self.grpc_unix {
            cmd.arg("--grpc-unix").arg(s);
        }
        if self.mtls {
            let certs = super::certs_dir();
            cmd.arg("--tls-cert")
                .arg(certs.join("rsa2048.cert.pem"))
                .arg("--tls-key")
                .arg(certs.join("rsa2048.key.pem"))
                .arg("--tls-client-ca")
                .arg(certs.join("client-ca.cert.pem"));
        }
        let child = cmd
            .stdout(logf.try_clone().expect("clone log"))
            .stderr(logf)
            .spawn()
            .expect("spawn xds-control-plane");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok((200, _)) = self.http("GET", "/healthz", "") {
                return;
            }
            if let Some(Ok(Some(st))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("control plane exited ({st}):\n{}", self.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "control plane not healthy after 10 s:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every log of this control plane (one per start), concatenated.
    pub fn log_text(&self) -> String {
        (1..=self.starts)
            .map(|i| {
                std::fs::read_to_string(self.dir.path().join(format!("control-plane.{i}.log")))
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("--- restarted\n")
    }

    /// Set `node`'s snapshot: `resources` maps type URLs to lists of resources in Envoy's JSON
    /// form (without `@type`). Panics unless the control plane accepts it.
    pub fn push(&self, node: &str, version: &str, resources: serde_json::Value) {
        let body = serde_json::json!({ "version": version, "resources": resources }).to_string();
        let (code, text) = self
            .http("PUT", &format!("/snapshot?node={node}"), &body)
            .expect("PUT /snapshot");
        assert_eq!(code, 200, "PUT /snapshot {version}: {text}");
    }

    /// `GET /status`: `{"nodes": {id: {pushed_version, streams_open: {sotw, delta},
    /// streams_opened_total, types: {type_url: {requests, responses, acks, nacks,
    /// last_sent_version, last_acked_version, last_nack: {version, message} | null,
    /// nack_resends_suppressed}}}}}`.
    pub fn status(&self) -> serde_json::Value {
        let (code, text) = self.http("GET", "/status", "").expect("GET /status");
        assert_eq!(code, 200, "GET /status: {text}");
        serde_json::from_str(&text).expect("status JSON")
    }

    /// The request metadata of the last stream opened for the full gRPC `method` (e.g.
    /// `/envoy.service.secret.v3.SecretDiscoveryService/StreamSecrets`): `{key: [values]}`,
    /// `Null` when none was opened.
    pub fn stream_metadata(&self, method: &str) -> serde_json::Value {
        self.status()["stream_metadata"][method].clone()
    }

    /// `status()` for one node and type URL (`Null` when nothing was seen).
    pub fn type_status(&self, node: &str, type_url: &str) -> serde_json::Value {
        self.status()["nodes"][node]["types"][type_url].clone()
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start again on the same ports or socket (after `kill`; kills a running one first). The
    /// new process starts with no snapshot and no status.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// HTTP/1.0, so that the body is never chunked.
    fn http(&self, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
        super::http_exchange(
            self.http_port,
            &format!(
                "{method} {path} HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ),
        )
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.kill();
    }
}
