//! Test support: the shared harness of `quickshake-test-support` (run the real `quickshake`
//! binary on a config, talk to it with real clients, read its admin endpoint), re-exported so
//! that the suite's modules say `support::…`, and the helpers only this suite uses (control
//! planes, Envoy, upstreams, providers, SoftHSM, an OCSP PKI).

pub mod control_plane;
pub mod envoy;
pub mod ocsp_pki;
pub mod providers;
pub mod softhsm;
pub mod upstreams;
pub mod xds;

pub use quickshake_test_support::configs::*;
pub use quickshake_test_support::gateway::{
    bench_binary, binary, curl_ok, render, start_expect_failure, Gateway, SuiteLock,
};
pub use quickshake_test_support::http::*;
pub use quickshake_test_support::net::free_port;
pub use quickshake_test_support::openssl::*;
pub use quickshake_test_support::paths::{cert, certs_dir, testdata};
pub use quickshake_test_support::{skip, tls_client};

use quickshake_test_support::gateway;

/// Run beside other tests (see [`gateway::shared`]), with this package's `quickshake`.
pub fn shared() -> SuiteLock {
    gateway::use_binary(env!("CARGO_BIN_EXE_quickshake"));
    gateway::shared()
}

/// Run alone in the suite (see [`gateway::exclusive`]), with this package's `quickshake`.
pub fn exclusive() -> SuiteLock {
    gateway::use_binary(env!("CARGO_BIN_EXE_quickshake"));
    gateway::exclusive()
}

/// A [`SuiteLock`] whose thread's gateways run `quickshake-test` ([`gateway::test_binary`]: the
/// release gateway plus the tests' `engine: fault`, which the release `quickshake` refuses).
pub struct FaultEngineLock {
    _binary: gateway::ThreadBinary,
    _lock: SuiteLock,
}

/// [`shared`], with this thread's gateways on `quickshake-test` (for `engine: fault`).
pub fn shared_with_fault_engine() -> FaultEngineLock {
    FaultEngineLock {
        _lock: shared(),
        _binary: gateway::ThreadBinary::new(gateway::test_binary()),
    }
}

/// [`exclusive`], with this thread's gateways on `quickshake-test` (for `engine: fault`).
pub fn exclusive_with_fault_engine() -> FaultEngineLock {
    FaultEngineLock {
        _lock: exclusive(),
        _binary: gateway::ThreadBinary::new(gateway::test_binary()),
    }
}
