//! Constant-time harness for valgrind memcheck ("ctgrind").
//!
//! Run by `tests/ctgrind.rs` as
//! `valgrind --error-exitcode=42 --track-origins=no mbmath-ctgrind MODE`.
//!
//! The secret inputs (the key's primes, CRT exponents, `R^2` values, CRT
//! coefficient, and the message) are marked *undefined* with the memcheck
//! client request `VALGRIND_MAKE_MEM_UNDEFINED` (emitted below with the
//! documented amd64 magic instruction sequence, no C header needed). memcheck
//! then reports every conditional branch, conditional move or memory address
//! that depends on them. Results are marked defined again before they are
//! compared with a reference computed on unmarked data.
//!
//! Modes:
//! * `ct` (default): full RSA-2048 CRT batch on the portable and (if the CPU
//!   and valgrind offer them) AVX2 and FMA backends. Must produce no memcheck error.
//! * `mlkem`: ML-KEM-768 encapsulation of 3 lanes (two keys) with the randomness `m` marked
//!   secret, on the same backends (AVX2 and FMA run the AVX2 Keccak and NTT; AVX-512 is out
//!   of valgrind's reach). Must produce no memcheck error; the ciphertexts and shared secrets
//!   are declassified and compared with kyber-py's known answers.
//! * `p256`: P-256 ECDH (private scalar secret) and ECDSA signing for a given nonce (key and
//!   nonce secret), portable code. Must produce no memcheck error; outputs are compared with
//!   an unmarked reference and RFC 6979 A.2.5.
//! * `leaky-branch`: control; square-and-multiply branching on exponent bits.
//!   Must be flagged ("Conditional jump or move depends on uninitialised value").
//! * `leaky-index`: control; table lookup indexed by a secret.
//!   Must be flagged ("Use of uninitialised value of size 8").
//!
//! Outside valgrind the client requests are no-ops and the binary just runs.

use std::hint::black_box;

use quickshake_mbmath::{
    ecdsa_p256_sign_with_nonce_unchecked, mlkem768_encaps_batch, p256_ecdh_unchecked,
    rsa_private_crt_batch_unchecked, Avx2Token, Backend, FmaToken, MlKemEncapsJob, RsaCrtKey,
};

#[cfg(target_arch = "x86_64")]
fn client_request(request: u64, arg1: u64, arg2: u64) -> u64 {
    let args: [u64; 6] = [request, arg1, arg2, 0, 0, 0];
    let mut result: u64 = 0; // returned unchanged when not running on valgrind
                             // SAFETY: this is valgrind's "special instruction" preamble (four
                             // rotations of rdi by 3+13+61+51 = 128 bits, i.e. no change) followed by
                             // `xchg rbx, rbx` (no change). Natively it has no effect; under valgrind
                             // it performs the client request described by `args` (read through rax)
                             // and writes the result to rdx. rdi is declared clobbered to be safe.
    unsafe {
        core::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            inout("rdx") result,
            in("rax") args.as_ptr(),
            out("rdi") _,
        );
    }
    result
}

#[cfg(not(target_arch = "x86_64"))]
fn client_request(_request: u64, _arg1: u64, _arg2: u64) -> u64 {
    0
}

const RUNNING_ON_VALGRIND: u64 = 0x1001;
/// `VG_USERREQ_TOOL_BASE('M','C')`.
const MC_BASE: u64 = ((b'M' as u64) << 24) | ((b'C' as u64) << 16);
const MAKE_MEM_UNDEFINED: u64 = MC_BASE + 1;
const MAKE_MEM_DEFINED: u64 = MC_BASE + 2;

fn mark_undefined(ptr: *const u8, len: usize) {
    client_request(MAKE_MEM_UNDEFINED, ptr as u64, len as u64);
}

fn mark_defined(ptr: *const u8, len: usize) {
    client_request(MAKE_MEM_DEFINED, ptr as u64, len as u64);
}

fn secret<T: ?Sized>(x: &T) {
    mark_undefined((x as *const T).cast::<u8>(), core::mem::size_of_val(x));
}

fn declassify<T: ?Sized>(x: &T) {
    mark_defined((x as *const T).cast::<u8>(), core::mem::size_of_val(x));
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    let hex = if hex.len() % 2 == 1 {
        format!("0{hex}")
    } else {
        hex.to_string()
    };
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

fn parse_key(line: &str) -> RsaCrtKey {
    let get = |name: &str| -> Vec<u8> {
        let prefix = format!("{name}=");
        hex_bytes(
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(&prefix))
                .expect("field"),
        )
    };
    RsaCrtKey::from_components(
        &get("n"),
        &get("e"),
        &get("d"),
        &get("p"),
        &get("q"),
        &get("dp"),
        &get("dq"),
        &get("qinv"),
    )
    .expect("key")
}

