//! The field of X25519 and Edwards25519, `GF(2^255 - 19)`, one element at a time: 5 limbs of 51
//! bits in `u64`, products in `u128`. The reference arithmetic (the portable ladder, the base
//! table's construction) and the conversions to and from bytes the SIMD code shares.
//! Constant time: no branch or index depends on an element's value.

/// Zero copies of secret scalars; `black_box` keeps the stores.
pub(crate) fn wipe<T: Copy + Default, const N: usize>(v: &mut [[T; N]]) {
    for s in v.iter_mut() {
        s.fill(T::default());
    }
    std::hint::black_box(v);
}

/// RFC 7748's clamping of a scalar.
pub(crate) fn clamp(k: &[u8; 32]) -> [u8; 32] {
    let mut k = *k;
    k[0] &= 248;
    k[31] &= 127;
    k[31] |= 64;
    k
}

/// A field element mod `2^255 - 19`: 5 limbs of 51 bits (each below `2^52` between operations).
pub(crate) type Fe = [u64; 5];

pub(crate) const M51: u64 = (1 << 51) - 1;

/// The 255 low bits of `b` (little endian) as limbs.
pub(crate) fn fe_from_bytes(b: &[u8; 32]) -> Fe {
    let w = |i: usize| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[i..i + 8]);
        u64::from_le_bytes(x)
    };
    [
        w(0) & M51,
        (w(6) >> 3) & M51,
        (w(12) >> 6) & M51,
        (w(19) >> 1) & M51,
        (w(24) >> 12) & M51,
    ]
}

/// The canonical encoding (fully reduced mod p) of `f`, whose limbs are below `2^62`.
pub(crate) fn fe_to_bytes(f: &Fe) -> [u8; 32] {
    let mut t = *f;
    // Two carry rounds: limbs below 2^51, value below 2^255 + 2^13 * 19.
    for _ in 0..2 {
        for i in 0..4 {
            t[i + 1] += t[i] >> 51;
            t[i] &= M51;
        }
        t[0] += 19 * (t[4] >> 51);
        t[4] &= M51;
    }
    // t < 2p now. q = 1 iff t >= p, found by adding 19 and looking at bit 255.
    let mut q = (t[0] + 19) >> 51;
    for limb in &t[1..] {
        q = (limb + q) >> 51;
    }
    t[0] += 19 * q;
    for i in 0..4 {
        t[i + 1] += t[i] >> 51;
        t[i] &= M51;
    }
    t[4] &= M51;
    let v = [
        t[0] | (t[1] << 51),
        (t[1] >> 13) | (t[2] << 38),
        (t[2] >> 26) | (t[3] << 25),
        (t[3] >> 39) | (t[4] << 12),
    ];
    let mut out = [0u8; 32];
    for (i, w) in v.iter().enumerate() {
        out[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
    }
    out
}

pub(crate) fn carry(c: [u128; 5]) -> Fe {
    let mut out = [0u64; 5];
    let mut k: u128 = 0;
    for i in 0..5 {
        let v = c[i] + k;
        out[i] = (v as u64) & M51;
        k = v >> 51;
    }
    let v = out[0] as u128 + k * 19;
    out[0] = (v as u64) & M51;
    out[1] += (v >> 51) as u64;
    out
}

pub(crate) fn mul(a: &Fe, b: &Fe) -> Fe {
    let m = |x: u64, y: u64| (x as u128) * (y as u128);
    let b19: [u64; 5] = [b[0], b[1] * 19, b[2] * 19, b[3] * 19, b[4] * 19];
    let mut c = [0u128; 5];
    for (i, &ai) in a.iter().enumerate() {
        for (j, &bj) in b.iter().enumerate() {
            if i + j < 5 {
                c[i + j] += m(ai, bj);
            } else {
                c[i + j - 5] += m(ai, b19[j]);
            }
        }
    }
    carry(c)
}

pub(crate) fn add(a: &Fe, b: &Fe) -> Fe {
    carry(core::array::from_fn(|i| (a[i] + b[i]) as u128))
}

/// `a - b` with `4 p` added (limbs of `b` below `2^52`).
pub(crate) fn sub(a: &Fe, b: &Fe) -> Fe {
    let four_p = |i: usize| {
        if i == 0 {
            (1u64 << 53) - 76
        } else {
            (1u64 << 53) - 4
        }
    };
    carry(core::array::from_fn(|i| (a[i] + four_p(i) - b[i]) as u128))
}

pub(crate) fn mul_small(a: &Fe, k: u64) -> Fe {
    carry(core::array::from_fn(|i| (a[i] as u128) * (k as u128)))
}

pub(crate) fn cswap(mask: u64, a: &mut Fe, b: &mut Fe) {
    for i in 0..5 {
        let t = mask & (a[i] ^ b[i]);
        a[i] ^= t;
        b[i] ^= t;
    }
}

pub(crate) fn sqr_n(a: &Fe, n: usize) -> Fe {
    let mut x = *a;
    for _ in 0..n {
        x = mul(&x, &x);
    }
    x
}

/// `z^(p - 2)`: the addition chain of ref10 (254 squarings, 11 multiplications).
pub(crate) fn invert_with<F: Copy>(
    z: &F,
    mul: impl Fn(&F, &F) -> F,
    sqr_n: impl Fn(&F, usize) -> F,
) -> F {
    let z2 = sqr_n(z, 1);
    let z9 = mul(&sqr_n(&z2, 2), z);
    let z11 = mul(&z9, &z2);
    let z2_5_0 = mul(&sqr_n(&z11, 1), &z9);
    let z2_10_0 = mul(&sqr_n(&z2_5_0, 5), &z2_5_0);
    let z2_20_0 = mul(&sqr_n(&z2_10_0, 10), &z2_10_0);
    let z2_40_0 = mul(&sqr_n(&z2_20_0, 20), &z2_20_0);
    let z2_50_0 = mul(&sqr_n(&z2_40_0, 10), &z2_10_0);
    let z2_100_0 = mul(&sqr_n(&z2_50_0, 50), &z2_50_0);
    let z2_200_0 = mul(&sqr_n(&z2_100_0, 100), &z2_100_0);
    let z2_250_0 = mul(&sqr_n(&z2_200_0, 50), &z2_50_0);
    mul(&sqr_n(&z2_250_0, 5), &z11)
}

/// RFC 7748's `a24` for curve25519.
pub(crate) const A24: u64 = 121_665;
