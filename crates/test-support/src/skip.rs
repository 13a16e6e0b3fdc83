//! Skips that someone sees, and that a machine which has the part cannot take.
//!
//! A test that cannot run here (no AVX-512 IFMA, crypto_mb not installed, an audit tool opted
//! out) calls [`missing`] (or [`available`]) and returns. That writes one line, `test: part:
//! why`, to a file under the skip report directory (`QUICKSHAKE_SKIP_DIR`, else
//! `target/skips/`), where the last stage of `scripts/test` prints every line, and on stderr.
//! When `QUICKSHAKE_REQUIRE` (a comma-separated list; `scripts/test` sets it from `quickshake
//! doctor`) names the part, or is `all`, the part must be there: [`missing`] panics instead and
//! the test fails.

use std::fmt::Display;
use std::io::Write;
use std::path::PathBuf;

/// The variable naming the parts that must be present (`ifma,crypto_mb`; `all`).
pub const REQUIRE_ENV: &str = "QUICKSHAKE_REQUIRE";
/// The variable naming the directory the skip lines go to.
pub const DIR_ENV: &str = "QUICKSHAKE_SKIP_DIR";

/// Where the skip lines are written: `QUICKSHAKE_SKIP_DIR`, else `target/skips`.
pub fn report_dir() -> PathBuf {
    std::env::var_os(DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::paths::target_dir().join("skips"))
}

/// Whether `QUICKSHAKE_REQUIRE` names `part` (case-insensitive) or is `all`.
pub fn is_required(part: &str) -> bool {
    std::env::var(REQUIRE_ENV)
        .map(|list| required_in(&list, part))
        .unwrap_or(false)
}

fn required_in(list: &str, part: &str) -> bool {
    list.split(',')
        .map(str::trim)
        .any(|p| p.eq_ignore_ascii_case(part) || p.eq_ignore_ascii_case("all"))
}

/// The running test: libtest names each test's thread after it; the test binary's name
/// (without cargo's hash) says which crate's tests.
fn test_name() -> String {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| match s.rsplit_once('-') {
            Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_owned(),
            _ => s,
        })
        .unwrap_or_else(|| "?".into());
    let thread = std::thread::current();
    format!("{binary}::{}", thread.name().unwrap_or("?"))
}

/// The test skips (the rest of) its work because `part` is missing here, for the reason `why`.
/// Panics instead when `QUICKSHAKE_REQUIRE` requires `part`.
pub fn missing(part: &str, why: impl Display) {
    let test = test_name();
    if is_required(part) {
        panic!(
            "{test}: {part} is required on this machine ({REQUIRE_ENV}={}) but missing: {why}",
            std::env::var(REQUIRE_ENV).unwrap_or_default()
        );
    }
    let line = format!("{test}: {part}: {why}");
    eprintln!("skip {line}");
    record(&line);
}

/// `Some(value)` when `found` is `Ok`; otherwise the skip is reported as [`missing`] does and
/// the test gets `None` (`let Some(e) = skip::available("crypto_mb", load()) else { return };`).
pub fn available<T, E: Display>(part: &str, found: Result<T, E>) -> Option<T> {
    match found {
        Ok(value) => Some(value),
        Err(why) => {
            missing(part, why);
            None
        }
    }
}

/// Whether the tests of `part` are opted out on this machine with `var=1` (a laptop without the
/// audit tools); an opt-out is a skip like any other: reported, and refused where required.
pub fn opted_out(part: &str, var: &str) -> bool {
    if std::env::var(var).as_deref() == Ok("1") {
        missing(part, format!("{var}=1"));
        return true;
    }
    false
}

/// Appends `line` to this test process's file of the report directory (one file per process,
/// so that test binaries running side by side do not interleave).
fn record(line: &str) {
    let dir = report_dir();
    let file = dir.join(format!("{}.txt", std::process::id()));
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()))
    });
    // A skip that cannot be written down must not pass unseen.
    if let Err(e) = written {
        panic!("cannot record the skip in {}: {e}\n{line}", file.display());
    }
}

#[cfg(test)]
mod tests {
    use super::required_in;

    #[test]
    fn a_requirement_names_parts_or_all() {
        assert!(required_in("ifma,crypto_mb", "crypto_mb"));
        assert!(required_in(" IFMA , x", "ifma"));
        assert!(required_in("all", "helm"));
        assert!(!required_in("", "ifma"));
        assert!(!required_in("ifma", "crypto_mb"));
    }
}
