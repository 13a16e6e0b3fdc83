//! What the tests of every crate share, and nothing the product needs: the test certificates
//! (and the script that regenerates them), the gateway harness that runs the built binary,
//! clients, skip reporting (a skip is written down where CI prints it, and becomes a failure
//! where `scripts/test` requires the missing part), and the fault engine, a test double that only
//! the test-only `quickshake-test` binary links.
//!
//! It must not be a `[dependencies]` entry of any product crate: only `[dev-dependencies]` and
//! the test-only binary use it.
//!
//! Modules: [`paths`] (the one `testdata/` root, certificates, `target/`), [`skip`] (skips
//! written down, or failed where required), [`net`] (ports), [`process`] (children killed on
//! drop, bounded runs), [`gateway`] (the harness and the suite lock), [`http`], [`openssl`] and
//! [`tls_client`] (clients), [`configs`] (config templates), [`keys`] (public keys, key
//! provider entries), [`fault`] (the fault engine).
//!
//! Test binaries of every crate run side by side, so nothing here holds process-wide state
//! beyond one test process (ports handed out, the gateway binary, the suite lock); a skip goes to
//! a file of its own per process under the skip report directory.

pub mod configs;
pub mod fault;
pub mod gateway;
pub mod http;
pub mod keys;
pub mod net;
pub mod openssl;
pub mod paths;
pub mod process;
pub mod skip;
pub mod tls_client;
