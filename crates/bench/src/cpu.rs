//! CPU accounting: this process's user+sys time (`getrusage`) and each core's busy ticks
//! from `/proc/stat` (the server's core, when the server is pinned; every core for
//! `quickshake-bench observe`). The one reader of `/proc/stat` for the benchmark: bench/bench.py
//! gets these figures from `quickshake-bench`, it does not read `/proc/stat` itself.

use std::collections::BTreeMap;
use std::time::Duration;

/// This process's user + system CPU time so far (all threads).
pub fn self_cpu_time() -> Duration {
    // SAFETY: `getrusage` only writes into the zero-initialised `rusage` we pass by pointer;
    // `RUSAGE_SELF` is a valid `who`. A failure leaves the struct zeroed, read as 0.
    #[allow(unsafe_code)]
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
            return Duration::ZERO;
        }
        ru
    };
    timeval(ru.ru_utime) + timeval(ru.ru_stime)
}

fn timeval(tv: libc::timeval) -> Duration {
    let secs = u64::try_from(tv.tv_sec).unwrap_or(0);
    let micros = u32::try_from(tv.tv_usec).unwrap_or(0).min(999_999);
    Duration::new(secs, micros * 1000)
}

/// Kernel clock ticks per second (`USER_HZ`), the unit of `/proc/stat`.
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: `sysconf` takes a plain integer name and has no memory effects.
    #[allow(unsafe_code)]
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}

/// Busy and total ticks of one CPU line in `/proc/stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// user + nice + system + irq + softirq.
    pub busy: u64,
    /// Every field (busy + idle + iowait + steal ...; guest is already in user).
    pub total: u64,
}

impl CpuTicks {
    /// Ticks spent from `before` to `self`.
    pub fn since(&self, before: &CpuTicks) -> CpuTicks {
        CpuTicks {
            busy: self.busy.saturating_sub(before.busy),
            total: self.total.saturating_sub(before.total),
        }
    }

    /// Busy share of the ticks (0 when there are none), e.g. of a window's [`CpuTicks::since`].
    pub fn busy_share(&self) -> f64 {
        if self.total > 0 {
            self.busy as f64 / self.total as f64
        } else {
            0.0
        }
    }
}

/// Finds the `cpuN` line in a `/proc/stat` text.
pub fn parse_proc_stat(text: &str, cpu: usize) -> Result<CpuTicks, String> {
    let name = format!("cpu{cpu}");
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))
        .ok_or_else(|| format!("/proc/stat has no {name} line"))?;
    parse_cpu_line(&name, line)
}

/// Every `cpuN` line of a `/proc/stat` text (not the `cpu` total line), by N.
pub fn parse_proc_stat_all(text: &str) -> Result<BTreeMap<usize, CpuTicks>, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        if let Some(n) = name
            .strip_prefix("cpu")
            .and_then(|n| n.parse::<usize>().ok())
        {
            out.insert(n, parse_cpu_line(name, line)?);
        }
    }
    if out.is_empty() {
        return Err("/proc/stat has no cpuN line".into());
    }
    Ok(out)
}

fn parse_cpu_line(name: &str, line: &str) -> Result<CpuTicks, String> {
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("/proc/stat: bad {name} line {line:?}"))?;
    if fields.len() < 7 {
        return Err(format!("/proc/stat: short {name} line {line:?}"));
    }
    // user nice system idle iowait irq softirq [steal guest guest_nice]
    let busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6];
    // guest and guest_nice (fields 8, 9) are already counted in user and nice.
    let total = fields.iter().take(8).sum();
    Ok(CpuTicks { busy, total })
}

/// Reads `/proc/stat` for `cpuN`.
pub fn read_cpu_ticks(cpu: usize) -> Result<CpuTicks, String> {
    let text =
        std::fs::read_to_string("/proc/stat").map_err(|e| format!("reading /proc/stat: {e}"))?;
    parse_proc_stat(&text, cpu)
}

/// Reads `/proc/stat` for every `cpuN`.
pub fn read_all_cpu_ticks() -> Result<BTreeMap<usize, CpuTicks>, String> {
    let text =
        std::fs::read_to_string("/proc/stat").map_err(|e| format!("reading /proc/stat: {e}"))?;
    parse_proc_stat_all(&text)
}

/// Microseconds of CPU per event; `None` when there were no events.
pub fn us_per(cpu: Duration, events: u64) -> Option<f64> {
    (events > 0).then(|| cpu.as_secs_f64() * 1e6 / events as f64)
}

/// Converts a tick count to time.
pub fn ticks_to_duration(ticks: u64, hz: u64) -> Duration {
    Duration::from_secs_f64(ticks as f64 / hz.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 5 50 1000 7 3 2 1 0 0
cpu0 60 1 30 400 2 2 1 0 0 0
cpu1 40 4 20 600 5 1 1 1 0 0
intr 12345
";

    #[test]
    fn parses_one_core() {
        let c0 = parse_proc_stat(STAT, 0).unwrap();
        assert_eq!(c0.busy, 60 + 1 + 30 + 2 + 1);
        assert_eq!(c0.total, 60 + 1 + 30 + 400 + 2 + 2 + 1);
        let c1 = parse_proc_stat(STAT, 1).unwrap();
        assert_eq!(c1.busy, 40 + 4 + 20 + 1 + 1);
        assert!(parse_proc_stat(STAT, 2).is_err());
        assert!(parse_proc_stat("cpu0 1 2 x\n", 0).is_err());
        assert!(parse_proc_stat("cpu0 1 2 3\n", 0).is_err());
        let later = CpuTicks {
            busy: c0.busy + 50,
            total: c0.total + 100,
        };
        assert_eq!(
            later.since(&c0),
            CpuTicks {
                busy: 50,
                total: 100
            }
        );
        assert_eq!(later.since(&c0).busy_share(), 0.5);
        assert_eq!(CpuTicks::default().busy_share(), 0.0);
    }

    #[test]
    fn parses_every_core() {
        let all = parse_proc_stat_all(STAT).unwrap();
        assert_eq!(all.keys().copied().collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(all[&0], parse_proc_stat(STAT, 0).unwrap());
        assert_eq!(all[&1], parse_proc_stat(STAT, 1).unwrap());
        assert!(parse_proc_stat_all("intr 1\n").is_err());
        assert!(parse_proc_stat_all("cpu0 1 2 3\n").is_err());
    }

    #[test]
    fn real_sources_work() {
        let a = self_cpu_time();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(self_cpu_time() >= a);
        assert!(clock_ticks_per_sec() >= 1);
        if std::path::Path::new("/proc/stat").exists() {
            assert!(read_cpu_ticks(0).is_ok());
            assert!(read_all_cpu_ticks().is_ok_and(|all| all.contains_key(&0)));
        }
    }

    #[test]
    fn per_event() {
        assert_eq!(us_per(Duration::from_millis(3), 10), Some(300.0));
        assert_eq!(us_per(Duration::from_millis(3), 0), None);
        assert_eq!(ticks_to_duration(250, 100), Duration::from_millis(2500));
    }
}
