//! ML-KEM-768 encapsulation (FIPS 203) in batches: the server's half of the TLS 1.3
//! `X25519MLKEM768` key exchange for up to 8 handshakes at once, every lane with its own
//! client key.
//!
//! [`mlkem768_encaps_batch`] runs ML-KEM.Encaps_internal (FIPS 203, Algorithm 17) per job,
//! with the input checks of section 7.2 (length and the modulus check) on each encapsulation
//! key: a key that fails gets its own error, the other lanes go on. The caller supplies the
//! randomness `m` (32 bytes from an approved RBG, e.g. BoringSSL's `RAND_bytes`; fixed `m` is
//! for known-answer tests only).
//!
//! The batch shares its Keccak work (`sha3`, 8 sponges per permutation on AVX-512, 4 on
//! AVX2): `H(ek)` and `G(m || H(ek))` of all lanes side by side, and the 9 matrix entries
//! (SHAKE128) and 7 noise polynomials (SHAKE256) of every lane as one list of seeds, so even a
//! single encapsulation runs its 9 SampleNTTs 8 at a time. The arithmetic (`mlkem::ntt`: the
//! NTTs and products of K-PKE.Encrypt) runs on AVX2 for every SIMD backend: 8 encapsulations
//! per `ymm` ("vertical", one per lane), or for up to 4 encapsulations 2 per `ymm` with each
//! one's polynomials side by side ("spread": its 3 NTTs in one pass, its `u` and `v` in one
//! pass of products and inverse NTT), so a lone handshake gains too; `portable` runs it one
//! encapsulation at a time in `u32`. Compression and encoding (`mlkem::poly`) are scalar.
//!
//! Measured (Xeon with AVX-512 IFMA, shared machine, fastest of 15 interleaved rounds,
//! `tests/mlkem_boring.rs` `timing_against_boringssl`): BoringSSL 12.5 us per encapsulation;
//! here `ifma` 16.6 us alone, 11.0 us each in 4s, 10.0 us each in 8s; `avx2` 18.3 / 13.1 /
//! 12.5 us; `portable` 33 us. Where the batch of 8 spends its time (perf): the 8-lane NTTs and
//! products ~20%, SampleNTT's parsing ~17%, Keccak ~12%, squeezing ~10%, the transposition
//! into lanes ~10%, CBD ~6%, compression/encoding and the rest ~25%.
//!
//! Constant time: `m`, `r`, `K`, the noise and every intermediate before the ciphertext are
//! secret: hashing, CBD sampling, NTTs, products and compression have no branch or index
//! that depends on them (see `mlkem::poly`, `mlkem::ntt`, `sha3`). Variable time on public
//! data only: the encapsulation key checks and SampleNTT's rejection sampling of the public
//! matrix (`_vartime`). Secret buffers are zeroed before they are dropped. Checked by
//! valgrind (`mbmath-ctgrind mlkem`: portable, AVX2, FMA backends, in CI) and dudect
//! (`dudect_mlkem_encaps_fixed_vs_random_m`, ifma, by hand).

#[cfg(target_arch = "x86_64")]
mod avx2;
mod ntt;
mod poly;
mod sample;

use crate::backend::Backend;
use crate::error::MathError;
use crate::field25519::wipe;
use crate::keccak::LANES;
use crate::mlkem::ntt::{
    encrypt_core, Coeff, Work, K, SLOT_A, SLOT_E1, SLOT_E2, SLOT_MU, SLOT_T, SLOT_U, SLOT_V,
    SLOT_Y, SPREAD, SPREAD_E, SPREAD_M, SPREAD_MU, SPREAD_OUT, SPREAD_Y,
};
use crate::mlkem::poly::{compress_encode, decode12_checked_vartime, message_poly, Poly, N};
use crate::mlkem::sample::{cbd2_batch, sample_ntt_batch_vartime};
use crate::sha3::{sha3_256_batch, sha3_512_batch};

/// Bytes of an ML-KEM-768 encapsulation key (`384 k + 32`).
pub const MLKEM768_ENCAPS_KEY_BYTES: usize = 384 * K + 32;
/// Bytes of an ML-KEM-768 ciphertext (`32 (du k + dv)`).
pub const MLKEM768_CIPHERTEXT_BYTES: usize = 32 * (10 * K + 4);
/// Bytes of an ML-KEM shared secret.
pub const MLKEM_SHARED_SECRET_BYTES: usize = 32;

