//! The crypto_mb engine: Intel's multi-buffer library (AVX-512 IFMA), 8 lanes per call.
//!
//! The library is loaded at run time (`dlopen`), never linked: the build does not depend on it,
//! and a machine without it (or without IFMA) just gets [`CryptoMbUnavailable`] with a reason.
//! Install it with `scripts/install-crypto-mb` (into `<repo>/.deps/crypto_mb`).
//!
//! Search order for the libraries: the directory in `QUICKSHAKE_CRYPTO_MB_DIR` (searched
//! recursively), `<dir of the executable>/../../.deps/crypto_mb` (and the other ancestors of the
//! executable's directory, up to 5 levels), `./.deps/crypto_mb`, the repo
//! this crate was built from (`<CARGO_MANIFEST_DIR>/../../.deps/crypto_mb`), then the system
//! library path. `QUICKSHAKE_HIDE_ENGINES=crypto_mb` (or `all`) hides it.
//!
//! All FFI lives in `crypto_mb_ffi.rs`; this file is safe code. Constant time: the modular
//! arithmetic is crypto_mb's (constant-time by design, in its documentation and code review);
//! the conversions here copy limbs without branching on secret values (leading zero bytes of
//! secret parts are checked with an OR fold, not stripped).

#[path = "crypto_mb_ffi.rs"]
mod ffi;

use std::cell::RefCell;
use std::fmt;
use std::path::{Path, PathBuf};

use libloading::os::unix::Library;

use super::{
    Capabilities, EcKeyParts, EcdsaLane, Engine, LaneError, LaneResult, RsaKeyParts, RsaLane,
};

/// Environment variable naming a directory that holds the crypto_mb libraries.
pub const DIR_ENV: &str = "QUICKSHAKE_CRYPTO_MB_DIR";
/// Environment variable listing engines to hide (comma-separated; `all` hides every engine).
pub const HIDE_ENV: &str = "QUICKSHAKE_HIDE_ENGINES";

/// The crypto_mb library file (its SONAME; the wheel also ships `libcrypto_mb.so`).
const CRYPTO_MB_SONAME: &str = "libcrypto_mb.so.13";
/// Intel compiler runtime libraries crypto_mb needs, in dependency order.
const RUNTIME_LIBS: [&str; 4] = ["libintlc.so.5", "libirng.so", "libimf.so", "libsvml.so"];
/// Lanes per crypto_mb call.
const LANES: usize = 8;
/// RSA modulus sizes crypto_mb computes.
const RSA_BITS: [u32; 4] = [1024, 2048, 3072, 4096];

/// Smallest batch worth sending to crypto_mb rather than BoringSSL one at a time: the smallest
/// k for which one crypto_mb call costs less than k BoringSSL operations.
///
/// Measured here (2-vCPU AMD EPYC Zen 4 VM with AVX-512 IFMA, one thread, crypto_mb 2.3.0 from
/// ipp-crypto 2026.2.0, 4 runs on a shared, busy machine) with
/// `cargo test -p quickshake-keyprovider --profile ci --test crypto_mb_engine -- --ignored
/// --nocapture crossover`:
/// RSA-2048: BoringSSL (`RSA_private_decrypt`, no padding) 0.57-0.62 ms/op; crypto_mb
/// 1.02-1.06 ms per call of 1 lane, 1.03-1.18 ms for 8 lanes (0.13-0.15 ms/op, 6800-7800 op/s
/// on one core). Every run: 2 lanes in one call < 2 BoringSSL ops (by ~10-15%), so k = 2;
/// use 3 where measurements are noisier.
const RSA_MIN_BATCH: usize = 2;
/// ECDSA P-256, same command: BoringSSL 0.0175-0.021 ms/sign; crypto_mb 0.045-0.049 ms per
/// call of 1 lane, 0.050-0.051 ms for 8 (~160k op/s). 1 call > 2 signs but < 3, so k = 3.
const ECDSA_MIN_BATCH: usize = 3;

/// P-256 group order n, big-endian.
const P256_N: [u8; 32] = [
    0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
    0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
];

