//! The run's report: what was measured, the verdict, and its two renderings
//! (a human table and one JSON object). No I/O beyond returning strings.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::cpu::{self, CpuTicks};
use crate::stats_client::ServerCounters;

/// Client CPU at or above this share of `wall × threads` marks the client as the bottleneck.
pub const CLIENT_BOTTLENECK_SHARE: f64 = 0.9;

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl LatencySummary {
    /// Summarises a histogram of microseconds.
    pub fn from_micros(h: &Histogram<u64>) -> LatencySummary {
        if h.is_empty() {
            return LatencySummary::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        LatencySummary {
            count: h.len(),
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    }
}

/// A histogram for latencies in microseconds, 1 µs to 1 hour, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    // Bounds are constants that `new_with_bounds` accepts; `new(3)` is the infallible fallback.
    Histogram::new_with_bounds(1, 3_600_000_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}

/// Failed requests by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ErrorCounts {
    /// TCP connect failed.
    pub connect: u64,
    /// TLS handshake failed (including certificate verification).
    pub tls: u64,
    /// Non-2xx status or a malformed response.
    pub http: u64,
    /// The request did not finish within `--timeout`.
    pub timeout: u64,
    /// Read/write failure or early close after the handshake.
    pub io: u64,
    pub total: u64,
}

/// Error kinds, in the order they are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Connect,
    Tls,
    Http,
    Timeout,
    Io,
}

impl ErrorKind {
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Tls => "tls",
            ErrorKind::Http => "http",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Io => "io",
        }
    }
}

impl ErrorCounts {
    pub fn add(&mut self, kind: ErrorKind) {
        match kind {
            ErrorKind::Connect => self.connect += 1,
            ErrorKind::Tls => self.tls += 1,
            ErrorKind::Http => self.http += 1,
            ErrorKind::Timeout => self.timeout += 1,
            ErrorKind::Io => self.io += 1,
        }
        self.total += 1;
    }
}

/// What the first successful handshake negotiated.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Negotiated {
    pub version: String,
    pub cipher: Option<String>,
    pub group: Option<String>,
    pub signature_algorithm: Option<String>,
    pub alpn: Option<String>,
}

/// How well the open loop kept its timetable.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OpenLoopReport {
    pub rate: f64,
    /// Requests started during the timed window.
    pub started: u64,
    /// Started later than `late_threshold_ms` after their intended time.
    pub started_late: u64,
    /// Waited for a free slot under the outstanding cap.
    pub capped: u64,
    pub max_start_lag_ms: f64,
    pub late_threshold_ms: f64,
    /// Still outstanding when the window closed (not counted in latencies).
    pub unfinished: u64,
    pub max_outstanding: usize,
}

/// The server's view, from its stats endpoint and/or its core's `/proc/stat` ticks.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ServerReport {
    /// Server-counted handshakes in the window (`--server-stats`).
    pub handshakes: Option<u64>,
    /// Server-counted resumed sessions in the window (`--server-stats`).
    pub session_reused: Option<u64>,
    pub handshakes_per_sec: Option<f64>,
    /// Listener handshake counters found on the stats page.
    pub listeners: Option<u32>,
    /// `--server-cpu N`.
    pub cpu: Option<usize>,
    pub cpu_busy_seconds: Option<f64>,
    pub cpu_utilization: Option<f64>,
    /// Busy µs of that core per handshake (see [`HandshakeCount`]).
    pub cpu_us_per_handshake: Option<f64>,
    /// Whose handshake count `cpu_us_per_handshake` divides by: "server" or "client".
    pub cpu_per_handshake_counted_by: Option<&'static str>,
    /// Server-counted handshakes by key exchange group in the window (`--server-stats`;
    /// groups that did not grow are left out).
    pub curves: Option<BTreeMap<String, u64>>,
}

/// Which handshake count the server core's busy time is divided by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeCount {
    /// The server's own counter (`listener.*.ssl.handshake`) when it was read, else the
    /// client's count when there is one (TCP runs, `observe`).
    Server { client: Option<u64> },
    /// The client's count (QUIC runs: Envoy's `ssl.handshake` does not move for QUIC).
    Client(u64),
}

