//! Arithmetic modulo the P-256 field prime `p` and the group order `n`: 4 x 64-bit limbs,
//! Montgomery form (`R = 2^256`), CIOS products with `u128`. One generic code for both
//! moduli ([`Elem<M>`]): the point arithmetic uses [`Fe`], ECDSA uses [`Scalar`].
//!
//! Constant time: every operation runs the same instructions whatever the values; the final
//! reduction of a sum, difference or product is a masked selection, comparisons return masks.
//! Inversion is Fermat's (`a^(m-2)`): the exponent is public, so its bits may steer the
//! square-and-multiply. Only the `_vartime` functions branch on values (public inputs).

use core::marker::PhantomData;

/// Parses 64 hex digits (big-endian) into little-endian limbs, at compile time.
pub(crate) const fn limbs_from_hex(s: &str) -> [u64; 4] {
    let b = s.as_bytes();
    assert!(b.len() == 64);
    let mut out = [0u64; 4];
    let mut i = 0;
    while i < 64 {
        let c = b[i];
        let v = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => panic!("hex"),
        } as u64;
        let limb = 3 - i / 16;
        out[limb] = (out[limb] << 4) | v;
        i += 1;
    }
    out
}

const fn adc(a: u64, b: u64, c: u64) -> (u64, u64) {
    let t = a as u128 + b as u128 + c as u128;
    (t as u64, (t >> 64) as u64)
}

/// `a - b - borrow`, returning the borrow (0 or 1).
const fn sbb(a: u64, b: u64, borrow: u64) -> (u64, u64) {
    let t = (a as u128).wrapping_sub(b as u128 + borrow as u128);
    (t as u64, (t >> 127) as u64)
}

const fn sub4(a: [u64; 4], b: [u64; 4]) -> ([u64; 4], u64) {
    let (r0, c) = sbb(a[0], b[0], 0);
    let (r1, c) = sbb(a[1], b[1], c);
    let (r2, c) = sbb(a[2], b[2], c);
    let (r3, c) = sbb(a[3], b[3], c);
    ([r0, r1, r2, r3], c)
}

const fn add4(a: [u64; 4], b: [u64; 4]) -> ([u64; 4], u64) {
    let (r0, c) = adc(a[0], b[0], 0);
    let (r1, c) = adc(a[1], b[1], c);
    let (r2, c) = adc(a[2], b[2], c);
    let (r3, c) = adc(a[3], b[3], c);
    ([r0, r1, r2, r3], c)
}

/// `(carry:a) mod m` for a value below `2m`: subtract `m` unless that borrows. Masked.
const fn reduce_once(a: [u64; 4], carry: u64, m: [u64; 4]) -> [u64; 4] {
    let (t, borrow) = sub4(a, m);
    // keep `a` iff the 257-bit value is below m: the subtraction borrowed and no carry.
    let keep_a = borrow & (carry ^ 1);
    let mask = 0u64.wrapping_sub(keep_a);
    [
        (a[0] & mask) | (t[0] & !mask),
        (a[1] & mask) | (t[1] & !mask),
        (a[2] & mask) | (t[2] & !mask),
        (a[3] & mask) | (t[3] & !mask),
    ]
}

/// A modulus: `M` (odd, `2^255 < M < 2^256`) and its Montgomery constants.
pub(crate) trait Modulus: Copy {
    /// The modulus, little-endian limbs.
    const M: [u64; 4];
    /// `-M^-1 mod 2^64`.
    const M0INV: u64 = {
        // Newton: x <- x (2 - m x) doubles the correct low bits each step.
        let m = Self::M[0];
        let mut x = 1u64;
        let mut i = 0;
        while i < 7 {
            x = x.wrapping_mul(2u64.wrapping_sub(m.wrapping_mul(x)));
            i += 1;
        }
        x.wrapping_neg()
    };
    /// `R^2 mod M`, `R = 2^256`.
    const R2: [u64; 4] = {
        // 2^256 mod M = 2^256 - M (M > 2^255), then 256 modular doublings.
        let (mut x, _) = sub4([0; 4], Self::M);
        let mut i = 0;
        while i < 256 {
            let (d, c) = add4(x, x);
            x = reduce_once(d, c, Self::M);
            i += 1;
        }
        x
    };
}

/// The field prime `p = 2^256 - 2^224 + 2^192 + 2^96 - 1`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FieldP;
impl Modulus for FieldP {
    const M: [u64; 4] =
        limbs_from_hex("ffffffff00000001000000000000000000000000ffffffffffffffffffffffff");
}

/// The group order `n`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OrderN;
impl Modulus for OrderN {
    const M: [u64; 4] =
        limbs_from_hex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551");
}

/// An element modulo `M` in Montgomery form (`a R mod M`, fully reduced).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Elem<M: Modulus>(pub(crate) [u64; 4], PhantomData<M>);

/// A field element.
pub(crate) type Fe = Elem<FieldP>;
/// A scalar modulo `n`.
pub(crate) type Scalar = Elem<OrderN>;

/// All ones iff `x == 0`.
pub(crate) fn is_zero_mask(x: [u64; 4]) -> u64 {
    let t = x[0] | x[1] | x[2] | x[3];
    core::hint::black_box(((t | t.wrapping_neg()) >> 63).wrapping_sub(1))
}

/// Big-endian bytes to little-endian limbs (any value below `2^256`).
pub(crate) fn limbs_from_be(b: &[u8; 32]) -> [u64; 4] {
    let mut out = [0u64; 4];
    for (i, limb) in out.iter_mut().enumerate() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[32 - 8 * (i + 1)..32 - 8 * i]);
        *limb = u64::from_be_bytes(w);
    }
    out
}