/// Why crypto_mb cannot be used in this process.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoMbUnavailable {
    #[error(
        "crypto_mb is not installed (looked in {} and the system library path; run scripts/install-crypto-mb)",
        show_paths(.looked)
    )]
    NotInstalled { looked: Vec<PathBuf> },
    #[error("crypto_mb failed to load from {path}: {reason}")]
    LoadFailed { path: PathBuf, reason: String },
    #[error("crypto_mb is not applicable on this CPU: needs AVX-512 IFMA")]
    NotApplicable,
    #[error("crypto_mb is hidden by QUICKSHAKE_HIDE_ENGINES")]
    Hidden,
}

impl CryptoMbUnavailable {
    /// The human reason, as shown by `quickshake doctor`.
    pub fn reason(&self) -> String {
        self.to_string()
    }
}

fn show_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "no directory".to_string();
    }
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

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

/// Whether `QUICKSHAKE_HIDE_ENGINES` hides `name`.
pub(crate) fn hidden(name: &str) -> bool {
    std::env::var(HIDE_ENV).is_ok_and(|v| hide_list_hides(&v, name))
}

/// Whether a comma-separated hide list names `name` (or `all`).
fn hide_list_hides(list: &str, name: &str) -> bool {
    list.split(',')
        .map(str::trim)
        .any(|x| x.eq_ignore_ascii_case(name) || x.eq_ignore_ascii_case("all"))
}

