//! Child processes of a test: killed when dropped, or run to completion within a bound.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process, killed (and reaped) when dropped.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What a bounded run gave: the exit code (`None` when killed) and its output.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout as JSON after asserting the run exited 0 (both outputs in the failure).
    pub fn success_json(&self) -> serde_json::Value {
        assert_eq!(
            self.code,
            Some(0),
            "stdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self.json()
    }

    /// stdout as JSON; panics with both outputs when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!("bad JSON ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr)
        })
    }
}

/// Runs `cmd` (stdin closed, output captured), killed after `limit`.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> Run {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {:?}: {e}", cmd.get_program()));
    let start = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("wait");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