fn run_ct() {
    let keys: Vec<RsaCrtKey> = include_str!("../../../../testdata/rsa-crt-keys/rsa2048_keys.txt")
        .lines()
        .filter(|l| !l.is_empty())
        .take(2)
        .map(parse_key)
        .collect();
    // Messages: a random-looking one, one >= p and q (top bytes set), and edge values.
    let mut msgs: Vec<Vec<u8>> = Vec::new();
    let mut m = vec![0u8; 256];
    for (j, b) in m.iter_mut().enumerate().skip(1) {
        *b = (j as u8).wrapping_mul(151).wrapping_add(7);
    }
    msgs.push(m);
    let mut one = vec![0u8; 256];
    one[255] = 1;
    msgs.push(one);
    msgs.push(vec![0u8; 256]);
    let mut n_minus_1 = keys[1].modulus_be();
    n_minus_1[255] -= 1; // n is odd
    msgs.push(n_minus_1);
    let lane_keys = [&keys[0], &keys[0], &keys[1], &keys[1]];

    let backends = ct_backends();

    // Reference outputs, computed before anything is marked.
    let lanes: Vec<(&RsaCrtKey, &[u8])> = lane_keys
        .iter()
        .zip(&msgs)
        .map(|(k, m)| (*k, m.as_slice()))
        .collect();
    let expected = rsa_private_crt_batch_unchecked(Backend::Portable, &lanes);

    for key in &keys {
        key.for_each_secret_region(mark_undefined);
    }
    for m in &msgs {
        secret(m.as_slice());
    }
    for backend in backends {
        let out = rsa_private_crt_batch_unchecked(backend, &lanes);
        for o in &out {
            declassify(o.as_slice());
        }
        assert_eq!(
            out,
            expected,
            "backend {} gave a wrong result",
            backend.kind()
        );
        println!("ct: backend {} ok ({} lanes)", backend.kind(), out.len());
    }
    for key in &keys {
        key.for_each_secret_region(mark_defined);
    }
}

/// The portable backend and, where the CPU and valgrind offer them, AVX2 and FMA.
fn ct_backends() -> Vec<Backend> {
    let mut backends = vec![Backend::Portable];
    match Avx2Token::new() {
        Some(t) => backends.push(Backend::Avx2(t)),
        None => println!("note: AVX2 not available (CPU or valgrind); portable only"),
    }
    match FmaToken::new() {
        Some(t) => backends.push(Backend::Fma(t)),
        None => println!("note: FMA not available (CPU, valgrind or MXCSR); not checked"),
    }
    backends
}

fn run_mlkem_ct() {
    // (ek, m, K, c) of the first known answers (kyber-py 1.2.0).
    let vectors: Vec<[Vec<u8>; 4]> = include_str!("../../../../testdata/mlkem/mlkem768_encaps.txt")
        .lines()
        .filter(|l| l.starts_with("valid "))
        .take(2)
        .map(|l| {
            let field = |name: &str| {
                hex_bytes(
                    l.split_whitespace()
                        .find_map(|f| f.strip_prefix(name))
                        .expect("field"),
                )
            };
            [field("ek="), field("m="), field("K="), field("c=")]
        })
        .collect();
    let lane_vectors = [&vectors[0], &vectors[1], &vectors[0]];
    let ms: Vec<[u8; 32]> = lane_vectors
        .iter()
        .map(|v| v[1].clone().try_into().expect("32-byte m"))
        .collect();
    for backend in ct_backends() {
        for m in &ms {
            secret(m);
        }
        let jobs: Vec<MlKemEncapsJob<'_>> = lane_vectors
            .iter()
            .zip(&ms)
            .map(|(v, m)| MlKemEncapsJob { ek: &v[0], m })
            .collect();
        let out = mlkem768_encaps_batch(backend, &jobs);
        for m in &ms {
            declassify(m);
        }
        for (o, v) in out.iter().zip(lane_vectors) {
            let o = o.as_ref().expect("valid key");
            declassify(&o.shared_secret);
            declassify(o.ciphertext.as_slice());
            assert_eq!(o.shared_secret[..], v[2][..], "backend {}", backend.kind());
            assert_eq!(o.ciphertext, v[3], "backend {}", backend.kind());
        }
        println!("mlkem: backend {} ok ({} lanes)", backend.kind(), out.len());
    }
}

