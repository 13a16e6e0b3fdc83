//! The kinds of backend (without proof that the CPU can run them) and the
//! limb counts each one uses for a modulus size.

use core::fmt;

/// The kinds of backend, without proof of availability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// Scalar `u64` code, runs everywhere.
    Portable,
    /// AVX2, 8 lanes of radix-2^28 numbers (two interleaved `ymm` groups of 4).
    Avx2,
    /// AVX2 + FMA3, 4 lanes of radix-2^50 numbers in `f64` per `ymm`.
    Fma,
    /// AVX-512 IFMA, 8 lanes of radix-2^52 numbers per `zmm`.
    Ifma,
}

impl BackendKind {
    /// All kinds, slowest first.
    pub const ALL: [BackendKind; 4] = [
        BackendKind::Portable,
        BackendKind::Avx2,
        BackendKind::Fma,
        BackendKind::Ifma,
    ];

    /// The name used in configuration and reports: `portable`, `avx2`, `fma`,
    /// `ifma`.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Portable => "portable",
            BackendKind::Avx2 => "avx2",
            BackendKind::Fma => "fma",
            BackendKind::Ifma => "ifma",
        }
    }

    /// Parses [`BackendKind::name`].
    pub fn from_name(s: &str) -> Option<BackendKind> {
        BackendKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Number of numbers one SIMD register (or one scalar pass) holds.
    pub fn lanes(self) -> usize {
        match self {
            BackendKind::Portable => 1,
            BackendKind::Avx2 => 8,
            BackendKind::Fma => 4,
            BackendKind::Ifma => 8,
        }
    }

    /// `log2(R)` of the backend's Montgomery radix for a modulus of
    /// `modulus_bits` bits (a multiple of 64): what
    /// [`mont_mul_1024_lanes`](crate::mont_mul_1024_lanes)
    /// divides by.
    pub fn montgomery_r_bits(self, modulus_bits: usize) -> usize {
        let l = modulus_bits / 64;
        match self {
            BackendKind::Portable => 64 * l,
            BackendKind::Avx2 => 28 * avx2_limbs(l),
            BackendKind::Fma => 50 * fma_limbs(l),
            BackendKind::Ifma => 52 * ifma_limbs(l),
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// Radix-2^28 limbs used by the AVX2 backend for an `l`-limb (64-bit) modulus:
/// enough that `4 m < R`.
pub(crate) const fn avx2_limbs(l: usize) -> usize {
    (64 * l + 2).div_ceil(28)
}

/// Radix-2^50 limbs used by the FMA backend for an `l`-limb modulus (four
/// 100-bit products chain inside one `f64` binade; see `fma.rs`).
pub(crate) const fn fma_limbs(l: usize) -> usize {
    (64 * l + 2).div_ceil(50)
}

/// Radix-2^52 limbs used by the IFMA backend for an `l`-limb modulus.
pub(crate) const fn ifma_limbs(l: usize) -> usize {
    (64 * l + 2).div_ceil(52)
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
