//! Radix-2^64 helpers shared by every backend: byte conversion, constant-time
//! add/sub/select, and the scalar Montgomery multiplication used by the
//! portable backend and by the CRT pre/post-processing.
//!
//! Numbers are little-endian slices of `u64` limbs. Every function here whose
//! inputs may be secret is constant time: loops run over public lengths only,
//! and conditional results are chosen with masks (passed through
//! [`core::hint::black_box`] so the optimiser does not turn them back into
//! branches or `cmov`s on secret data).

use core::hint::black_box;

/// Largest number of 64-bit limbs any supported modulus has (4096-bit `n`).
pub(crate) const MAX_LIMBS: usize = 64;

/// All-ones if `bit == 1`, zero if `bit == 0` (`bit` must be 0 or 1).
#[inline(always)]
pub(crate) fn mask_from_bit(bit: u64) -> u64 {
    0u64.wrapping_sub(black_box(bit))
}

/// `out = a - b`, returning the borrow (0 or 1). All slices have equal length.
#[inline(always)]
pub(crate) fn sub_into(a: &[u64], b: &[u64], out: &mut [u64]) -> u64 {
    debug_assert!(a.len() == b.len() && a.len() == out.len());
    let mut borrow = 0u64;
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        let (d1, b1) = x.overflowing_sub(y);
        let (d2, b2) = d1.overflowing_sub(borrow);
        *o = d2;
        borrow = (b1 | b2) as u64;
    }
    borrow
}

/// `out = a + b`, returning the carry (0 or 1). All slices have equal length.
#[inline(always)]
pub(crate) fn add_into(a: &[u64], b: &[u64], out: &mut [u64]) -> u64 {
    debug_assert!(a.len() == b.len() && a.len() == out.len());
    let mut carry = 0u64;
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        let (s1, c1) = x.overflowing_add(y);
        let (s2, c2) = s1.overflowing_add(carry);
        *o = s2;
        carry = (c1 | c2) as u64;
    }
    carry
}

/// `dst = mask ? src : dst` limb-wise, for `mask` all-ones or zero.
#[inline(always)]
pub(crate) fn ct_assign(mask: u64, src: &[u64], dst: &mut [u64]) {
    debug_assert_eq!(src.len(), dst.len());
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = (s & mask) | (*d & !mask);
    }
}

/// In-place `x = x mod n` for `x = x_lo + x_top * 2^(64 len) < 2n`
/// (one constant-time conditional subtraction).
#[inline]
pub(crate) fn reduce_once(x: &mut [u64], x_top: u64, n: &[u64]) {
    let mut tmp = [0u64; MAX_LIMBS];
    let tmp = &mut tmp[..n.len()];
    let borrow = sub_into(x, n, tmp);
    // Keep the difference if it did not underflow, i.e. unless (x_top == 0 && borrow == 1).
    let keep_diff = x_top | (borrow ^ 1);
    ct_assign(mask_from_bit(keep_diff & 1), tmp, x);
}

/// `out = (a + b) mod n` for `a, b < n`.
pub(crate) fn mod_add(a: &[u64], b: &[u64], n: &[u64], out: &mut [u64]) {
    let carry = add_into(a, b, out);
    reduce_once(out, carry, n);
}

/// `out = (a - b) mod n` for `a, b < n`.
pub(crate) fn mod_sub(a: &[u64], b: &[u64], n: &[u64], out: &mut [u64]) {
    let borrow = sub_into(a, b, out);
    let mut tmp = [0u64; MAX_LIMBS];
    let tmp = &mut tmp[..n.len()];
    add_into(out, n, tmp);
    ct_assign(mask_from_bit(borrow), tmp, out);
}

/// `-n0^{-1} mod 2^64` for odd `n0` (Newton iteration, constant time).
pub(crate) fn neg_inv_u64(n0: u64) -> u64 {
    debug_assert!(n0 & 1 == 1);
    // x = n0 is correct to 3 bits for odd n0; each step doubles the precision.
    let mut x = n0;
    for _ in 0..5 {
        x = x.wrapping_mul(2u64.wrapping_sub(n0.wrapping_mul(x)));
    }
    x.wrapping_neg()
}

/// `t + a * b + c` as a 128-bit value (cannot overflow). Written with
/// wrapping operations so that debug builds' overflow checks add no
/// value-dependent branches (the valgrind harness would flag them).
#[inline(always)]
fn mac(t: u64, a: u64, b: u64, c: u64) -> u128 {
    (a as u128)
        .wrapping_mul(b as u128)
        .wrapping_add(t as u128)
        .wrapping_add(c as u128)
}

