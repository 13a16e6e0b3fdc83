//! Bad configurations stop the gateway at start with a non-zero exit and a message naming the
//! exact field path or file at fault.

use std::net::TcpListener;

use crate::support;
use crate::support::*;

fn good() -> String {
    direct_response_config(&plain_cert("rsa2048"), "", "")
}

/// Start on `template`, expect failure; the stderr (asserting a non-zero exit).
fn fails(template: &str) -> String {
    let (code, stderr) = start_expect_failure(template, &[], &[]);
    assert_ne!(code, 0, "must fail; stderr: {stderr}");
    assert!(!stderr.trim().is_empty(), "an error message is required");
    stderr
}

/// The same configuration under `--mode validate` fails too, with the same message.
fn validate_fails(template: &str, needle: &str) {
    let (code, stderr) = start_expect_failure(template, &["--mode", "validate"], &[]);
    assert_ne!(code, 0, "validate must fail; stderr: {stderr}");
    assert!(
        stderr.contains(needle),
        "validate: {needle} not in {stderr}"
    );
}

#[test]
fn the_good_config_starts() {
    let _lock = support::shared();
    // The baseline every mutation below starts from.
    let gw = Gateway::start(&good(), &["--concurrency", "1"]);
    let (code, _) = gw.admin_get("/ready");
    assert_eq!(code, 200);
}

#[test]
fn unknown_field_in_listener() {
    let _lock = support::shared();
    let t = good().replace("  - name: main\n", "  - name: main\n    bogus: 1\n");
    assert!(t.contains("bogus: 1"));
    let err = fails(&t);
    assert!(
        err.contains("static_resources.listeners[0].bogus"),
        "field path missing: {err}"
    );
    assert!(err.contains("unknown field"), "{err}");
    validate_fails(&t, "static_resources.listeners[0].bogus");
}

#[test]
fn unknown_field_deep_inside_tls_context() {
    let _lock = support::shared();
    let t = good().replace(
        "            alpn_protocols: [h2, http/1.1]\n",
        "            alpn_protocols: [h2, http/1.1]\n            bogus_tls: true\n",
    );
    assert!(t.contains("bogus_tls"));
    let err = fails(&t);
    assert!(
        err.contains(
            "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config.common_tls_context.bogus_tls"
        ),
        "{err}"
    );
}

#[test]
fn wrong_type_url_in_transport_socket() {
    let _lock = support::shared();
    let t = good().replace(
        "envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
        "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
    );
    assert!(t.contains("UpstreamTlsContext"));
    let err = fails(&t);
    assert!(
        err.contains(
            "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config.@type"
        ),
        "{err}"
    );
    assert!(
        err.contains("UpstreamTlsContext"),
        "names what it got: {err}"
    );
    validate_fails(&t, "transport_socket.typed_config.@type");
}

#[test]
fn missing_key_file() {
    let _lock = support::shared();
    let t = good().replace(
        "{{CERTS}}/rsa2048.key.pem",
        "{{DIR}}/does-not-exist.key.pem",
    );
    let err = fails(&t);
    assert!(
        err.contains("does-not-exist.key.pem"),
        "file missing: {err}"
    );
    assert!(
        err.contains(
            "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config.common_tls_context.tls_certificates[0].private_key"
        ),
        "field path missing: {err}"
    );
    assert!(err.contains("No such file"), "OS error: {err}");
    validate_fails(&t, "does-not-exist.key.pem");
}

#[test]
fn missing_certificate_file() {
    let _lock = support::shared();
    let t = good().replace("{{CERTS}}/rsa2048.cert.pem", "{{DIR}}/nope.cert.pem");
    let err = fails(&t);
    assert!(err.contains("nope.cert.pem"), "{err}");
    assert!(
        err.contains("tls_certificates[0].certificate_chain"),
        "{err}"
    );
}

#[test]
fn key_does_not_match_certificate() {
    let _lock = support::shared();
    let t = good().replace("{{CERTS}}/rsa2048.key.pem", "{{CERTS}}/mismatch.key.pem");
    let err = fails(&t);
    assert!(err.contains("mismatch.key.pem"), "file missing: {err}");
    assert!(err.contains("does not match"), "{err}");
    assert!(err.contains("tls_certificates[0].private_key"), "{err}");
    // The key itself never reaches the message.
    assert!(!err.contains("PRIVATE KEY"), "{err}");
    validate_fails(&t, "does not match");
}

