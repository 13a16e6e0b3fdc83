//! The measurement window of a run: set up the shared state, start the load, warm up, take
//! the "before" snapshots of client CPU, the server core's CPU and the server's counters, show
//! progress until the duration, the budget or Ctrl-C ends it, stop every task, take the
//! "after" snapshots, and turn the differences into [`RunData`].

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinSet;

use super::config::Config;
use super::loops::{closed_worker, open_dispatcher};
use super::shared::{Shared, Tally, PHASE_DONE, PHASE_MEASURE, PHASE_WARMUP};
use super::tls::{build_connector, build_quic_context};
use crate::cpu;
use crate::h3::H3Client;
use crate::http;
use crate::report::{
    new_histogram, ErrorCounts, HandshakeCount, OpenLoopReport, RunData, ServerReport,
};
use crate::schedule::{late_threshold, Punctuality, Schedule};
use crate::stats_client::{self, ServerCounters};

struct Snapshot {
    at: Instant,
    cpu: Duration,
    server_cpu: Option<cpu::CpuTicks>,
}

fn snapshot(cfg: &Config, notes: &mut Vec<String>) -> Snapshot {
    let server_cpu = cfg.server_cpu.and_then(|n| match cpu::read_cpu_ticks(n) {
        Ok(t) => Some(t),
        Err(e) => {
            notes.push(e);
            None
        }
    });
    Snapshot {
        at: Instant::now(),
        cpu: cpu::self_cpu_time(),
        server_cpu,
    }
}

async fn server_counters(cfg: &Config, notes: &mut Vec<String>) -> Option<ServerCounters> {
    let url = cfg.server_stats.as_ref()?;
    match stats_client::fetch(url, Duration::from_secs(5)).await {
        Ok(c) => Some(c),
        Err(e) => {
            notes.push(e);
            None
        }
    }
}

fn progress_line(sh: &Shared, since: Instant, last: &mut (u64, u64, Instant)) -> String {
    let t = sh.tally();
    let now = Instant::now();
    let dt = now.duration_since(last.2).as_secs_f64().max(1e-6);
    let line = format!(
        "[{:>5.0}s] handshakes {} ({:.0}/s)  requests {} ({:.0}/s)  resumed {}  errors {}  in flight {}",
        now.duration_since(since).as_secs_f64(),
        t.handshakes,
        (t.handshakes - last.0) as f64 / dt,
        t.requests,
        (t.requests - last.1) as f64 / dt,
        t.resumed,
        t.errors.total,
        sh.in_flight.load(Ordering::Relaxed),
    );
    *last = (t.handshakes, t.requests, now);
    line
}