impl ServerReport {
    /// The server's view of a window from the readings taken before and after it: counter
    /// growth (when both stats pages were read) and the server core's busy time, share and µs
    /// per handshake (counted as `count` says; `ticks` are the core's `/proc/stat` ticks
    /// before and after, `hz` their unit). The one place these figures are computed, for
    /// `quickshake-bench` runs and for `observe`.
    pub fn from_window(
        counters: (Option<&ServerCounters>, Option<&ServerCounters>),
        cpu: Option<usize>,
        ticks: (Option<CpuTicks>, Option<CpuTicks>),
        hz: u64,
        wall: Duration,
        count: HandshakeCount,
    ) -> ServerReport {
        let mut s = ServerReport::default();
        if let (Some(b), Some(a)) = counters {
            let d = a.since(b);
            s.handshakes = Some(d.handshakes);
            s.session_reused = Some(d.session_reused);
            s.listeners = Some(d.listeners);
            s.handshakes_per_sec = Some(d.handshakes as f64 / wall.as_secs_f64().max(1e-9));
            s.curves = Some(d.curves);
        }
        if let Some(n) = cpu {
            s.cpu = Some(n);
            if let (Some(b), Some(a)) = ticks {
                let d = a.since(&b);
                let busy = cpu::ticks_to_duration(d.busy, hz);
                s.cpu_busy_seconds = Some(busy.as_secs_f64());
                s.cpu_utilization = Some(d.busy_share());
                let (n, by) = match (count, s.handshakes) {
                    (HandshakeCount::Client(c), _) => (Some(c), "client"),
                    (HandshakeCount::Server { .. }, Some(h)) => (Some(h), "server"),
                    (HandshakeCount::Server { client }, None) => (client, "client"),
                };
                s.cpu_us_per_handshake = n.and_then(|h| cpu::us_per(busy, h));
                s.cpu_per_handshake_counted_by = s.cpu_us_per_handshake.map(|_| by);
            }
        }
        s
    }

    /// The `server` and `server CPU` lines of the human-readable table.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        if let Some(h) = self.handshakes {
            let groups = self
                .curves
                .iter()
                .flatten()
                .map(|(g, n)| format!(" {g} {n}"))
                .collect::<String>();
            let _ = writeln!(
                s,
                "server      handshakes {} ({:.1}/s), session_reused {}{}",
                h,
                self.handshakes_per_sec.unwrap_or(0.0),
                self.session_reused.unwrap_or(0),
                if groups.is_empty() {
                    String::new()
                } else {
                    format!(", groups{groups}")
                }
            );
        }
        if let Some(cpu) = self.cpu {
            let _ = writeln!(
                s,
                "server CPU  cpu{} busy {:.3} s ({:.0}%), {} per handshake",
                cpu,
                self.cpu_busy_seconds.unwrap_or(0.0),
                self.cpu_utilization.unwrap_or(0.0) * 100.0,
                fmt_us(self.cpu_us_per_handshake)
            );
        }
        s
    }
}

/// Raw measurements of one run, before derivation.
#[derive(Debug, Clone)]
pub struct RunData {
    pub url: String,
    pub mode: &'static str,
    /// "tcp" (TLS over TCP) or "quic" (`--h3`).
    pub transport: &'static str,
    pub connections: usize,
    pub threads: usize,
    pub keepalive: bool,
    pub allow_resumption: bool,
    pub offer_sessions: bool,
    pub wall: Duration,
    pub handshakes: u64,
    pub requests: u64,
    pub resumed: u64,
    pub errors: ErrorCounts,
    pub error_samples: Vec<String>,
    pub connect: Histogram<u64>,
    pub handshake: Histogram<u64>,
    pub request: Histogram<u64>,
    pub client_cpu: Duration,
    pub negotiated: Option<Negotiated>,
    pub open_loop: Option<OpenLoopReport>,
    pub server: Option<ServerReport>,
    pub interrupted: bool,
    /// Problems met outside requests (stats endpoint unreachable ...).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Latencies {
    pub connect: LatencySummary,
    pub handshake: LatencySummary,
    pub request: LatencySummary,
}

