//! Integration tests of `quickshake-upstream` against loopback servers, in one test binary
//! (each test binary links BoringSSL). Each module was a test binary of its own
//! (`tests/<name>.rs`); `cargo test -p quickshake-upstream --profile ci --test suite <name>::`
//! runs one.

mod common;

mod hash;
mod health;
mod http;
mod raw;
mod reuse;
mod tls;
mod workers;