/// One encapsulation: the peer's encapsulation key and 32 fresh random bytes.
#[derive(Clone, Copy)]
pub struct MlKemEncapsJob<'a> {
    /// The encapsulation key as received (checked here).
    pub ek: &'a [u8],
    /// The randomness `m` of ML-KEM.Encaps (FIPS 203, Algorithm 20, line 1).
    pub m: &'a [u8; 32],
}

/// The result of one encapsulation.
pub struct MlKemEncapsulation {
    /// The shared secret `K`.
    pub shared_secret: [u8; MLKEM_SHARED_SECRET_BYTES],
    /// The ciphertext `c` for the peer.
    pub ciphertext: Vec<u8>,
}

impl Drop for MlKemEncapsulation {
    fn drop(&mut self) {
        wipe(core::slice::from_mut(&mut self.shared_secret));
    }
}

/// The encapsulation key's `t_hat` (its three polynomials), or why it is refused (FIPS 203,
/// 7.2: length, then the modulus check). Variable time: the key is public.
fn check_ek_vartime(ek: &[u8]) -> Result<[Poly; K], MathError> {
    if ek.len() != MLKEM768_ENCAPS_KEY_BYTES {
        return Err(MathError::InvalidPublicKey(
            "ML-KEM-768 encapsulation key: wrong length",
        ));
    }
    let mut t = [[0u16; N]; K];
    for (p, chunk) in t.iter_mut().zip(ek[..384 * K].chunks_exact(384)) {
        *p = decode12_checked_vartime(chunk).ok_or(MathError::InvalidPublicKey(
            "ML-KEM-768 encapsulation key: a coefficient is not below q (modulus check)",
        ))?;
    }
    Ok(t)
}