/// Schoolbook product `out = a * b`, `out.len() == a.len() + b.len()`.
pub(crate) fn mul_into(a: &[u64], b: &[u64], out: &mut [u64]) {
    debug_assert_eq!(out.len(), a.len() + b.len());
    out.fill(0);
    for (i, &ai) in a.iter().enumerate() {
        let mut carry = 0u64;
        for (j, &bj) in b.iter().enumerate() {
            let v = mac(out[i + j], ai, bj, carry);
            out[i + j] = v as u64;
            carry = (v >> 64) as u64;
        }
        out[i + b.len()] = carry;
    }
}

/// Montgomery multiplication `out = a * b * 2^(-64 L) mod n` (CIOS), fully
/// reduced. Requires `a, b < n`, `n` odd, `n0 = -n^{-1} mod 2^64`, and all
/// slices of the same length `L <= MAX_LIMBS`. Constant time.
#[inline(always)]
pub(crate) fn mont_mul_into(a: &[u64], b: &[u64], n: &[u64], n0: u64, out: &mut [u64]) {
    let l = n.len();
    assert!((1..=MAX_LIMBS).contains(&l) && a.len() == l && b.len() == l && out.len() == l);
    let mut t = [0u64; MAX_LIMBS + 2];
    for &ai in a {
        let mut c = 0u64;
        for j in 0..l {
            let v = mac(t[j], ai, b[j], c);
            t[j] = v as u64;
            c = (v >> 64) as u64;
        }
        let v = mac(t[l], 0, 0, c);
        t[l] = v as u64;
        t[l + 1] = (v >> 64) as u64;

        let m = t[0].wrapping_mul(n0);
        let v = mac(t[0], m, n[0], 0);
        let mut c = (v >> 64) as u64;
        for j in 1..l {
            let v = mac(t[j], m, n[j], c);
            t[j - 1] = v as u64;
            c = (v >> 64) as u64;
        }
        let v = mac(t[l], 0, 0, c);
        t[l - 1] = v as u64;
        t[l] = t[l + 1].wrapping_add((v >> 64) as u64);
    }
    out.copy_from_slice(&t[..l]);
    reduce_once(out, t[l], n);
}

/// Fixed-size wrapper around [`mont_mul_into`].
#[inline]
pub(crate) fn mont_mul<const L: usize>(
    a: &[u64; L],
    b: &[u64; L],
    n: &[u64; L],
    n0: u64,
) -> [u64; L] {
    let mut out = [0u64; L];
    mont_mul_into(a, b, n, n0, &mut out);
    out
}

/// `2^e mod n` for an `n` whose top limb has its top bit set (so that
/// `2^(64 L - 1) < n`), computed by constant-time modular doublings.
/// Used for `R^2 mod n` with `e = 2 * log2(R)`.
pub(crate) fn pow2_mod(e: usize, n: &[u64]) -> Vec<u64> {
    let l = n.len();
    let top = 64 * l - 1;
    assert!(e >= top, "pow2_mod: exponent below the modulus size");
    let mut x = vec![0u64; l];
    x[l - 1] = 1 << 63; // 2^top < n
    let mut sum = vec![0u64; l];
    for _ in top..e {
        let carry = add_into(&x, &x, &mut sum);
        reduce_once(&mut sum, carry, n);
        x.copy_from_slice(&sum);
    }
    x
}

/// Bits `[pos, pos + w)` of the little-endian number `x` (zero beyond its end),
/// `w < 64`. Indexing depends on `pos` and `w` only (public).
#[inline(always)]
pub(crate) fn bits_at(x: &[u64], pos: usize, w: u32) -> u64 {
    debug_assert!(w < 64);
    let limb = pos / 64;
    let off = (pos % 64) as u32;
    if limb >= x.len() {
        return 0;
    }
    let mut v = x[limb] >> off;
    if off != 0 && limb + 1 < x.len() {
        v |= x[limb + 1] << (64 - off);
    }
    v & ((1u64 << w) - 1)
}

/// Splits the radix-2^64 number `x` into `out.len()` limbs of `bits` bits.
pub(crate) fn to_radix(x: &[u64], bits: u32, out: &mut [u64]) {
    for (k, o) in out.iter_mut().enumerate() {
        *o = bits_at(x, k * bits as usize, bits);
    }
}

