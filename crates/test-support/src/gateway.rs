//! The gateway harness: runs the built `quickshake` binary on a config template (ports,
//! certificates and a scratch directory filled in), waits until its admin endpoint says LIVE,
//! reads its admin endpoint and stats, and stops it; plus the suite lock that decides which
//! tests run beside which.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use crate::http::{curl_status, http_get, http_request};
use crate::net::free_port;
use crate::paths::{certs_dir, workspace_root};

/// Every test of the gateway suite (`crates/quickshake/tests/suite`) starts with
/// `let _lock = support::shared();` (or `exclusive()`), as
/// its first statement, so that the guard is dropped last: after the test's gateways, upstreams
/// and clients. `Gateway::start*` and `start_expect_failure` check that the thread holds one.
///
/// Why a lock: the suite used to be one test binary per file. Cargo ran the binaries one after
/// another, so a test only ever ran beside tests of its own file (`--test-threads 2`), and the
/// two files whose tests measure time (provider_batching, reliability_faults) ran those one at a
/// time with a per-file mutex. In one binary any two tests of any modules run side by side, on
/// CI's 2-core machine. A test whose verdict depends on a quiet machine takes the write side
/// and runs alone; every other test takes the read side and runs beside any other, as before.
///
/// Exclusive, and why:
/// * provider_batching (all): handshake times against `poll_delay` (< 20 ms, 150 ms, 200–400 ms)
///   and mean batch sizes under load. These replace that file's mutex.
/// * reliability_faults, the keep-alive latency tests: p50/p99 on a quiet machine, gateway and
///   clients pinned to CPUs 0 and 1. They replace that file's mutex, which the fault tests
///   took only so as not to run beside these.
/// * handshake_priority (all): handshakes run on `SCHED_IDLE` threads, which get next to no CPU
///   while any other test keeps the CPUs busy (a closed loop must complete 50 handshakes in 2 s).
/// * reliability_storms' 10,000-connection storm: it saturates both CPUs for seconds, and it
///   compares resident memory after two storms that must meet the same load.
/// * sub-second windows that include a curl run, a handshake or a refusal, which a busy
///   machine stretches: reliability_overload's refusal in < 50 ms, reliability_hostile's
///   slowloris (curl < 700 ms, closed at 0.9–2.5 s), gateway_robustness's stalled ClientHello
///   (curl < 900 ms) and silent clients (two curls before the 1 s handshake timeout),
///   proxy_http's route timeout (504 in 150–900 ms) and circuit breaker (a second curl while
///   the first request's 1 s upstream delay runs).
///
/// Every other test is light or has bounds of seconds (and the audits and load-generator tests
/// already ran beside each other within their files).
///
/// One `RwLock` rather than per-file mutexes, because a quiet machine means no other test at
/// all. std's RwLock on Linux lets no new reader in while a writer waits, so an exclusive test
/// waits only for the tests already running. The guards are not reentrant: a test takes one,
/// once (a second on the same thread panics here rather than deadlocking).
static SUITE: RwLock<()> = RwLock::new(());

