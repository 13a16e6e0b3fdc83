use quickshake_mbmath::*;
use std::time::Instant;
fn main() {
    let b = Backend::new(BackendKind::Ifma).unwrap();
    let ks: Vec<[u8; 32]> = (0..8u8)
        .map(|i| [i.wrapping_mul(37).wrapping_add(1); 32])
        .collect();
    let jobs: Vec<X25519Job> = ks
        .iter()
        .map(|k| X25519Job {
            scalar: k,
            point: &X25519_BASE_POINT,
        })
        .collect();
    for _ in 0..3 {
        let n = 2000;
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(x25519_batch(b, &jobs).unwrap());
        }
        let el = t.elapsed().as_secs_f64();
        println!(
            "ifma 8-lane batch: {:.1} us/batch, {:.2} us/op",
            el / n as f64 * 1e6,
            el / (n * 8) as f64 * 1e6
        );
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(x25519_portable(&ks[0], &X25519_BASE_POINT));
        }
        println!(
            "portable: {:.2} us/op",
            t.elapsed().as_secs_f64() / n as f64 * 1e6
        );
    }
}
