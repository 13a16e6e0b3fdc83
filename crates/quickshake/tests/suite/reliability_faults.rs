//! Provider faults are contained, counted, and logged once per burst, and the worker keeps
//! serving: engine errors, wrong results, a slow (sleeping, offloaded) engine, a panicking
//! engine. And keep-alive requests on established connections keep flowing while handshakes
//! wait in a provider.
//!
//! Positive controls: the log-line counter counts two lines when two providers fail (one each),
//! and the latency criterion applied to the inline key in the same storm flags it (the harness
//! can see a worker blocked by handshakes). See docs/reliability.md.
//!
//! `engine: fault` is a test engine: the tests that use it run the test-only `quickshake-test`
//! (the release gateway plus the fault engine; `support::*_with_fault_engine`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use boring::ssl::SslStream;

use crate::support;
use crate::support::providers::{batching_cert, batching_cert_with, provider_counter};
use crate::support::tls_client::{closed_loop, connector, handshake_with, ClientOpts};
use crate::support::*;

/// The log line of a provider problem (`log_once` in crates/keyprovider/src/provider.rs).
const BURST_MARK: &str = "further reports within a minute are counted, not logged";

fn burst_lines(log: &str) -> usize {
    log.lines().filter(|l| l.contains(BURST_MARK)).count()
}

fn fault_cert(cert: &str, fault: &str, fallback: Option<bool>) -> String {
    batching_cert_with(cert, &[("engine", "fault"), ("fault", fault)], fallback)
}

fn fault_gateway(fault: &str, fallback: Option<bool>) -> Gateway {
    Gateway::start(
        &direct_response_config(&fault_cert("rsa2048", fault, fallback), "", ""),
        &["--concurrency", "1"],
    )
}

/// `n` sequential full handshakes (each with one request); (ok, failed, slowest).
fn sequential(gw: &Gateway, n: usize, opts: &ClientOpts) -> (usize, usize, Duration) {
    let c = connector(opts).expect("connector");
    let (mut ok, mut slowest) = (0, Duration::ZERO);
    for _ in 0..n {
        if let Ok((took, status)) = handshake_with(&c, gw.port) {
            assert!(status.contains("200"), "{status}");
            ok += 1;
            slowest = slowest.max(took);
        }
    }
    (ok, n - ok, slowest)
}

fn report(gw: &Gateway, what: &str, ok: usize, failed: usize) {
    eprintln!(
        "{what}: {ok} ok, {failed} failed; engine_error {}, verify_failed {}, software_retry {}, \
         failed {}, rsa_sign {}; provider log lines {}",
        provider_counter(gw, "engine_error"),
        provider_counter(gw, "verify_failed"),
        provider_counter(gw, "software_retry"),
        provider_counter(gw, "failed"),
        provider_counter(gw, "rsa_sign"),
        burst_lines(&gw.log_text())
    );
}

#[test]
fn engine_errors_are_contained_counted_and_logged_once() {
    let _lock = support::shared_with_fault_engine();
    let gw = fault_gateway("{ error_every: 2 }", Some(false));
    let (ok, failed, _) = sequential(&gw, 20, &ClientOpts::default());
    report(&gw, "error_every: 2", ok, failed);
    assert_eq!((ok, failed), (10, 10));
    assert_eq!(provider_counter(&gw, "engine_error"), 10);
    assert_eq!(provider_counter(&gw, "failed"), 10);
    assert_eq!(burst_lines(&gw.log_text()), 1, "{}", gw.log_text());
    // The worker keeps serving: every second handshake still succeeds after the burst.
    assert_eq!(sequential(&gw, 2, &ClientOpts::default()).0, 1);
}

#[test]
fn wrong_results_are_caught_counted_and_logged_once() {
    let _lock = support::shared_with_fault_engine();
    let gw = fault_gateway("{ corrupt_every: 1 }", None);
    let (ok, failed, _) = sequential(&gw, 20, &ClientOpts::default());
    report(&gw, "corrupt_every: 1", ok, failed);
    assert_eq!((ok, failed), (20, 0), "redone in software");
    assert_eq!(provider_counter(&gw, "verify_failed"), 20);
    assert_eq!(provider_counter(&gw, "software_retry"), 20);
    assert_eq!(provider_counter(&gw, "failed"), 0);
    assert_eq!(burst_lines(&gw.log_text()), 1, "{}", gw.log_text());
}

