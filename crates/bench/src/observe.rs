//! `quickshake-bench observe`: the server's side of a window in which another load generator
//! runs (bench/bench.py's fortio cross-check), or nothing of ours runs (bench/bench.py's
//! background load). It makes no load of its own: it reads the server's stats page and
//! `/proc/stat` as a run does, in the same order (stats page, then CPU ticks before the window;
//! CPU ticks, then stats page after it), and turns them into the same [`ServerReport`], plus
//! every core's busy share. So the benchmark's server figures are computed in one place, whichever
//! client made the load.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cpu::{self, CpuTicks};
use crate::http::Url;
use crate::report::{HandshakeCount, ServerReport};
use crate::stats_client::{self, ServerCounters};

/// What to observe.
#[derive(Debug, Clone)]
pub struct Observe {
    /// The server's admin `/stats` URL (see [`stats_client::stats_url`]).
    pub server_stats: Option<Url>,
    /// The core the server is pinned to.
    pub server_cpu: Option<usize>,
    /// The window: this command (program, then arguments), run to its end. Its stdout goes to
    /// our stderr, so our stdout carries the report alone.
    pub command: Vec<String>,
    /// Without a command: an idle window of this length.
    pub duration: Duration,
}

/// What was observed.
#[derive(Debug, Clone, Serialize)]
pub struct Observation {
    pub duration_s: f64,
    /// The command's exit status (`None`: no command, or a signal ended it).
    pub exit: Option<i32>,
    /// Busy share of every core over the window, by core number (busy ticks over all ticks,
    /// as `server.cpu_utilization`).
    pub cpu_busy: BTreeMap<usize, f64>,
    /// With `--server-stats` or `--server-cpu`: the server's view, as in a run's report.
    pub server: Option<ServerReport>,
    /// Readings that failed (stats page unreachable, no such core ...).
    pub notes: Vec<String>,
}

struct Snapshot {
    at: Instant,
    ticks: Option<BTreeMap<usize, CpuTicks>>,
}

fn snapshot(notes: &mut Vec<String>) -> Snapshot {
    let ticks = match cpu::read_all_cpu_ticks() {
        Ok(t) => Some(t),
        Err(e) => {
            notes.push(e);
            None
        }
    };
    Snapshot {
        at: Instant::now(),
        ticks,
    }
}

/// Runs the window and reports it. Errors: the runtime or the command could not start.
pub fn observe(o: &Observe) -> Result<Observation, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let mut notes = Vec::new();
    let counters = |notes: &mut Vec<String>| -> Option<ServerCounters> {
        let url = o.server_stats.as_ref()?;
        match rt.block_on(stats_client::fetch(url, Duration::from_secs(5))) {
            Ok(c) => Some(c),
            Err(e) => {
                notes.push(e);
                None
            }
        }
    };

    let before_server = counters(&mut notes);
    let before = snapshot(&mut notes);
    let exit = match o.command.split_first() {
        None => {
            std::thread::sleep(o.duration);
            None
        }
        Some((program, args)) => {
            let stdout = std::io::stderr()
                .as_fd()
                .try_clone_to_owned()
                .map_err(|e| format!("duplicating stderr: {e}"))?;
            let status = Command::new(program)
                .args(args)
                .stdout(Stdio::from(stdout))
                .status()
                .map_err(|e| format!("running {program}: {e}"))?;
            status.code()
        }
    };
    let after = snapshot(&mut notes);
    let after_server = counters(&mut notes);

    let wall = after.at.duration_since(before.at);
    let mut cpu_busy = BTreeMap::new();
    if let (Some(b), Some(a)) = (&before.ticks, &after.ticks) {
        for (n, t) in a {
            if let Some(was) = b.get(n) {
                cpu_busy.insert(*n, t.since(was).busy_share());
            }
        }
    }
    let core = |s: &Snapshot, notes: &mut Vec<String>| {
        let n = o.server_cpu?;
        let t = s.ticks.as_ref()?.get(&n).copied();
        if t.is_none() {
            notes.push(format!("/proc/stat has no cpu{n} line"));
        }
        t
    };
    let ticks = (core(&before, &mut notes), core(&after, &mut notes));
    let server = (o.server_stats.is_some() || o.server_cpu.is_some()).then(|| {
        ServerReport::from_window(
            (before_server.as_ref(), after_server.as_ref()),
            o.server_cpu,
            ticks,
            cpu::clock_ticks_per_sec(),
            wall,
            HandshakeCount::Server { client: None },
        )
    });
    notes.dedup();
    Ok(Observation {
        duration_s: wall.as_secs_f64(),
        exit,
        cpu_busy,
        server,
        notes,
    })
}

impl Observation {
    /// One JSON object.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The human-readable lines.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "window      {:.2} s{}",
            self.duration_s,
            match self.exit {
                Some(c) => format!(", command exited {c}"),
                None => String::new(),
            }
        );
        let busy = self
            .cpu_busy
            .iter()
            .map(|(n, b)| format!("cpu{n} {:.0}%", b * 100.0))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(s, "CPU busy    {busy}");
        if let Some(v) = &self.server {
            s.push_str(&v.to_text());
        }
        for n in &self.notes {
            let _ = writeln!(s, "WARNING     {n}");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet(command: &[&str], duration: Duration) -> Observation {
        observe(&Observe {
            server_stats: None,
            server_cpu: Some(0),
            command: command.iter().map(|s| s.to_string()).collect(),
            duration,
        })
        .expect("observes")
    }

    #[test]
    fn an_idle_window_and_a_command() {
        if !std::path::Path::new("/proc/stat").exists() {
            return;
        }
        let o = quiet(&[], Duration::from_millis(50));
        assert!(o.duration_s >= 0.05, "{o:?}");
        assert_eq!(o.exit, None);
        assert!(o.cpu_busy.contains_key(&0), "{o:?}");
        assert!(o.cpu_busy.values().all(|b| (0.0..=1.0).contains(b)));
        let s = o.server.as_ref().expect("server view");
        assert_eq!((s.cpu, s.handshakes), (Some(0), None));
        assert!(s.cpu_busy_seconds.is_some());
        assert_eq!(s.cpu_us_per_handshake, None, "no handshake count at all");
        assert!(o.to_text().contains("cpu0"));
        let v: serde_json::Value = serde_json::from_str(&o.to_json()).unwrap();
        assert!(v["cpu_busy"]["0"].is_number(), "{v}");

        let o = quiet(&["sh", "-c", "exit 3"], Duration::ZERO);
        assert_eq!(o.exit, Some(3));
        assert!(observe(&Observe {
            server_stats: None,
            server_cpu: None,
            command: vec!["/nonexistent/load-generator".into()],
            duration: Duration::ZERO,
        })
        .is_err());
    }
}
