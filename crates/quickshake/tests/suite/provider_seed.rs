//! The seed's CryptoMB configuration (seed 000, section 3.2.2), as users copy it: it runs
//! through an accelerated engine where one exists, and where none exists (or all are hidden)
//! it refuses to start with a reason, starts with `fallback: true`, and `doctor` explains it.

use crate::support;
use crate::support::providers::{auto_engine, provider_counter};

/// The engine Envoy's cryptomb provider gets here: the first usable accelerated engine in the
/// committed order (on IFMA CPUs our ifma on AMD, crypto_mb on Intel; our avx2 engine on
/// AVX2-only CPUs), if any.
fn best_engine() -> Option<String> {
    auto_engine()
}
use crate::support::{start_expect_failure, testdata, Gateway};

fn seed(fallback: bool) -> String {
    let text =
        std::fs::read_to_string(testdata("configs/seed-000-cryptomb.yaml")).expect("fixture");
    let mut text = text
        .replace("/etc/ssl/cert.pem", "{{CERTS}}/rsa2048.cert.pem")
        .replace("/etc/ssl/key.pem", "{{CERTS}}/rsa2048.key.pem")
        .replace("address: 0.0.0.0", "address: 127.0.0.1")
        .replace("port_value: 9000", "port_value: {{PORT}}")
        .replace("port_value: 9001", "port_value: {{ADMIN}}");
    if fallback {
        text = text.replace(
            "                provider_name: cryptomb\n",
            "                provider_name: cryptomb\n                fallback: true\n",
        );
    }
    text
}

#[test]
fn seed_runs_through_the_accelerated_engine() {
    let _lock = support::shared();
    let Some(engine) = best_engine() else {
        support::skip::missing(
            "accelerated",
            "no accelerated engine on this machine: covered by the hidden-engine tests",
        );
        return;
    };
    let gw = Gateway::start(&seed(false), &["--concurrency", "1"]);
    for _ in 0..3 {
        support::curl_ok(&gw);
    }
    assert_eq!(
        gw.counter(&format!(
            "{}cryptomb.engine.{engine}",
            gw.scope("127.0.0.1")
        )),
        1
    );
    assert_eq!(provider_counter(&gw, "rsa_sign"), 3);
    assert_eq!(provider_counter(&gw, "fallback"), 0);
    let (_, dump) = gw.admin_get("/config_dump");
    assert!(
        dump.contains(&engine) && dump.contains("PrivateKeyProviders"),
        "{dump}"
    );
}

#[test]
fn without_an_engine_it_refuses_to_start_and_says_why() {
    let _lock = support::shared();
    let (code, stderr) =
        start_expect_failure(&seed(false), &[], &[("QUICKSHAKE_HIDE_ENGINES", "all")]);
    assert_ne!(code, 0);
    assert!(stderr.contains("private_key_provider"), "{stderr}");
    assert!(stderr.contains("no usable accelerated engine"), "{stderr}");
    assert!(stderr.contains("fallback: true"), "{stderr}");
}

#[test]
fn without_an_engine_fallback_uses_the_key_in_process() {
    let _lock = support::shared();
    let gw = Gateway::start_with_env(
        &seed(true),
        &["--concurrency", "1"],
        &[("QUICKSHAKE_HIDE_ENGINES", "all")],
    );
    support::curl_ok(&gw);
    assert_eq!(provider_counter(&gw, "fallback"), 1);
    assert_eq!(
        provider_counter(&gw, "rsa_sign"),
        0,
        "the key is used in-process"
    );
    assert!(
        gw.log_text().contains("fallback"),
        "said once in the log: {}",
        gw.log_text()
    );
}

#[test]
fn doctor_explains_the_engine_choice() {
    let _lock = support::shared();
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("seed.yaml");
    std::fs::write(
        &cfg,
        support::render(&seed(false), 19000, 19001, 19002, dir.path()),
    )
    .expect("write");
    let run = |env: &[(&str, &str)]| {
        let mut cmd = quickshake_test_support::gateway::quickshake_command();
        cmd.args(["doctor", "--json", "-c"]).arg(&cfg);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("doctor");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("doctor --json")
    };
    let hidden = run(&[("QUICKSHAKE_HIDE_ENGINES", "all")]);
    assert_eq!(hidden["config"]["starts"], false);
    assert!(hidden["config"]["error"]
        .as_str()
        .unwrap_or("")
        .contains("no usable accelerated engine"));
    assert_eq!(hidden["crypto_mb"]["usable"], false);
    assert!(hidden["crypto_mb"]["why"]
        .as_str()
        .unwrap_or("")
        .contains("hidden"));
    for flag in ["avx512f", "avx512ifma", "avx2", "adx", "bmi2", "vaes"] {
        assert!(
            hidden["cpu"]["flags"].get(flag).is_some(),
            "doctor reports {flag}"
        );
    }
    let visible = run(&[]);
    if let Some(engine) = best_engine() {
        assert_eq!(visible["config"]["starts"], true);
        assert_eq!(visible["config"]["keys"][0]["engine"], engine.as_str());
    } else {
        assert_eq!(visible["config"]["starts"], false);
    }
}
