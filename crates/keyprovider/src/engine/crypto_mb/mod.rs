//! The crypto_mb engine: Intel's multi-buffer library (AVX-512 IFMA), 8 lanes per call.
//!
//! The library is loaded at run time (`dlopen`), never linked: the build does not depend on it,
//! and a machine without it (or without IFMA) just gets [`CryptoMbUnavailable`] with a reason.
//! Install it with `scripts/install-crypto-mb` (into `<repo>/.deps/crypto_mb`).
//!
//! Where the libraries come from ([`CryptoMbSource`]): the directory
//! [`EngineOptions::crypto_mb_dir`] names (the binary's `--crypto-mb-dir`, env
//! `QUICKSHAKE_CRYPTO_MB_DIR`; the files in it or in its `lib/`), or, when none is named, the
//! system loader's path (a plain `dlopen` of the SONAME: `LD_LIBRARY_PATH`, `ld.so.conf`).
//! Nowhere else: not the executable's ancestors, the working directory nor the source tree.
//! [`EngineOptions::hide`] naming `crypto_mb` (or `all`) hides it. The engine registry loads it
//! only when a configured provider needs it (`crate::engines`).
//!
//! This module owns the engine itself (loading it, its capabilities, the reasons it is
//! unavailable, hiding) and sorts each call's lanes into 8-lane batches per key size. The rest
//! is split by seam: `library` finds and loads the shared libraries and answers `doctor`'s
//! probe, `batch` makes the 8-lane crypto_mb calls, `lanes` validates lanes and converts between
//! big-endian bytes and crypto_mb's little-endian limbs.
//!
//! All FFI lives in `ffi`; every other module here is safe code. Constant time: the modular
//! arithmetic is crypto_mb's (constant-time by design, in its documentation and code review);
//! the conversions here copy limbs without branching on secret values (leading zero bytes of
//! secret parts are checked with an OR fold, not stripped).

mod batch;
mod ffi;
mod lanes;
mod library;
mod source;
mod unavailable;

use std::fmt;
use std::path::{Path, PathBuf};

use super::{
    Capabilities, EcdsaLane, Engine, LaneError, LaneResult, RsaLane, X25519Lane, X25519_BASE,
};
use crate::options::EngineOptions;
use lanes::{
    check_ecdsa_lane, check_rsa_lane, is_f4, verify_parts, wipe_limbs, VerifyParts, LANES, RSA_BITS,
};
use library::{open_library, CRYPTO_MB_SONAME};

pub use library::{probe, CryptoMbProbe};
pub use source::CryptoMbSource;
pub use unavailable::CryptoMbUnavailable;

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
/// Fewest e = 65537 lanes worth one `mbx_rsa_public_mb8` for the check of RSA results rather
/// than BoringSSL one at a time: on Zen 4 an 8-lane RSA-2048 call takes ~47 µs, BoringSSL
/// 14.6 µs per operation (`bench/engine`'s `rsa2048-public` lines): a win from 4 lanes.
const PUBLIC_MIN_BATCH: usize = 4;
/// Fewest key exchanges per batch worth computing here: each is two 8-lane calls' worth of
/// lanes at most, and one call of 8 X25519 lanes costs about two of BoringSSL's (measured as
/// the ifma engine's, `bench/engine`'s `x25519` lines).
const X25519_MIN_BATCH: usize = 2;
/// Fewest ECDSA signatures per batch whose check goes to `mbx_nistp256_ecdsa_verify_mb8`
/// rather than BoringSSL's verification one at a time: on Zen 4 one call takes ~156 µs for up
/// to 8 signatures, BoringSSL ~47 µs per signature (`bench/engine`'s `p256-verify` line): a
/// loss at 3, a win from 4.
const ECDSA_VERIFY_MIN_BATCH: usize = 4;

/// The crypto_mb engine. Cheap to share (`Send + Sync`); every call is independent.
pub struct CryptoMbEngine {
    lib: ffi::CryptoMbLib,
    /// `mbx_RSA_private_crt_Method` per size in `RSA_BITS` order.
    rsa_methods: Vec<ffi::RsaMethod>,
    /// `mbx_RSA_pub65537_Method` per size of `RSA_BITS`, where the library has it.
    public_methods: Vec<Option<ffi::RsaMethod>>,
    caps: Capabilities,
    path: Option<PathBuf>,
    source: CryptoMbSource,
    version: Option<String>,
}

