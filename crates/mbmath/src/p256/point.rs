//! P-256 points in projective coordinates `(X : Y : Z)` (`x = X/Z`, `y = Y/Z`, the identity is
//! `(0 : 1 : 0)`), with the complete formulas of Renes, Costello and Batina (2016, "Complete
//! addition formulas for prime order elliptic curves", algorithms 4 and 6 for `a = -3`): one
//! addition law for every pair of points, the identity and doublings included, so the scalar
//! multiplication needs no exceptional-case branch.
//!
//! [`Point::mul`] is a fixed-window (4-bit) multiplication: 64 windows, each 4 doublings and
//! one addition of a table entry fetched by scanning all 16 entries under masks; every
//! window runs, the zero nibble adds the identity. No branch or address depends on the scalar
//! or the point.

use std::sync::OnceLock;

use super::field::{limbs_from_be, limbs_from_hex, lt_mask, Fe};

/// The curve coefficient `b`.
const B: [u64; 4] =
    limbs_from_hex("5ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604b");
const GX: [u64; 4] =
    limbs_from_hex("6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296");
const GY: [u64; 4] =
    limbs_from_hex("4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5");

/// A projective point.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Point {
    x: Fe,
    y: Fe,
    z: Fe,
}

/// Affine coordinates as big-endian bytes.
pub(crate) struct Affine {
    pub(crate) x: [u8; 32],
    pub(crate) y: [u8; 32],
}

fn b() -> Fe {
    Fe::from_reduced(B)
}

impl Point {
    pub(crate) fn identity() -> Self {
        Point {
            x: Fe::ZERO,
            y: Fe::one(),
            z: Fe::ZERO,
        }
    }

    pub(crate) fn generator() -> Self {
        Point {
            x: Fe::from_reduced(GX),
            y: Fe::from_reduced(GY),
            z: Fe::one(),
        }
    }

    /// Decodes an uncompressed SEC1 point (`04 || x || y`, 65 bytes): both coordinates below
    /// `p`, the point on the curve (so never the identity, which has no such encoding).
    /// Public input: branches on its validity.
    pub(crate) fn decode_vartime(bytes: &[u8]) -> Option<Self> {
        let (xl, yl) = Self::decode_affine_vartime(bytes)?;
        Some(Self::from_affine_limbs(xl, yl))
    }

    /// The point with affine coordinates `x`, `y` (canonical limbs, already validated).
    pub(crate) fn from_affine_limbs(x: [u64; 4], y: [u64; 4]) -> Self {
        Point {
            x: Fe::from_reduced(x),
            y: Fe::from_reduced(y),
            z: Fe::one(),
        }
    }

