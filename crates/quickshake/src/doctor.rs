//! `quickshake doctor`: what this machine offers for handshake acceleration.

use std::path::Path;
use std::process::ExitCode;

pub fn run(_config: Option<&Path>, json: bool, concurrency: usize) -> ExitCode {
    let report = serde_json::json!({ "workers": concurrency });
    if json {
        println!("{report}");
    } else {
        println!("workers: {concurrency}");
    }
    ExitCode::SUCCESS
}