/// ML-KEM-768 encapsulation for every job, in order: a shared secret and a ciphertext, or the
/// reason the job's encapsulation key was refused. Up to 8 jobs share each Keccak batch.
pub fn mlkem768_encaps_batch(
    backend: Backend,
    jobs: &[MlKemEncapsJob<'_>],
) -> Vec<Result<MlKemEncapsulation, MathError>> {
    let mut out: Vec<Option<Result<MlKemEncapsulation, MathError>>> =
        (0..jobs.len()).map(|_| None).collect();
    let mut valid = Vec::with_capacity(jobs.len());
    for (i, job) in jobs.iter().enumerate() {
        match check_ek_vartime(job.ek) {
            Ok(t) => valid.push((i, t)),
            Err(e) => out[i] = Some(Err(e)),
        }
    }
    for chunk in valid.chunks(LANES) {
        let lane_jobs: Vec<&MlKemEncapsJob<'_>> = chunk.iter().map(|&(i, _)| &jobs[i]).collect();
        let t_hats: Vec<&[Poly; K]> = chunk.iter().map(|(_, t)| t).collect();
        for ((i, _), enc) in chunk.iter().zip(encaps_lanes(backend, &lane_jobs, &t_hats)) {
            out[*i] = Some(Ok(enc));
        }
    }
    out.into_iter()
        .map(|r| r.unwrap_or(Err(MathError::Unsupported("ML-KEM lane without result"))))
        .collect()
}

/// Encaps_internal for up to 8 checked keys (`t_hats[l]` decoded from `jobs[l].ek`).
fn encaps_lanes(
    backend: Backend,
    jobs: &[&MlKemEncapsJob<'_>],
    t_hats: &[&[Poly; K]],
) -> Vec<MlKemEncapsulation> {
    let lanes = jobs.len();
    // (K, r) = G(m || H(ek)).
    let eks: Vec<&[u8]> = jobs.iter().map(|j| j.ek).collect();
    let h = sha3_256_batch(backend, &eks);
    let mut g_in: Vec<[u8; 64]> = jobs
        .iter()
        .zip(&h)
        .map(|(j, h)| {
            let mut x = [0u8; 64];
            x[..32].copy_from_slice(j.m);
            x[32..].copy_from_slice(h);
            x
        })
        .collect();
    let g_refs: Vec<&[u8]> = g_in.iter().map(|x| &x[..]).collect();
    let mut g = sha3_512_batch(backend, &g_refs);
    wipe(&mut g_in);

    // A_hat[i][j] = SampleNTT(rho || j || i), all lanes' 9 entries in one list.
    let mut a_seeds = Vec::with_capacity(lanes * K * K);
    for job in jobs {
        let rho = &job.ek[384 * K..];
        for i in 0..K {
            for j in 0..K {
                let mut s = [0u8; 34];
                s[..32].copy_from_slice(rho);
                s[32] = j as u8;
                s[33] = i as u8;
                a_seeds.push(s);
            }
        }
    }
    let a_hat = sample_ntt_batch_vartime(backend, &a_seeds);

    // y (N = 0..3), e1 (N = 3..6), e2 (N = 6): SamplePolyCBD_2(PRF_2(r, N)).
    let mut prf_seeds = Vec::with_capacity(lanes * (2 * K + 1));
    for gl in &g {
        for n in 0..2 * K + 1 {
            let mut s = [0u8; 33];
            s[..32].copy_from_slice(&gl[32..]);
            s[32] = n as u8;
            prf_seeds.push(s);
        }
    }
    let mut noise = cbd2_batch(backend, &prf_seeds);
    wipe(&mut prf_seeds);

    let mut mus: Vec<Poly> = jobs.iter().map(|j| message_poly(j.m)).collect();
    let mut u = vec![[[0u16; N]; K]; lanes];
    let mut v = vec![[0u16; N]; lanes];
    let inputs = EncryptInputs {
        a_hat: &a_hat,
        t_hats,
        noise: &noise,
        mus: &mus,
    };
    match arith(backend) {
        Arith::Portable => encrypt_lanes::<u32>(&inputs, &mut u, &mut v, encrypt_core),
        // Few lanes: each encryption's own polynomials side by side, 2 per `ymm`.
        #[cfg(target_arch = "x86_64")]
        Arith::Avx2(t) if lanes <= SPREAD_MAX_LANES => {
            encrypt_spread(&inputs, &mut u, &mut v, |w| avx2::encrypt2_spread(t, w))
        }
        #[cfg(target_arch = "x86_64")]
        Arith::Avx2(t) => encrypt_lanes(&inputs, &mut u, &mut v, |w| avx2::encrypt8(t, w)),
    }
    wipe(&mut noise);
    wipe(&mut mus);

    let mut res = Vec::with_capacity(lanes);
    for (l, (ul, vl)) in u.iter_mut().zip(v.iter_mut()).enumerate() {
        let mut c = Vec::with_capacity(MLKEM768_CIPHERTEXT_BYTES);
        for p in ul.iter() {
            compress_encode(p, 10, &mut c);
        }
        compress_encode(vl, 4, &mut c);
        debug_assert_eq!(c.len(), MLKEM768_CIPHERTEXT_BYTES);
        let mut shared_secret = [0u8; 32];
        shared_secret.copy_from_slice(&g[l][..32]);
        res.push(MlKemEncapsulation {
            shared_secret,
            ciphertext: c,
        });
        wipe(ul);
        wipe(core::slice::from_mut(vl));
    }
    wipe(&mut g);
    res
}

/// How the encryption arithmetic runs on a backend.
enum Arith {
    /// One encryption at a time in `u32`.
    Portable,
    /// 8 per `ymm` (AVX2; the `avx2`, `fma` and `ifma` backends all have it).
    #[cfg(target_arch = "x86_64")]
    Avx2(crate::token::Avx2Token),
}

fn arith(backend: Backend) -> Arith {
    match backend {
        Backend::Portable => Arith::Portable,
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2(t) => Arith::Avx2(t),
        // An FmaToken or IfmaToken implies AVX2 on every CPU that has them; checked again to
        // obtain the token.
        #[allow(unreachable_patterns)]
        _ => {
            #[cfg(target_arch = "x86_64")]
            if let Some(t) = crate::token::Avx2Token::new() {
                return Arith::Avx2(t);
            }
            Arith::Portable
        }
    }
}

/// The sampled inputs of the lanes' encryptions (`a_hat`: 9 per lane, `noise`: 7 per lane:
/// `y`, `e1`, `e2`; `mus`: `Decompress_1(m)`).
struct EncryptInputs<'a> {
    a_hat: &'a [Poly],
    t_hats: &'a [&'a [Poly; K]],
    noise: &'a [Poly],
    mus: &'a [Poly],
}

