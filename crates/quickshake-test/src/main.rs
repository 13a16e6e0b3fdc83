//! `quickshake-test`: the `quickshake` command with the tests' engines added (`engine: fault`,
//! from `quickshake-test-support`), for the suite's fault-injection tests. A test binary: it is
//! built with the workspace but never installed, packaged or shipped; the release `quickshake`
//! refuses `engine: fault` at load.
//!
//! It must hold nothing but this wiring: every behaviour is the library's, so what the fault
//! tests see is what the release binary does.
#![forbid(unsafe_code)]

use std::process::ExitCode;

/// The allocator the release binary runs with (see its `main.rs`), so the two differ only in
/// their engines.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    quickshake::run(quickshake::Extensions {
        engines: quickshake_test_support::fault::engines(),
    })
}
