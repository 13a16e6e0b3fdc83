//! X25519 public keys, `X25519(k, 9)`, by the Edwards form's fixed-base comb (ref10's
//! `ge_scalarmult_base`, as BoringSSL computes its key shares): about a third of the work of a
//! Montgomery ladder.
//!
//! `u = 9` is the image of the Edwards25519 base point `B` (`y = 4/5`) under
//! `u = (1 + y) / (1 - y)`, so `X25519(k, 9)` is the u-coordinate of `[k] B`. The clamped scalar
//! is recoded into 64 signed radix-16 digits `e_i` in `[-8, 8]`; `[k] B` is the sum of
//! `e_i 16^i B`, taken from a table of `j 256^i B` (`j` = 1..8, `i` = 0..31) in the
//! precomputed form `(y + x, y - x, 2 d x y)`: the odd digits' points added first, the sum
//! multiplied by 16 (four doublings), then the even digits' points. Which table entry and sign
//! a digit picks is secret: the lookup scans the whole row under masks and negates by a masked
//! exchange (here and in `ifma::x25519_base`), with no branch or address depending on it.
//!
//! The table is built once, at first use, from `B` itself (its `x` is a square root; either
//! root serves, since `u` depends on `y` only), with the reference arithmetic of
//! [`crate::field25519`]: public values, so its construction need not be constant time.

use std::sync::OnceLock;

use crate::field25519::{
    add, clamp, cswap, fe_from_bytes, fe_to_bytes, invert_with, mul, sqr_n, sub, Fe,
};

const ZERO: Fe = [0; 5];
const ONE: Fe = [1, 0, 0, 0, 0];

/// A table point `(y + x, y - x, 2 d x y)`, each coordinate fully reduced (limbs below 2^51).
#[derive(Clone, Copy)]
pub(crate) struct Niels {
    pub(crate) ypx: Fe,
    pub(crate) ymx: Fe,
    pub(crate) xy2d: Fe,
}

/// A point in extended coordinates `(X : Y : Z : T)`, `x = X/Z`, `y = Y/Z`, `x y = T/Z`.
#[derive(Clone, Copy)]
struct Ext {
    x: Fe,
    y: Fe,
    z: Fe,
    t: Fe,
}

const IDENTITY: Ext = Ext {
    x: ZERO,
    y: ONE,
    z: ONE,
    t: ZERO,
};

fn small(n: u64) -> Fe {
    [n, 0, 0, 0, 0]
}

fn invert(a: &Fe) -> Fe {
    invert_with(a, mul, sqr_n)
}

/// Fully reduced limbs (the canonical value's).
fn reduced(a: &Fe) -> Fe {
    fe_from_bytes(&fe_to_bytes(a))
}

/// `a^e` for a public little-endian exponent (variable time: table construction only).
fn pow_vartime(a: &Fe, e: &[u8; 32]) -> Fe {
    let mut r = ONE;
    for i in (0..256).rev() {
        r = mul(&r, &r);
        if (e[i / 8] >> (i % 8)) & 1 == 1 {
            r = mul(&r, a);
        }
    }
    r
}

/// The extended point of the formulas' `E, F, G, H`: `(E F : G H : F G : E H)`.
fn efgh(e: &Fe, f: &Fe, g: &Fe, h: &Fe) -> Ext {
    Ext {
        x: mul(e, f),
        y: mul(g, h),
        z: mul(f, g),
        t: mul(e, h),
    }
}

/// Unified addition (Hisil et al., add-2008-hwcd-3; complete on Edwards25519, so it doubles
/// too); `d2` is `2 d`.
fn ext_add(p: &Ext, q: &Ext, d2: &Fe) -> Ext {
    let a = mul(&sub(&p.y, &p.x), &sub(&q.y, &q.x));
    let b = mul(&add(&p.y, &p.x), &add(&q.y, &q.x));
    let c = mul(&mul(&p.t, d2), &q.t);
    let zz = mul(&p.z, &q.z);
    let d = add(&zz, &zz);
    let (e, f, g, h) = (sub(&b, &a), sub(&d, &c), add(&d, &c), add(&b, &a));
    efgh(&e, &f, &g, &h)
}

/// `p` plus a table point (ref10's `ge_madd`, then to extended coordinates).
fn madd(p: &Ext, q: &Niels) -> Ext {
    let a = mul(&add(&p.y, &p.x), &q.ypx);
    let b = mul(&sub(&p.y, &p.x), &q.ymx);
    let c = mul(&q.xy2d, &p.t);
    let d = add(&p.z, &p.z);
    let (e, h, g, f) = (sub(&a, &b), add(&a, &b), add(&d, &c), sub(&d, &c));
    efgh(&e, &f, &g, &h)
}

/// `2 p` (dbl-2008-hwcd with `a = -1`).
fn dbl(p: &Ext) -> Ext {
    let a = mul(&p.x, &p.x);
    let b = mul(&p.y, &p.y);
    let zz = mul(&p.z, &p.z);
    let c = add(&zz, &zz);
    let s = add(&p.x, &p.y);
    let e = sub(&sub(&mul(&s, &s), &a), &b);
    let g = sub(&b, &a);
    let f = sub(&g, &c);
    let h = sub(&ZERO, &add(&a, &b));
    efgh(&e, &f, &g, &h)
}

/// `d = -121665 / 121666`.
fn edwards_d() -> Fe {
    mul(&sub(&ZERO, &small(121_665)), &invert(&small(121_666)))
}

