//! SHA3-256, SHA3-512, SHAKE128 and SHAKE256 (FIPS 202) over many independent inputs at once:
//! up to 8 sponges side by side, one per Keccak state of a batch (`keccak`), so 8 hashes cost
//! about one permutation per block on AVX-512 (two on AVX2) instead of eight.
//!
//! The inputs of one batch may have different lengths (a state whose input ended waits, its
//! words kept unchanged, while the others absorb); all outputs of a call have the same length.
//! [`Sponge`] is the incremental form the ML-KEM sampling uses (squeeze as much as needed).
//!
//! Constant time: input bytes are only XORed into the state, output bytes only copied out;
//! branches and indices depend on lengths (public) only. Secret inputs are fine (ML-KEM hashes
//! its secret randomness here); the states are wiped when a [`Sponge`] is dropped.

use crate::backend::Backend;
use crate::keccak::{Permuter, States, LANES};

/// Hashes computed side by side: one per lane of a batch.
pub const KECCAK_LANES: usize = LANES;

/// Rate of SHAKE128 in bytes.
pub(crate) const SHAKE128_RATE: usize = 168;
/// Rate of SHAKE256 in bytes.
pub(crate) const SHAKE256_RATE: usize = 136;
const SHA3_256_RATE: usize = 136;
const SHA3_512_RATE: usize = 72;
/// Domain separation (with the first padding bit) of SHA3-*.
const DS_SHA3: u8 = 0x06;
/// ... and of SHAKE*.
const DS_SHAKE: u8 = 0x1f;

/// Up to [`KECCAK_LANES`] sponges of one rate, absorbed and squeezed together.
pub(crate) struct Sponge {
    permuter: Permuter,
    st: States,
    lanes: usize,
    rate: usize,
    /// Bytes of the current block already squeezed.
    pos: usize,
}

impl Sponge {
    /// Absorbs `inputs[l]` (with FIPS 202 padding, domain byte `ds`) into state `l`.
    /// `1 <= inputs.len() <= KECCAK_LANES`; `rate` is a multiple of 8, below 200.
    pub(crate) fn absorb(backend: Backend, rate: usize, ds: u8, inputs: &[&[u8]]) -> Sponge {
        assert!((1..=LANES).contains(&inputs.len()) && rate.is_multiple_of(8) && rate < 200);
        let mut s = Sponge {
            permuter: Permuter::new(backend),
            st: [[0; LANES]; 25],
            lanes: inputs.len(),
            rate,
            pos: 0,
        };
        // Lane l absorbs len / rate full blocks and one padded final block.
        let blocks: Vec<usize> = inputs.iter().map(|x| x.len() / rate + 1).collect();
        let most = blocks.iter().copied().max().unwrap_or(1);
        let mut last = [0u8; 200];
        for b in 0..most {
            for (l, input) in inputs.iter().enumerate() {
                if b + 1 < blocks[l] {
                    s.xor_block(l, &input[b * rate..(b + 1) * rate]);
                } else if b + 1 == blocks[l] {
                    let tail = &input[b * rate..];
                    last[..rate].fill(0);
                    last[..tail.len()].copy_from_slice(tail);
                    last[tail.len()] ^= ds;
                    last[rate - 1] ^= 0x80;
                    s.xor_block(l, &last[..rate]);
                }
            }
            // States whose input is done keep their words through this permutation.
            let done: Vec<usize> = (0..inputs.len()).filter(|&l| blocks[l] <= b).collect();
            let saved: Vec<[u64; 25]> = done
                .iter()
                .map(|&l| core::array::from_fn(|i| s.st[i][l]))
                .collect();
            s.permuter.permute(&mut s.st, s.lanes);
            for (&l, words) in done.iter().zip(&saved) {
                for (w, &x) in s.st.iter_mut().zip(words) {
                    w[l] = x;
                }
            }
        }
        last.fill(0);
        std::hint::black_box(&mut last);
        s
    }

    fn xor_block(&mut self, lane: usize, block: &[u8]) {
        for (w, chunk) in self.st.iter_mut().zip(block.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            w[lane] ^= u64::from_le_bytes(b);
        }
    }