impl fmt::Debug for CryptoMbEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CryptoMbEngine")
            .field("path", &self.path)
            .field("source", &self.source)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl CryptoMbEngine {
    /// Load crypto_mb from where `options` allow ([`CryptoMbSource::of`]), and check that this
    /// CPU runs it.
    pub fn load(options: &EngineOptions) -> Result<CryptoMbEngine, CryptoMbUnavailable> {
        if options.hides("crypto_mb") {
            return Err(CryptoMbUnavailable::Hidden);
        }
        let source = CryptoMbSource::of(options);
        let (path, lib) = open_library(&source);
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
        let public_methods = RSA_BITS
            .iter()
            .map(|&bits| lib.rsa_pub65537_method(bits))
            .collect();
        let version = lib.version();
        let caps = Capabilities {
            name: "crypto_mb".to_string(),
            accelerated: true,
            lanes: LANES,
            rsa_bits: RSA_BITS.to_vec(),
            ecdsa_p256: true,
            rsa_min_batch: RSA_MIN_BATCH,
            ecdsa_min_batch: ECDSA_MIN_BATCH,
            x25519_min_batch: if lib.has_x25519() {
                X25519_MIN_BATCH
            } else {
                usize::MAX
            },
            offload: false,
        };
        Ok(CryptoMbEngine {
            lib,
            rsa_methods,
            public_methods,
            caps,
            path,
            source,
            version,
        })
    }

    /// Where the library was loaded from (None: the system loader path).
    pub fn library_path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The directory it was loaded from, or the system loader path.
    pub fn source(&self) -> &CryptoMbSource {
        &self.source
    }

    /// `mbx_getversion()`'s string, if the library has it.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }
}

/// Validates each lane (`check_rsa_lane`), groups the valid ones by size (index into
/// `RSA_BITS`), and runs `call` on each group in chunks of 8; every lane gets its result, in
/// order (an invalid lane its validation error).
fn by_size(
    lanes: &[RsaLane<'_>],
    mut call: impl FnMut(usize, &[&RsaLane<'_>]) -> Vec<LaneResult>,
) -> Vec<LaneResult> {
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
            for (&i, r) in chunk.iter().zip(call(g, &batch)) {
                results[i] = Some(r);
            }
        }
    }
    results
        .into_iter()
        .map(|r| r.expect("every lane has a result"))
        .collect()
}

impl Engine for CryptoMbEngine {
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn rsa_private(&self, lanes: &[RsaLane<'_>]) -> Vec<LaneResult> {
        by_size(lanes, |g, batch| {
            self.rsa_batch(&self.rsa_methods[g], RSA_BITS[g], batch)
        })
    }

    /// `mbx_rsa_public_mb8` for keys with e = 65537 (crypto_mb's only public exponent; other
    /// lanes go to BoringSSL's check), batches of at least [`PUBLIC_MIN_BATCH`] such lanes.
    fn rsa_public(&self, lanes: &[RsaLane<'_>]) -> Option<Vec<LaneResult>> {
        if lanes.iter().filter(|l| is_f4(l.key)).count() < PUBLIC_MIN_BATCH {
            return None;
        }
        Some(by_size(lanes, |g, batch| match &self.public_methods[g] {
            Some(m) => self.rsa_public_batch(m, RSA_BITS[g], batch),
            None => vec![Err(LaneError::Unsupported); batch.len()],
        }))
    }

    /// `mbx_nistp256_ecdsa_verify_mb8`, 8 lanes at a time; a lane whose parts do not parse
    /// stays unconfirmed (BoringSSL checks it).
    fn ecdsa_verify(&self, lanes: &[EcdsaLane<'_>], signatures: &[&[u8]]) -> Option<Vec<bool>> {
        if !self.lib.has_ecdsa_verify()
            || lanes.len() < ECDSA_VERIFY_MIN_BATCH
            || lanes.len() != signatures.len()
        {
            return None;
        }
        let parts: Vec<(usize, VerifyParts)> = lanes
            .iter()
            .zip(signatures)
            .enumerate()
            .filter_map(|(i, (lane, sig))| Some((i, verify_parts(lane.key, lane.digest, sig)?)))
            .collect();
        let mut out = vec![false; lanes.len()];
        for chunk in parts.chunks(LANES) {
            let group: Vec<VerifyParts> = chunk.iter().map(|(_, p)| *p).collect();
            for ((i, _), ok) in chunk.iter().zip(self.ecdsa_verify_batch(&group)) {
                out[*i] = ok;
            }
        }
        Some(out)
    }

    /// Base-point lanes through `mbx_x25519_public_key_mb8`, the rest through `mbx_x25519_mb8`,
    /// 8 at a time.
    fn x25519(&self, lanes: &[X25519Lane<'_>]) -> Vec<Result<[u8; 32], LaneError>> {
        let mut results = vec![Err(LaneError::Unsupported); lanes.len()];
        if !self.lib.has_x25519() {
            return results;
        }
        let (base, peer): (Vec<usize>, Vec<usize>) =
            (0..lanes.len()).partition(|&i| *lanes[i].point == X25519_BASE);
        for (idx, is_base) in [(base, true), (peer, false)] {
            for chunk in idx.chunks(LANES) {
                self.x25519_batch(lanes, chunk, is_base, &mut results);
            }
        }
        results
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