/// The base point: `y = 4/5`, `x` a square root of `(y^2 - 1) / (d y^2 + 1)`.
fn base_point(d: &Fe) -> Ext {
    let y = mul(&small(4), &invert(&small(5)));
    let y2 = mul(&y, &y);
    let r = mul(&sub(&y2, &ONE), &invert(&add(&mul(d, &y2), &ONE)));
    // (p + 3) / 8 = 2^252 - 2 and (p - 1) / 4 = 2^253 - 5, little endian.
    let mut e1 = [0xffu8; 32];
    e1[0] = 0xfe;
    e1[31] = 0x0f;
    let mut e2 = [0xffu8; 32];
    e2[0] = 0xfb;
    e2[31] = 0x1f;
    let mut x = pow_vartime(&r, &e1);
    if fe_to_bytes(&mul(&x, &x)) != fe_to_bytes(&r) {
        x = mul(&x, &pow_vartime(&small(2), &e2));
    }
    Ext {
        x,
        y,
        z: ONE,
        t: mul(&x, &y),
    }
}

fn niels(p: &Ext, d2: &Fe) -> Niels {
    let zi = invert(&p.z);
    let (x, y) = (mul(&p.x, &zi), mul(&p.y, &zi));
    Niels {
        ypx: reduced(&add(&y, &x)),
        ymx: reduced(&sub(&y, &x)),
        xy2d: reduced(&mul(&mul(&x, &y), d2)),
    }
}

/// `table()[i][j] = (j + 1) 256^i B`.
pub(crate) fn table() -> &'static [[Niels; 8]; 32] {
    static TABLE: OnceLock<Box<[[Niels; 8]; 32]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let d = edwards_d();
        let d2 = add(&d, &d);
        let blank = Niels {
            ypx: ZERO,
            ymx: ZERO,
            xy2d: ZERO,
        };
        let mut t = Box::new([[blank; 8]; 32]);
        let mut q = base_point(&d);
        for row in t.iter_mut() {
            let mut p = q;
            for (j, entry) in row.iter_mut().enumerate() {
                if j > 0 {
                    p = ext_add(&p, &q, &d2);
                }
                *entry = niels(&p, &d2);
            }
            for _ in 0..8 {
                q = ext_add(&q, &q, &d2);
            }
        }
        t
    })
}

/// The clamped scalar as 64 signed radix-16 digits in `[-8, 8]`, least significant first
/// (ref10's recoding: arithmetic only, no branch on the digits).
pub(crate) fn signed_digits(scalar: &[u8; 32]) -> [i8; 64] {
    let k = clamp(scalar);
    let mut e = [0i8; 64];
    for (i, b) in k.iter().enumerate() {
        e[2 * i] = (b & 15) as i8;
        e[2 * i + 1] = (b >> 4) as i8;
    }
    let mut carry = 0i8;
    for d in e.iter_mut().take(63) {
        *d += carry;
        carry = (*d + 8) >> 4;
        *d -= carry << 4;
    }
    e[63] += carry;
    e
}

/// `digit 256^pos B` from row `pos`: every entry scanned under masks, negated by mask.
fn select(pos: usize, digit: i8) -> Niels {
    let neg = u64::from((digit as u8) >> 7).wrapping_neg();
    let abs = (i16::from(digit) ^ (neg as i16)).wrapping_sub(neg as i16) as u64;
    let mut t = Niels {
        ypx: ONE,
        ymx: ONE,
        xy2d: ZERO,
    };
    for (j, entry) in table()[pos].iter().enumerate() {
        let m = u64::from((abs ^ (j as u64 + 1)) == 0).wrapping_neg();
        for l in 0..5 {
            t.ypx[l] ^= m & (t.ypx[l] ^ entry.ypx[l]);
            t.ymx[l] ^= m & (t.ymx[l] ^ entry.ymx[l]);
            t.xy2d[l] ^= m & (t.xy2d[l] ^ entry.xy2d[l]);
        }
    }
    cswap(neg, &mut t.ypx, &mut t.ymx);
    let n = sub(&ZERO, &t.xy2d);
    for (x, nl) in t.xy2d.iter_mut().zip(n) {
        *x ^= neg & (*x ^ nl);
    }
    t
}

/// `X25519(scalar, 9)` one at a time by the comb: the reference for the SIMD comb.
pub(crate) fn x25519_base_portable(scalar: &[u8; 32]) -> [u8; 32] {
    let e = signed_digits(scalar);
    let mut h = IDENTITY;
    for i in (1..64).step_by(2) {
        h = madd(&h, &select(i / 2, e[i]));
    }
    h = dbl(&dbl(&dbl(&dbl(&h))));
    for i in (0..64).step_by(2) {
        h = madd(&h, &select(i / 2, e[i]));
    }
    fe_to_bytes(&mul(&add(&h.z, &h.y), &invert(&sub(&h.z, &h.y))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::x25519::{x25519_portable, X25519_BASE_POINT};

    #[test]
    fn the_comb_agrees_with_the_ladder() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(25519);
        let mut scalars: Vec<[u8; 32]> = (0..64).map(|_| rng.gen()).collect();
        scalars.push([0; 32]);
        scalars.push([0xff; 32]);
        for k in &scalars {
            assert_eq!(
                x25519_base_portable(k),
                x25519_portable(k, &X25519_BASE_POINT)
            );
        }
    }

    #[test]
    fn doubling_agrees_with_unified_addition() {
        let d = edwards_d();
        let d2 = add(&d, &d);
        let b = base_point(&d);
        let affine_y = |p: &Ext| fe_to_bytes(&mul(&p.y, &invert(&p.z)));
        assert_eq!(affine_y(&dbl(&b)), affine_y(&ext_add(&b, &b, &d2)));
    }
}