/// Reassembles normalised `bits`-bit limbs into radix 2^64 (`out` is
/// overwritten; limbs that do not fit are dropped, callers size `out` so that
/// none are).
pub(crate) fn from_radix(limbs: &[u64], bits: u32, out: &mut [u64]) {
    out.fill(0);
    for (k, &v) in limbs.iter().enumerate() {
        let pos = k * bits as usize;
        let idx = pos / 64;
        let off = (pos % 64) as u32;
        if idx < out.len() {
            out[idx] |= v << off;
        }
        if off + bits > 64 && idx + 1 < out.len() {
            out[idx + 1] |= v >> (64 - off);
        }
    }
}

/// Big-endian bytes to little-endian limbs, right-aligned. Returns `false`
/// (vartime: used on public lengths / at key load) if the value does not fit.
pub(crate) fn from_be_bytes(bytes: &[u8], out: &mut [u64]) -> bool {
    out.fill(0);
    let mut overflow = 0u8;
    for (i, &b) in bytes.iter().rev().enumerate() {
        let limb = i / 8;
        if limb < out.len() {
            out[limb] |= (b as u64) << (8 * (i % 8));
        } else {
            overflow |= b;
        }
    }
    overflow == 0
}

/// Little-endian limbs to big-endian bytes filling `out` (high limbs beyond
/// `out` are dropped).
pub(crate) fn to_be_bytes(x: &[u64], out: &mut [u8]) {
    let len = out.len();
    for (i, o) in out.iter_mut().rev().enumerate() {
        let limb = i / 8;
        *o = if limb < x.len() {
            (x[limb] >> (8 * (i % 8))) as u8
        } else {
            0
        };
    }
    debug_assert_eq!(out.len(), len);
}

/// Vartime bit length (public values only).
pub(crate) fn bit_len_vartime(x: &[u64]) -> usize {
    for i in (0..x.len()).rev() {
        if x[i] != 0 {
            return 64 * i + 64 - x[i].leading_zeros() as usize;
        }
    }
    0
}

/// Vartime `a < b` for equal-length numbers (public values only).
pub(crate) fn lt_vartime(a: &[u64], b: &[u64]) -> bool {
    for i in (0..a.len()).rev() {
        if a[i] != b[i] {
            return a[i] < b[i];
        }
    }
    false
}

/// Overwrites a secret buffer with zeros in a way the optimiser keeps.
pub(crate) fn wipe(x: &mut [u64]) {
    x.fill(0);
    black_box(&x);
}

/// Vartime modular exponentiation with a public exponent (left-to-right
/// binary), for public-key operations only. `n` odd, `base < n`.
pub(crate) fn mod_exp_public_vartime(base: &[u64], exp: &[u64], n: &[u64]) -> Vec<u64> {
    let l = n.len();
    let n0 = neg_inv_u64(n[0]);
    // R mod n, R^2 mod n with R = 2^(64 l); n's top bit need not be set, so
    // compute from 2^(bitlen-1) < n.
    let nbits = bit_len_vartime(n);
    let rr = {
        let mut x = vec![0u64; l];
        x[(nbits - 1) / 64] = 1 << ((nbits - 1) % 64);
        let mut sum = vec![0u64; l];
        for _ in (nbits - 1)..(2 * 64 * l) {
            let carry = add_into(&x, &x, &mut sum);
            reduce_once(&mut sum, carry, n);
            x.copy_from_slice(&sum);
        }
        x
    };
    let mut one = vec![0u64; l];
    one[0] = 1;
    let mut base_m = vec![0u64; l];
    mont_mul_into(base, &rr, n, n0, &mut base_m);
    let mut acc = vec![0u64; l];
    mont_mul_into(&one, &rr, n, n0, &mut acc);
    let mut tmp = vec![0u64; l];
    let ebits = bit_len_vartime(exp);
    for i in (0..ebits).rev() {
        mont_mul_into(&acc, &acc, n, n0, &mut tmp);
        core::mem::swap(&mut acc, &mut tmp);
        if (exp[i / 64] >> (i % 64)) & 1 == 1 {
            mont_mul_into(&acc, &base_m, n, n0, &mut tmp);
            core::mem::swap(&mut acc, &mut tmp);
        }
    }
    mont_mul_into(&acc, &one, n, n0, &mut tmp);
    tmp
}
