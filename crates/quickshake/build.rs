//! Build script: the git revision the binary is built from, for `quickshake --version`.
//!
//! `QUICKSHAKE_GIT_REV` (set by deploy/Dockerfile's `--build-arg GIT_REV=…`, where the build
//! context has no `.git`) wins; otherwise `git rev-parse --short HEAD`; otherwise `unknown`.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// `cargo:rerun-if-changed` for a git file, when it exists (a missing one would rerun every build).
fn watch(git_path: &str) {
    if let Some(path) = git(&["rev-parse", "--git-path", git_path]) {
        let path = PathBuf::from(path);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=QUICKSHAKE_GIT_REV");
    let from_env = std::env::var("QUICKSHAKE_GIT_REV")
        .ok()
        .filter(|s| !s.trim().is_empty());
    let rev = match from_env {
        Some(rev) => rev.trim().to_string(),
        None => {
            // Rebuild when HEAD moves: HEAD itself, the branch it points at, and packed refs.
            watch("HEAD");
            watch("packed-refs");
            if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
                watch(&r);
            }
            git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into())
        }
    };
    println!("cargo:rustc-env=QUICKSHAKE_GIT_REV={rev}");
}