/// Little-endian limbs to big-endian bytes.
pub(crate) fn limbs_to_be(x: [u64; 4]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, limb) in x.iter().enumerate() {
        out[32 - 8 * (i + 1)..32 - 8 * i].copy_from_slice(&limb.to_be_bytes());
    }
    out
}

/// All ones iff `x < M` (constant time).
pub(crate) fn lt_mask<M: Modulus>(x: [u64; 4]) -> u64 {
    let (_, borrow) = sub4(x, M::M);
    0u64.wrapping_sub(borrow)
}

impl<M: Modulus> Elem<M> {
    pub(crate) const ZERO: Self = Elem([0; 4], PhantomData);

    /// `R mod M`: one in Montgomery form.
    pub(crate) fn one() -> Self {
        Elem(sub4([0; 4], M::M).0, PhantomData)
    }

    /// Montgomery product `a b R^-1 mod M` (CIOS).
    pub(crate) fn mul(&self, b: &Self) -> Self {
        let (a, b, m) = (self.0, b.0, M::M);
        let mut t = [0u64; 6];
        for &bi in &b {
            let mut c = 0u64;
            for j in 0..4 {
                let x = t[j] as u128 + a[j] as u128 * bi as u128 + c as u128;
                t[j] = x as u64;
                c = (x >> 64) as u64;
            }
            let (t4, c2) = adc(t[4], c, 0);
            t[4] = t4;
            t[5] = c2;
            let q = t[0].wrapping_mul(M::M0INV);
            let x = t[0] as u128 + q as u128 * m[0] as u128;
            let mut c = (x >> 64) as u64;
            for j in 1..4 {
                let x = t[j] as u128 + q as u128 * m[j] as u128 + c as u128;
                t[j - 1] = x as u64;
                c = (x >> 64) as u64;
            }
            let (t3, c2) = adc(t[4], c, 0);
            t[3] = t3;
            t[4] = t[5] + c2;
        }
        Elem(reduce_once([t[0], t[1], t[2], t[3]], t[4], m), PhantomData)
    }

    pub(crate) fn square(&self) -> Self {
        self.mul(self)
    }

    pub(crate) fn add(&self, b: &Self) -> Self {
        let (s, c) = add4(self.0, b.0);
        Elem(reduce_once(s, c, M::M), PhantomData)
    }

    pub(crate) fn sub(&self, b: &Self) -> Self {
        let (d, borrow) = sub4(self.0, b.0);
        let mask = 0u64.wrapping_sub(borrow);
        let m = M::M;
        let (r, _) = add4(d, [m[0] & mask, m[1] & mask, m[2] & mask, m[3] & mask]);
        Elem(r, PhantomData)
    }

    pub(crate) fn double(&self) -> Self {
        self.add(self)
    }

    /// Converts a reduced value (`< M`) into Montgomery form.
    pub(crate) fn from_reduced(x: [u64; 4]) -> Self {
        Elem(x, PhantomData).mul(&Elem(M::R2, PhantomData))
    }

    /// Reduces any value below `2^256` (`< 2M`) once and converts it into Montgomery form.
    pub(crate) fn from_u256(x: [u64; 4]) -> Self {
        Self::from_reduced(reduce_once(x, 0, M::M))
    }

    /// The canonical value (out of Montgomery form).
    pub(crate) fn to_limbs(self) -> [u64; 4] {
        let mut one = [0u64; 4];
        one[0] = 1;
        self.mul(&Elem(one, PhantomData)).0
    }

    pub(crate) fn to_be_bytes(self) -> [u8; 32] {
        limbs_to_be(self.to_limbs())
    }

    /// All ones iff the element is zero.
    pub(crate) fn is_zero(&self) -> u64 {
        is_zero_mask(self.0)
    }

    /// `mask ? a : b` for an all-ones or all-zero mask.
    pub(crate) fn select(mask: u64, a: &Self, b: &Self) -> Self {
        let r = core::array::from_fn(|i| (a.0[i] & mask) | (b.0[i] & !mask));
        Elem(r, PhantomData)
    }

    /// `self^e` for a public exponent `e` (its bits steer the loop; the base's don't).
    fn pow_public(&self, e: [u64; 4]) -> Self {
        let mut acc = Self::one();
        for i in (0..256).rev() {
            acc = acc.square();
            if (e[i / 64] >> (i % 64)) & 1 == 1 {
                acc = acc.mul(self);
            }
        }
        acc
    }

    /// `self^-1` (Fermat); zero maps to zero.
    pub(crate) fn invert(&self) -> Self {
        let (e, _) = sub4(M::M, [2, 0, 0, 0]);
        self.pow_public(e)
    }

    /// Overwrites the value with zero.
    pub(crate) fn wipe(&mut self) {
        // black_box keeps the store from being optimised away as dead.
        self.0 = core::hint::black_box([0; 4]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants() {
        // M * M0INV == -1 mod 2^64
        assert_eq!(FieldP::M[0].wrapping_mul(FieldP::M0INV), u64::MAX);
        assert_eq!(OrderN::M[0].wrapping_mul(OrderN::M0INV), u64::MAX);
        let two = Fe::from_reduced([2, 0, 0, 0]);
        let three = Fe::from_reduced([3, 0, 0, 0]);
        assert_eq!(two.mul(&three).to_limbs(), [6, 0, 0, 0]);
        assert_eq!(three.invert().mul(&three).to_limbs(), [1, 0, 0, 0]);
        let s = Scalar::from_reduced([7, 0, 0, 0]);
        assert_eq!(s.invert().mul(&s).to_limbs(), [1, 0, 0, 0]);
        assert_eq!(two.sub(&three).add(&three).to_limbs(), [2, 0, 0, 0]);
    }
}
