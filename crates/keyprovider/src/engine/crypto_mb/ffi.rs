//! The raw interface to Intel crypto_mb (`libcrypto_mb.so`), loaded at run time.
//!
//! `unsafe` is needed here, and only here, for two things Rust cannot check: loading shared
//! libraries with `dlopen` (their initialisers run, and we trust their symbols to have the C
//! signatures declared below, taken from crypto_mb's headers `rsa.h`, `ec_nistp256.h`,
//! `cpu_features.h` and `version.h`), and calling those functions with raw pointer arrays.
//! Every call goes through one small wrapper below that checks the buffer sizes the C function
//! will read or write before calling it, so the rest of the engine (the other `crypto_mb`
//! modules) is safe code.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::Path;
use std::ptr::{self, NonNull};

use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_LOCAL, RTLD_NOW};

/// `mbx_status`: 4 bits per lane, lane `i` in bits `4i..4i+4` (status.h).
pub(super) type MbxStatus = u32;

/// `MBX_GET_STS(status, lane)` from status.h.
pub(super) fn lane_status(status: MbxStatus, lane: usize) -> u32 {
    (status >> (4 * (lane & 7))) & 0xF
}

/// A human name for one lane's status value (status.h).
pub(super) fn status_name(code: u32) -> &'static str {
    match code {
        0 => "ok",
        1 => "MBX_STATUS_MISMATCH_PARAM_ERR",
        2 => "MBX_STATUS_NULL_PARAM_ERR",
        4 => "MBX_STATUS_LOW_ORDER_ERR",
        8 => "MBX_STATUS_SIGNATURE_ERR",
        10 => "MBX_STATUS_UNSUPPORTED_ISA_ERR",
        _ => "unknown crypto_mb status",
    }
}

/// `mbxVersion` (version.h).
#[repr(C)]
struct MbxVersion {
    major: c_int,
    minor: c_int,
    patch: c_int,
    target_cpu: [c_char; 4],
    name: *const c_char,
    build_date: *const c_char,
    str_version: *const c_char,
}

type GetCpuFeaturesFn = unsafe extern "C" fn() -> u64;
type IsApplicableFn = unsafe extern "C" fn(u64) -> c_int;
type GetVersionFn = unsafe extern "C" fn() -> *const MbxVersion;
type RsaMethodFn = unsafe extern "C" fn(c_int) -> *const c_void;
type RsaMethodBufSizeFn = unsafe extern "C" fn(*const c_void) -> c_int;
type RsaPrivateCrtFn = unsafe extern "C" fn(
    *const *const u8,  // from_pa[8]
    *const *mut u8,    // to_pa[8]
    *const *const u64, // p_pa[8]
    *const *const u64, // q_pa[8]
    *const *const u64, // dp_pa[8]
    *const *const u64, // dq_pa[8]
    *const *const u64, // iq_pa[8]
    c_int,             // rsaBitlen
    *const c_void,     // const mbx_RSA_Method*
    *mut u8,           // pBuffer
) -> MbxStatus;
type RsaPublicFn = unsafe extern "C" fn(
    *const *const u8,  // from_pa[8]
    *const *mut u8,    // to_pa[8]
    *const *const u64, // n_pa[8]
    c_int,             // rsaBitlen
    *const c_void,     // const mbx_RSA_Method* (e = 65537)
    *mut u8,           // pBuffer
) -> MbxStatus;
type EcdsaSignFn = unsafe extern "C" fn(
    *const *mut u8,    // pa_sign_r[8]
    *const *mut u8,    // pa_sign_s[8]
    *const *const u8,  // pa_msg[8]
    *const *const u64, // pa_eph_skey[8]
    *const *const u64, // pa_reg_skey[8]
    *mut u8,           // pBuffer
) -> MbxStatus;

type EcdsaVerifyFn = unsafe extern "C" fn(
    *const *const u8,  // pa_sign_r[8]
    *const *const u8,  // pa_sign_s[8]
    *const *const u8,  // pa_msg[8]
    *const *const u64, // pa_pubx[8]
    *const *const u64, // pa_puby[8]
    *const *const u64, // pa_pubz[8] (NULL: affine)
    *mut u8,           // pBuffer (NULL)
) -> MbxStatus;
type X25519Fn = unsafe extern "C" fn(
    *const *mut u8,   // pa_shared_key[8]
    *const *const u8, // pa_private_key[8]
    *const *const u8, // pa_public_key[8]
) -> MbxStatus;
type X25519PublicKeyFn = unsafe extern "C" fn(
    *const *mut u8,   // pa_public_key[8]
    *const *const u8, // pa_private_key[8]
) -> MbxStatus;

