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
//! * `leaky-branch`: control; square-and-multiply branching on exponent bits.
//!   Must be flagged ("Conditional jump or move depends on uninitialised value").
//! * `leaky-index`: control; table lookup indexed by a secret.
//!   Must be flagged ("Use of uninitialised value of size 8").
//!
//! Outside valgrind the client requests are no-ops and the binary just runs.

use std::hint::black_box;

use quickshake_mbmath::{rsa_private_crt_batch_unchecked, Avx2Token, Backend, FmaToken, RsaCrtKey};

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

    let mut backends = vec![Backend::Portable];
    match Avx2Token::new() {
        Some(t) => backends.push(Backend::Avx2(t)),
        None => println!("note: AVX2 not available (CPU or valgrind); portable only"),
    }
    match FmaToken::new() {
        Some(t) => backends.push(Backend::Fma(t)),
        None => println!("note: FMA not available (CPU, valgrind or MXCSR); not checked"),
    }

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

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "ct".into());
    let on_valgrind = client_request(RUNNING_ON_VALGRIND, 0, 0) != 0;
    println!("mbmath-ctgrind mode={mode} running_on_valgrind={on_valgrind}");
    match mode.as_str() {
        "ct" => run_ct(),
        "leaky-branch" => run_leaky_branch(),
        "leaky-index" => run_leaky_index(),
        other => {
            eprintln!("unknown mode {other:?} (ct | leaky-branch | leaky-index)");
            std::process::exit(2);
        }
    }
}