    /// The generator's affine coordinates as canonical limbs.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) fn generator_affine_limbs() -> ([u64; 4], [u64; 4]) {
        (GX, GY)
    }

    /// As [`Point::decode_vartime`], the affine coordinates as canonical limbs.
    pub(crate) fn decode_affine_vartime(bytes: &[u8]) -> Option<([u64; 4], [u64; 4])> {
        if bytes.len() != 65 || bytes[0] != 4 {
            return None;
        }
        let mut xb = [0u8; 32];
        let mut yb = [0u8; 32];
        xb.copy_from_slice(&bytes[1..33]);
        yb.copy_from_slice(&bytes[33..65]);
        let (xl, yl) = (limbs_from_be(&xb), limbs_from_be(&yb));
        if lt_mask::<super::field::FieldP>(xl) == 0 || lt_mask::<super::field::FieldP>(yl) == 0 {
            return None;
        }
        let (x, y) = (Fe::from_reduced(xl), Fe::from_reduced(yl));
        // y^2 == x^3 - 3x + b
        let rhs = x.square().mul(&x).sub(&x.double().add(&x)).add(&b());
        if y.square().sub(&rhs).is_zero() == 0 {
            return None;
        }
        Some((xl, yl))
    }

    /// All ones iff this is the identity (`Z = 0`).
    pub(crate) fn is_identity(&self) -> u64 {
        self.z.is_zero()
    }

    /// Affine coordinates (one field inversion). The identity maps to `(0, 0)`; callers check
    /// [`Point::is_identity`] first.
    pub(crate) fn to_affine(self) -> Affine {
        let zi = self.z.invert();
        Affine {
            x: self.x.mul(&zi).to_be_bytes(),
            y: self.y.mul(&zi).to_be_bytes(),
        }
    }

    /// Uncompressed SEC1 encoding of a point that is not the identity.
    pub(crate) fn encode(self) -> [u8; 65] {
        let a = self.to_affine();
        let mut out = [0u8; 65];
        out[0] = 4;
        out[1..33].copy_from_slice(&a.x);
        out[33..].copy_from_slice(&a.y);
        out
    }

    /// `self + q`, complete (RCB algorithm 4, `a = -3`).
    pub(crate) fn add(&self, q: &Point) -> Point {
        let [x, y, z] = rcb_add(&[self.x, self.y, self.z], &[q.x, q.y, q.z]);
        Point { x, y, z }
    }

    /// `2 self`, complete (RCB algorithm 6, `a = -3`).
    pub(crate) fn double(&self) -> Point {
        let [x, y, z] = rcb_double(&[self.x, self.y, self.z]);
        Point { x, y, z }
    }

    fn select(mask: u64, a: &Point, b: &Point) -> Point {
        Point {
            x: Fe::select(mask, &a.x, &b.x),
            y: Fe::select(mask, &a.y, &b.y),
            z: Fe::select(mask, &a.z, &b.z),
        }
    }

    /// `k self` for a scalar `k < 2^256` given as little-endian limbs (not Montgomery form).
    /// Constant time in `k` and in the point (fixed 4-bit windows, masked table scan).
    pub(crate) fn mul(&self, k: &[u64; 4]) -> Point {
        let mut table = [Point::identity(); 16];
        table[1] = *self;
        for i in 2..16 {
            table[i] = if i % 2 == 0 {
                table[i / 2].double()
            } else {
                table[i - 1].add(self)
            };
        }
        let mut acc = Point::identity();
        for w in (0..64).rev() {
            if w != 63 {
                acc = acc.double().double().double().double();
            }
            let nibble = (k[w / 16] >> ((w % 16) * 4)) & 15;
            acc = acc.add(&Point::scan(&table, nibble));
        }
        acc
    }

    /// `k G` by a fixed-base comb: `k = sum k_w 16^w` (64 nibbles), `k G = sum T[w][k_w]` with
    /// `T[w][j] = j 16^w G` precomputed once (public). 64 complete additions of entries
    /// fetched by masked scans of their 16-entry rows: constant time in `k` as [`Point::mul`],
    /// about a quarter of its work.
    pub(crate) fn mul_base(k: &[u64; 4]) -> Point {
        let table = base_table();
        let mut acc = Point::identity();
        for (w, row) in table.iter().enumerate() {
            let nibble = (k[w / 16] >> ((w % 16) * 4)) & 15;
            acc = acc.add(&Point::scan(row, nibble));
        }
        acc
    }

    /// `row[index]`, reading every entry (masked selection).
    fn scan(row: &[Point; 16], index: u64) -> Point {
        let mut entry = Point::identity();
        for (i, t) in row.iter().enumerate() {
            let d = i as u64 ^ index;
            let mask = core::hint::black_box(((d | d.wrapping_neg()) >> 63).wrapping_sub(1));
            entry = Point::select(mask, t, &entry);
        }
        entry
    }

    #[cfg(test)]
    fn eq_vartime(&self, q: &Point) -> bool {
        // X1 Z2 == X2 Z1 and Y1 Z2 == Y2 Z1
        self.x.mul(&q.z).sub(&q.x.mul(&self.z)).is_zero() != 0
            && self.y.mul(&q.z).sub(&q.y.mul(&self.z)).is_zero() != 0
    }
}

/// `p + q` with the complete formulas of RCB algorithm 4 (`a = -3`), over any [`CurveField`].
#[inline(always)]
pub(crate) fn rcb_add<F: CurveField>(p: &[F; 3], q: &[F; 3]) -> [F; 3] {
    let [x1, y1, z1] = p;
    let [x2, y2, z2] = q;
    let b = x1.curve_b();
    let mut t0 = x1.mul(x2);
    let mut t1 = y1.mul(y2);
    let mut t2 = z1.mul(z2);
    let mut t3 = x1.add(y1);
    let mut t4 = x2.add(y2);
    t3 = t3.mul(&t4);
    t4 = t0.add(&t1);
    t3 = t3.sub(&t4);
    t4 = y1.add(z1);
    let mut x3 = y2.add(z2);
    t4 = t4.mul(&x3);
    x3 = t1.add(&t2);
    t4 = t4.sub(&x3);
    x3 = x1.add(z1);
    let mut y3 = x2.add(z2);
    x3 = x3.mul(&y3);
    y3 = t0.add(&t2);
    y3 = x3.sub(&y3);
    let mut z3 = b.mul(&t2);
    x3 = y3.sub(&z3);
    z3 = x3.double();
    x3 = x3.add(&z3);
    z3 = t1.sub(&x3);
    x3 = t1.add(&x3);
    y3 = b.mul(&y3);
    t1 = t2.double();
    t2 = t1.add(&t2);
    y3 = y3.sub(&t2);
    y3 = y3.sub(&t0);
    t1 = y3.double();
    y3 = t1.add(&y3);
    t1 = t0.double();
    t0 = t1.add(&t0);
    t0 = t0.sub(&t2);
    t1 = t4.mul(&y3);
    t2 = t0.mul(&y3);
    y3 = x3.mul(&z3);
    y3 = y3.add(&t2);
    x3 = t3.mul(&x3);
    x3 = x3.sub(&t1);
    z3 = t4.mul(&z3);
    t1 = t3.mul(&t0);
    z3 = z3.add(&t1);
    [x3, y3, z3]
}