/// `dlopen(path, RTLD_NOW | RTLD_GLOBAL)`: for the Intel compiler runtime libraries, so that
/// crypto_mb's `NEEDED` entries (`libintlc.so.5`, `libirng.so`, `libimf.so`, `libsvml.so`) are
/// already satisfied when it is loaded.
pub(super) fn open_global(path: &Path) -> Result<Library, libloading::Error> {
    // SAFETY: loading a library runs its initialisers; the Intel runtime libraries are plain C
    // libraries whose initialisers only set up their own state.
    unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }
}

/// The loaded crypto_mb library and the entry points the engine uses.
pub(super) struct CryptoMbLib {
    get_cpu_features: GetCpuFeaturesFn,
    is_applicable: IsApplicableFn,
    get_version: Option<GetVersionFn>,
    rsa_private_crt_method: RsaMethodFn,
    rsa_method_buf_size: RsaMethodBufSizeFn,
    rsa_private_crt_mb8: RsaPrivateCrtFn,
    /// `mbx_RSA_pub65537_Method` and `mbx_rsa_public_mb8`, where the library has them.
    rsa_pub65537_method: Option<RsaMethodFn>,
    rsa_public_mb8: Option<RsaPublicFn>,
    ecdsa_sign_mb8: EcdsaSignFn,
    /// `mbx_nistp256_ecdsa_verify_mb8`, where the library has it.
    ecdsa_verify_mb8: Option<EcdsaVerifyFn>,
    /// `mbx_x25519_mb8` and `mbx_x25519_public_key_mb8` (x25519.h), where the library has them.
    x25519_mb8: Option<X25519Fn>,
    x25519_public_key_mb8: Option<X25519PublicKeyFn>,
    // Declared last: the function pointers above stay valid while these are loaded.
    _lib: Library,
    _runtime: Vec<Library>,
}

/// A `mbx_RSA_Method` for one modulus size: a pointer to constant data inside the library.
pub(super) struct RsaMethod {
    ptr: NonNull<c_void>,
    bits: u32,
    buf_size: usize,
}

// SAFETY: an `mbx_RSA_Method` is immutable static data of crypto_mb (a table of function
// pointers and sizes); the engine holding it keeps the library loaded, and crypto_mb only reads
// it, so sharing the pointer between threads is sound.
unsafe impl Send for RsaMethod {}
// SAFETY: as above: immutable, never written after the library is loaded.
unsafe impl Sync for RsaMethod {}

impl RsaMethod {
    /// Bytes of scratch buffer `mbx_rsa_private_crt_mb8` needs with this method.
    pub(super) fn buf_size(&self) -> usize {
        self.buf_size
    }
}

/// Look one symbol up and copy it out as a function pointer of type `T`.
///
/// # Safety
/// `T` must be the symbol's real C function type.
unsafe fn sym<T: Copy>(lib: &Library, name: &[u8]) -> Result<T, libloading::Error> {
    // SAFETY: the caller guarantees `T` matches the symbol.
    unsafe { lib.get::<T>(name) }.map(|s| *s)
}