/// Runs the load and returns raw measurements. Errors are setup failures only.
pub async fn run(cfg: Config) -> Result<RunData, String> {
    let offer = cfg.offers_sessions();
    let negotiated = Arc::new(OnceLock::new());
    let quic = if cfg.h3 {
        if offer || cfg.keepalive {
            return Err(
                "--h3 opens a new QUIC connection per request: no keep-alive, no sessions"
                    .to_string(),
            );
        }
        let ctx = build_quic_context(&cfg.tls, &cfg.server_name, negotiated.clone())?;
        let idle_ms = u64::try_from(cfg.timeout.as_millis()).unwrap_or(u64::MAX);
        Some(H3Client::new(
            ctx,
            idle_ms,
            &cfg.url.path,
            &cfg.url.host_header(),
        )?)
    } else {
        None
    };
    let (connector, slot_index) = build_connector(&cfg.tls, offer)?;
    let schedule = cfg.rate.map(Schedule::new).transpose()?;
    let slots = if offer {
        (0..cfg.connections.max(1))
            .map(|_| Arc::new(Mutex::new(None)))
            .collect()
    } else {
        Vec::new()
    };
    let authority = cfg.url.host_header();
    let sh = Arc::new(Shared {
        request_bytes: http::get_request(&cfg.url.path, &authority, !cfg.keepalive),
        authority,
        connector,
        slot_index,
        slots,
        phase: AtomicU8::new(if cfg.warmup.is_zero() {
            PHASE_MEASURE
        } else {
            PHASE_WARMUP
        }),
        tally: Mutex::new(Tally {
            handshakes: 0,
            requests: 0,
            resumed: 0,
            errors: ErrorCounts::default(),
            samples: Vec::new(),
            connect: new_histogram(),
            handshake: new_histogram(),
            request: new_histogram(),
        }),
        negotiated,
        quic,
        budget: AtomicU64::new(cfg.max_requests.unwrap_or(u64::MAX)),
        in_flight: AtomicU64::new(0),
        finished: Notify::new(),
        idle: Mutex::new(Vec::new()),
        punctuality: Mutex::new(Punctuality::default()),
        cfg,
    });
    let cfg = &sh.cfg;
    let mut notes = Vec::new();
    let mut interrupted = false;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);

    // Before the load: a warm-up run needs the "before" snapshots after it, otherwise now.
    let mut before_server = None;
    let mut before = None;
    if cfg.warmup.is_zero() {
        // Phase is already MEASURE; take snapshots before any load starts.
        before_server = server_counters(cfg, &mut notes).await;
        before = Some(snapshot(cfg, &mut notes));
    }

    let t_load = Instant::now();
    let tasks = Arc::new(Mutex::new(JoinSet::new()));
    if let Ok(mut t) = tasks.lock() {
        match schedule {
            None => {
                for slot in 0..cfg.connections.max(1) {
                    t.spawn(closed_worker(sh.clone(), slot));
                }
            }
            Some(s) => {
                t.spawn(open_dispatcher(sh.clone(), s, t_load, tasks.clone()));
            }
        }
    }

    if !cfg.warmup.is_zero() {
        tokio::select! {
            _ = tokio::time::sleep(cfg.warmup) => {}
            _ = &mut ctrl_c => { interrupted = true; }
        }
        before_server = server_counters(cfg, &mut notes).await;
        before = Some(snapshot(cfg, &mut notes));
        if let Ok(mut p) = sh.punctuality.lock() {
            *p = Punctuality::default();
        }
        sh.phase.store(PHASE_MEASURE, Ordering::Release);
    }
    let before = match before {
        Some(b) => b,
        None => snapshot(cfg, &mut notes),
    };

    let show_progress = cfg.progress && cfg.duration.is_none_or(|d| d >= Duration::from_secs(3));
    let deadline = cfg.duration.map(|d| before.at + d);
    if !interrupted {
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(sleep);
        let mut tick = tokio::time::interval_at(
            (before.at + Duration::from_secs(1)).into(),
            Duration::from_secs(1),
        );
        let mut last = (0u64, 0u64, before.at);
        loop {
            tokio::select! {
                _ = &mut sleep => break,
                _ = sh.finished.notified() => break,
                _ = &mut ctrl_c => { interrupted = true; break; }
                _ = tick.tick(), if show_progress => {
                    eprint!("\r{}\x1b[K", progress_line(&sh, before.at, &mut last));
                }
            }
        }
        if show_progress {
            eprintln!();
        }
    }
    sh.phase.store(PHASE_DONE, Ordering::Release);
    let after = snapshot(cfg, &mut notes);
    let unfinished = sh.in_flight.load(Ordering::Acquire);
    // Stop the load: abort every task (closes their sockets) before asking the server.
    // Twice: the open-loop dispatcher may spawn one last task while the first set stops.
    for _ in 0..2 {
        let set = tasks.lock().ok().map(|mut t| std::mem::take(&mut *t));
        if let Some(mut set) = set {
            set.shutdown().await;
        }
    }
    if let Ok(mut idle) = sh.idle.lock() {
        idle.clear();
    }
    let after_server = server_counters(cfg, &mut notes).await;

    let wall = after.at.duration_since(before.at);
    let t = sh.tally();
    let handshakes = t.handshakes;
    let server = (cfg.server_stats.is_some() || cfg.server_cpu.is_some()).then(|| {
        ServerReport::from_window(
            (before_server.as_ref(), after_server.as_ref()),
            cfg.server_cpu,
            (before.server_cpu, after.server_cpu),
            cpu::clock_ticks_per_sec(),
            wall,
            if cfg.h3 {
                HandshakeCount::Client(handshakes)
            } else {
                HandshakeCount::Server {
                    client: Some(handshakes),
                }
            },
        )
    });
    let open_loop = schedule.map(|s| {
        let p = sh.punctuality.lock().map(|p| p.clone()).unwrap_or_default();
        OpenLoopReport {
            rate: s.rate(),
            started: p.started,
            started_late: p.late,
            capped: p.capped,
            max_start_lag_ms: p.max_lag.as_secs_f64() * 1000.0,
            late_threshold_ms: late_threshold(s.rate()).as_secs_f64() * 1000.0,
            unfinished,
            max_outstanding: cfg.connections,
        }
    });
    Ok(RunData {
        url: format!(
            "{}://{}{}",
            cfg.url.scheme,
            cfg.url.host_header(),
            cfg.url.path
        ),
        mode: if schedule.is_some() { "open" } else { "closed" },
        transport: if cfg.h3 { "quic" } else { "tcp" },
        connections: cfg.connections,
        threads: cfg.threads,
        keepalive: cfg.keepalive,
        allow_resumption: cfg.allow_resumption,
        offer_sessions: offer,
        wall,
        handshakes,
        requests: t.requests,
        resumed: t.resumed,
        errors: t.errors,
        error_samples: t.samples.clone(),
        connect: t.connect.clone(),
        handshake: t.handshake.clone(),
        request: t.request.clone(),
        client_cpu: after.cpu.saturating_sub(before.cpu),
        negotiated: sh.negotiated.get().cloned(),
        open_loop,
        server,
        interrupted,
        notes,
    })
}