/// The final report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub ok: bool,
    pub failures: Vec<String>,
    pub warnings: Vec<String>,
    pub url: String,
    pub mode: &'static str,
    pub transport: &'static str,
    pub connections: usize,
    pub threads: usize,
    pub keepalive: bool,
    pub allow_resumption: bool,
    pub interrupted: bool,
    pub duration_s: f64,
    pub handshakes: u64,
    pub requests: u64,
    pub resumed: u64,
    pub errors: ErrorCounts,
    pub handshakes_per_sec: f64,
    pub requests_per_sec: f64,
    pub latency_ms: Latencies,
    pub client_cpu_seconds: f64,
    pub client_cpu_us_per_handshake: Option<f64>,
    pub client_cpu_utilization: f64,
    pub client_bottleneck: bool,
    pub negotiated: Option<Negotiated>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoopReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerReport>,
    pub error_samples: Vec<String>,
}

fn per_sec(n: u64, wall: Duration) -> f64 {
    let s = wall.as_secs_f64();
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}

impl Report {
    /// Derives rates, CPU shares and the verdict from raw measurements.
    pub fn build(d: RunData) -> Report {
        let wall_s = d.wall.as_secs_f64();
        let cpu_s = d.client_cpu.as_secs_f64();
        let utilization = if wall_s > 0.0 {
            cpu_s / (wall_s * d.threads.max(1) as f64)
        } else {
            0.0
        };
        let bottleneck = utilization >= CLIENT_BOTTLENECK_SHARE;
        let mut failures = Vec::new();
        let mut warnings = d.notes.clone();
        let resumption_allowed = d.allow_resumption;
        if d.resumed > 0 && !resumption_allowed {
            failures.push(format!(
                "session resumption detected: {} of {} handshakes resumed a session \
                 (SSL_session_reused); these are not full handshakes. Pass --allow-resumption \
                 to measure resumption on purpose",
                d.resumed, d.handshakes
            ));
        }
        if let Some(s) = &d.server {
            if let Some(r) = s.session_reused {
                if r > 0 && !resumption_allowed {
                    failures.push(format!(
                        "server resumed sessions: listener.*.ssl.session_reused grew by {r} \
                         during the window; the server is not doing full handshakes"
                    ));
                }
            }
            if s.listeners == Some(0) {
                warnings.push(
                    "the server stats page has no listener.*.ssl.handshake counter".to_string(),
                );
            }
            // Over QUIC a server may not count handshakes at all (Envoy's ssl.handshake does
            // not move): the client's count is the one used then, nothing to warn about.
            let uncounted = d.transport == "quic" && s.handshakes == Some(0);
            if let (Some(sh), true, false) = (s.handshakes, d.handshakes > 0, uncounted) {
                let diff = sh.abs_diff(d.handshakes) as f64 / d.handshakes as f64;
                if diff > 0.05 && sh.abs_diff(d.handshakes) > 5 {
                    warnings.push(format!(
                        "server counted {sh} handshakes, client {} ({:+.1}%): another client \
                         may be connected or counters cover other listeners",
                        d.handshakes,
                        (sh as f64 / d.handshakes as f64 - 1.0) * 100.0
                    ));
                }
            }
        }
        if d.handshakes == 0 {
            failures.push("no TLS handshake completed".to_string());
        }
        if bottleneck {
            warnings.push(format!(
                "client CPU was {:.0}% of {} thread(s) x wall time: the client is the \
                 bottleneck, rates measure the client",
                utilization * 100.0,
                d.threads
            ));
        }
        if let Some(o) = &d.open_loop {
            if o.started_late > 0 {
                warnings.push(format!(
                    "open loop: {} of {} requests started late (max lag {:.1} ms, {} waited \
                     for the outstanding cap); latencies count from the intended start",
                    o.started_late, o.started, o.max_start_lag_ms, o.capped
                ));
            }
        }
        if d.interrupted {
            warnings.push("interrupted: partial report".to_string());
        }
        Report {
            ok: failures.is_empty(),
            failures,
            warnings,
            url: d.url,
            mode: d.mode,
            transport: d.transport,
            connections: d.connections,
            threads: d.threads,
            keepalive: d.keepalive,
            allow_resumption: d.allow_resumption,
            interrupted: d.interrupted,
            duration_s: wall_s,
            handshakes: d.handshakes,
            requests: d.requests,
            resumed: d.resumed,
            errors: d.errors,
            handshakes_per_sec: per_sec(d.handshakes, d.wall),
            requests_per_sec: per_sec(d.requests, d.wall),
            latency_ms: Latencies {
                connect: LatencySummary::from_micros(&d.connect),
                handshake: LatencySummary::from_micros(&d.handshake),
                request: LatencySummary::from_micros(&d.request),
            },
            client_cpu_seconds: cpu_s,
            client_cpu_us_per_handshake: crate::cpu::us_per(d.client_cpu, d.handshakes),
            client_cpu_utilization: utilization,
            client_bottleneck: bottleneck,
            negotiated: d.negotiated,
            open_loop: d.open_loop,
            server: d.server,
            error_samples: d.error_samples,
        }
    }