fn pick<'a>(ls: &core::ops::Range<usize>, f: impl Fn(usize) -> &'a Poly) -> Vec<&'a Poly> {
    ls.clone().map(f).collect()
}

/// `u` and `v` of every lane, `W::WIDTH` lanes per call of `core`.
fn encrypt_lanes<W: Coeff>(
    x: &EncryptInputs<'_>,
    u: &mut [[Poly; K]],
    v: &mut [Poly],
    core: impl Fn(&mut Work<W>),
) {
    let mut w = Work::<W>::vertical();
    let n = 2 * K + 1;
    for start in (0..v.len()).step_by(W::WIDTH) {
        let ls = start..(start + W::WIDTH).min(v.len());
        for i in 0..K * K {
            w.load(SLOT_A + i, &pick(&ls, |l| &x.a_hat[l * K * K + i]));
        }
        for j in 0..K {
            w.load(SLOT_T + j, &pick(&ls, |l| &x.t_hats[l][j]));
            w.load(SLOT_Y + j, &pick(&ls, |l| &x.noise[l * n + j]));
            w.load(SLOT_E1 + j, &pick(&ls, |l| &x.noise[l * n + K + j]));
        }
        w.load(SLOT_E2, &pick(&ls, |l| &x.noise[l * n + 2 * K]));
        w.load(SLOT_MU, &pick(&ls, |l| &x.mus[l]));
        core(&mut w);
        for i in 0..K {
            let mut outs: Vec<&mut Poly> = u[ls.clone()].iter_mut().map(|p| &mut p[i]).collect();
            w.store(SLOT_U + i, &mut outs);
        }
        let mut outs: Vec<&mut Poly> = v[ls.clone()].iter_mut().collect();
        w.store(SLOT_V, &mut outs);
        w.wipe();
    }
}

/// Up to this many lanes, the spread layout (`encrypt_spread`) is used on AVX2.
const SPREAD_MAX_LANES: usize = 4;

/// `f(l, i)` for the 4 lanes `i` of every encryption `l` in `ls`.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn spread<'a>(ls: &core::ops::Range<usize>, f: impl Fn(usize, usize) -> &'a Poly) -> Vec<&'a Poly> {
    ls.clone()
        .flat_map(|l| (0..SPREAD).map(move |i| (l, i)))
        .map(|(l, i)| f(l, i))
        .collect()
}

/// The all-zero polynomial (the spread layout's unused lanes).
static ZERO: Poly = [0; N];

/// `u` and `v` of every lane in the spread layout (`mlkem::ntt::SPREAD`), `W::WIDTH / 4`
/// encryptions per call of `core`.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn encrypt_spread<W: Coeff>(
    x: &EncryptInputs<'_>,
    u: &mut [[Poly; K]],
    v: &mut [Poly],
    core: impl Fn(&mut Work<W>),
) {
    let mut w = Work::<W>::spread();
    let n = 2 * K + 1;
    let per = W::WIDTH / SPREAD;
    for start in (0..v.len()).step_by(per) {
        let ls = start..(start + per).min(v.len());
        for j in 0..K {
            w.load(
                SPREAD_M + j,
                &spread(&ls, |l, i| {
                    if i < K {
                        &x.a_hat[l * K * K + K * j + i]
                    } else {
                        &x.t_hats[l][j]
                    }
                }),
            );
        }
        w.load(
            SPREAD_Y,
            &spread(&ls, |l, i| if i < K { &x.noise[l * n + i] } else { &ZERO }),
        );
        w.load(SPREAD_E, &spread(&ls, |l, i| &x.noise[l * n + K + i]));
        w.load(
            SPREAD_MU,
            &spread(&ls, |l, i| if i < K { &ZERO } else { &x.mus[l] }),
        );
        core(&mut w);
        let mut outs: Vec<&mut Poly> = Vec::with_capacity(per * SPREAD);
        for (ul, vl) in u[ls.clone()].iter_mut().zip(v[ls.clone()].iter_mut()) {
            outs.extend(ul.iter_mut());
            outs.push(vl);
        }
        w.store(SPREAD_OUT, &mut outs);
        w.wipe();
    }
}
