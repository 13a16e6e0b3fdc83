//! The benchmark scripts' helpers: `observe` reports the server's view of another load
//! generator's window as a run reports its own, and `cpu-info` prints keyprovider's CPU model.

mod common;

use std::time::Duration;

use common::{bench, fake_stats, page};

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn observe_reports_a_command_window_as_a_run_does() {
    let stats = fake_stats(vec![page(1000, 7), page(1100, 7)]);
    let admin = format!("http://127.0.0.1:{stats}");
    let run = bench(
        &[
            "observe",
            "--json",
            "--server-stats",
            &admin,
            "--server-cpu",
            "0",
            "--",
            "sh",
            "-c",
            "echo load-generator-output; sleep 0.2",
        ],
        LIMIT,
    );
    assert_eq!(run.code, Some(0), "stderr:\n{}", run.stderr);
    let v = run.json();
    assert_eq!(v["exit"], 0, "{v}");
    assert!(v["duration_s"].as_f64().unwrap_or(0.0) >= 0.2, "{v}");
    assert_eq!(v["server"]["handshakes"], 100, "{v}");
    assert_eq!(v["server"]["session_reused"], 0, "{v}");
    assert_eq!(v["server"]["curves"]["X25519"], 100, "{v}");
    assert_eq!(v["server"]["cpu"], 0, "{v}");
    assert!(v["server"]["cpu_busy_seconds"].is_number(), "{v}");
    assert!(v["server"]["cpu_utilization"].is_number(), "{v}");
    assert!(v["server"]["cpu_us_per_handshake"].is_number(), "{v}");
    assert!(v["cpu_busy"]["0"].is_number(), "{v}");
    // The command's stdout goes to stderr: stdout is the report alone.
    assert!(
        run.stderr.contains("load-generator-output"),
        "{}",
        run.stderr
    );

    // The command failed: reported, and the exit status says so.
    let run = bench(&["observe", "--json", "--", "sh", "-c", "exit 4"], LIMIT);
    assert_eq!(run.code, Some(1));
    assert_eq!(run.json()["exit"], 4);
    assert!(run.json()["server"].is_null());
}

#[test]
fn observe_an_idle_window() {
    let run = bench(&["observe", "--json", "-d", "200ms"], LIMIT);
    assert_eq!(run.code, Some(0), "stderr:\n{}", run.stderr);
    let v = run.json();
    assert!(v["exit"].is_null(), "{v}");
    let busy = v["cpu_busy"].as_object().expect("cpu_busy");
    assert!(busy.contains_key("0"), "{v}");
    assert!(busy
        .values()
        .all(|b| (0.0..=1.0).contains(&b.as_f64().unwrap_or(-1.0))));
    // Either a command or -d.
    assert_eq!(bench(&["observe"], LIMIT).code, Some(2));
}

#[test]
fn cpu_info_prints_the_model() {
    let run = bench(&["cpu-info"], LIMIT);
    assert_eq!(run.code, Some(0), "stderr:\n{}", run.stderr);
    let mut lines = run.stdout.lines();
    assert!(
        lines.next().is_some_and(|l| l.starts_with("cpu: ")),
        "{}",
        run.stdout
    );
    assert!(
        lines.next().is_some_and(|l| l.starts_with("flags: ")),
        "{}",
        run.stdout
    );
    let v = bench(&["cpu-info", "--json"], LIMIT).json();
    assert!(v["model"].is_string(), "{v}");
    assert!(v["flags"].is_array(), "{v}");
    assert!(v["processors"].is_number(), "{v}");
}