/// Deliberately leaky: branches on the exponent bits.
fn leaky_square_and_multiply(base: u64, exp: u64, m: u64) -> u64 {
    let mut r: u64 = 1;
    for i in (0..64).rev() {
        r = ((r as u128 * r as u128) % m as u128) as u64;
        if (exp >> i) & 1 == 1 {
            // black_box keeps this a real branch (no cmov).
            r = black_box(((r as u128 * base as u128) % m as u128) as u64);
        }
    }
    r
}

fn run_leaky_branch() {
    let exp = black_box(0x1234_5678_9abc_def1u64);
    secret(&exp);
    // Re-read through an opaque reference: the value must come from the (now undefined)
    // memory, not from a register the optimiser kept from before the client request.
    let exp = *black_box(&exp);
    let r = leaky_square_and_multiply(3, exp, 1_000_000_007);
    declassify(&r);
    println!("leaky-branch: {r}");
}

static TABLE: [u64; 16] = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3];

fn run_leaky_index() {
    let s = black_box(0xa5u64);
    secret(&s);
    let s = *black_box(&s);
    let mut acc = 0u64;
    for k in 0..4 {
        acc = acc.wrapping_add(TABLE[((s >> (4 * k)) & 15) as usize]);
    }
    let acc = black_box(acc);
    declassify(&acc);
    println!("leaky-index: {acc}");
}

/// P-256 (portable code, every backend runs it): ECDH with the private scalar secret, and
/// ECDSA signing with the private key and the nonce `k` secret (the DRBG's range check and
/// the r/s = 0 retries are the only branches of the full signing path; they sit outside the
/// `_unchecked` entries, see `p256::ecdsa`). Outputs are declassified and compared with a
/// reference computed on unmarked inputs.
fn run_p256_ct() {
    let hex32 = |h: &str| -> [u8; 32] { hex_bytes(h).try_into().expect("32 bytes") };
    let d = hex32("c9afa9d845ba75166b5c215767b1d6934e50c3db36e89b127b8a622b120f6721");
    let k = hex32("a6e3c57dd01abe90086538398355dd4c3b17aa873382b0f24d6129493d8aad60");
    let digest = hex32("af2bdbe1aa9b6ec1e2ade1d694f41fc71a831d0268e9891562113d8a62add1bf");
    // The RFC 6979 A.2.5 key's public point serves as the peer.
    let peer = hex_bytes(
        "0460fed4ba255a9d31c961eb74c6356d68c049b8923b61fa6ce669622e60f29fb6\
         7903fe1008b8bc99a41ae9e95628bc64f2f1b20c2d7e9f5177a3c294d4462299",
    );
    let ref_ecdh = p256_ecdh_unchecked(&d, &peer).expect("valid point");
    let ref_sig = ecdsa_p256_sign_with_nonce_unchecked(&d, &digest, &k);
    let (sd, sk) = (black_box(d), black_box(k));
    secret(&sd);
    secret(&sk);
    let ecdh = p256_ecdh_unchecked(&sd, &peer).expect("valid point");
    let sig = ecdsa_p256_sign_with_nonce_unchecked(&sd, &digest, &sk);
    declassify(&ecdh);
    declassify(&sig);
    assert_eq!(ecdh, ref_ecdh, "p256: ECDH differs from the reference");
    assert_eq!(sig, ref_sig, "p256: signature differs from the reference");
    // RFC 6979 A.2.5, message "sample".
    assert_eq!(
        sig.0.r,
        hex32("efd48b2aacb6a8fd1140dd9cd45e81d69d2c877b56aaf991c34d0ea84eaf3716")
    );
    println!("p256: ecdh and ecdsa sign ok");
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "ct".into());
    let on_valgrind = client_request(RUNNING_ON_VALGRIND, 0, 0) != 0;
    println!("mbmath-ctgrind mode={mode} running_on_valgrind={on_valgrind}");
    match mode.as_str() {
        "ct" => run_ct(),
        "mlkem" => run_mlkem_ct(),
        "p256" => run_p256_ct(),
        "leaky-branch" => run_leaky_branch(),
        "leaky-index" => run_leaky_index(),
        other => {
            eprintln!("unknown mode {other:?} (ct | mlkem | p256 | leaky-branch | leaky-index)");
            std::process::exit(2);
        }
    }
}