    /// The next `outs[l].len()` output bytes of sponge `l`, for every lane (all the same
    /// length, `outs.len()` the number of lanes absorbed).
    pub(crate) fn squeeze(&mut self, outs: &mut [&mut [u8]]) {
        debug_assert_eq!(outs.len(), self.lanes);
        let n = outs.first().map_or(0, |o| o.len());
        debug_assert!(outs.iter().all(|o| o.len() == n));
        let mut done = 0;
        while done < n {
            if self.pos == self.rate {
                self.permuter.permute(&mut self.st, self.lanes);
                self.pos = 0;
            }
            let take = (self.rate - self.pos).min(n - done);
            for (l, out) in outs.iter_mut().enumerate() {
                // Whole words where possible (the rate is a multiple of 8).
                let mut k = 0;
                while k < take {
                    let (w, off) = ((self.pos + k) / 8, (self.pos + k) % 8);
                    let n = (8 - off).min(take - k);
                    let bytes = self.st[w][l].to_le_bytes();
                    if n == 8 {
                        // A whole word: a fixed-size copy (no call to memcpy).
                        out[done + k..done + k + 8].copy_from_slice(&bytes);
                    } else {
                        out[done + k..done + k + n].copy_from_slice(&bytes[off..off + n]);
                    }
                    k += n;
                }
            }
            self.pos += take;
            done += take;
        }
    }
}

impl Drop for Sponge {
    fn drop(&mut self) {
        for w in self.st.iter_mut() {
            w.fill(0);
        }
        std::hint::black_box(&mut self.st);
    }
}

/// Fixed-length outputs of one rate and domain, for any number of inputs (8 at a time).
fn hash_batch<const N: usize>(
    backend: Backend,
    rate: usize,
    ds: u8,
    inputs: &[&[u8]],
) -> Vec<[u8; N]> {
    let mut out = vec![[0u8; N]; inputs.len()];
    for (ins, outs) in inputs.chunks(LANES).zip(out.chunks_mut(LANES)) {
        let mut sponge = Sponge::absorb(backend, rate, ds, ins);
        let mut views: Vec<&mut [u8]> = outs.iter_mut().map(|o| &mut o[..]).collect();
        sponge.squeeze(&mut views);
    }
    out
}

/// Variable-length outputs (`out_len` bytes each) of one rate, SHAKE's domain.
fn shake_batch(backend: Backend, rate: usize, inputs: &[&[u8]], out_len: usize) -> Vec<Vec<u8>> {
    let mut out = vec![vec![0u8; out_len]; inputs.len()];
    for (ins, outs) in inputs.chunks(LANES).zip(out.chunks_mut(LANES)) {
        let mut sponge = Sponge::absorb(backend, rate, DS_SHAKE, ins);
        let mut views: Vec<&mut [u8]> = outs.iter_mut().map(|o| &mut o[..]).collect();
        sponge.squeeze(&mut views);
    }
    out
}

/// SHA3-256 of every input, in order (8 side by side; inputs may differ in length).
pub fn sha3_256_batch(backend: Backend, inputs: &[&[u8]]) -> Vec<[u8; 32]> {
    hash_batch(backend, SHA3_256_RATE, DS_SHA3, inputs)
}

/// SHA3-512 of every input, in order (8 side by side; inputs may differ in length).
pub fn sha3_512_batch(backend: Backend, inputs: &[&[u8]]) -> Vec<[u8; 64]> {
    hash_batch(backend, SHA3_512_RATE, DS_SHA3, inputs)
}

/// SHAKE128 of every input, `out_len` bytes each, in order (8 side by side).
pub fn shake128_batch(backend: Backend, inputs: &[&[u8]], out_len: usize) -> Vec<Vec<u8>> {
    shake_batch(backend, SHAKE128_RATE, inputs, out_len)
}

/// SHAKE256 of every input, `out_len` bytes each, in order (8 side by side).
pub fn shake256_batch(backend: Backend, inputs: &[&[u8]], out_len: usize) -> Vec<Vec<u8>> {
    shake_batch(backend, SHAKE256_RATE, inputs, out_len)
}
