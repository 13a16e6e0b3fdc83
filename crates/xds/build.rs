//! Finds the descriptor set that the `envoy-types` crate ships beside its generated code
//! (`src/generated/types.bin`: every Envoy, xDS and Google message it was generated from) and
//! copies it into OUT_DIR, so the bridge can decode any Envoy resource by reflection. The crate
//! does not export it, so its source directory is asked of `cargo metadata` (which works with
//! the registry, vendored sources and path overrides alike).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let meta = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--manifest-path",
        ])
        .arg(manifest.join("Cargo.toml"))
        .output()
        .expect("cannot run cargo metadata");
    assert!(
        meta.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&meta.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&meta.stdout).expect("cargo metadata printed bad JSON");
    let pkg = doc["packages"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "envoy-types"))
        .expect("envoy-types is not among the dependencies");
    let pkg_manifest = PathBuf::from(pkg["manifest_path"].as_str().expect("manifest_path"));
    let bin = pkg_manifest
        .parent()
        .expect("a manifest has a directory")
        .join("src/generated/types.bin");
    std::fs::copy(&bin, out.join("envoy_types.bin"))
        .unwrap_or_else(|e| panic!("cannot copy {}: {e}", bin.display()));
    println!("cargo:rerun-if-changed={}", bin.display());
    println!("cargo:rerun-if-changed=build.rs");
}