#[test]
fn engine_panics_are_contained_counted_and_logged_once() {
    let _lock = support::shared_with_fault_engine();
    let gw = fault_gateway("{ panic_every: 2 }", Some(false));
    let (ok, failed, _) = sequential(&gw, 20, &ClientOpts::default());
    report(&gw, "panic_every: 2", ok, failed);
    assert_eq!((ok, failed), (10, 10));
    assert_eq!(provider_counter(&gw, "engine_error"), 10);
    assert_eq!(provider_counter(&gw, "failed"), 10);
    assert_eq!(burst_lines(&gw.log_text()), 1, "{}", gw.log_text());
    assert_eq!(sequential(&gw, 2, &ClientOpts::default()).0, 1);
    // The admin endpoint and the process survived the panics.
    assert_eq!(gw.admin_get("/ready").0, 200);
}

#[test]
fn slow_engine_only_slows_its_handshakes() {
    let _lock = support::shared_with_fault_engine();
    let gw = fault_gateway("{ delay: 50ms }", None);
    let (ok, failed, slowest) = sequential(&gw, 20, &ClientOpts::default());
    report(&gw, "delay: 50ms", ok, failed);
    assert_eq!((ok, failed), (20, 0));
    // The delay is in effect (the slowest handshake waited for it) ...
    assert!(slowest >= Duration::from_millis(50), "slowest {slowest:?}");
    // ... and it is no problem to log or count.
    assert_eq!(provider_counter(&gw, "failed"), 0);
    assert_eq!(burst_lines(&gw.log_text()), 0);
}

/// Positive control for the once-per-burst count: two providers (an RSA and an ECDSA
/// certificate, each with its own failing engine) log one line each, and `burst_lines` counts
/// two.
#[test]
fn burst_counter_sees_one_line_per_provider() {
    let _lock = support::shared_with_fault_engine();
    let certs = format!(
        "{}{}",
        fault_cert("rsa2048", "{ error_every: 1 }", Some(false)),
        fault_cert("ecdsa-p256", "{ error_every: 1 }", Some(false))
    );
    let gw = Gateway::start(
        &direct_response_config(&certs, "", ""),
        &["--concurrency", "1"],
    );
    let rsa = ClientOpts {
        sigalgs: Some("RSA-PSS+SHA256".into()),
        ..Default::default()
    };
    let ec = ClientOpts {
        sigalgs: Some("ECDSA+SHA256".into()),
        ..Default::default()
    };
    assert_eq!(sequential(&gw, 5, &rsa).1, 5);
    assert_eq!(burst_lines(&gw.log_text()), 1, "{}", gw.log_text());
    assert_eq!(sequential(&gw, 5, &ec).1, 5);
    assert_eq!(burst_lines(&gw.log_text()), 2, "{}", gw.log_text());
}

// ---------------------------------------------------------------------------------------------
// Keep-alive latency while handshakes wait in a provider

