//! Constant-time check with valgrind memcheck (see `src/bin/mbmath-ctgrind.rs`).
//!
//! Fails (does not skip) when valgrind is not installed: install Debian's
//! `valgrind` package or point `VALGRIND` at the binary.
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

use std::process::Command;

const UNINIT_BRANCH: &str = "Conditional jump or move depends on uninitialised value";
const UNINIT_USE: &str = "Use of uninitialised value of size";

fn valgrind() -> String {
    let v = std::env::var("VALGRIND").unwrap_or_else(|_| "valgrind".into());
    match Command::new(&v).arg("--version").output() {
        Ok(o) if o.status.success() => v,
        _ => panic!(
            "valgrind is required for the constant-time test but `{v} --version` failed; \
             install it (apt-get install valgrind) or set VALGRIND=/path/to/valgrind"
        ),
    }
}

/// Runs the harness in `mode` under memcheck; returns (exit code, combined output).
fn run(mode: &str) -> (i32, String) {
    let out = Command::new(valgrind())
        .args(["--error-exitcode=42", "--track-origins=no", "--quiet"])
        .arg(env!("CARGO_BIN_EXE_mbmath-ctgrind"))
        .arg(mode)
        .output()
        .expect("spawning valgrind");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn ctgrind_private_crt_is_constant_time() {
    let (code, text) = run("ct");
    println!("{text}");
    assert!(
        text.contains("running_on_valgrind=true"),
        "harness did not detect valgrind:\n{text}"
    );
    assert!(
        text.contains("ct: backend portable ok"),
        "portable backend did not run:\n{text}"
    );
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        assert!(
            text.contains("ct: backend fma ok"),
            "fma backend did not run:\n{text}"
        );
    }
    assert!(
        !text.contains(UNINIT_BRANCH) && !text.contains(UNINIT_USE),
        "secret-dependent branch/index:\n{text}"
    );
    assert_eq!(code, 0, "valgrind reported errors:\n{text}");
}

#[test]
fn ctgrind_mlkem_encaps_is_constant_time() {
    let (code, text) = run("mlkem");
    println!("{text}");
    assert!(
        text.contains("running_on_valgrind=true"),
        "harness did not detect valgrind:\n{text}"
    );
    assert!(
        text.contains("mlkem: backend portable ok"),
        "portable backend did not run:\n{text}"
    );
    if std::arch::is_x86_feature_detected!("avx2") {
        assert!(
            text.contains("mlkem: backend avx2 ok"),
            "avx2 backend did not run:\n{text}"
        );
    }
    assert!(
        !text.contains(UNINIT_BRANCH) && !text.contains(UNINIT_USE),
        "secret-dependent branch/index:\n{text}"
    );
    assert_eq!(code, 0, "valgrind reported errors:\n{text}");
}

#[test]
fn ctgrind_p256_is_constant_time() {
    let (code, text) = run("p256");
    println!("{text}");
    assert!(
        text.contains("running_on_valgrind=true"),
        "harness did not detect valgrind:\n{text}"
    );
    assert!(
        text.contains("p256: ecdh and ecdsa sign ok"),
        "p256 did not run:\n{text}"
    );
    assert!(
        !text.contains(UNINIT_BRANCH) && !text.contains(UNINIT_USE),
        "secret-dependent branch/index:\n{text}"
    );
    assert_eq!(code, 0, "valgrind reported errors:\n{text}");
}

#[test]
fn ctgrind_flags_leaky_branch() {
    let (code, text) = run("leaky-branch");
    assert_eq!(code, 42, "leaky control not flagged:\n{text}");
    assert!(text.contains(UNINIT_BRANCH), "{text}");
}

#[test]
fn ctgrind_flags_leaky_index() {
    let (code, text) = run("leaky-index");
    assert_eq!(code, 42, "leaky control not flagged:\n{text}");
    assert!(text.contains(UNINIT_USE), "{text}");
}
