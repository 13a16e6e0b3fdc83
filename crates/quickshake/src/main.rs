//! The `quickshake` binary: the release gateway, with no extensions (see the library's
//! [`quickshake::run`]).
#![forbid(unsafe_code)]

use std::process::ExitCode;

/// mimalloc instead of glibc's malloc: a QUIC handshake makes a few hundred small allocations
/// inside quiche, and glibc's spent ~10% of a QUIC handshake's CPU on them (perf, RSA-2048,
/// adaptive batching). Measured in `docs/benchmarks.md` (HTTP/3 section).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    quickshake::run(quickshake::Extensions::default())
}
