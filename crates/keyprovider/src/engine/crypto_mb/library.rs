//! Finding and loading the crypto_mb shared libraries, and `doctor`'s probe of them.
//!
//! Owns the search order described in the parent module (the configured directory, the
//! executable's ancestors, `./.deps`, the source repo, then the system library
//! path), the names of crypto_mb and the Intel runtime libraries it needs, and the order they
//! are loaded in. The `dlopen` calls themselves are in `ffi`.

use std::path::{Path, PathBuf};

use libloading::os::unix::Library;

use super::ffi;
use super::unavailable::CryptoMbUnavailable;
use crate::options::EngineOptions;

/// The crypto_mb library file (its SONAME; the wheel also ships `libcrypto_mb.so`).
pub(super) const CRYPTO_MB_SONAME: &str = "libcrypto_mb.so.13";
/// Intel compiler runtime libraries crypto_mb needs, in dependency order.
const RUNTIME_LIBS: [&str; 4] = ["libintlc.so.5", "libirng.so", "libimf.so", "libsvml.so"];

/// What `quickshake doctor` reports about crypto_mb.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CryptoMbProbe {
    /// Where `libcrypto_mb` was found (None: not found in any searched directory).
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

/// Directories searched for the libraries, in order (`configured` first).
fn search_dirs(configured: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = configured.filter(|d| !d.as_os_str().is_empty()) {
        dirs.push(d.to_path_buf());
    }
    if let Ok(exe) = std::env::current_exe() {
        // `<exe dir>/../../.deps/crypto_mb` is the repo of `target/<profile>/quickshake`; test
        // binaries (`target/<profile>/deps/`) and custom target dirs sit deeper, so every
        // ancestor up to 5 levels above the executable's directory is tried.
        let exe = exe.canonicalize().unwrap_or(exe);
        for anc in exe.ancestors().skip(1).take(6) {
            dirs.push(anc.join(".deps/crypto_mb"));
        }
    }
    dirs.push(PathBuf::from("./.deps/crypto_mb"));
    dirs.push(PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../.deps/crypto_mb"
    )));
    let mut seen = Vec::new();
    dirs.into_iter()
        .filter_map(|d| {
            let canon = d.canonicalize().unwrap_or(d);
            (!seen.contains(&canon)).then(|| {
                seen.push(canon.clone());
                canon
            })
        })
        .collect()
}

/// Find a file named by `pred` under `dir`, at most `depth` levels down; shallowest first.
fn find_file(dir: &Path, pred: &dyn Fn(&str) -> bool, depth: usize) -> Option<PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in &entries {
        let path = e.path();
        if path.is_file() && e.file_name().to_str().is_some_and(pred) {
            return Some(path);
        }
    }
    if depth == 0 {
        return None;
    }
    entries
        .iter()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .find_map(|e| find_file(&e.path(), pred, depth - 1))
}

fn is_crypto_mb_name(name: &str) -> bool {
    name == "libcrypto_mb.so"
        || name
            .strip_prefix("libcrypto_mb.so.")
            .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// Where the libraries were found: crypto_mb itself and the runtime libraries found beside it.
struct Located {
    crypto_mb: PathBuf,
    runtime: Vec<Option<PathBuf>>,
    /// The searched directory it was found under.
    root: PathBuf,
}

fn locate(configured: Option<&Path>) -> Result<Located, Vec<PathBuf>> {
    let dirs = search_dirs(configured);
    for dir in &dirs {
        let Some(lib) = find_file(dir, &is_crypto_mb_name, 4) else {
            continue;
        };
        let lib_dir = lib.parent().unwrap_or(dir).to_path_buf();
        let runtime = RUNTIME_LIBS
            .iter()
            .map(|name| {
                let pred = |n: &str| n == *name;
                find_file(&lib_dir, &pred, 0).or_else(|| find_file(dir, &pred, 4))
            })
            .collect();
        return Ok(Located {
            crypto_mb: lib,
            runtime,
            root: dir.clone(),
        });
    }
    Err(dirs)
}

/// Load the runtime libraries (by path when found, else by name) then crypto_mb.
/// Returns the path it was found at (None: loaded from the system library path).
pub(super) fn open_library(
    configured: Option<&Path>,
) -> (
    Option<PathBuf>,
    Result<ffi::CryptoMbLib, CryptoMbUnavailable>,
) {
    match locate(configured) {
        Ok(loc) => {
            let mut runtime = Vec::new();
            for (name, path) in RUNTIME_LIBS.iter().zip(&loc.runtime) {
                let target = path.clone().unwrap_or_else(|| PathBuf::from(name));
                match ffi::open_global(&target) {
                    Ok(l) => runtime.push(l),
                    Err(mut reason) => {
                        if path.is_none() {
                            reason = format!(
                                "{reason} (Intel runtime library needed by {}, not found under {}; \
                                 run scripts/install-crypto-mb)",
                                loc.crypto_mb.display(),
                                loc.root.display()
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
            let res = ffi::CryptoMbLib::open(&loc.crypto_mb, runtime).map_err(|reason| {
                CryptoMbUnavailable::LoadFailed {
                    path: loc.crypto_mb.clone(),
                    reason,
                }
            });
            (Some(loc.crypto_mb), res)
        }
        Err(looked) => {
            // System library path: the runtime libraries may be there too; if not, crypto_mb's
            // own load fails and we report "not installed".
            let runtime: Vec<Library> = RUNTIME_LIBS
                .iter()
                .filter_map(|n| ffi::open_global(Path::new(n)).ok())
                .collect();
            match ffi::CryptoMbLib::open(Path::new(CRYPTO_MB_SONAME), runtime) {
                Ok(lib) => (None, Ok(lib)),
                Err(_) => (None, Err(CryptoMbUnavailable::NotInstalled { looked })),
            }
        }
    }
}

/// Report for `quickshake doctor`: where crypto_mb is, whether it loads and runs here.
pub fn probe(options: &EngineOptions) -> CryptoMbProbe {
    let configured = options.crypto_mb_dir.as_deref();
    let installed = locate(configured).ok().map(|l| l.crypto_mb);
    if options.hides("crypto_mb") {
        return CryptoMbProbe {
            installed,
            loaded: false,
            applicable: false,
            version: None,
            reason: Some(CryptoMbUnavailable::Hidden.reason()),
        };
    }
    let (path, lib) = open_library(configured);
    match lib {
        Err(e) => CryptoMbProbe {
            installed: path.or(installed),
            loaded: false,
            applicable: false,
            version: None,
            reason: Some(e.reason()),
        },
        Ok(lib) => {
            let applicable = lib.applicable();
            CryptoMbProbe {
                installed: path.or_else(|| Some(PathBuf::from(CRYPTO_MB_SONAME))),
                loaded: true,
                applicable,
                version: lib.version(),
                reason: (!applicable).then(|| CryptoMbUnavailable::NotApplicable.reason()),
            }
        }
    }
}