/// `2 p` with RCB algorithm 6 (`a = -3`), over any [`CurveField`].
#[inline(always)]
pub(crate) fn rcb_double<F: CurveField>(p: &[F; 3]) -> [F; 3] {
    let [x, y, z] = p;
    let b = x.curve_b();
    let mut t0 = x.mul(x);
    let t1 = y.mul(y);
    let mut t2 = z.mul(z);
    let mut t3 = x.mul(y);
    t3 = t3.double();
    let mut z3 = x.mul(z);
    z3 = z3.double();
    let mut y3 = b.mul(&t2);
    y3 = y3.sub(&z3);
    let mut x3 = y3.double();
    y3 = x3.add(&y3);
    x3 = t1.sub(&y3);
    y3 = t1.add(&y3);
    y3 = x3.mul(&y3);
    x3 = x3.mul(&t3);
    t3 = t2.double();
    t2 = t2.add(&t3);
    z3 = b.mul(&z3);
    z3 = z3.sub(&t2);
    z3 = z3.sub(&t0);
    t3 = z3.double();
    z3 = z3.add(&t3);
    t3 = t0.double();
    t0 = t3.add(&t0);
    t0 = t0.sub(&t2);
    t0 = t0.mul(&z3);
    y3 = y3.add(&t0);
    t0 = y.mul(z);
    t0 = t0.double();
    z3 = t0.mul(&z3);
    x3 = x3.sub(&z3);
    z3 = t0.mul(&t1);
    z3 = z3.double();
    z3 = z3.double();
    [x3, y3, z3]
}

/// The field operations the complete formulas need, on one element type: the portable
/// [`Fe`] here, 8 lanes of IFMA limbs in `ifma::p256`.
pub(crate) trait CurveField: Copy {
    fn mul(&self, b: &Self) -> Self;
    fn add(&self, b: &Self) -> Self;
    fn sub(&self, b: &Self) -> Self;
    fn double(&self) -> Self;
    /// The curve coefficient `b` (in the representation of `self`).
    fn curve_b(&self) -> Self;
}

impl CurveField for Fe {
    fn mul(&self, b: &Self) -> Self {
        Fe::mul(self, b)
    }
    fn add(&self, b: &Self) -> Self {
        Fe::add(self, b)
    }
    fn sub(&self, b: &Self) -> Self {
        Fe::sub(self, b)
    }
    fn double(&self) -> Self {
        Fe::double(self)
    }
    fn curve_b(&self) -> Self {
        b()
    }
}

impl Point {
    /// The coordinates `X, Y, Z` as `c 2^260 mod p` (canonical, radix 2^64): the Montgomery
    /// form of `ifma::p256` (`R = 2^260`). Public points only (the comb table).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) fn coordinates_r260(&self) -> [[u64; 4]; 3] {
        // `Fe` holds `c 2^256 mod p`; times 16 is `c 2^260 mod p`.
        let r = |c: &Fe| c.double().double().double().double().0;
        [r(&self.x), r(&self.y), r(&self.z)]
    }
}

/// The comb table of [`Point::mul_base`]: `T[w][j] = j 16^w G`, 64 rows of 16 projective
/// points (about 96 KiB), built on first use from public values.
pub(crate) fn base_table() -> &'static [[Point; 16]; 64] {
    static TABLE: OnceLock<Box<[[Point; 16]; 64]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Box::new([[Point::identity(); 16]; 64]);
        let mut base = Point::generator();
        for row in t.iter_mut() {
            row[1] = base;
            for j in 2..16 {
                row[j] = row[j - 1].add(&base);
            }
            base = base.double().double().double().double();
        }
        t
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_laws() {
        let g = Point::generator();
        let id = Point::identity();
        assert!(g.add(&id).eq_vartime(&g));
        assert!(id.add(&g).eq_vartime(&g));
        assert!(g.add(&g).eq_vartime(&g.double()));
        assert!(id.double().is_identity() != 0);
        let g3 = g.double().add(&g);
        assert!(g.mul(&[3, 0, 0, 0]).eq_vartime(&g3));
        assert!(g.mul(&[0, 0, 0, 0]).is_identity() != 0);
        // n G = identity, (n - 1) G = -G
        let n = <super::super::field::OrderN as super::super::field::Modulus>::M;
        assert!(g.mul(&n).is_identity() != 0);
        assert!(Point::mul_base(&n).is_identity() != 0);
        let k = [
            0x0123_4567_89ab_cdef,
            0xfedc_ba98_7654_3210,
            0x1111_2222_3333_4444,
            0x8000_0000_0000_0001,
        ];
        assert!(Point::mul_base(&k).eq_vartime(&g.mul(&k)));
        assert!(Point::mul_base(&[3, 0, 0, 0]).eq_vartime(&g3));
        let g_enc = g.encode();
        assert!(Point::decode_vartime(&g_enc).is_some());
        let mut bad = g_enc;
        bad[64] ^= 1;
        assert!(Point::decode_vartime(&bad).is_none());
    }
}
