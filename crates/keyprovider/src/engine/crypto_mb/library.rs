//! Finding and loading the crypto_mb shared libraries, and `doctor`'s probe of them.
//!
//! Loads them only from where [`CryptoMbSource`] allows (the directory the operator named, or
//! the system loader's path; nowhere else). Owns the names of crypto_mb and the Intel runtime
//! libraries it needs, and the order they are loaded in. The `dlopen` calls themselves are in
//! `ffi`.
//!
//! A library that receives private keys must not be picked up from wherever the process happens
//! to run: no search of the executable's ancestors, the working directory or the source tree.
//! Within a named directory only two places are looked at: the directory itself and its `lib/`
//! (where `scripts/install-crypto-mb` and the ipp-crypto wheel put the files).

use std::path::{Path, PathBuf};

use libloading::os::unix::Library;

use super::ffi;
use super::source::CryptoMbSource;
use super::unavailable::CryptoMbUnavailable;
use crate::options::EngineOptions;

/// The crypto_mb library file (its SONAME; the wheel also ships `libcrypto_mb.so`).
pub(super) const CRYPTO_MB_SONAME: &str = "libcrypto_mb.so.13";
/// Intel compiler runtime libraries crypto_mb needs, in dependency order.
const RUNTIME_LIBS: [&str; 4] = ["libintlc.so.5", "libirng.so", "libimf.so", "libsvml.so"];
/// What `quickshake doctor` reports about crypto_mb.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CryptoMbProbe {
    /// Where it is looked for (and, when found, came from).
    pub source: CryptoMbSource,
    /// Where `libcrypto_mb` was found (None: not found; the SONAME when the system loader
    /// found it).
    pub installed: Option<PathBuf>,
    /// Whether it and its runtime libraries loaded.
    pub loaded: bool,
    /// Whether this CPU runs it (AVX-512 IFMA).
    pub applicable: bool,
    /// `mbx_getversion()`'s version string.
    pub version: Option<String>,
    /// Why it is unavailable; None when usable.
    pub reason: Option<String>,
}

/// The places inside a named directory the libraries may be in: itself, then its `lib/`.
fn places(dir: &Path) -> [PathBuf; 2] {
    [dir.to_path_buf(), dir.join("lib")]
}

/// The file of `dir` (not below it) whose name `pred` accepts; the SONAME first, then by name.
fn find_in(dir: &Path, pred: &dyn Fn(&str) -> bool) -> Option<PathBuf> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| pred(n))
        .collect();
    names.sort_by_key(|n| (n != CRYPTO_MB_SONAME, n.clone()));
    names.into_iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