thread_local! {
    /// Whether this thread holds a [`SuiteLock`] (checked where gateways start).
    static HELD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The guard of [`shared`] or [`exclusive`]; released on drop.
pub struct SuiteLock {
    _guard: Held,
}

enum Held {
    Shared {
        _guard: RwLockReadGuard<'static, ()>,
    },
    Exclusive {
        _guard: RwLockWriteGuard<'static, ()>,
    },
}

impl Drop for SuiteLock {
    fn drop(&mut self) {
        HELD.with(|h| h.set(false));
    }
}

fn lock(take: impl FnOnce() -> Held) -> SuiteLock {
    assert!(
        !HELD.with(|h| h.replace(true)),
        "this thread already holds the suite lock (take shared() or exclusive() once per test)"
    );
    SuiteLock { _guard: take() }
}

/// Run beside other tests (the read side of the suite lock). A test that panicked holding the
/// lock does not stop the others: poisoning is ignored.
pub fn shared() -> SuiteLock {
    lock(|| Held::Shared {
        _guard: SUITE.read().unwrap_or_else(PoisonError::into_inner),
    })
}

/// Run alone in the suite (the write side of the suite lock).
pub fn exclusive() -> SuiteLock {
    lock(|| Held::Exclusive {
        _guard: SUITE.write().unwrap_or_else(PoisonError::into_inner),
    })
}

fn assert_suite_lock_held() {
    assert!(
        HELD.with(|h| h.get()),
        "take support::shared() or support::exclusive() at the start of the test"
    );
}

// ---------------------------------------------------------------------------------------------
// The binary

static BINARY: OnceLock<String> = OnceLock::new();

/// Run `path` as the gateway (a test binary passes `env!("CARGO_BIN_EXE_quickshake")` before
/// its first gateway starts); the first call wins.
pub fn use_binary(path: &str) {
    let _ = BINARY.set(path.to_owned());
}

thread_local! {
    /// The binary this thread's gateways run instead ([`ThreadBinary`]).
    static THREAD_BINARY: std::cell::Cell<Option<&'static str>> =
        const { std::cell::Cell::new(None) };
}

/// While it lives, [`binary`] on this thread is another binary: a test whose gateways need the
/// test-only `quickshake-test` ([`test_binary`], for `engine: fault`) runs beside tests on the
/// release `quickshake`.
pub struct ThreadBinary {
    previous: Option<&'static str>,
}

impl ThreadBinary {
    /// Gateways this thread starts run `path` until the guard is dropped.
    pub fn new(path: &'static str) -> ThreadBinary {
        ThreadBinary {
            previous: THREAD_BINARY.with(|b| b.replace(Some(path))),
        }
    }
}

impl Drop for ThreadBinary {
    fn drop(&mut self) {
        THREAD_BINARY.with(|b| b.set(self.previous));
    }
}

/// The gateway binary: this thread's [`ThreadBinary`], else the one [`use_binary`] named, else
/// `target/<profile>/quickshake`.
/// A command running the built binary with crypto_mb's directory named
/// (`QUICKSHAKE_CRYPTO_MB_DIR`: [`crate::paths::crypto_mb_dir`]): quickshake loads it from
/// nowhere else, so the tests pass the development install explicitly.
pub fn quickshake_command() -> Command {
    let mut cmd = Command::new(binary());
    cmd.env("QUICKSHAKE_CRYPTO_MB_DIR", crate::paths::crypto_mb_dir());
    cmd
}

pub fn binary() -> &'static str {
    if let Some(path) = THREAD_BINARY.with(std::cell::Cell::get) {
        return path;
    }
    BINARY.get_or_init(|| {
        let path = profile_binary("quickshake", "quickshake");
        path.to_str()
            .unwrap_or_else(|| panic!("{} is not UTF-8", path.display()))
            .to_owned()
    })
}

/// `target/<profile>/<name>` of the profile this test binary was built in, built (`cargo build
/// -p <package>`) when missing.
pub fn profile_binary(name: &str, package: &str) -> PathBuf {
    // The test binary is target/<profile>/deps/<name>; the binaries sit in target/<profile>.
    let exe = std::env::current_exe().expect("current exe");
    let profile_dir = exe
        .parent()
        .and_then(|d| d.parent())
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::paths::target_dir().join("ci"));
    let path = profile_dir.join(name);
    if !path.exists() {
        build(&path, name, package);
    }
    assert!(path.exists(), "{} missing", path.display());
    path
}

/// `target/<profile>/quickshake-test`, the release gateway plus the tests' fault engine
/// (`engine: fault`): built when missing, and rebuilt when older than the newest build of the
/// `quickshake` library or of this crate (whose `fault` module it links), so a test never runs
/// a stale one. The workspace build (`scripts/test`) builds it with everything else.
pub fn test_binary() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| {
        let path = profile_binary("quickshake-test", "quickshake-test");
        let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        let deps = path.parent().map(|d| d.join("deps"));
        let newest_lib = deps
            .and_then(|d| std::fs::read_dir(d).ok())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.ends_with(".rlib")
                    && (name.starts_with("libquickshake-")
                        || name.starts_with("libquickshake_test_support-"))
            })
            .filter_map(|e| modified(&e.path()))
            .max();
        if newest_lib.is_some_and(|lib| modified(&path).is_some_and(|bin| bin < lib)) {
            build(&path, "quickshake-test", "quickshake-test");
        }
        path.to_str()
            .unwrap_or_else(|| panic!("{} is not UTF-8", path.display()))
            .to_owned()
    })
}

