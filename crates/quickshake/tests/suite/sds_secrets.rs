//! SDS-shaped secrets from files: the `Secret` that seed 003's Envoy Gateway `EnvoyPatchPolicy`
//! produces (a `private_key_provider` with `fallback: true` and the key copied into it) runs
//! as written, for the CryptoMB and the QAT variants; a file change is picked up.

use crate::support;
use crate::support::providers::provider_counter;
use crate::support::{render, testdata, Gateway};

fn listener_with_sds(secret_file: &str) -> String {
    let sds = format!(
        "            tls_certificate_sds_secret_configs:\n            - name: default/example-cert\n              sds_config:\n                path_config_source:\n                  path: {secret_file}\n"
    );
    // No inline certificates: the context's only certificate comes from the SDS file.
    support::direct_response_config("", &sds, "").replace("            tls_certificates:\n\n", "")
}

fn start(variant: &str, env: &[(&str, &str)]) -> Gateway {
    let text =
        std::fs::read_to_string(testdata(&format!("configs/seed-003-secret-{variant}.yaml")))
            .expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir").keep();
    let secret = dir.join("secret.yaml");
    std::fs::write(&secret, render(&text, 0, 0, 0, &dir)).expect("write secret");
    Gateway::start_with_env(
        &listener_with_sds(&secret.display().to_string()),
        &["--concurrency", "1"],
        env,
    )
}

#[test]
fn seed_003_cryptomb_secret_runs() {
    let _lock = support::shared();
    let gw = start("cryptomb", &[]);
    support::curl_ok(&gw);
    let (_, dump) = gw.admin_get("/config_dump");
    assert!(dump.contains("cryptomb"), "{dump}");
    // Accelerated where an engine exists, in-process (fallback: true) elsewhere.
    let accelerated = provider_counter(&gw, "rsa_sign") == 1;
    let fallback = provider_counter(&gw, "fallback") == 1;
    assert!(accelerated ^ fallback, "engine or fallback: {dump}");
}

#[test]
fn seed_003_cryptomb_secret_without_engines_falls_back() {
    let _lock = support::shared();
    let gw = start("cryptomb", &[("QUICKSHAKE_HIDE_ENGINES", "all")]);
    support::curl_ok(&gw);
    assert_eq!(provider_counter(&gw, "fallback"), 1);
}

#[test]
fn seed_003_qat_secret_runs_with_fallback() {
    let _lock = support::shared();
    // No QAT device here: Envoy's behaviour with fallback: true is the in-process key.
    let gw = start("qat", &[]);
    support::curl_ok(&gw);
    assert_eq!(provider_counter(&gw, "fallback"), 1);
    assert!(gw.log_text().contains("QAT"), "says why: {}", gw.log_text());
}

#[test]
fn qat_without_fallback_refuses_to_start_and_says_why() {
    let _lock = support::shared();
    let text = std::fs::read_to_string(testdata("configs/seed-003-secret-qat.yaml"))
        .expect("fixture")
        .replace("      fallback: true\n", "");
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("secret.yaml");
    std::fs::write(&secret, render(&text, 0, 0, 0, dir.path())).expect("write");
    let (code, stderr) =
        support::start_expect_failure(&listener_with_sds(&secret.display().to_string()), &[], &[]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("QAT") && stderr.contains("fallback"),
        "{stderr}"
    );
}

#[test]
fn missing_secret_name_is_a_clear_error() {
    let _lock = support::shared();
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("secret.yaml");
    std::fs::write(&secret, "resources: []\n").expect("write");
    let (code, stderr) =
        support::start_expect_failure(&listener_with_sds(&secret.display().to_string()), &[], &[]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("default/example-cert") && stderr.contains("secret.yaml"),
        "{stderr}"
    );
}

#[test]
fn a_changed_secret_file_is_picked_up() {
    let _lock = support::shared();
    let text = std::fs::read_to_string(testdata("configs/seed-003-secret-cryptomb.yaml"))
        .expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir").keep();
    let secret = dir.join("secret.yaml");
    std::fs::write(&secret, render(&text, 0, 0, 0, &dir)).expect("write secret");
    let gw = Gateway::start_with_env(
        &listener_with_sds(&secret.display().to_string()),
        &["--concurrency", "1"],
        &[("QUICKSHAKE_RELOAD_INTERVAL_MS", "100")],
    );
    let before = support::tls_client::peer_serial(gw.port).expect("serial");
    // Rotate: write the new secret to a temporary file and rename it over (atomic, as a
    // controller would), now naming the `other` certificate and key.
    let rotated = render(&text.replace("rsa2048.", "other."), 0, 0, 0, &dir);
    let tmp = dir.join("secret.yaml.tmp");
    std::fs::write(&tmp, rotated).expect("write");
    std::fs::rename(&tmp, &secret).expect("rename");
    let scope = gw.scope("127.0.0.1");
    support::eventually("SDS reload", || {
        gw.counter(&format!(
            "{scope}server_ssl_socket_factory.ssl_context_update_by_sds"
        )) >= 1
    });
    let after = support::tls_client::peer_serial(gw.port).expect("serial");
    assert_ne!(before, after, "new handshakes use the rotated secret");
    let _ = std::fs::remove_dir_all(dir);
}