impl CryptoMbLib {
    /// `dlopen(path, RTLD_NOW | RTLD_LOCAL)` of `libcrypto_mb.so` and lookup of every entry
    /// point. RTLD_LOCAL keeps the OpenSSL 3 symbols it links (`libcrypto.so.3`, for its `_ssl_`
    /// functions, which we do not use) away from our statically linked BoringSSL.
    /// `path` may be a bare file name, searched on the system library path.
    pub(super) fn open(
        path: &Path,
        runtime: Vec<Library>,
    ) -> Result<CryptoMbLib, libloading::Error> {
        // SAFETY: loading crypto_mb runs its initialisers (none beyond libc/OpenSSL setup);
        // it is loaded locally so its symbols cannot interpose on ours.
        let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }?;
        // SAFETY: each type below is the signature declared in crypto_mb's headers
        // (cpu_features.h, version.h, rsa.h, ec_nistp256.h, x25519.h) for that symbol.
        unsafe {
            Ok(CryptoMbLib {
                get_cpu_features: sym(&lib, b"mbx_get_cpu_features\0")?,
                is_applicable: sym(&lib, b"mbx_is_crypto_mb_applicable\0")?,
                get_version: sym(&lib, b"mbx_getversion\0").ok(),
                rsa_private_crt_method: sym(&lib, b"mbx_RSA_private_crt_Method\0")?,
                rsa_method_buf_size: sym(&lib, b"mbx_RSA_Method_BufSize\0")?,
                rsa_private_crt_mb8: sym(&lib, b"mbx_rsa_private_crt_mb8\0")?,
                rsa_pub65537_method: sym(&lib, b"mbx_RSA_pub65537_Method\0").ok(),
                rsa_public_mb8: sym(&lib, b"mbx_rsa_public_mb8\0").ok(),
                ecdsa_sign_mb8: sym(&lib, b"mbx_nistp256_ecdsa_sign_mb8\0")?,
                ecdsa_verify_mb8: sym(&lib, b"mbx_nistp256_ecdsa_verify_mb8\0").ok(),
                x25519_mb8: sym(&lib, b"mbx_x25519_mb8\0").ok(),
                x25519_public_key_mb8: sym(&lib, b"mbx_x25519_public_key_mb8\0").ok(),
                _lib: lib,
                _runtime: runtime,
            })
        }
    }

    /// `mbx_is_crypto_mb_applicable(mbx_get_cpu_features())`: whether this CPU has what the
    /// library's 8-lane code needs (AVX-512 IFMA).
    pub(super) fn applicable(&self) -> bool {
        // SAFETY: both functions take and return plain integers and only read CPUID.
        unsafe { (self.is_applicable)((self.get_cpu_features)()) != 0 }
    }

    /// `mbx_getversion()->strVersion`, e.g. "crypto_mb (ver 1.2.3 ...)".
    pub(super) fn version(&self) -> Option<String> {
        let f = self.get_version?;
        // SAFETY: mbx_getversion returns a pointer to a static struct (or NULL); its string
        // fields point at static NUL-terminated strings.
        unsafe {
            let v = f();
            if v.is_null() || (*v).str_version.is_null() {
                return None;
            }
            Some(
                CStr::from_ptr((*v).str_version)
                    .to_string_lossy()
                    .into_owned(),
            )
        }
    }

    /// `mbx_RSA_private_crt_Method(bits)` and `mbx_RSA_Method_BufSize(method)`.
    pub(super) fn rsa_private_crt_method(&self, bits: u32) -> Option<RsaMethod> {
        self.rsa_method(self.rsa_private_crt_method, bits)
    }

    /// `mbx_RSA_pub65537_Method(bits)` and its buffer size; `None` where the library lacks
    /// the public operation or the size.
    pub(super) fn rsa_pub65537_method(&self, bits: u32) -> Option<RsaMethod> {
        self.rsa_method(self.rsa_pub65537_method?, bits)
    }

    /// The method `get(bits)` returns, with `mbx_RSA_Method_BufSize` of it.
    fn rsa_method(&self, get: RsaMethodFn, bits: u32) -> Option<RsaMethod> {
        let c_bits = c_int::try_from(bits).ok()?;
        // SAFETY: `get` is one of the library's `mbx_RSA_*_Method(int)` entry points: it takes
        // an integer and returns a pointer to static data, or NULL for other sizes.
        let ptr = NonNull::new(unsafe { get(c_bits) } as *mut c_void)?;
        // SAFETY: `ptr` is a method returned by the library just above.
        let size = unsafe { (self.rsa_method_buf_size)(ptr.as_ptr()) };
        let buf_size = usize::try_from(size).ok().filter(|&s| s > 0)?;
        Some(RsaMethod {
            ptr,
            bits,
            buf_size,
        })
    }

    /// `mbx_rsa_public_mb8`: 8 RSA public operations with e = 65537 (`method` from
    /// [`rsa_pub65537_method`](Self::rsa_pub65537_method)). `inputs` and `outputs`: big-endian,
    /// exactly `bits / 8` bytes each; `n`: the moduli as little-endian 64-bit limbs, exactly
    /// `bits / 64` each; `scratch` at least `method.buf_size()` bytes. Every lane must be filled.
    pub(super) fn rsa_public_mb8(
        &self,
        method: &RsaMethod,
        inputs: &[&[u8]; 8],
        outputs: &mut [&mut [u8]; 8],
        n: &[&[u64]; 8],
        scratch: &mut [u8],
    ) -> Result<MbxStatus, &'static str> {
        let public = self
            .rsa_public_mb8
            .ok_or("this crypto_mb has no mbx_rsa_public_mb8")?;
        let bits = method.bits;
        let bytes = bits as usize / 8;
        if inputs.iter().any(|x| x.len() != bytes) || outputs.iter().any(|x| x.len() != bytes) {
            return Err("input or output length is not the modulus length");
        }
        if n.iter().any(|x| x.len() != bits as usize / 64) {
            return Err("modulus has the wrong number of limbs");
        }
        if scratch.len() < method.buf_size {
            return Err("scratch buffer too small");
        }
        let from: [*const u8; 8] = std::array::from_fn(|i| inputs[i].as_ptr());
        let to: [*mut u8; 8] = std::array::from_fn(|i| outputs[i].as_mut_ptr());
        let moduli: [*const u64; 8] = std::array::from_fn(|i| n[i].as_ptr());
        // SAFETY: every pointer is valid for what crypto_mb reads or writes for `bits` (checked
        // above: bits/8 bytes in and out, bits/64 limbs of modulus, buf_size bytes of scratch);
        // output buffers are distinct `&mut` slices; the method came from this library for the
        // same `bits`.
        let status = unsafe {
            public(
                from.as_ptr(),
                to.as_ptr(),
                moduli.as_ptr(),
                bits as c_int,
                method.ptr.as_ptr(),
                scratch.as_mut_ptr(),
            )
        };
        Ok(status)
    }

    /// Whether the library has `mbx_nistp256_ecdsa_verify_mb8`.
    pub(super) fn has_ecdsa_verify(&self) -> bool {
        self.ecdsa_verify_mb8.is_some()
    }

    /// `mbx_nistp256_ecdsa_verify_mb8`: 8 P-256 signatures (`r`, `s` big-endian) over `msg`
    /// (big-endian, reduced mod n) with affine public points (`x`, `y` little-endian limbs).
    /// Every lane filled; lane status 0 means the signature verified.
    pub(super) fn nistp256_ecdsa_verify_mb8(
        &self,
        r: &[[u8; 32]; 8],
        s: &[[u8; 32]; 8],
        msg: &[[u8; 32]; 8],
        x: &[[u64; 4]; 8],
        y: &[[u64; 4]; 8],
    ) -> Result<MbxStatus, &'static str> {
        let f = self
            .ecdsa_verify_mb8
            .ok_or("this crypto_mb has no mbx_nistp256_ecdsa_verify_mb8")?;
        let bytes =
            |a: &[[u8; 32]; 8]| -> [*const u8; 8] { std::array::from_fn(|i| a[i].as_ptr()) };
        let limbs =
            |a: &[[u64; 4]; 8]| -> [*const u64; 8] { std::array::from_fn(|i| a[i].as_ptr()) };
        let (r, s, msg, x, y) = (bytes(r), bytes(s), bytes(msg), limbs(x), limbs(y));
        // SAFETY: every pointer is to a 32-byte array or 4 limbs, the sizes ec_nistp256.h's
        // verification reads per lane, alive for the call; a NULL `pa_pubz` means affine points
        // and a NULL buffer lets the library use its own (as its self-test calls it).
        let status = unsafe {
            f(
                r.as_ptr(),
                s.as_ptr(),
                msg.as_ptr(),
                x.as_ptr(),
                y.as_ptr(),
                ptr::null(),
                ptr::null_mut(),
            )
        };
        Ok(status)
    }

    /// Whether the library has both X25519 entry points.
    pub(super) fn has_x25519(&self) -> bool {
        self.x25519_mb8.is_some() && self.x25519_public_key_mb8.is_some()
    }

    /// 8 X25519 scalar multiplications: `mbx_x25519_mb8` with the peers' `points`, or
    /// `mbx_x25519_public_key_mb8` (the base point) when `points` is `None`. Every lane filled.
    pub(super) fn x25519_mb8(
        &self,
        out: &mut [[u8; 32]; 8],
        scalars: &[[u8; 32]; 8],
        points: Option<&[[u8; 32]; 8]>,
    ) -> Result<MbxStatus, &'static str> {
        let to: [*mut u8; 8] = {
            let mut it = out.iter_mut();
            std::array::from_fn(|_| it.next().map_or(ptr::null_mut(), |o| o.as_mut_ptr()))
        };
        let k: [*const u8; 8] = std::array::from_fn(|i| scalars[i].as_ptr());
        let status = match points {
            Some(points) => {
                let f = self
                    .x25519_mb8
                    .ok_or("this crypto_mb has no mbx_x25519_mb8")?;
                let u: [*const u8; 8] = std::array::from_fn(|i| points[i].as_ptr());
                // SAFETY: every pointer is to a distinct 32-byte array (what x25519.h's
                // functions read or write per lane), alive for the call.
                unsafe { f(to.as_ptr(), k.as_ptr(), u.as_ptr()) }
            }
            None => {
                let f = self
                    .x25519_public_key_mb8
                    .ok_or("this crypto_mb has no mbx_x25519_public_key_mb8")?;
                // SAFETY: as above: distinct 32-byte arrays, alive for the call.
                unsafe { f(to.as_ptr(), k.as_ptr()) }
            }
        };
        Ok(status)
    }

    /// `mbx_rsa_private_crt_mb8`: 8 RSA private operations with the CRT key parts.
    ///
    /// `inputs` and `outputs`: big-endian, exactly `bits / 8` bytes each. Key parts: little-endian
    /// 64-bit limbs, exactly `bits / 128` limbs each (p, q, dp, dq, q^-1 mod p). `scratch` must
    /// hold `method.buf_size()` bytes. Every lane must be filled (repeat a lane for unused ones,
    /// with its own output buffer). Returns the per-lane status word.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rsa_private_crt_mb8(
        &self,
        method: &RsaMethod,
        inputs: &[&[u8]; 8],
        outputs: &mut [&mut [u8]; 8],
        p: &[&[u64]; 8],
        q: &[&[u64]; 8],
        dp: &[&[u64]; 8],
        dq: &[&[u64]; 8],
        qinv: &[&[u64]; 8],
        scratch: &mut [u8],
    ) -> Result<MbxStatus, &'static str> {
        let bits = method.bits;
        let bytes = bits as usize / 8;
        let limbs = bits as usize / 128;
        if inputs.iter().any(|x| x.len() != bytes) || outputs.iter().any(|x| x.len() != bytes) {
            return Err("input or output length is not the modulus length");
        }
        if [p, q, dp, dq, qinv]
            .iter()
            .any(|part| part.iter().any(|x| x.len() != limbs))
        {
            return Err("CRT part has the wrong number of limbs");
        }
        if scratch.len() < method.buf_size {
            return Err("scratch buffer too small");
        }
        let from: [*const u8; 8] = std::array::from_fn(|i| inputs[i].as_ptr());
        let to: [*mut u8; 8] = std::array::from_fn(|i| outputs[i].as_mut_ptr());
        let ptrs =
            |part: &[&[u64]; 8]| -> [*const u64; 8] { std::array::from_fn(|i| part[i].as_ptr()) };
        let (p, q, dp, dq, qinv) = (ptrs(p), ptrs(q), ptrs(dp), ptrs(dq), ptrs(qinv));
        // SAFETY: every pointer is valid for the length crypto_mb reads or writes for `bits`
        // (checked above: bits/8 bytes in and out, bits/128 limbs per CRT part, buf_size bytes
        // of scratch); output buffers are distinct `&mut` slices, so nothing aliases a write;
        // the method pointer came from this library for the same `bits`.
        let status = unsafe {
            (self.rsa_private_crt_mb8)(
                from.as_ptr(),
                to.as_ptr(),
                p.as_ptr(),
                q.as_ptr(),
                dp.as_ptr(),
                dq.as_ptr(),
                qinv.as_ptr(),
                bits as c_int,
                method.ptr.as_ptr(),
                scratch.as_mut_ptr(),
            )
        };
        Ok(status)
    }

    /// `mbx_nistp256_ecdsa_sign_mb8`: 8 ECDSA P-256 signatures.
    ///
    /// `msg`: the (reduced, `< n`) digest, big-endian. `k` (ephemeral) and `d` (private) keys:
    /// little-endian 64-bit limbs. `r`, `s`: big-endian outputs. Returns the per-lane status.
    pub(super) fn nistp256_ecdsa_sign_mb8(
        &self,
        r: &mut [[u8; 32]; 8],
        s: &mut [[u8; 32]; 8],
        msg: &[[u8; 32]; 8],
        k: &[[u64; 4]; 8],
        d: &[[u64; 4]; 8],
    ) -> MbxStatus {
        let r_p: [*mut u8; 8] = std::array::from_fn(|i| r[i].as_mut_ptr());
        let s_p: [*mut u8; 8] = std::array::from_fn(|i| s[i].as_mut_ptr());
        let m_p: [*const u8; 8] = std::array::from_fn(|i| msg[i].as_ptr());
        let k_p: [*const u64; 8] = std::array::from_fn(|i| k[i].as_ptr());
        let d_p: [*const u64; 8] = std::array::from_fn(|i| d[i].as_ptr());
        // SAFETY: fixed-size arrays of exactly the sizes crypto_mb reads and writes for P-256
        // (32 bytes, 4 limbs); `r` and `s` are distinct `&mut` arrays; pBuffer is unused by the
        // P-256 code (NULL is accepted).
        unsafe {
            (self.ecdsa_sign_mb8)(
                r_p.as_ptr(),
                s_p.as_ptr(),
                m_p.as_ptr(),
                k_p.as_ptr(),
                d_p.as_ptr(),
                ptr::null_mut(),
            )
        }
    }
}