/// `cargo build -p <package> --bin <name>` in the profile of `path` (`target/<profile>/<name>`).
fn build(path: &Path, name: &str, package: &str) {
    let profile = path
        .parent()
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .map(|n| if n == "debug" { "dev" } else { n })
        .unwrap_or("ci")
        .to_owned();
    let status = Command::new(env!("CARGO"))
        .args(["build", "-p", package, "--bin", name, "--profile", &profile])
        .current_dir(workspace_root())
        .status()
        .unwrap_or_else(|e| panic!("cargo build {package}: {e}"));
    assert!(status.success(), "building {name} failed");
}

/// `target/<profile>/quickshake-bench`, built on demand.
pub fn bench_binary() -> PathBuf {
    profile_binary("quickshake-bench", "quickshake-bench")
}

// ---------------------------------------------------------------------------------------------
// The gateway

/// A running gateway; killed on drop.
pub struct Gateway {
    child: Option<Child>,
    pub port: u16,
    /// The second listener port (`{{PORT2}}`).
    pub port2: u16,
    pub admin: u16,
    pub dir: tempfile::TempDir,
    pub log: PathBuf,
}

/// Replace `{{PORT}}`, `{{PORT2}}`, `{{ADMIN}}`, `{{CERTS}}`, `{{DIR}}` in a config template.
pub fn render(template: &str, port: u16, port2: u16, admin: u16, dir: &Path) -> String {
    template
        .replace("{{PORT}}", &port.to_string())
        .replace("{{PORT2}}", &port2.to_string())
        .replace("{{ADMIN}}", &admin.to_string())
        .replace("{{CERTS}}", &certs_dir().display().to_string())
        .replace("{{DIR}}", &dir.display().to_string())
}

/// A gateway's scratch directory (`{{DIR}}`) and the ports its templates get.
struct Scratch {
    dir: tempfile::TempDir,
    port: u16,
    port2: u16,
    admin: u16,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().expect("tempdir"),
            port: free_port(),
            port2: free_port(),
            admin: free_port(),
        }
    }

    /// `template` with its placeholders replaced ([`render`]).
    fn fill(&self, template: &str) -> String {
        render(template, self.port, self.port2, self.admin, self.dir.path())
    }

    /// Writes `template`, filled, to `{{DIR}}/name`; the file's path.
    fn write(&self, name: &str, template: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, self.fill(template))
            .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    /// Spawns `cmd` with its output in `{{DIR}}/quickshake.log`; the gateway, not yet waited for.
    fn spawn(self, mut cmd: Command) -> Gateway {
        let log = self.dir.path().join("quickshake.log");
        let logf = std::fs::File::create(&log).expect("log file");
        let child = cmd
            .stdout(logf.try_clone().expect("clone log"))
            .stderr(logf)
            .spawn()
            .expect("spawn quickshake");
        Gateway {
            child: Some(child),
            port: self.port,
            port2: self.port2,
            admin: self.admin,
            dir: self.dir,
            log,
        }
    }
}

