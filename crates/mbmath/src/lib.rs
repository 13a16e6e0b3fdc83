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
//! | `ifma` | 8 per `zmm` | 20 x 52 bit, `vpmadd52{l,h}uq` | AVX-512F + IFMA |
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
//! # Why `unsafe`
//!
//! The SIMD backends call `core::arch::x86_64` intrinsics inside functions
//! compiled with `#[target_feature(enable = ...)]`. Calling such a function
//! is `unsafe` (the CPU must support the features); each call site is an
//! `unsafe` block justified by a witness token. The intrinsics themselves are
//! safe inside those functions except loads/stores through raw pointers,
//! which are only used on properly sized, in-bounds arrays. The `fma`
//! backend additionally reads MXCSR (`_mm_getcsr`, SSE, always present on
//! x86_64) and reinterprets `f64` vectors as integers (plain data). The crate uses
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
//!   per-lane masks (`vpcmpeqq` / mask registers / arithmetic masks);
//! * the `fma` backend's floating-point operations (FMA, add, subtract on
//!   normal numbers or zero, round-to-nearest) have data-independent timing
//!   on the targeted CPUs; no value ever becomes subnormal, and the exact
//!   product splitting has no branch (biases are removed by constants);
//! * SIMD Montgomery products are "almost Montgomery" (`< 2p`, no per-step
//!   subtraction, since `4p < R`), the final reduction is a masked subtraction;
//! * reduction of the input mod `p`/`q`, CRT recombination
//!   `h = qinv (m1 - m2) mod p`, `m = m2 + h q` use masked add/subtract only.
//!
//! Vartime functions (public-key operations, input validation against the
//! public modulus) carry a `_vartime` suffix or say so in their docs.
//!
//! How this is checked:
//!
//! * `tests/ctgrind.rs` runs the `mbmath-ctgrind` binary under valgrind
//!   memcheck (`--error-exitcode=42`). The binary marks the key's secret
//!   fields and the message as undefined (valgrind client request
//!   `MAKE_MEM_UNDEFINED`, emitted with inline asm) and runs the full CRT
//!   signing path on the portable, AVX2 and FMA backends. Any branch or address
//!   that depends on secret data is reported by memcheck and fails the test.
//!   A deliberately leaky square-and-multiply and a secret-indexed table
//!   lookup are run by the same harness and must be flagged (exit 42). The
//!   test fails if valgrind is missing.
//! * valgrind cannot execute AVX-512, so the IFMA backend is covered by a
//!   dudect-style timing test instead (`tests/dudect.rs`, `--ignored`,
//!   Welch's t printed, not asserted).
//!
//! Correctness against answers from outside (Wycheproof PKCS#1 v1.5 signing
//! and decryption, NIST SigGen15) on every backend and batch shape:
//! `quickshake-keyprovider`'s `tests/known_answers.rs`, through the engines
//! the provider runs.
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
//! * `portable`, `avx2`, `fma`, `ifma`: the engines (a SIMD one holds its token);
//!   `m256` has the `__m256i` conversions that `avx2` and `fma` share;
//! * `dispatch` (`with_engine!`: backend and prime size to engine), used by
//!   `rsa` (keys, the batched CRT operation) and `mont` (the Montgomery-chain
//!   entry points).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod backend;
mod bigint;
mod dispatch;
mod engine;
mod error;
mod kind;
mod mont;
mod portable;
mod rsa;
mod token;

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
pub use mont::{mont_mul_1024_lanes, mont_sqr_1024_lanes};
pub use rsa::{rsa_private_crt_batch, rsa_public_batch_vartime, RsaCrtKey};
pub use token::{Avx2Token, FmaToken, IfmaToken};

#[doc(hidden)]
pub use rsa::rsa_private_crt_batch_unchecked;
