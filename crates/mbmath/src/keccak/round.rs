//! The Keccak-f[1600] permutation written once over a 64-bit "word" type: `u64` (one state,
//! the portable reference), four states in a `ymm` (AVX2) or eight in a `zmm` (AVX-512), one
//! state word per 64-bit lane. Everything is `#[inline(always)]`, so each SIMD backend gets
//! the whole permutation inlined into its `#[target_feature]` function.
//!
//! Constant time: a fixed sequence of XOR, AND-NOT and fixed rotations; every index below is
//! a literal, nothing depends on the state.

/// Lanes of a batch: states side by side, one per 64-bit SIMD lane of a `zmm`.
pub(crate) const LANES: usize = 8;

/// Up to [`LANES`] Keccak states, word-major: `st[i][l]` is word `i` (`x + 5 y`) of state `l`,
/// so word `i` of all states is one `zmm` (or two `ymm`s).
pub(crate) type States = [[u64; LANES]; 25];

/// The 24 round constants (FIPS 202, 3.2.5).
pub(super) const RC: [u64; 24] = [
    0x0000_0000_0000_0001,
    0x0000_0000_0000_8082,
    0x8000_0000_0000_808a,
    0x8000_0000_8000_8000,
    0x0000_0000_0000_808b,
    0x0000_0000_8000_0001,
    0x8000_0000_8000_8081,
    0x8000_0000_0000_8009,
    0x0000_0000_0000_008a,
    0x0000_0000_0000_0088,
    0x0000_0000_8000_8009,
    0x0000_0000_8000_000a,
    0x0000_0000_8000_808b,
    0x8000_0000_0000_008b,
    0x8000_0000_0000_8089,
    0x8000_0000_0000_8003,
    0x8000_0000_0000_8002,
    0x8000_0000_0000_0080,
    0x0000_0000_0000_800a,
    0x8000_0000_8000_000a,
    0x8000_0000_8000_8081,
    0x8000_0000_0000_8080,
    0x0000_0000_8000_0001,
    0x8000_0000_8000_8008,
];

/// One 64-bit state word, or one per SIMD lane.
pub(super) trait Word: Copy {
    /// `a ^ b`.
    fn xor(self, b: Self) -> Self;
    /// `a ^ b ^ c ^ d ^ e`.
    #[inline(always)]
    fn xor5(self, b: Self, c: Self, d: Self, e: Self) -> Self {
        self.xor(b).xor(c).xor(d).xor(e)
    }
    /// Rotation left by `n` (`0 <= n < 64`, a constant after inlining).
    fn rotl(self, n: u32) -> Self;
    /// chi's `a ^ (!b & c)`.
    fn chi(a: Self, b: Self, c: Self) -> Self;
    /// `a ^ rc` in every lane.
    fn xor_const(self, rc: u64) -> Self;
}

impl Word for u64 {
    #[inline(always)]
    fn xor(self, b: Self) -> Self {
        self ^ b
    }
    #[inline(always)]
    fn rotl(self, n: u32) -> Self {
        self.rotate_left(n)
    }
    #[inline(always)]
    fn chi(a: Self, b: Self, c: Self) -> Self {
        a ^ (!b & c)
    }
    #[inline(always)]
    fn xor_const(self, rc: u64) -> Self {
        self ^ rc
    }
}

/// Keccak-f[1600] on `a` (the word at `x + 5 y`), all 24 rounds. The round is written out
/// (every index and rotation a literal; rho's offsets are FIPS 202's table 2), so the state
/// stays in registers and the rotations are immediates.
#[inline(always)]
pub(super) fn keccak_f<W: Word>(a: &mut [W; 25]) {
    for &rc in RC.iter() {
        // theta
        let c0 = a[0].xor5(a[5], a[10], a[15], a[20]);
        let c1 = a[1].xor5(a[6], a[11], a[16], a[21]);
        let c2 = a[2].xor5(a[7], a[12], a[17], a[22]);
        let c3 = a[3].xor5(a[8], a[13], a[18], a[23]);
        let c4 = a[4].xor5(a[9], a[14], a[19], a[24]);
        let d0 = c4.xor(c1.rotl(1));
        let d1 = c0.xor(c2.rotl(1));
        let d2 = c1.xor(c3.rotl(1));
        let d3 = c2.xor(c4.rotl(1));
        let d4 = c3.xor(c0.rotl(1));
        // rho and pi: B[y, 2x + 3y] = rot(A[x, y] ^ D[x], r[x, y])
        let b0 = a[0].xor(d0).rotl(0);
        let b10 = a[1].xor(d1).rotl(1);
        let b20 = a[2].xor(d2).rotl(62);
        let b5 = a[3].xor(d3).rotl(28);
        let b15 = a[4].xor(d4).rotl(27);
        let b16 = a[5].xor(d0).rotl(36);
        let b1 = a[6].xor(d1).rotl(44);
        let b11 = a[7].xor(d2).rotl(6);
        let b21 = a[8].xor(d3).rotl(55);
        let b6 = a[9].xor(d4).rotl(20);
        let b7 = a[10].xor(d0).rotl(3);
        let b17 = a[11].xor(d1).rotl(10);
        let b2 = a[12].xor(d2).rotl(43);
        let b12 = a[13].xor(d3).rotl(25);
        let b22 = a[14].xor(d4).rotl(39);
        let b23 = a[15].xor(d0).rotl(41);
        let b8 = a[16].xor(d1).rotl(45);
        let b18 = a[17].xor(d2).rotl(15);
        let b3 = a[18].xor(d3).rotl(21);
        let b13 = a[19].xor(d4).rotl(8);
        let b14 = a[20].xor(d0).rotl(18);
        let b24 = a[21].xor(d1).rotl(2);
        let b9 = a[22].xor(d2).rotl(61);
        let b19 = a[23].xor(d3).rotl(56);
        let b4 = a[24].xor(d4).rotl(14);
        // chi
        a[0] = W::chi(b0, b1, b2);
        a[1] = W::chi(b1, b2, b3);
        a[2] = W::chi(b2, b3, b4);
        a[3] = W::chi(b3, b4, b0);
        a[4] = W::chi(b4, b0, b1);
        a[5] = W::chi(b5, b6, b7);
        a[6] = W::chi(b6, b7, b8);
        a[7] = W::chi(b7, b8, b9);
        a[8] = W::chi(b8, b9, b5);
        a[9] = W::chi(b9, b5, b6);
        a[10] = W::chi(b10, b11, b12);
        a[11] = W::chi(b11, b12, b13);
        a[12] = W::chi(b12, b13, b14);
        a[13] = W::chi(b13, b14, b10);
        a[14] = W::chi(b14, b10, b11);
        a[15] = W::chi(b15, b16, b17);
        a[16] = W::chi(b16, b17, b18);
        a[17] = W::chi(b17, b18, b19);
        a[18] = W::chi(b18, b19, b15);
        a[19] = W::chi(b19, b15, b16);
        a[20] = W::chi(b20, b21, b22);
        a[21] = W::chi(b21, b22, b23);
        a[22] = W::chi(b22, b23, b24);
        a[23] = W::chi(b23, b24, b20);
        a[24] = W::chi(b24, b20, b21);
        // iota
        a[0] = a[0].xor_const(rc);
    }
}
