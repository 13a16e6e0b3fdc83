//! Multi-buffer Montgomery arithmetic for batched RSA CRT private-key
//! operations.
//!
//! A queue of RSA private operations (e.g. 8 RSA-2048 signatures) becomes
//! 16 independent modular exponentiations (`c^dp mod p`, `c^dq mod q` per
//! key; every lane may use a different key). They are computed side by side
//! with one number per SIMD lane ("vertical" layout): lane `l` of limb
//! register `k` holds limb `k` of the `l`-th number.
//!
//! # Backends
//!
//! | [`BackendKind`] | lanes | limbs (1024-bit) | needs |
//! |---|---|---|---|
//! | `portable` | 1 (lanes in a loop) | 16 x 64 bit, `u128` products | nothing |
//! | `avx2` | 8 (two groups of 4 per `ymm`) | 37 x 28 bit, `vpmuludq`, lazy carries | AVX2 |
//! | `fma` | 4 per `ymm` | 21 x 50 bit in `f64`, exact products with two FMAs | AVX2 + FMA, MXCSR round-to-nearest |
//! | `ifma` | 8 per `zmm` | 20 x 52 bit, `vpmadd52{l,h}uq` (1024-bit: generated straight-line Karatsuba kernels) | AVX-512F + IFMA |
//!
//! A backend is chosen at run time. SIMD backends are represented by
//! zero-sized witness tokens ([`Avx2Token`], [`FmaToken`], [`IfmaToken`]) that
//! can only be obtained after `is_x86_feature_detected!` confirmed the CPU
//! features (and, for `fma`, that the MXCSR rounding mode is
//! round-to-nearest, which its exact products rely on), so
//! no code path can call a `#[target_feature]` function without that proof
//! (the style of `ring`'s CPU feature tokens). [`Backend`] carries the token;
//! [`Backend::new`] / [`Backend::best`] obtain one.
//!
//! Prime sizes 1024, 1536 and 2048 bits (RSA-2048/3072/4096 with balanced
//! primes) are supported on every backend.
//!
//! Beside RSA, the key exchange of batched TLS handshakes: X25519 (`x25519`,
//! see there), and for `X25519MLKEM768` (issue 31, not yet wired into the
//! providers):
//!
//! * Keccak-f\[1600\] over up to 8 states (`keccak`: one permutation written
//!   once over a word type; `ifma`'s token runs it on 8 states per `zmm`
//!   (AVX-512F), `avx2`/`fma` on 4 per `ymm`, `portable` one `u64` state at a
//!   time) and on it SHA3-256/512 and SHAKE128/256 over many inputs
//!   ([`sha3_256_batch`], ..., `sha3::Sponge`);
//! * ML-KEM-768 encapsulation ([`mlkem768_encaps_batch`], FIPS 203 with the
//!   encapsulation key checks): the lanes' hashes, matrix sampling and noise
//!   share the batched Keccak; the NTT and products run vertically, 8
//!   encapsulations per `ymm` (`mlkem::avx2`, every SIMD backend; up to 4
//!   encapsulations "spread", each one's polynomials side by side, 2 per
//!   `ymm`) or one at a time in `u32` (`portable`), one generic code
//!   (`mlkem::ntt`).
//!
//! and P-256 (issue 31 point 2, not yet wired into the providers either): the `secp256r1`
//! key share ([`p256_public_key_batch`], [`p256_ecdh_batch`] with the peer point validated)
//! and ECDSA ([`ecdsa_p256_sign_batch`] with hedged RFC 6979 nonces,
//! [`ecdsa_p256_verify_batch_vartime`]): portable code (4 x 64-bit Montgomery arithmetic,
//! complete Renes-Costello-Batina formulas, fixed-window and fixed-base comb
//! multiplications), and on `ifma` the variable-base multiplications 8 jobs per `zmm`
//! (`ifma::p256`, 5 x 52-bit limbs, the same formulas); `avx2`/`fma` run the portable code
//! (a 4-lane AVX2 form is later work).
//!
//! # Why `unsafe`
//!
//! The SIMD backends call `core::arch::x86_64` intrinsics inside functions
//! compiled with `#[target_feature(enable = ...)]`. Calling such a function
//! is `unsafe` (the CPU must support the features); each call site is an
//! `unsafe` block justified by a witness token. The intrinsics themselves are
//! safe inside those functions except loads/stores through raw pointers,
//! which are only used on properly sized, in-bounds arrays. The `fma`
//! backend additionally reads MXCSR (`_mm_getcsr`, SSE, always present on
//! x86_64) and reinterprets `f64` vectors as integers (plain data); the `ifma`
//! backend views its window table `&[[__m512i; N]]` as `&[[__m512i; 20]]`
//! when `N = 20` (the same type) to hand it to the 1024-bit kernels; `mlkem::avx2`
//! converts `[u32; 8]` to `__m256i` and views a polynomial of `ymm` lanes as
//! `u32`s (plain data, in bounds); `ifma::p256` calls its `#[target_feature]` field
//! operations from the `CurveField`-generic point formulas, each call justified by the
//! `IfmaToken` every 8-lane element carries. The crate uses
//! `#![deny(unsafe_op_in_unsafe_fn)]` and every `unsafe` block carries a
//! `// SAFETY:` comment. No other `unsafe` exists.
//!
//! # Constant time
//!
//! Everything that touches secret data (private exponents, primes, CRT
//! coefficient, the message and all intermediates) is written without
//! branches or memory indices depending on it:
//!
//! * fixed-window (5-bit) exponentiation over all `64 L` exponent bits; the
//!   table entry is fetched by scanning the whole table and combining with
//!   per-lane masks (`vpcmpeqq` / mask registers / arithmetic masks). The
//!   `ifma` backend on 1024-bit primes splits that scan into 5 parts of 7
//!   table slots, one stitched into each of the window's 5 squarings (the
//!   slots' addresses depend on the public part number only; the 3 slots
//!   past the 32 entries repeat the last address under a mask that never
//!   matches): still every entry, every window, every lane;
//! * the `ifma` backend's 1024-bit kernels (`ifma/kernel20.rs`, generated by
//!   `tools/gen_ifma_kernel20.py`) are straight-line code: one Karatsuba step
//!   whose `|a0 - a1|` is a borrow chain plus a masked complement and whose
//!   middle product's sign is applied by mask (`(x ^ s) - s`), signed column
//!   sums carried with arithmetic shifts; no branch, no data-dependent address;
//! * the `fma` backend's floating-point operations (FMA, add, subtract on
//!   normal numbers or zero, round-to-nearest) have data-independent timing
//!   on the targeted CPUs; no value ever becomes subnormal, and the exact
//!   product splitting has no branch (biases are removed by constants);
//! * SIMD Montgomery products are "almost Montgomery" (`< 2p`, no per-step
//!   subtraction, since `4p < R`), the final reduction is a masked subtraction;
//! * reduction of the input mod `p`/`q`, CRT recombination
//!   `h = qinv (m1 - m2) mod p`, `m = m2 + h q` use masked add/subtract only.
//!
//! * Keccak, SHA3/SHAKE: bitwise operations and fixed rotations only;
//!   branches on lengths (public) only. ML-KEM: Montgomery products and
//!   additions mod `q` end in a masked (or `vpminud`) conditional subtraction,
//!   compression divides by `q` by multiply and shift, the CBD noise is
//!   shifts and masks; secret buffers are zeroed.
//! * P-256: field and scalar arithmetic end every operation in a masked selection, point
//!   addition is complete (no exceptional case to branch on), scalar multiplications fetch
//!   table entries by scanning every entry under masks, inversions are Fermat's with public
//!   exponents; ECDSA's nonce DRBG is HMAC-SHA-256. Branches only on validity (a key, a
//!   peer point, a nonce candidate: see `p256::ecdsa`).
//!
//! Vartime functions (public-key operations, input validation against the
//! public modulus, ML-KEM's encapsulation key check and its rejection
//! sampling of the public matrix) carry a `_vartime` suffix or say so in
//! their docs.
//!
//! How this is checked:
//!
//! * `tests/ctgrind.rs` runs the `mbmath-ctgrind` binary under valgrind
//!   memcheck (`--error-exitcode=42`). The binary marks the key's secret
//!   fields and the message as undefined (valgrind client request
//!   `MAKE_MEM_UNDEFINED`, emitted with inline asm) and runs the full CRT
//!   signing path on the portable, AVX2 and FMA backends; mode `mlkem` runs
//!   ML-KEM-768 encapsulation with the randomness `m` marked the same way; mode `p256` runs
//!   P-256 ECDH and ECDSA signing for a given nonce with the private key and nonce marked
//!   (the `_unchecked` entries, which leave out the validity branches). Any branch or address
//!   that depends on secret data is reported by memcheck and fails the test.
//!   A deliberately leaky square-and-multiply and a secret-indexed table
//!   lookup are run by the same harness and must be flagged (exit 42). The
//!   test fails if valgrind is missing.
//! * valgrind cannot execute AVX-512, so the IFMA backend is covered by a
//!   dudect-style timing test instead (`tests/dudect.rs`, `--ignored`,
//!   Welch's t printed, not asserted; RSA, X25519, ML-KEM and P-256 on `ifma`).
//!   CI runs the valgrind tests, not the dudect ones.
//!
//! Correctness against answers from outside (Wycheproof PKCS#1 v1.5 signing
//! and decryption, NIST SigGen15) on every backend and batch shape:
//! `quickshake-keyprovider`'s `tests/known_answers.rs`, through the engines
//! the provider runs. Here: `tests/keccak.rs` (Python's hashlib answers,
//! `testdata/keccak/`), `tests/mlkem.rs` (kyber-py 1.2.0 answers,
//! `testdata/mlkem/`) and `tests/mlkem_boring.rs` (BoringSSL decapsulates;
//! `boring` is a dev-dependency only); `tests/p256_wycheproof.rs` (Wycheproof ECDH, X.509
//! and SEC1 public keys, and ECDSA verification, `testdata/wycheproof/`) and
//! `tests/p256_boring.rs` (RFC 6979 A.2.5; BoringSSL verifies our signatures and agrees on
//! ECDH both ways, every batch shape 1..=17 with mixed keys).
//!
//! # Layout
//!
//! Module dependencies point one way (`scripts/check-module-cycles`); this
//! file only declares and re-exports:
//!
//! * `token` (the witness tokens, constructible only there), `kind`
//!   ([`BackendKind`], limb counts), `error` and `backend` ([`Backend`]): what
//!   a backend is and how one is obtained;
//! * `bigint` (radix-2^64 helpers) and `engine` (the lane-engine trait and the
//!   fixed-window exponentiation on top of it);
//! * `portable`, `avx2`, `fma`, `ifma`: the engines (a SIMD one holds its token;
//!   `ifma::ops` has its lane operations, `ifma::kernel20` the generated
//!   1024-bit kernels built on them);
//!   `m256` has the `__m256i` conversions that `avx2` and `fma` share;
//! * `dispatch` (`with_engine!`: backend and prime size to engine), used by
//!   `rsa` (keys, the batched CRT operation) and `mont` (the Montgomery-chain
//!   entry points);
//! * `field25519`, `x25519`, `x25519_base` (and `ifma::x25519*`): X25519;
//! * `keccak` (the permutation: `round`, `avx2`, `avx512`), `sha3` (sponges),
//!   `mlkem` (`poly`: sampling from bits, compression, encoding; `ntt`: the
//!   generic encryption arithmetic; `avx2`: its 8-lane form; `sample`: the
//!   batched SampleNTT and CBD);
//! * `sha256` (SHA-256, HMAC for the ECDSA nonces), `p256` (the batched API; `field`:
//!   arithmetic modulo `p` and `n`, `point`: the group law and multiplications, `ecdsa`),
//!   `ifma::p256` (its 8-lane multiplication).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod backend;
mod bigint;
mod dispatch;
mod engine;
mod error;
mod field25519;
mod keccak;
mod kind;
mod mlkem;
mod mont;
mod p256;
mod portable;
mod rsa;
mod sha256;
mod sha3;
mod token;
mod x25519;
mod x25519_base;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod fma;
#[cfg(target_arch = "x86_64")]
mod ifma;
#[cfg(target_arch = "x86_64")]
mod m256;