#[test]
fn listener_port_in_use() {
    let _lock = support::shared();
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let t = good().replace("port_value: {{PORT}}", &format!("port_value: {port}"));
    let err = fails(&t);
    let addr = format!("127.0.0.1:{port}");
    assert!(err.contains(&addr), "address missing: {err}");
    assert!(
        err.contains("static_resources.listeners[0].address"),
        "field path missing: {err}"
    );
    assert!(err.to_lowercase().contains("in use"), "{err}");
    drop(taken);
}

#[test]
fn admin_port_in_use() {
    let _lock = support::shared();
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let t = good().replace("port_value: {{ADMIN}}", &format!("port_value: {port}"));
    let err = fails(&t);
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(err.contains("admin.address"), "{err}");
}

#[test]
fn listener_and_admin_on_one_address() {
    let _lock = support::shared();
    let t = good().replace("port_value: {{ADMIN}}", "port_value: {{PORT}}");
    let err = fails(&t);
    assert!(
        err.contains("static_resources.listeners[0].address"),
        "{err}"
    );
    assert!(err.contains("admin.address"), "{err}");
}

#[test]
fn bad_handshake_timeout_duration() {
    let _lock = support::shared();
    let t = good().replace(
        "\n      filters:\n",
        "\n      transport_socket_connect_timeout: 5\n      filters:\n",
    );
    assert!(t.contains("transport_socket_connect_timeout"));
    let err = fails(&t);
    assert!(
        err.contains(
            "static_resources.listeners[0].filter_chains[0].transport_socket_connect_timeout"
        ),
        "{err}"
    );
}

#[test]
fn invalid_yaml_names_the_file() {
    let _lock = support::shared();
    let err = fails("static_resources: [\n");
    assert!(err.contains("config.yaml"), "{err}");
    assert!(err.contains("invalid YAML"), "{err}");
}

#[test]
fn missing_config_file() {
    let _lock = support::shared();
    let out = std::process::Command::new(binary())
        .args(["-c", "/nonexistent/quickshake.yaml"])
        .output()
        .expect("run");
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/quickshake.yaml"), "{err}");
}

#[test]
fn require_client_certificate_without_trusted_ca() {
    let _lock = support::shared();
    let t = direct_response_config(
        &plain_cert("rsa2048"),
        "          require_client_certificate: true",
        "",
    );
    let err = fails(&t);
    assert!(
        err.contains("transport_socket.typed_config.require_client_certificate"),
        "{err}"
    );
    assert!(err.contains("trusted_ca"), "{err}");
}

/// The fault engine is a test double that only the test-only `quickshake-test` links: the
/// release binary refuses `engine: fault` at load (also with `fallback: true`), naming the
/// field and where the engine is.
#[test]
fn the_release_binary_refuses_the_test_only_fault_engine() {
    let _lock = support::shared();
    let cert = support::providers::batching_cert_with(
        "rsa2048",
        &[("engine", "fault"), ("fault", "{ error_every: 1 }")],
        Some(true),
    );
    let t = direct_response_config(&cert, "", "");
    let err = fails(&t);
    assert!(
        err.contains(
            "tls_certificates[0].private_key_provider.typed_config.engine: 'fault' is a test engine"
        ) && err.contains("`quickshake-test`"),
        "{err}"
    );
    validate_fails(&t, "'fault' is a test engine");
}

/// Nothing of the fault engine is in the release binary: none of its messages is in the file,
/// while they are in `quickshake-test` (the positive control of the search).
#[test]
fn the_release_binary_holds_no_fault_engine() {
    let _lock = support::shared();
    let holds = |path: &str, needle: &str| {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
    };
    for needle in [
        "injected engine error",
        "fault engine: injected panic in batch",
    ] {
        assert!(
            holds(quickshake_test_support::gateway::test_binary(), needle),
            "quickshake-test lacks {needle:?}: the search is broken"
        );
        assert!(
            !holds(binary(), needle),
            "the release binary holds {needle:?}"
        );
    }
}
