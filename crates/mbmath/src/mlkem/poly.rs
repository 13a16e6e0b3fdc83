//! ML-KEM's polynomials `Z_q[X]/(X^256 + 1)`, `q = 3329` (FIPS 203, section 4.2.1), one at a
//! time, coefficients as `u16` in `[0, q)`: the centred binomial distribution, compression and
//! byte encoding (the NTT and products are in `mlkem::ntt`).
//!
//! Constant time: the conditional subtraction is masked, compression divides by `q` with a multiply and shift (no `div` instruction,
//! cf. "KyberSlash"), sampling from bits is shifts and masks; loops and indices depend on
//! public constants only. The one value-dependent test, [`decode12_checked_vartime`], sees the
//! public encapsulation key only.

/// The modulus.
pub(crate) const Q: u32 = 3329;
/// Coefficients per polynomial.
pub(crate) const N: usize = 256;
/// A polynomial (or its NTT), coefficients in `[0, q)`.
pub(crate) type Poly = [u16; N];

/// `r - q` if `r >= q`, else `r`, for `r < 2q`, without a branch.
#[inline(always)]
pub(crate) fn csub(r: u32) -> u32 {
    let s = r.wrapping_sub(Q);
    // s's top bit is set iff r < q: add q back under that mask.
    s.wrapping_add(Q & 0u32.wrapping_sub(s >> 31))
}

/// SamplePolyCBD_2 (FIPS 203, Algorithm 8, eta = 2) of 128 bytes.
pub(crate) fn cbd2(bytes: &[u8; 128]) -> Poly {
    let mut f = [0u16; N];
    for (w, coeffs) in bytes.chunks_exact(4).zip(f.chunks_exact_mut(8)) {
        let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        // Bit pair p of t holds b[2p] + b[2p+1].
        let t = (w & 0x5555_5555) + ((w >> 1) & 0x5555_5555);
        for (c, out) in coeffs.iter_mut().enumerate() {
            let x = (t >> (4 * c)) & 3;
            let y = (t >> (4 * c + 2)) & 3;
            *out = csub(x + Q - y) as u16;
        }
    }
    f
}

/// `floor(t / q)` for `t < 2^23`, by multiply and shift (`ceil(2^34 / q)`, exact there).
#[inline(always)]
fn div_q(t: u32) -> u32 {
    ((u64::from(t) * 5_160_670) >> 34) as u32
}

/// Compress_d (FIPS 203, 4.7): `round(2^d x / q) mod 2^d`, `d <= 11`.
#[inline(always)]
pub(crate) fn compress(x: u16, d: u32) -> u16 {
    // round(a / q) = floor((a + 1664) / q) for integers a (q odd: no ties).
    (div_q((u32::from(x) << d) + 1664) & ((1 << d) - 1)) as u16
}

/// ByteEncode_d of `compress(f, d)` appended to `out` (FIPS 203, Algorithm 5), `d <= 11`.
pub(crate) fn compress_encode(f: &Poly, d: u32, out: &mut Vec<u8>) {
    let (mut acc, mut bits) = (0u64, 0u32);
    for &c in f {
        acc |= u64::from(compress(c, d)) << bits;
        bits += d;
        while bits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            bits -= 8;
        }
    }
}

/// Decompress_1 of ByteDecode_1(m): `ceil(q/2) = 1665` where `m`'s bit is set.
pub(crate) fn message_poly(m: &[u8; 32]) -> Poly {
    core::array::from_fn(|i| {
        let bit = u16::from((m[i / 8] >> (i % 8)) & 1);
        0u16.wrapping_sub(bit) & 1665
    })
}

/// ByteDecode_12 of 384 bytes, or `None` if a coefficient is not below `q` (the modulus check
/// of FIPS 203, 7.2: ByteEncode_12(ByteDecode_12(ek)) = ek). Variable time: public keys only.
pub(crate) fn decode12_checked_vartime(b: &[u8]) -> Option<Poly> {
    debug_assert_eq!(b.len(), 384);
    let mut f = [0u16; N];
    for (t, pair) in b.chunks_exact(3).zip(f.chunks_exact_mut(2)) {
        let (b0, b1, b2) = (u16::from(t[0]), u16::from(t[1]), u16::from(t[2]));
        pair[0] = b0 | (b1 & 0x0f) << 8;
        pair[1] = b1 >> 4 | b2 << 4;
    }
    f.iter().all(|&c| u32::from(c) < Q).then_some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn div_q_is_exact() {
        for t in 0..(1u32 << 23) {
            assert_eq!(div_q(t), t / Q, "{t}");
        }
    }

    #[test]
    fn compress_rounds_to_nearest() {
        for d in [1, 4, 10, 11] {
            for x in 0..Q as u16 {
                // round(2^d x / q) with exact rational arithmetic.
                let num = (u64::from(x) << d) * 2 + u64::from(Q);
                let want = (num / (2 * u64::from(Q))) % (1 << d);
                assert_eq!(u64::from(compress(x, d)), want, "d {d} x {x}");
            }
        }
    }
}
