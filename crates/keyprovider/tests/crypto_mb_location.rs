//! crypto_mb is loaded only from where the operator said (the directory named by
//! `--crypto-mb-dir` / `QUICKSHAKE_CRYPTO_MB_DIR`, passed down as `EngineOptions::crypto_mb_dir`,
//! or the system loader's path when none is named), and only when a provider needs it.
//!
//! One test in a binary of its own on purpose: whether the library is mapped is per process,
//! and once it is, the loader finds it again by its SONAME from anywhere.

use std::path::Path;

use quickshake_config::PrivateKeyProvider;
use quickshake_keyprovider::engine::crypto_mb::{
    self, CryptoMbEngine, CryptoMbSource, CryptoMbUnavailable,
};
use quickshake_keyprovider::engines::ranking;
use quickshake_keyprovider::key::KeyType;
use quickshake_keyprovider::{EngineOptions, Engines, ProviderOptions, Providers};
use quickshake_stats::Store;
use quickshake_test_support::keys::{batching_provider, public_key as public_of};
use quickshake_test_support::paths::cert;
use quickshake_test_support::skip;
use serde_json::json;

#[path = "common/crypto_mb_dir.rs"]
mod crypto_mb_dir;

/// Whether `libcrypto_mb` is mapped into this process.
fn mapped() -> bool {
    std::fs::read_to_string("/proc/self/maps")
        .expect("/proc/self/maps")
        .contains("libcrypto_mb")
}

fn installed_in(dir: &Path) -> bool {
    [
        dir.join("libcrypto_mb.so.13"),
        dir.join("lib/libcrypto_mb.so.13"),
    ]
    .iter()
    .any(|p| p.is_file())
}

fn with_dir(dir: &Path) -> EngineOptions {
    EngineOptions {
        crypto_mb_dir: Some(dir.to_path_buf()),
        ..EngineOptions::default()
    }
}

/// A `quickshake.batching` provider asking for `engine: crypto_mb` explicitly.
fn crypto_mb_provider(fallback: bool) -> PrivateKeyProvider {
    let typed = json!({
        "private_key": { "filename": cert("rsa2048.key.pem") },
        "engine": "crypto_mb",
    });
    batching_provider(typed, fallback)
}

fn names_the_option(message: &str) -> bool {
    message.contains("--crypto-mb-dir") && message.contains("QUICKSHAKE_CRYPTO_MB_DIR")
}