/// A gateway pinned to CPU 0 with `taskset` (one worker); killed on drop.
struct Pinned {
    child: Child,
    port: u16,
    admin: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn two_cpus() -> bool {
    std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2
}

/// How the pinned gateway schedules handshake work against established connections.
#[derive(Clone, Copy, Debug)]
enum Sched {
    /// The default: handshakes and batches on the worker thread.
    Worker,
    /// `QUICKSHAKE_BATCH_THREADS=1`: CPU engine batches on a nice-10 thread per worker.
    BatchThread,
    /// `--handshake-priority idle`: handshakes (and their batches) on a SCHED_IDLE thread.
    IdleHandshakes,
}

fn start_pinned(template: &str, sched: Sched) -> Pinned {
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, port2, admin) = (free_port(), free_port(), free_port());
    let cfg = dir.path().join("config.yaml");
    std::fs::write(&cfg, render(template, port, port2, admin, dir.path())).expect("config");
    let log = std::fs::File::create(dir.path().join("log")).expect("log");
    let mut cmd = if two_cpus() {
        let mut c = Command::new("taskset");
        c.args(["-c", "0", binary()]);
        c
    } else {
        Command::new(binary())
    };
    match sched {
        Sched::Worker => {}
        Sched::BatchThread => {
            cmd.env("QUICKSHAKE_BATCH_THREADS", "1");
        }
        Sched::IdleHandshakes => {
            cmd.args(["--handshake-priority", "idle"]);
        }
    }
    let child = cmd
        .arg("-c")
        .arg(&cfg)
        .args(["--concurrency", "1", "-l", "warning"])
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn quickshake");
    let mut p = Pinned {
        child,
        port,
        admin,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Some(s)) = p.child.try_wait() {
            panic!("quickshake exited: {s}");
        }
        if matches!(http_get(p.admin, "/ready"), Ok((200, b)) if b.contains("LIVE")) {
            return p;
        }
        assert!(Instant::now() < deadline, "quickshake not ready");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Pin the calling thread (and the threads it creates later) to CPU 1 and, for the storm, to
/// the lowest priority, so that the client side of the storm cannot delay the measuring
/// threads (which share CPU 1 with it: this machine has two).
fn client_cpu(nice: i32) {
    if !two_cpus() {
        return;
    }
    // SAFETY: plain syscalls on the calling thread with a zeroed, then filled, cpu_set_t.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(1, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        if nice != 0 {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, nice);
        }
    }
}

/// One keep-alive response's status, read in chunks rather than byte by byte as
/// `support::read_http1_response` does: one request is outstanding at a time here, and this
/// path is what the latency figures measure.
fn read_response(s: &mut impl Read) -> Option<u16> {
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len = content_length(&head);
            while buf.len() < end + 4 + len {
                let n = s.read(&mut chunk).ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            return head.split_whitespace().nth(1)?.parse().ok();
        }
    }
}

const CONNS: usize = 4;
const PER_CONN: usize = 125; // 500 requests per measurement
const GAP: Duration = Duration::from_millis(2);

fn open_keepalive(port: u16) -> Vec<SslStream<TcpStream>> {
    let c = connector(&ClientOpts::default()).expect("connector");
    (0..CONNS)
        .map(|_| {
            let tcp = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            tcp.set_nodelay(true).expect("nodelay");
            tcp.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            c.connect("localhost", tcp).expect("handshake")
        })
        .collect()
}

