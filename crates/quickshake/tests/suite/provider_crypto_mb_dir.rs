//! Where crypto_mb comes from, through the binary: only the directory `--crypto-mb-dir` /
//! `QUICKSHAKE_CRYPTO_MB_DIR` names (or the system loader path), only when a provider needs it,
//! named in the start-up log; a config that needs it and cannot find it fails naming the option.

use crate::support;
use crate::support::providers::{accelerated_engines, batching_cert};
use crate::support::{direct_response_config, plain_cert, start_expect_failure, Gateway};

fn crypto_mb_config() -> String {
    direct_response_config(
        &batching_cert("rsa2048", &[("engine", "crypto_mb")]),
        "",
        "",
    )
}

#[test]
fn an_explicit_crypto_mb_config_without_the_library_names_the_option() {
    let _lock = support::shared();
    // A named directory without the library: not looked for anywhere else (the system loader
    // path without a directory is covered by keyprovider's tests/crypto_mb_location.rs).
    let empty = tempfile::tempdir().expect("tempdir");
    let dir = empty.path().display().to_string();
    let env = [("QUICKSHAKE_CRYPTO_MB_DIR", dir.as_str())];
    let (code, stderr) = start_expect_failure(&crypto_mb_config(), &[], &env);
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("--crypto-mb-dir") && stderr.contains("QUICKSHAKE_CRYPTO_MB_DIR"),
        "{stderr}"
    );
    assert!(stderr.contains(&dir), "{stderr}");
}

#[test]
fn crypto_mb_is_loaded_from_the_named_directory_and_only_when_needed() {
    let _lock = support::shared();
    let usable = accelerated_engines()
        .into_iter()
        .any(|(name, usable)| name == "crypto_mb" && usable);
    if !usable {
        support::skip::missing("crypto_mb", "not usable here (see quickshake doctor)");
        return;
    }
    let dir = quickshake_test_support::paths::crypto_mb_dir();
    // A config with no provider: the library is not mapped, though its directory is named.
    let gw = Gateway::start(
        &direct_response_config(&plain_cert("rsa2048"), "", ""),
        &["--concurrency", "1"],
    );
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", gw.pid())).expect("maps");
    assert!(!maps.contains("libcrypto_mb"), "mapped with no provider");
    drop(gw);
    // `engine: crypto_mb`: loaded from the named directory, and the log says so.
    let gw = Gateway::start(&crypto_mb_config(), &["--concurrency", "1"]);
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", gw.pid())).expect("maps");
    assert!(
        maps.contains("libcrypto_mb"),
        "not mapped with engine: crypto_mb"
    );
    let log = gw.log_text();
    assert!(
        log.contains(&format!("crypto_mb loaded from {}", dir.display())),
        "{log}"
    );
}