#[test]
fn crypto_mb_comes_only_from_the_named_directory_and_only_when_needed() {
    let dev = crypto_mb_dir::dev_dir();
    if !installed_in(&dev) {
        let why = format!(
            "not installed in {} (scripts/install-crypto-mb)",
            dev.display()
        );
        skip::missing("crypto_mb", why);
        return;
    }
    if std::env::var("LD_LIBRARY_PATH").is_ok_and(|p| p.contains("crypto_mb")) {
        eprintln!("LD_LIBRARY_PATH names a crypto_mb directory (the system loader path may load it): skipping");
        return;
    }
    assert!(!mapped(), "crypto_mb mapped before anything asked for it");

    // A registry whose config has no provider (and one whose providers want software or our
    // own engines) maps nothing, even with the directory named.
    let engines = Engines::detect(&crypto_mb_dir::dev_options());
    let _ = engines.by_name("software");
    if ranking().first() != Some(&"crypto_mb") {
        // `auto` for an RSA key: an engine ranked before crypto_mb wins where it is usable.
        if let Ok(e) = engines.best_accelerated(&KeyType::Rsa { bits: 2048 }) {
            assert_ne!(e.capabilities().name, "crypto_mb");
            assert!(
                !mapped(),
                "auto mapped crypto_mb though {} won",
                e.capabilities().name
            );
        }
    }
    let providers = Providers::new(
        Store::new(),
        ProviderOptions {
            engines: crypto_mb_dir::dev_options(),
            ..ProviderOptions::default()
        },
    );
    assert!(!mapped(), "a registry with no provider mapped crypto_mb");
    drop(providers);

    // The places the old search looked at (the working directory's `.deps/crypto_mb`, the
    // executable's ancestors, this source tree's `.deps/crypto_mb`): not loaded from any of them
    // when no directory is named.
    let scratch =
        std::env::temp_dir().join(format!("qs-crypto-mb-location-{}", std::process::id()));
    std::fs::create_dir_all(scratch.join(".deps")).expect("scratch dir");
    let linked = scratch.join(".deps/crypto_mb");
    if !linked.exists() {
        std::os::unix::fs::symlink(dev.canonicalize().expect("dev dir"), &linked).expect("symlink");
    }
    let back = std::env::current_dir().expect("cwd");
    std::env::set_current_dir(&scratch).expect("cd scratch");
    let err = CryptoMbEngine::load(&EngineOptions::default()).expect_err("loaded from cwd");
    assert_eq!(
        err,
        CryptoMbUnavailable::NotInstalled {
            from: CryptoMbSource::SystemLoader
        }
    );
    assert!(names_the_option(&err.to_string()), "{err}");
    let probe = crypto_mb::probe(&EngineOptions::default());
    assert!(!probe.loaded && probe.installed.is_none(), "{probe:?}");
    assert_eq!(probe.source, CryptoMbSource::SystemLoader);

    // A named directory that lacks it: not looked for anywhere else.
    let empty = scratch.join("empty");
    std::fs::create_dir_all(&empty).expect("empty dir");
    let err = CryptoMbEngine::load(&with_dir(&empty)).expect_err("loaded from elsewhere");
    assert_eq!(
        err,
        CryptoMbUnavailable::NotInstalled {
            from: CryptoMbSource::Directory(empty.clone())
        }
    );
    assert!(names_the_option(&err.to_string()), "{err}");

    // A config asking for crypto_mb explicitly, without it: start-up fails naming the option;
    // with `fallback: true` the key is used in-process (as before).
    let public = public_of("rsa2048");
    let providers = Providers::new(
        Store::new(),
        ProviderOptions {
            engines: with_dir(&empty),
            ..ProviderOptions::default()
        },
    );
    let err = match providers.setup(&crypto_mb_provider(false), None, &public, "t.") {
        Ok(_) => panic!("engine: crypto_mb without the library started"),
        Err(e) => e.to_string(),
    };
    assert!(names_the_option(&err), "{err}");
    assert!(err.contains("set `fallback: true`"), "{err}");
    let providers = Providers::new(Store::new(), ProviderOptions::default());
    match providers.setup(&crypto_mb_provider(true), None, &public, "t.") {
        Ok(quickshake_keyprovider::KeySetup::Inline { .. }) => {}
        Ok(_) => panic!("fallback: true without crypto_mb got a provider"),
        Err(e) => panic!("fallback: true without crypto_mb failed: {e}"),
    }
    let report = &providers.reports()[0];
    assert!(
        report.fallback_active && names_the_option(&report.reason),
        "{report:?}"
    );
    std::env::set_current_dir(&back).expect("cd back");
    assert!(!mapped(), "crypto_mb mapped from a place nobody named");

    // The named directory (a relative or symlinked name is fine too): loaded from it.
    let loaded = CryptoMbEngine::load(&with_dir(&linked));
    match &loaded {
        Ok(e) => {
            assert_eq!(e.source(), &CryptoMbSource::Directory(linked.clone()));
            assert!(e.library_path().is_some_and(|p| p.starts_with(&linked)));
        }
        Err(CryptoMbUnavailable::NotApplicable) => eprintln!("no AVX-512 IFMA: loaded, not used"),
        Err(e) => panic!(
            "crypto_mb did not load from the named {}: {e}",
            linked.display()
        ),
    }
    assert!(mapped(), "loaded but not mapped");
    drop(loaded);
    let probe = crypto_mb::probe(&with_dir(&linked));
    assert!(probe.loaded, "{probe:?}");
    assert_eq!(probe.source, CryptoMbSource::Directory(linked.clone()));
    let _ = std::fs::remove_dir_all(&scratch);
}