    /// One JSON object.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The human-readable table.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "target      {}  ({} loop{})", self.url, self.mode, {
            if self.transport == "quic" {
                ", HTTP/3, new QUIC connection per request"
            } else if self.keepalive {
                ", keep-alive"
            } else {
                ", new connection per request"
            }
        });
        if let Some(n) = &self.negotiated {
            let _ = writeln!(
                s,
                "negotiated  {} {} group={} sigalg={}{}",
                n.version,
                n.cipher.as_deref().unwrap_or("?"),
                n.group.as_deref().unwrap_or("?"),
                n.signature_algorithm.as_deref().unwrap_or("?"),
                n.alpn
                    .as_deref()
                    .map(|a| format!(" alpn={a}"))
                    .unwrap_or_default()
            );
        }
        let _ = writeln!(
            s,
            "duration    {:.2} s, {} connections, {} thread(s){}",
            self.duration_s,
            self.connections,
            self.threads,
            if self.interrupted {
                " (interrupted)"
            } else {
                ""
            }
        );
        let _ = writeln!(
            s,
            "handshakes  {} ({:.1}/s), resumed {}",
            self.handshakes, self.handshakes_per_sec, self.resumed
        );
        let _ = writeln!(
            s,
            "requests    {} ({:.1}/s)",
            self.requests, self.requests_per_sec
        );
        let e = &self.errors;
        let _ = writeln!(
            s,
            "errors      {} (connect {}, tls {}, http {}, timeout {}, io {})",
            e.total, e.connect, e.tls, e.http, e.timeout, e.io
        );
        let _ = writeln!(
            s,
            "latency ms  {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "", "p50", "p90", "p99", "p99.9", "max"
        );
        for (name, l) in [
            ("connect", &self.latency_ms.connect),
            ("handshake", &self.latency_ms.handshake),
            ("request", &self.latency_ms.request),
        ] {
            let _ = writeln!(
                s,
                "            {:>10} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
                name, l.p50, l.p90, l.p99, l.p999, l.max
            );
        }
        let _ = writeln!(
            s,
            "client CPU  {:.3} s ({:.0}% of {} thread(s)), {} per handshake{}",
            self.client_cpu_seconds,
            self.client_cpu_utilization * 100.0,
            self.threads,
            fmt_us(self.client_cpu_us_per_handshake),
            if self.client_bottleneck {
                "  << CLIENT IS THE BOTTLENECK"
            } else {
                ""
            }
        );
        if let Some(o) = &self.open_loop {
            let _ = writeln!(
                s,
                "open loop   rate {}/s, started {}, late {} (> {:.1} ms), capped {}, max lag {:.1} ms, unfinished {}",
                o.rate, o.started, o.started_late, o.late_threshold_ms, o.capped, o.max_start_lag_ms, o.unfinished
            );
        }
        if let Some(v) = &self.server {
            s.push_str(&v.to_text());
        }
        for w in &self.warnings {
            let _ = writeln!(s, "WARNING     {w}");
        }
        for e in &self.error_samples {
            let _ = writeln!(s, "error       {e}");
        }
        for f in &self.failures {
            let _ = writeln!(s, "FAILED      {f}");
        }
        s
    }
}

