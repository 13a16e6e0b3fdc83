//! Chains of 1024-bit Montgomery products over lanes: the micro-benchmark and
//! test entry points for a single backend's arithmetic.

use crate::backend::Backend;
use crate::dispatch::with_engine;
use crate::engine::mont_chain;
use crate::error::MathError;

/// Micro-benchmark / test entry point: for every lane `i`, starting from
/// `x = a[i]`, performs `iterations` Montgomery multiplications
/// `x = x * b[i] * R^-1 mod n[i]` on `backend` (numbers kept in the backend's
/// representation throughout), and returns the fully reduced `x` per lane.
/// `R = 2^backend.kind().montgomery_r_bits(1024)`.
///
/// Numbers are little-endian 64-bit limbs. Each `n[i]` must be odd with its
/// top bit set; `a[i], b[i] < n[i]`. Any number of lanes (padded internally
/// to the backend's lane count).
pub fn mont_mul_1024_lanes(
    backend: Backend,
    a: &[[u64; 16]],
    b: &[[u64; 16]],
    n: &[[u64; 16]],
    iterations: usize,
) -> Result<Vec<[u64; 16]>, MathError> {
    mont_chain_1024(backend, a, Some(b), n, iterations)
}

/// Like [`mont_mul_1024_lanes`] with dedicated squaring: `x = x^2 R^-1 mod n`.
pub fn mont_sqr_1024_lanes(
    backend: Backend,
    a: &[[u64; 16]],
    n: &[[u64; 16]],
    iterations: usize,
) -> Result<Vec<[u64; 16]>, MathError> {
    mont_chain_1024(backend, a, None, n, iterations)
}

fn mont_chain_1024(
    backend: Backend,
    a: &[[u64; 16]],
    b: Option<&[[u64; 16]]>,
    n: &[[u64; 16]],
    iterations: usize,
) -> Result<Vec<[u64; 16]>, MathError> {
    if a.len() != n.len() || b.is_some_and(|b| b.len() != a.len()) {
        return Err(MathError::Unsupported("lane slices of different lengths"));
    }
    for m in n {
        if m[0] & 1 == 0 || m[15] >> 63 == 0 {
            return Err(MathError::Unsupported(
                "modulus must be odd with its top bit set",
            ));
        }
    }
    with_engine!(backend, 16usize, |e| mont_chain(&e, a, b, n, iterations))
}