/// PER_CONN keep-alive requests on each established connection (one thread each, on the client
/// CPU); every request's latency; the connections come back.
fn measure(conns: Vec<SslStream<TcpStream>>) -> (Vec<SslStream<TcpStream>>, Vec<Duration>) {
    let handles: Vec<_> = conns
        .into_iter()
        .map(|mut s| {
            std::thread::spawn(move || {
                client_cpu(0);
                let mut lat = Vec::with_capacity(PER_CONN);
                for _ in 0..PER_CONN {
                    let t = Instant::now();
                    s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
                        .expect("write");
                    assert_eq!(read_response(&mut s), Some(200), "keep-alive request");
                    lat.push(t.elapsed());
                    std::thread::sleep(GAP);
                }
                (s, lat)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut conns = Vec::new();
    for h in handles {
        let (s, lat) = h.join().expect("measuring thread");
        conns.push(s);
        all.extend(lat);
    }
    (conns, all)
}

fn pct(mut v: Vec<Duration>, p: usize) -> Duration {
    v.sort();
    v[(v.len() * p).div_ceil(100) - 1]
}

struct Latency {
    idle_p50: Duration,
    storm_p50: Duration,
    idle_p99: Duration,
    storm_p99: Duration,
    handshakes: usize,
    op_wait: String,
}

/// Idle p99 of keep-alive requests, then their p99 during a closed-loop storm of full handshakes
/// from 16 clients.
fn keepalive_under_storm(certificates: &str, sched: Sched) -> Latency {
    let gw = start_pinned(&direct_response_config(certificates, "", ""), sched);
    let conns = open_keepalive(gw.port);
    // Warm up, then the idle measurement.
    let (conns, _) = measure(conns);
    let (conns, idle) = measure(conns);
    let port = gw.port;
    let storm_for = Duration::from_secs(4);
    let storm = std::thread::spawn(move || {
        client_cpu(19);
        closed_loop(port, 16, storm_for, &ClientOpts::default())
    });
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let (_conns, busy) = measure(conns);
    let measured_for = started.elapsed();
    let handshakes = storm
        .join()
        .expect("storm thread")
        .expect("storm handshakes");
    assert!(
        measured_for + Duration::from_millis(500) < storm_for,
        "the measurement ({measured_for:?}) outlasted the storm"
    );
    let (_, stats) = http_get(gw.admin, "/stats").expect("stats");
    let op_wait = stats
        .lines()
        .find(|l| l.contains("cryptomb.op_wait_ms"))
        .unwrap_or("")
        .to_string();
    Latency {
        idle_p50: pct(idle.clone(), 50),
        storm_p50: pct(busy.clone(), 50),
        idle_p99: pct(idle, 99),
        storm_p99: pct(busy, 99),
        handshakes,
        op_wait,
    }
}

/// The offload criterion: within twice the idle p99, plus [`FLOOR`]. The floor: idle p99 on
/// loopback is a fraction of a millisecond, where scheduler wake-up and timer slack on a shared
/// 2-core machine (the measuring threads share CPU 1 with the storm's clients) are of the same
/// order; 1 ms is well below one batch of signatures (~6 ms) and the ~3 ms a worker spends
/// resuming a batch's handshakes, so a worker that computed, waited for or resumed a batch in
/// front of the request would still be flagged (the inline control below is).
fn within_offload_bound(l: &Latency) -> bool {
    l.storm_p99 <= l.idle_p99 * 2 + FLOOR
}

/// Allowance for timer and scheduler noise on a shared 2-core VM, where idle p99 itself moves
/// between 0.3 and 0.7 ms from run to run.
const FLOOR: Duration = Duration::from_millis(1);

/// One batch of 8 RSA-2048 signatures in software on this class of machine: 8 × ~0.7 ms.
const ONE_BATCH: Duration = Duration::from_micros(8 * 700);

fn print(what: &str, l: &Latency) {
    eprintln!(
        "{what}: idle p50 {:.2} ms p99 {:.2} ms, storm p50 {:.2} ms p99 {:.2} ms, {} storm \
         handshakes in 4 s; {}",
        l.idle_p50.as_secs_f64() * 1e3,
        l.idle_p99.as_secs_f64() * 1e3,
        l.storm_p50.as_secs_f64() * 1e3,
        l.storm_p99.as_secs_f64() * 1e3,
        l.handshakes,
        l.op_wait
    );
}

fn slow_engine() -> String {
    fault_cert("rsa2048", "{ delay: 50ms }", None)
}

fn software_engine() -> String {
    batching_cert("rsa2048", &[("engine", "software")])
}

/// The comparison in one run: with idle-class handshakes and the key in a provider, keep-alive
/// requests are delayed far less by a handshake storm than with the key inline on the worker
/// (the default), which is also the positive control of the offload criterion.
#[test]
fn keepalive_requests_keep_flowing_while_handshakes_wait_in_a_provider() {
    let _lock = support::exclusive_with_fault_engine();
    // One retry of the whole comparison: this 2-core machine is shared (other builds and fuzzers
    // run beside CI) and one scheduling hiccup moves a 500-sample p99. A real regression (a
    // worker blocked by its handshakes) fails both runs: compare the inline key, ~20-35 ms.
    let first = compare_engines();
    if let Err(e) = first {
        eprintln!("first run: {e}; measuring again");
        if let Err(e2) = compare_engines() {
            panic!("both runs failed:\n{e}\n{e2}");
        }
    }
}

fn compare_engines() -> Result<(), String> {
    let slow = keepalive_under_storm(&slow_engine(), Sched::IdleHandshakes);
    print(
        "slow sleeping engine (delay 50ms, offload), idle-class handshakes",
        &slow,
    );
    let software = keepalive_under_storm(&software_engine(), Sched::IdleHandshakes);
    print(
        "software engine (batching), idle-class handshakes",
        &software,
    );
    let inline = keepalive_under_storm(&plain_cert("rsa2048"), Sched::Worker);
    print("inline key", &inline);
    // Positive control: the inline key in the same storm is flagged by the offload criterion.
    if within_offload_bound(&inline) {
        return Err(format!(
            "control: the inline key's keep-alive p99 ({:?}) is within the offload bound of its \
             idle p99 ({:?}); the harness cannot see a busy worker",
            inline.storm_p99, inline.idle_p99
        ));
    }
    // The offloaded engine leaves the median untouched and the tail well below the inline key's.
    if slow.storm_p50 > slow.idle_p50 * 2 + Duration::from_millis(1) {
        return Err(format!(
            "slow engine: storm p50 {:?} vs idle p50 {:?}",
            slow.storm_p50, slow.idle_p50
        ));
    }
    if slow.storm_p99 * 2 >= inline.storm_p99 {
        return Err(format!(
            "slow engine p99 {:?} not below half the inline key's {:?}",
            slow.storm_p99, inline.storm_p99
        ));
    }
    if software.storm_p99 >= inline.storm_p99 {
        return Err(format!(
            "software engine p99 {:?} not below the inline key's {:?}",
            software.storm_p99, inline.storm_p99
        ));
    }
    Ok(())
}

/// The offload target: with handshakes on idle-class threads (`--handshake-priority idle`),
/// keep-alive p99 during the storm within 2 × idle p99 (plus [`FLOOR`]). The kernel preempts
/// the handshake thread whenever the serving thread has a request, so resumed handshakes and
/// new ClientHellos no longer queue in front of it. Without the split (the default, one thread
/// per worker) the target was met in about half the runs: when a batch of 8 returned, the
/// worker resumed 8 handshakes back to back and a request arriving then waited behind them
/// (storm p99 1.9–8.6 ms).
#[test]
fn keepalive_p99_with_an_offloaded_engine_within_twice_idle() {
    let _lock = support::exclusive_with_fault_engine();
    // Timing on a shared 2-core machine: one re-measurement before judging (reported either way).
    let mut slow = keepalive_under_storm(&slow_engine(), Sched::IdleHandshakes);
    print(
        "slow sleeping engine (delay 50ms, offload), idle-class handshakes",
        &slow,
    );
    if !within_offload_bound(&slow) {
        slow = keepalive_under_storm(&slow_engine(), Sched::IdleHandshakes);
        print("slow sleeping engine, second measurement", &slow);
    }
    assert!(
        within_offload_bound(&slow),
        "slow engine: storm p99 {:?} > 2 × idle p99 {:?} + {FLOOR:?}",
        slow.storm_p99,
        slow.idle_p99
    );
}

/// The CPU engine's target: keep-alive p99 during the storm within idle p99 plus one batch's
/// compute time, below the inline key's. Two ways to get there, both checked: batches on a
/// lower-priority batch thread (`QUICKSHAKE_BATCH_THREADS=1`: the kernel preempts the batch
/// when the worker has a request, but the worker still runs the handshakes themselves), and
/// whole handshakes on idle-class threads. With the batch computed on the worker (the
/// default) it is ~15 ms.
#[test]
fn keepalive_p99_with_the_software_engine_within_one_batch_of_idle() {
    let _lock = support::exclusive();
    for (sched, what) in [
        (Sched::BatchThread, "software engine, batch thread"),
        (
            Sched::IdleHandshakes,
            "software engine, idle-class handshakes",
        ),
    ] {
        let mut software = keepalive_under_storm(&software_engine(), sched);
        print(what, &software);
        if software.storm_p99 > software.idle_p99 + ONE_BATCH {
            software = keepalive_under_storm(&software_engine(), sched);
            print(&format!("{what}, second measurement"), &software);
        }
        assert!(
            software.storm_p99 <= software.idle_p99 + ONE_BATCH,
            "{what}: storm p99 {:?} > idle p99 {:?} + one batch {ONE_BATCH:?}",
            software.storm_p99,
            software.idle_p99
        );
    }
}

/// With idle-class handshakes even an in-process key leaves keep-alive requests alone: the
/// signature is computed on the handshake thread, which the serving thread preempts. Reported
/// (not asserted): it is a property of the mode, not of a provider.
#[test]
#[ignore = "report only: run with --ignored --nocapture"]
fn report_inline_key_with_idle_class_handshakes() {
    let _lock = support::exclusive();
    let inline = keepalive_under_storm(&plain_cert("rsa2048"), Sched::IdleHandshakes);
    print("inline key, idle-class handshakes", &inline);
}