pub use backend::{available_backends, Backend};
pub use error::MathError;
pub use kind::BackendKind;
pub use mlkem::{
    mlkem768_encaps_batch, MlKemEncapsJob, MlKemEncapsulation, MLKEM768_CIPHERTEXT_BYTES,
    MLKEM768_ENCAPS_KEY_BYTES, MLKEM_SHARED_SECRET_BYTES,
};
pub use mont::{mont_mul_1024_lanes, mont_sqr_1024_lanes};
pub use p256::{
    ecdsa_p256_sign_batch, ecdsa_p256_verify_batch_vartime, p256_ecdh_batch, p256_public_key_batch,
    EcdsaP256SignJob, EcdsaP256Signature, EcdsaP256VerifyJob, P256EcdhJob, P256_LANES,
    P256_POINT_BYTES,
};
pub use rsa::{rsa_private_crt_batch, rsa_public_batch, rsa_public_batch_vartime, RsaCrtKey};
pub use sha3::{sha3_256_batch, sha3_512_batch, shake128_batch, shake256_batch, KECCAK_LANES};
pub use token::{Avx2Token, FmaToken, IfmaToken};
pub use x25519::{x25519_batch, x25519_portable, X25519Job, X25519_BASE_POINT, X25519_LANES};

#[doc(hidden)]
pub use p256::{
    ecdsa_p256_sign_rfc6979, ecdsa_p256_sign_with_nonce_unchecked, p256_ecdh_unchecked,
};
#[doc(hidden)]
pub use rsa::rsa_private_crt_batch_unchecked;