impl Gateway {
    /// Start on a config template with extra command-line arguments and environment; wait until
    /// the admin endpoint says LIVE. Panics with the gateway's log if it does not come up.
    pub fn start_with_env(template: &str, args: &[&str], env: &[(&str, &str)]) -> Gateway {
        assert_suite_lock_held();
        let scratch = Scratch::new();
        let cfg = scratch.write("config.yaml", template);
        let mut cmd = quickshake_command();
        cmd.arg("-c").arg(&cfg).args(args);
        // Run the tests with handshakes on idle-class threads (the handshake_priority module
        // covers that mode in CI; this reruns any other module in it by hand).
        if let Ok(p) = std::env::var("QS_TEST_HANDSHAKE_PRIORITY") {
            if !args.contains(&"--handshake-priority") {
                cmd.args(["--handshake-priority", &p]);
            }
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut gw = scratch.spawn(cmd);
        gw.wait_ready();
        gw
    }

    pub fn start(template: &str, args: &[&str]) -> Gateway {
        Self::start_with_env(template, args, &[])
    }

    /// Start on a command line of its own, with no `-c` added (Envoy Gateway passes the whole
    /// bootstrap in `--config-yaml`): each argument, and each `(name, template)` of `files`
    /// (written to `{{DIR}}/name` first), has its placeholders replaced as [`render`] does.
    pub fn start_argv(files: &[(&str, &str)], args: &[&str]) -> Gateway {
        let mut gw = Self::spawn_argv(files, args);
        gw.wait_ready();
        gw
    }

    /// [`Self::start_argv`] for a gateway that stays INITIALIZING (xDS with no control plane and
    /// `initial_fetch_timeout: 0s`): waits until the admin endpoint answers `/ready` with 503
    /// `INITIALIZING`.
    pub fn start_argv_initializing(files: &[(&str, &str)], args: &[&str]) -> Gateway {
        let gw = Self::spawn_argv(files, args);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok((503, body)) = http_get(gw.admin, "/ready") {
                assert!(body.contains("INITIALIZING"), "{body}");
                return gw;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("no admin endpoint after 20 s:\n{}", gw.log_text());
    }

    fn spawn_argv(files: &[(&str, &str)], args: &[&str]) -> Gateway {
        assert_suite_lock_held();
        let scratch = Scratch::new();
        for (name, template) in files {
            scratch.write(name, template);
        }
        let mut cmd = quickshake_command();
        cmd.args(args.iter().map(|a| scratch.fill(a)));
        scratch.spawn(cmd)
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "quickshake exited ({status}) before it was ready:\n{}",
                        self.log_text()
                    );
                }
            }
            if let Ok((200, body)) = http_get(self.admin, "/ready") {
                if body.contains("LIVE") {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("quickshake not ready after 20 s:\n{}", self.log_text());
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{}", self.port, path)
    }

    pub fn admin_get(&self, path: &str) -> (u16, String) {
        http_get(self.admin, path).unwrap_or_else(|e| panic!("admin GET {path}: {e}"))
    }

    pub fn admin_post(&self, path: &str) -> (u16, String) {
        http_request(self.admin, "POST", path).unwrap_or_else(|e| panic!("admin POST {path}: {e}"))
    }

    /// Every `name: value` line of `/stats` (counters and gauges).
    pub fn stats(&self) -> HashMap<String, String> {
        let (_, body) = self.admin_get("/stats");
        body.lines()
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// A counter or gauge (0 when absent).
    pub fn counter(&self, name: &str) -> u64 {
        self.stats()
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// Envoy's listener scope for this gateway's first listener on 0.0.0.0 or 127.0.0.1.
    pub fn scope(&self, host: &str) -> String {
        format!("listener.{host}_{}.", self.port)
    }

    /// Send SIGTERM and wait for exit (bounded); the exit status.
    pub fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(s)) = child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// SIGTERM, then assert the process exited 0 within `limit` (the drain finished).
    pub fn assert_terminates_cleanly_within(&mut self, limit: Duration) {
        let started = Instant::now();
        let status = self.terminate().expect("exited after SIGTERM");
        assert!(
            status.success(),
            "exit status {status}: {}",
            self.log_text()
        );
        assert!(
            started.elapsed() < limit,
            "SIGTERM took {:?} (limit {limit:?})",
            started.elapsed()
        );
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Run the binary on a config expected to be rejected; its exit code and stderr.
pub fn start_expect_failure(template: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    assert_suite_lock_held();
    let scratch = Scratch::new();
    let cfg = scratch.write("config.yaml", template);
    let mut cmd = quickshake_command();
    cmd.arg("-c").arg(&cfg).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("quickshake did not exit on a bad configuration");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// `curl --cacert rsa2048.cert.pem` to the gateway's first listener must answer 200.
pub fn curl_ok(gw: &Gateway) {
    let out = curl_status(&gw.url("/"), "rsa2048.cert.pem");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "200",
        "curl: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        gw.log_text()
    );
}