pub(crate) fn fmt_us(v: Option<f64>) -> String {
    match v {
        Some(us) => format!("{us:.0} µs"),
        None => "n/a".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> RunData {
        let mut request = new_histogram();
        for us in 1..=1000u64 {
            request.record(us * 100).unwrap();
        }
        let mut errors = ErrorCounts::default();
        errors.add(ErrorKind::Timeout);
        errors.add(ErrorKind::Http);
        RunData {
            url: "https://localhost:8443/".into(),
            mode: "closed",
            transport: "tcp",
            connections: 4,
            threads: 1,
            keepalive: false,
            allow_resumption: false,
            offer_sessions: false,
            wall: Duration::from_secs(2),
            handshakes: 1000,
            requests: 1000,
            resumed: 0,
            errors,
            error_samples: vec![],
            connect: new_histogram(),
            handshake: new_histogram(),
            request,
            client_cpu: Duration::from_millis(300),
            negotiated: None,
            open_loop: None,
            server: Some(ServerReport {
                handshakes: Some(1001),
                session_reused: Some(0),
                handshakes_per_sec: Some(500.5),
                listeners: Some(1),
                cpu: Some(0),
                cpu_busy_seconds: Some(1.0),
                cpu_utilization: Some(0.5),
                cpu_us_per_handshake: Some(999.0),
                cpu_per_handshake_counted_by: Some("server"),
                curves: Some([("X25519".to_string(), 1001)].into()),
            }),
            interrupted: false,
            notes: vec![],
        }
    }

    #[test]
    fn json_has_the_promised_keys() {
        let r = Report::build(data());
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v["ok"], true);
        assert_eq!(v["handshakes"], 1000);
        assert_eq!(v["resumed"], 0);
        assert_eq!(v["errors"]["total"], 2);
        assert_eq!(v["errors"]["timeout"], 1);
        assert_eq!(v["errors"]["http"], 1);
        assert_eq!(v["errors"]["connect"], 0);
        assert_eq!(v["handshakes_per_sec"], 500.0);
        assert_eq!(v["requests_per_sec"], 500.0);
        assert_eq!(v["duration_s"], 2.0);
        assert!((v["client_cpu_seconds"].as_f64().unwrap() - 0.3).abs() < 1e-9);
        assert!((v["client_cpu_us_per_handshake"].as_f64().unwrap() - 300.0).abs() < 1e-6);
        assert_eq!(v["client_bottleneck"], false);
        for k in ["connect", "handshake", "request"] {
            for p in ["p50", "p90", "p99", "p999", "max"] {
                assert!(v["latency_ms"][k][p].is_number(), "{k}.{p}");
            }
        }
        let p50 = v["latency_ms"]["request"]["p50"].as_f64().unwrap();
        assert!((49.9..=50.1).contains(&p50), "{p50}");
        let max = v["latency_ms"]["request"]["max"].as_f64().unwrap();
        assert!((99.9..=100.1).contains(&max), "{max}");
        assert_eq!(v["server"]["handshakes"], 1001);
        assert_eq!(v["server"]["session_reused"], 0);
        assert_eq!(v["server"]["cpu_us_per_handshake"], 999.0);
        assert!(v["server"]["handshakes_per_sec"].is_number());
        assert!(v.get("open_loop").is_none());
    }

    #[test]
    fn resumption_fails_the_run_unless_allowed() {
        let mut d = data();
        d.resumed = 3;
        let r = Report::build(d.clone());
        assert!(!r.ok);
        assert!(r.failures[0].contains("resum"), "{:?}", r.failures);
        assert!(r.to_text().contains("FAILED"));
        d.allow_resumption = true;
        assert!(Report::build(d).ok);

        let mut d = data();
        if let Some(s) = d.server.as_mut() {
            s.session_reused = Some(2);
        }
        let r = Report::build(d);
        assert!(!r.ok);
        assert!(r.failures[0].contains("session_reused"));
    }

    #[test]
    fn bottleneck_and_empty_runs() {
        let mut d = data();
        d.client_cpu = Duration::from_millis(1900);
        let r = Report::build(d);
        assert!(r.client_bottleneck);
        assert!(r.ok);
        assert!(r.to_text().contains("BOTTLENECK"));

        let mut d = data();
        d.handshakes = 0;
        d.threads = 4;
        let r = Report::build(d);
        assert!(!r.ok);
        assert_eq!(r.client_cpu_us_per_handshake, None);
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert!(v["client_cpu_us_per_handshake"].is_null());
        assert_eq!(v["latency_ms"]["connect"]["p50"], 0.0);
    }

    #[test]
    fn quic_runs_expect_no_server_handshake_count() {
        // A server that does not count QUIC handshakes (Envoy): no warning over QUIC ...
        let mut d = data();
        d.transport = "quic";
        if let Some(s) = d.server.as_mut() {
            s.handshakes = Some(0);
        }
        let r = Report::build(d.clone());
        assert!(r.ok);
        assert!(
            r.warnings.iter().all(|w| !w.contains("server counted")),
            "{:?}",
            r.warnings
        );
        assert!(r
            .to_text()
            .contains("HTTP/3, new QUIC connection per request"));
        assert_eq!(serde_json::to_value(&r).unwrap()["transport"], "quic");
        // ... while over TCP the same gap is worth a warning.
        d.transport = "tcp";
        let r = Report::build(d);
        assert!(
            r.warnings.iter().any(|w| w.contains("server counted 0")),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn server_view_of_a_window() {
        let before = ServerCounters {
            handshakes: 100,
            session_reused: 1,
            listeners: 1,
            curves: [("X25519".to_string(), 100)].into(),
        };
        let after = ServerCounters {
            handshakes: 1100,
            session_reused: 1,
            listeners: 1,
            curves: [("X25519".to_string(), 1100)].into(),
        };
        let ticks = (
            Some(CpuTicks {
                busy: 1000,
                total: 2000,
            }),
            Some(CpuTicks {
                busy: 1150,
                total: 2200,
            }),
        );
        let wall = Duration::from_secs(2);
        let s = ServerReport::from_window(
            (Some(&before), Some(&after)),
            Some(0),
            ticks,
            100,
            wall,
            HandshakeCount::Server { client: Some(990) },
        );
        assert_eq!(s.handshakes, Some(1000));
        assert_eq!(s.session_reused, Some(0));
        assert_eq!(s.handshakes_per_sec, Some(500.0));
        assert_eq!(s.curves, Some([("X25519".to_string(), 1000)].into()));
        assert_eq!(s.cpu_busy_seconds, Some(1.5));
        assert_eq!(s.cpu_utilization, Some(0.75));
        // Server-counted handshakes win over the client's count.
        assert!((s.cpu_us_per_handshake.unwrap() - 1500.0).abs() < 1e-6);
        assert_eq!(s.cpu_per_handshake_counted_by, Some("server"));
        // QUIC: the client's count, even with the stats page read.
        let c = HandshakeCount::Client(750);
        let s =
            ServerReport::from_window((Some(&before), Some(&after)), Some(0), ticks, 100, wall, c);
        assert!((s.cpu_us_per_handshake.unwrap() - 2000.0).abs() < 1e-6);
        assert_eq!(s.cpu_per_handshake_counted_by, Some("client"));
        // Without the stats page: the client's count; without either: none.
        let c = HandshakeCount::Server { client: Some(500) };
        let s = ServerReport::from_window((None, Some(&after)), Some(0), ticks, 100, wall, c);
        assert_eq!((s.handshakes, s.curves.as_ref()), (None, None));
        assert!((s.cpu_us_per_handshake.unwrap() - 3000.0).abs() < 1e-6);
        let c = HandshakeCount::Server { client: None };
        let s = ServerReport::from_window((None, None), Some(0), ticks, 100, wall, c);
        assert_eq!(s.cpu_us_per_handshake, None);
        assert_eq!(s.cpu_busy_seconds, Some(1.5));
        let c = HandshakeCount::Server { client: Some(1) };
        let s = ServerReport::from_window((None, None), None, ticks, 100, wall, c);
        assert_eq!(s, ServerReport::default());
    }

    #[test]
    fn text_table_mentions_everything() {
        let t = Report::build(data()).to_text();
        for needle in [
            "handshakes",
            "p99.9",
            "client CPU",
            "server CPU",
            "groups X25519 1001",
            "timeout 1",
        ] {
            assert!(t.contains(needle), "{needle} missing from\n{t}");
        }
    }
}
