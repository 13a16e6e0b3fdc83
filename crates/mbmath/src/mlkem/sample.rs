//! ML-KEM's sampling over many seeds at once on the batched sponges (`sha3::Sponge`, 8 per
//! Keccak batch): the matrix entries from SHAKE128 (SampleNTT) and the noise from SHAKE256
//! (PRF, then SamplePolyCBD_2).

use crate::backend::Backend;
use crate::field25519::wipe;
use crate::keccak::LANES;
use crate::mlkem::poly::{cbd2, Poly, N, Q};
use crate::sha3::{Sponge, SHAKE128_RATE, SHAKE256_RATE};

/// Domain byte of SHAKE (FIPS 202).
const DS_SHAKE: u8 = 0x1f;

/// Candidates kept per lane: below N before a round, at most 2 per 3 bytes of 3 blocks in it.
const SCRATCH: usize = N + 2 * SHAKE128_RATE;

/// SampleNTT(seed) (FIPS 203, Algorithm 7) for every 34-byte seed `rho || j || i`: rejection
/// sampling of 12-bit candidates below `q` from SHAKE128. Variable time: how many blocks are
/// squeezed and which candidates are kept depend on the output, and the seeds are public
/// (the encapsulation key's `rho`). 8 seeds share each squeeze; a batch squeezes 3 blocks
/// (enough for all 256 coefficients most of the time), then one block more for all lanes
/// while any lane lacks coefficients.
pub(crate) fn sample_ntt_batch_vartime(backend: Backend, seeds: &[[u8; 34]]) -> Vec<Poly> {
    let mut out = vec![[0u16; N]; seeds.len()];
    for (ins, polys) in seeds.chunks(LANES).zip(out.chunks_mut(LANES)) {
        let inputs: Vec<&[u8]> = ins.iter().map(|s| &s[..]).collect();
        let mut sponge = Sponge::absorb(backend, SHAKE128_RATE, DS_SHAKE, &inputs);
        let mut filled = vec![0usize; ins.len()];
        let mut bufs = vec![[0u8; 3 * SHAKE128_RATE]; ins.len()];
        let mut scratch = vec![[0u16; SCRATCH]; ins.len()];
        let mut blocks = 3;
        while filled.iter().any(|&f| f < N) {
            let mut views: Vec<&mut [u8]> = bufs
                .iter_mut()
                .map(|b| &mut b[..blocks * SHAKE128_RATE])
                .collect();
            sponge.squeeze(&mut views);
            for ((buf, poly), j) in bufs.iter().zip(scratch.iter_mut()).zip(filled.iter_mut()) {
                if *j >= N {
                    continue;
                }
                // Every candidate is written and kept by advancing `at` (no hard-to-predict
                // branch, one add on the loop-carried chain); the scratch has room for every
                // candidate of 3 blocks past N - 1, the surplus is dropped below.
                let mut at = *j;
                for c in buf[..blocks * SHAKE128_RATE].chunks_exact(3) {
                    let (c0, c1, c2) = (u16::from(c[0]), u16::from(c[1]), u16::from(c[2]));
                    let (d1, d2) = (c0 | (c1 & 0x0f) << 8, c1 >> 4 | c2 << 4);
                    poly[at] = d1;
                    at += usize::from(u32::from(d1) < Q);
                    poly[at] = d2;
                    at += usize::from(u32::from(d2) < Q);
                }
                *j = at;
            }
            blocks = 1;
        }
        for (poly, s) in polys.iter_mut().zip(&scratch) {
            poly.copy_from_slice(&s[..N]);
        }
    }
    out
}

/// SamplePolyCBD_2(PRF_2(seed)) (FIPS 203, Algorithms 8 and 4.3's PRF: SHAKE256 to 128
/// bytes) for every 33-byte seed `r || N`. Constant time: the seeds are secret; the sponge and
/// `cbd2` do not branch on them, and the squeezed bytes are wiped.
pub(crate) fn cbd2_batch(backend: Backend, seeds: &[[u8; 33]]) -> Vec<Poly> {
    let mut out = Vec::with_capacity(seeds.len());
    for ins in seeds.chunks(LANES) {
        let inputs: Vec<&[u8]> = ins.iter().map(|s| &s[..]).collect();
        let mut sponge = Sponge::absorb(backend, SHAKE256_RATE, DS_SHAKE, &inputs);
        let mut bufs = vec![[0u8; 128]; ins.len()];
        let mut views: Vec<&mut [u8]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
        sponge.squeeze(&mut views);
        out.extend(bufs.iter().map(cbd2));
        wipe(&mut bufs);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sha3::shake128_batch;

    /// SampleNTT straight from the specification on a long SHAKE128 output.
    fn reference(seed: &[u8; 34]) -> Poly {
        let stream = &shake128_batch(Backend::Portable, &[&seed[..]], 8 * SHAKE128_RATE)[0];
        let mut f = [0u16; N];
        let mut j = 0;
        for c in stream.chunks_exact(3) {
            let (c0, c1, c2) = (u16::from(c[0]), u16::from(c[1]), u16::from(c[2]));
            for d in [c0 | (c1 & 0x0f) << 8, c1 >> 4 | c2 << 4] {
                if u32::from(d) < Q && j < N {
                    f[j] = d;
                    j += 1;
                }
            }
        }
        assert_eq!(j, N);
        f
    }

    /// 1000 seeds (about 1 in 120 needs a fourth block, so some batches mix lanes that are done
    /// with lanes that squeeze on) on the portable and the best backend.
    #[test]
    fn batched_sampling_matches_the_specification() {
        let seeds: Vec<[u8; 34]> = (0..1000u32)
            .map(|i| {
                let mut s = [0u8; 34];
                s[..4].copy_from_slice(&i.to_le_bytes());
                s[32] = (i % 3) as u8;
                s[33] = (i / 3 % 3) as u8;
                s
            })
            .collect();
        let want: Vec<Poly> = seeds.iter().map(reference).collect();
        for backend in [Backend::Portable, Backend::best()] {
            assert_eq!(sample_ntt_batch_vartime(backend, &seeds), want);
        }
    }
}