fn is_crypto_mb_name(name: &str) -> bool {
    name == "libcrypto_mb.so"
        || name
            .strip_prefix("libcrypto_mb.so.")
            .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// Where the libraries were found in a named directory: crypto_mb itself and the runtime
/// libraries (beside it, else in the directory's other place; None: not there).
struct Located {
    crypto_mb: PathBuf,
    runtime: Vec<Option<PathBuf>>,
}

fn locate(dir: &Path) -> Option<Located> {
    let places = places(dir);
    let crypto_mb = places.iter().find_map(|p| find_in(p, &is_crypto_mb_name))?;
    let beside = crypto_mb.parent().map(Path::to_path_buf);
    let runtime = RUNTIME_LIBS
        .iter()
        .map(|name| {
            let pred = |n: &str| n == *name;
            beside.iter().chain(&places).find_map(|p| find_in(p, &pred))
        })
        .collect();
    Some(Located { crypto_mb, runtime })
}

/// Load the runtime libraries (by path when found in the named directory, else by name) then
/// crypto_mb, from `source` only. Returns the path it was found at (None: not found, or the
/// system loader found it).
pub(super) fn open_library(
    source: &CryptoMbSource,
) -> (
    Option<PathBuf>,
    Result<ffi::CryptoMbLib, CryptoMbUnavailable>,
) {
    let dir = match source {
        CryptoMbSource::Directory(dir) => dir,
        CryptoMbSource::SystemLoader => {
            // The runtime libraries may be on the loader's path too; if not, crypto_mb's own
            // load fails and we report "not installed".
            let runtime: Vec<Library> = RUNTIME_LIBS
                .iter()
                .filter_map(|n| ffi::open_global(Path::new(n)).ok())
                .collect();
            return match ffi::CryptoMbLib::open(Path::new(CRYPTO_MB_SONAME), runtime) {
                Ok(lib) => (None, Ok(lib)),
                Err(_) => (
                    None,
                    Err(CryptoMbUnavailable::NotInstalled {
                        from: source.clone(),
                    }),
                ),
            };
        }
    };
    let Some(loc) = locate(dir) else {
        return (
            None,
            Err(CryptoMbUnavailable::NotInstalled {
                from: source.clone(),
            }),
        );
    };
    let mut runtime = Vec::new();
    for (name, path) in RUNTIME_LIBS.iter().zip(&loc.runtime) {
        let target = path.clone().unwrap_or_else(|| PathBuf::from(name));
        match ffi::open_global(&target) {
            Ok(l) => runtime.push(l),
            Err(e) => {
                let mut reason = e.to_string();
                if path.is_none() {
                    reason = format!(
                        "{reason} (Intel runtime library needed by {}, not found in {} or {}/lib, \
                         nor on the system loader path; run scripts/install-crypto-mb)",
                        loc.crypto_mb.display(),
                        dir.display(),
                        dir.display()
                    );
                }
                let err = CryptoMbUnavailable::LoadFailed {
                    path: target,
                    reason,
                };
                return (Some(loc.crypto_mb), Err(err));
            }
        }
    }
    let res = ffi::CryptoMbLib::open(&loc.crypto_mb, runtime).map_err(|e| {
        CryptoMbUnavailable::LoadFailed {
            path: loc.crypto_mb.clone(),
            reason: e.to_string(),
        }
    });
    (Some(loc.crypto_mb), res)
}

/// Report for `quickshake doctor`: where crypto_mb is, whether it loads and runs here. Doctor
/// is explicit: it loads the library (from where `options` allow) whatever the config needs.
pub fn probe(options: &EngineOptions) -> CryptoMbProbe {
    let source = CryptoMbSource::of(options);
    let installed = match &source {
        CryptoMbSource::Directory(dir) => locate(dir).map(|l| l.crypto_mb),
        CryptoMbSource::SystemLoader => None,
    };
    if options.hides("crypto_mb") {
        return CryptoMbProbe {
            source,
            installed,
            loaded: false,
            applicable: false,
            version: None,
            reason: Some(CryptoMbUnavailable::Hidden.reason()),
        };
    }
    let (path, lib) = open_library(&source);
    match lib {
        Err(e) => CryptoMbProbe {
            source,
            installed: path.or(installed),
            loaded: false,
            applicable: false,
            version: None,
            reason: Some(e.reason()),
        },
        Ok(lib) => {
            let applicable = lib.applicable();
            CryptoMbProbe {
                source,
                installed: path.or_else(|| Some(PathBuf::from(CRYPTO_MB_SONAME))),
                loaded: true,
                applicable,
                version: lib.version(),
                reason: (!applicable).then(|| CryptoMbUnavailable::NotApplicable.reason()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_directory_and_its_lib_are_looked_at() {
        let root = std::env::temp_dir().join(format!("qs-cmb-locate-{}", std::process::id()));
        let deep = root.join("a/b/lib");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join(CRYPTO_MB_SONAME), b"").unwrap();
        // Deeper than `lib/`: not found.
        assert!(locate(&root).is_none());
        assert!(locate(&root.join("a")).is_none());
        // In `<dir>/lib/`, with the runtime beside it.
        std::fs::write(deep.join("libimf.so"), b"").unwrap();
        let found = locate(&root.join("a/b")).expect("found in lib/");
        assert_eq!(found.crypto_mb, deep.join(CRYPTO_MB_SONAME));
        assert_eq!(
            found.runtime[2].as_deref(),
            Some(deep.join("libimf.so").as_path())
        );
        assert!(found.runtime[0].is_none());
        // In the directory itself.
        assert_eq!(
            locate(&deep).map(|l| l.crypto_mb),
            Some(deep.join(CRYPTO_MB_SONAME))
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_source_is_the_named_directory_or_the_loader_path() {
        let mut o = EngineOptions::default();
        assert_eq!(CryptoMbSource::of(&o), CryptoMbSource::SystemLoader);
        assert_eq!(
            CryptoMbSource::SystemLoader.to_string(),
            "system loader path"
        );
        o.crypto_mb_dir = Some(PathBuf::new());
        assert_eq!(CryptoMbSource::of(&o), CryptoMbSource::SystemLoader);
        o.crypto_mb_dir = Some(PathBuf::from("/opt/crypto_mb"));
        assert_eq!(
            CryptoMbSource::of(&o),
            CryptoMbSource::Directory("/opt/crypto_mb".into())
        );
    }

    #[test]
    fn is_crypto_mb_name_accepts_versions_only() {
        assert!(is_crypto_mb_name("libcrypto_mb.so"));
        assert!(is_crypto_mb_name("libcrypto_mb.so.13"));
        assert!(is_crypto_mb_name("libcrypto_mb.so.13.1"));
        assert!(!is_crypto_mb_name("libcrypto_mb.so."));
        assert!(!is_crypto_mb_name("libcrypto_mb.so.bak"));
    }
}