/// Directories searched for the libraries, in order.
fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os(DIR_ENV).filter(|d| !d.is_empty()) {
        dirs.push(PathBuf::from(d));
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

fn locate() -> Result<Located, Vec<PathBuf>> {
    let dirs = search_dirs();
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
fn open_library() -> (
    Option<PathBuf>,
    Result<ffi::CryptoMbLib, CryptoMbUnavailable>,
) {
    match locate() {
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
pub fn probe() -> CryptoMbProbe {
    let installed = locate().ok().map(|l| l.crypto_mb);
    if hidden("crypto_mb") {
        return CryptoMbProbe {
            installed,
            loaded: false,
            applicable: false,
            version: None,
            reason: Some(CryptoMbUnavailable::Hidden.reason()),
        };
    }
    let (path, lib) = open_library();
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

/// The crypto_mb engine. Cheap to share (`Send + Sync`); every call is independent.
pub struct CryptoMbEngine {
    lib: ffi::CryptoMbLib,
    /// `mbx_RSA_private_crt_Method` per size in `RSA_BITS` order.
    rsa_methods: Vec<ffi::RsaMethod>,
    caps: Capabilities,
    path: Option<PathBuf>,
    version: Option<String>,
}

impl fmt::Debug for CryptoMbEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CryptoMbEngine")
            .field("path", &self.path)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

thread_local! {
    /// Per-thread scratch buffer for `mbx_rsa_private_crt_mb8`.
    static RSA_SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl CryptoMbEngine {
    /// Find and load crypto_mb, and check that this CPU runs it.
    pub fn load() -> Result<CryptoMbEngine, CryptoMbUnavailable> {
        if hidden("crypto_mb") {
            return Err(CryptoMbUnavailable::Hidden);
        }
        let (path, lib) = open_library();
        let lib = lib?;
        if !lib.applicable() {
            return Err(CryptoMbUnavailable::NotApplicable);
        }
        let mut rsa_methods = Vec::new();
        for bits in RSA_BITS {
            let m = lib.rsa_private_crt_method(bits).ok_or_else(|| {
                CryptoMbUnavailable::LoadFailed {
                    path: path
                        .clone()
                        .unwrap_or_else(|| PathBuf::from(CRYPTO_MB_SONAME)),
                    reason: format!("mbx_RSA_private_crt_Method({bits}) returned no method"),
                }
            })?;
            rsa_methods.push(m);
        }
        let version = lib.version();
        let caps = Capabilities {
            name: "crypto_mb".to_string(),
            accelerated: true,
            lanes: LANES,
            rsa_bits: RSA_BITS.to_vec(),
            ecdsa_p256: true,
            rsa_min_batch: RSA_MIN_BATCH,
            ecdsa_min_batch: ECDSA_MIN_BATCH,
            offload: false,
        };
        Ok(CryptoMbEngine {
            lib,
            rsa_methods,
            caps,
            path,
            version,
        })
    }

    /// Where the library was loaded from (None: the system library path).
    pub fn library_path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// `mbx_getversion()`'s string, if the library has it.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// One call of up to 8 RSA lanes of one size (`method`). `lanes` were validated.
    fn rsa_batch(
        &self,
        method: &ffi::RsaMethod,
        bits: u32,
        lanes: &[&RsaLane<'_>],
    ) -> Vec<LaneResult> {
        debug_assert!(!lanes.is_empty() && lanes.len() <= LANES);
        let limbs = bits as usize / 128;
        let bytes = bits as usize / 8;
        // Per lane: p, q, dp, dq, qinv as little-endian limbs.
        let mut parts: Vec<[Vec<u64>; 5]> = Vec::with_capacity(lanes.len());
        let mut results: Vec<Option<LaneResult>> = vec![None; lanes.len()];
        for (i, lane) in lanes.iter().enumerate() {
            let k = lane.key;
            let conv = [&k.p, &k.q, &k.dp, &k.dq, &k.qinv].map(|v| be_to_le_limbs(v, limbs));
            if conv.iter().any(Option::is_none) {
                results[i] = Some(Err(LaneError::Failed(
                    "RSA CRT part longer than half the modulus".into(),
                )));
            }
            parts.push(conv.map(Option::unwrap_or_default));
        }
        // Lanes to compute; unused slots repeat the first good lane (with its own output).
        let good: Vec<usize> = (0..lanes.len()).filter(|&i| results[i].is_none()).collect();
        if let Some(&first) = good.first() {
            let slot = |j: usize| good.get(j).copied().unwrap_or(first);
            let inputs: [&[u8]; 8] = std::array::from_fn(|j| lanes[slot(j)].input);
            let part =
                |n: usize| -> [&[u64]; 8] { std::array::from_fn(|j| parts[slot(j)][n].as_slice()) };
            let mut out_bufs: Vec<Vec<u8>> = (0..LANES).map(|_| vec![0u8; bytes]).collect();
            let mut it = out_bufs.iter_mut();
            let mut outputs: [&mut [u8]; 8] =
                std::array::from_fn(|_| it.next().expect("8 buffers").as_mut_slice());
            let status = RSA_SCRATCH.with(|s| {
                let mut s = s.borrow_mut();
                if s.len() < method.buf_size() {
                    s.resize(method.buf_size(), 0);
                }
                self.lib.rsa_private_crt_mb8(
                    method,
                    &inputs,
                    &mut outputs,
                    &part(0),
                    &part(1),
                    &part(2),
                    &part(3),
                    &part(4),
                    &mut s,
                )
            });
            for (j, &i) in good.iter().enumerate() {
                results[i] = Some(match status {
                    Err(e) => Err(LaneError::Failed(e.to_string())),
                    Ok(st) => match ffi::lane_status(st, j) {
                        0 => Ok(std::mem::take(&mut out_bufs[j])),
                        code => Err(LaneError::Failed(format!(
                            "crypto_mb RSA lane status {code} ({})",
                            ffi::status_name(code)
                        ))),
                    },
                });
            }
            for b in out_bufs.iter_mut() {
                wipe(b);
            }
        }
        for p in parts.iter_mut().flatten() {
            wipe_limbs(p);
        }
        results
            .into_iter()
            .map(|r| r.expect("every lane has a result"))
            .collect()
    }

    /// One call of up to 8 ECDSA lanes, all valid.
    fn ecdsa_batch(&self, lanes: &[(usize, [u8; 32], [u64; 4])]) -> Vec<(usize, LaneResult)> {
        debug_assert!(!lanes.is_empty() && lanes.len() <= LANES);
        let slot = |j: usize| lanes.get(j).unwrap_or(&lanes[0]);
        let msg: [[u8; 32]; 8] = std::array::from_fn(|j| slot(j).1);
        let mut d: [[u64; 4]; 8] = std::array::from_fn(|j| slot(j).2);
        let mut k = [[0u64; 4]; 8];
        for kj in k.iter_mut().take(lanes.len()) {
            match random_scalar() {
                Ok(v) => *kj = v,
                Err(e) => {
                    for row in d.iter_mut() {
                        wipe_limbs(row);
                    }
                    return lanes
                        .iter()
                        .map(|l| (l.0, Err(LaneError::Failed(e.clone()))))
                        .collect();
                }
            }
        }
        for j in lanes.len()..LANES {
            k[j] = k[0];
        }
        let mut r = [[0u8; 32]; 8];
        let mut s = [[0u8; 32]; 8];
        let status = self
            .lib
            .nistp256_ecdsa_sign_mb8(&mut r, &mut s, &msg, &k, &d);
        for row in k.iter_mut().chain(d.iter_mut()) {
            wipe_limbs(row);
        }
        lanes
            .iter()
            .enumerate()
            .map(|(j, l)| {
                let res = match ffi::lane_status(status, j) {
                    0 => Ok(der_signature(&r[j], &s[j])),
                    code => Err(LaneError::Failed(format!(
                        "crypto_mb ECDSA lane status {code} ({})",
                        ffi::status_name(code)
                    ))),
                };
                (l.0, res)
            })
            .collect()
    }
}

impl Engine for CryptoMbEngine {
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn rsa_private(&self, lanes: &[RsaLane<'_>]) -> Vec<LaneResult> {
        let mut results: Vec<Option<LaneResult>> = vec![None; lanes.len()];
        // Lane indices per modulus size (RSA_BITS order).
        let mut groups: [Vec<usize>; 4] = Default::default();
        for (i, lane) in lanes.iter().enumerate() {
            match check_rsa_lane(lane) {
                Ok(g) => groups[g].push(i),
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        for (g, idx) in groups.iter().enumerate() {
            for chunk in idx.chunks(LANES) {
                let batch: Vec<&RsaLane<'_>> = chunk.iter().map(|&i| &lanes[i]).collect();
                let out = self.rsa_batch(&self.rsa_methods[g], RSA_BITS[g], &batch);
                for (&i, r) in chunk.iter().zip(out) {
                    results[i] = Some(r);
                }
            }
        }
        results
            .into_iter()
            .map(|r| r.expect("every lane has a result"))
            .collect()
    }

    fn ecdsa_sign(&self, lanes: &[EcdsaLane<'_>]) -> Vec<LaneResult> {
        let mut results: Vec<Option<LaneResult>> = vec![None; lanes.len()];
        let mut valid = Vec::with_capacity(lanes.len());
        for (i, lane) in lanes.iter().enumerate() {
            match check_ecdsa_lane(lane.key, lane.digest) {
                Ok((e, d)) => valid.push((i, e, d)),
                Err(err) => results[i] = Some(Err(err)),
            }
        }
        for chunk in valid.chunks(LANES) {
            for (i, r) in self.ecdsa_batch(chunk) {
                results[i] = Some(r);
            }
        }
        for v in valid.iter_mut() {
            wipe_limbs(&mut v.2);
        }
        results
            .into_iter()
            .map(|r| r.expect("every lane has a result"))
            .collect()
    }
}

/// Validate one RSA lane; returns its size group (index into `RSA_BITS`).
fn check_rsa_lane(lane: &RsaLane<'_>) -> Result<usize, LaneError> {
    let k: &RsaKeyParts = lane.key;
    let Some(g) = RSA_BITS.iter().position(|&b| b == k.bits) else {
        return Err(LaneError::Unsupported);
    };
    let bytes = k.bits as usize / 8;
    // The modulus is public: strip leading zeros and require exactly `bits` bits.
    let n = strip_zeros(&k.n);
    if n.len() != bytes || n[0] & 0x80 == 0 {
        return Err(LaneError::Unsupported);
    }
    if lane.input.len() != bytes {
        return Err(LaneError::Failed(format!(
            "input is {} bytes, modulus is {bytes}",
            lane.input.len()
        )));
    }
    // Inputs are public (padded block or ciphertext); big-endian equal length: compare bytes.
    if lane.input >= n {
        return Err(LaneError::Failed(
            "input is not less than the modulus".into(),
        ));
    }
    Ok(g)
}

/// Validate one ECDSA lane: returns the digest reduced mod n (big-endian) and the private key
/// as little-endian limbs.
fn check_ecdsa_lane(key: &EcKeyParts, digest: &[u8]) -> Result<([u8; 32], [u64; 4]), LaneError> {
    let d = be_to_le_limbs(&key.d, 4)
        .ok_or_else(|| LaneError::Failed("P-256 private key longer than 32 bytes".into()))?;
    let d: [u64; 4] = [d[0], d[1], d[2], d[3]];
    let (_, borrow) = sub_n(&d);
    if (d.iter().fold(0, |a, &x| a | x) == 0) | (borrow == 0) {
        return Err(LaneError::Failed("P-256 private key out of range".into()));
    }
    if digest.is_empty() {
        return Err(LaneError::Failed("empty digest".into()));
    }
    // ECDSA uses the leftmost 256 bits of the digest, as an integer, reduced mod n
    // (crypto_mb rejects a message >= n).
    let mut e = [0u8; 32];
    let take = digest.len().min(32);
    e[32 - take..].copy_from_slice(&digest[..take]);
    let e_l: [u64; 4] = be32_to_limbs(&e);
    let (e_minus_n, borrow) = sub_n(&e_l);
    let reduced = if borrow == 0 { e_minus_n } else { e_l };
    if reduced == [0; 4] {
        // Valid ECDSA (s = k^-1 r d) but crypto_mb rejects a zero message
        // (MBX_STATUS_MISMATCH_PARAM_ERR); never happens with a real hash.
        return Err(LaneError::Failed(
            "digest is 0 mod n, which crypto_mb does not sign".into(),
        ));
    }
    Ok((limbs_to_be32(&reduced), d))
}

/// `a - n` over 4 limbs and the final borrow (1 when `a < n`). Constant time.
fn sub_n(a: &[u64; 4]) -> ([u64; 4], u64) {
    let n = be32_to_limbs(&P256_N);
    let mut out = [0u64; 4];
    let mut borrow = 0u64;
    for i in 0..4 {
        let (x, b1) = a[i].overflowing_sub(n[i]);
        let (y, b2) = x.overflowing_sub(borrow);
        out[i] = y;
        borrow = (b1 | b2) as u64;
    }
    (out, borrow)
}

/// A uniformly random scalar in [1, n-1] (rejection sampling) as little-endian limbs.
fn random_scalar() -> Result<[u64; 4], String> {
    for _ in 0..64 {
        let mut buf = [0u8; 32];
        boring::rand::rand_bytes(&mut buf).map_err(|e| format!("RAND_bytes failed: {e}"))?;
        let k = be32_to_limbs(&buf);
        wipe(&mut buf);
        let (_, borrow) = sub_n(&k);
        if borrow == 1 && k.iter().fold(0, |a, &x| a | x) != 0 {
            return Ok(k);
        }
    }
    Err("could not sample an ECDSA nonce".into())
}

fn be32_to_limbs(b: &[u8; 32]) -> [u64; 4] {
    std::array::from_fn(|i| {
        u64::from_be_bytes(b[32 - 8 * (i + 1)..32 - 8 * i].try_into().expect("8 bytes"))
    })
}

fn limbs_to_be32(l: &[u64; 4]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for i in 0..4 {
        out[32 - 8 * (i + 1)..32 - 8 * i].copy_from_slice(&l[i].to_be_bytes());
    }
    out
}

/// Big-endian bytes to `limbs` little-endian 64-bit limbs; None when the value needs more
/// limbs. Leading zero bytes beyond the capacity are accepted, checked without branching on
/// their values.
fn be_to_le_limbs(be: &[u8], limbs: usize) -> Option<Vec<u64>> {
    let cap = limbs * 8;
    let (excess, body) = if be.len() > cap {
        be.split_at(be.len() - cap)
    } else {
        (&[][..], be)
    };
    if excess.iter().fold(0u8, |a, &x| a | x) != 0 {
        return None;
    }
    let mut out = vec![0u64; limbs];
    for (pos, &byte) in body.iter().rev().enumerate() {
        out[pos / 8] |= u64::from(byte) << (8 * (pos % 8));
    }
    Some(out)
}

fn strip_zeros(b: &[u8]) -> &[u8] {
    let first = b.iter().position(|&x| x != 0).unwrap_or(b.len());
    &b[first..]
}

/// DER `ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER }`, minimal encoding.
fn der_signature(r: &[u8; 32], s: &[u8; 32]) -> Vec<u8> {
    fn int(out: &mut Vec<u8>, v: &[u8]) {
        let v = strip_zeros(v);
        let v = if v.is_empty() { &[0u8][..] } else { v };
        let pad = v[0] & 0x80 != 0;
        out.push(0x02);
        out.push((v.len() + usize::from(pad)) as u8);
        if pad {
            out.push(0);
        }
        out.extend_from_slice(v);
    }
    let mut body = Vec::with_capacity(72);
    int(&mut body, r);
    int(&mut body, s);
    let mut out = Vec::with_capacity(body.len() + 2);
    out.push(0x30);
    out.push(body.len() as u8); // at most 70 for P-256: short form
    out.extend_from_slice(&body);
    out
}

fn wipe(v: &mut [u8]) {
    v.fill(0);
    std::hint::black_box(v);
}

fn wipe_limbs(v: &mut [u64]) {
    v.fill(0);
    std::hint::black_box(v);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limbs_round_trip() {
        let be: Vec<u8> = (1..=20).collect();
        let l = be_to_le_limbs(&be, 4).unwrap();
        assert_eq!(l[0], 0x0d0e0f1011121314);
        assert_eq!(l[2], 0x01020304);
        assert_eq!(l[3], 0);
        assert!(be_to_le_limbs(&[1; 33], 4).is_none());
        assert_eq!(be_to_le_limbs(&[0, 0, 5], 1).unwrap(), vec![5]);
        let mut b = [0u8; 32];
        b[0] = 0x80;
        b[31] = 1;
        assert_eq!(limbs_to_be32(&be32_to_limbs(&b)), b);
    }

    #[test]
    fn digest_reduced_mod_n() {
        let key = EcKeyParts {
            d: vec![1; 32],
            x: vec![0; 32],
            y: vec![0; 32],
            native: None,
        };
        let (e, _) = check_ecdsa_lane(&key, &[0xFF; 32]).unwrap();
        // 2^256 - 1 - n
        let (want, _) = sub_n(&[u64::MAX; 4]);
        assert_eq!(e, limbs_to_be32(&want));
        let (e, _) = check_ecdsa_lane(&key, &[7; 16]).unwrap();
        assert_eq!(&e[16..], &[7; 16]);
        let zero = EcKeyParts {
            d: vec![0; 32],
            x: vec![],
            y: vec![],
            native: None,
        };
        assert!(check_ecdsa_lane(&zero, &[1; 32]).is_err());
        assert!(check_ecdsa_lane(&key, &[0; 32]).is_err());
        assert!(check_ecdsa_lane(&key, &P256_N).is_err());
        let big = EcKeyParts {
            d: P256_N.to_vec(),
            x: vec![],
            y: vec![],
            native: None,
        };
        assert!(check_ecdsa_lane(&big, &[1; 32]).is_err());
    }

    #[test]
    fn der_minimal() {
        let mut r = [0u8; 32];
        r[31] = 0x80;
        let s = [0x7F; 32];
        let der = der_signature(&r, &s);
        assert_eq!(&der[..7], &[0x30, 4 + 32 + 2, 0x02, 2, 0x00, 0x80, 0x02]);
        assert_eq!(der[7], 32);
    }

    #[test]
    fn hide_list_parsing() {
        assert!(hide_list_hides("software, crypto_mb", "crypto_mb"));
        assert!(hide_list_hides("ALL", "crypto_mb"));
        assert!(!hide_list_hides("software", "crypto_mb"));
        assert!(!hide_list_hides("", "crypto_mb"));
    }
}
