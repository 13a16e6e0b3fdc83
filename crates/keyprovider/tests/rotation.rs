//! Key rotation through the registry's seam, 1,000 times: the provider (its queues, engine and
//! stats) is kept, each rotation's context gets a method bound to its own key, and neither the
//! per-worker queue map, the number of live providers nor the process's live heap grows.
//!
//! This file is its own test binary on purpose: it installs a counting global allocator, and the
//! heap figure is only meaningful when no other test allocates at the same time.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

use quickshake_config::PrivateKeyProvider;
use quickshake_keyprovider::op::{OpKind, PendingOp};
use quickshake_keyprovider::queue::queues_on_this_thread;
use quickshake_keyprovider::{KeySetup, ProviderMethod, ProviderOptions, Providers};
use quickshake_stats::Store;
use quickshake_test_support::keys::{batching_provider, public_key as public_of};
use quickshake_test_support::paths::certs_dir;
use serde_json::json;

/// Live heap bytes of the whole process.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `System` with this layout (see `alloc`).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: the caller's contract for `realloc` is passed on as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A `quickshake.batching` provider on the software engine for `name`'s key file, with
/// per-worker queues: the thread-local map whose cleanup this file checks (shared queues live
/// in the provider and go with it).
fn provider(name: &str, poll_delay_ms: u64) -> PrivateKeyProvider {
    let key = certs_dir().join(format!("{name}.key.pem"));
    let typed = json!({
        "private_key": { "filename": key.display().to_string() },
        "engine": "software",
        "batching": "adaptive",
        "queues": "per_worker",
        "poll_delay": format!("{}s", poll_delay_ms as f64 / 1000.0),
    });
    batching_provider(typed, false)
}

fn method(setup: KeySetup) -> ProviderMethod {
    match setup {
        KeySetup::Provider { method, .. } => method,
        KeySetup::Inline { description, .. } => panic!("expected a provider, got {description}"),
    }
}

/// One RSA operation through the method's queues on this worker, checked by the provider.
async fn sign_once(m: &ProviderMethod, name: &str) {
    let key = quickshake_keyprovider::ProviderKey::from_pem(
        &std::fs::read(certs_dir().join(format!("{name}.key.pem"))).expect("key"),
        "test",
        name,
    )
    .expect("key parses");
    let mut input = vec![0x5au8; key.rsa_len()];
    input[0] = 0;
    let (op, rx) = PendingOp::new(OpKind::RsaDecrypt, key, input);
    m.queues().submit(op);
    let out = rx.await.expect("reply").expect("operation succeeds");
    assert_eq!(out.len(), 256);
}

const SCOPE: &str = "listener.127.0.0.1_0.";

#[test]
fn a_thousand_rotations_leave_queues_providers_and_heap_flat() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let store = Store::new();
        let providers = Providers::new(store, ProviderOptions::default());
        let names = ["rsa2048", "other"];
        let publics = names.map(public_of);
        let rotate = |i: usize, poll_ms: u64| {
            let n = i % 2;
            let setup = providers
                .setup(&provider(names[n], poll_ms), None, &publics[n], SCOPE)
                .expect("rotation loads");
            (method(setup), names[n])
        };

        // Same settings, new key each time: the same queues come back, bound to the new key.
        let (mut current, mut name) = rotate(0, 10);
        sign_once(&current, name).await;
        let first = current.queues().clone();
        let mut heap_at_100 = 0;
        for i in 1..=1_000 {
            let (next, next_name) = rotate(i, 10);
            assert!(
                Arc::ptr_eq(next.queues(), &first),
                "rotation {i} built a new provider"
            );
            // The old context goes away (its connections finished).
            current = next;
            name = next_name;
            sign_once(&current, name).await;
            assert_eq!(queues_on_this_thread(), 1, "rotation {i}");
            assert_eq!(providers.live_providers(), 1, "rotation {i}");
            if i == 100 {
                heap_at_100 = LIVE.load(Ordering::Relaxed);
            }
        }
        let grown = LIVE.load(Ordering::Relaxed) - heap_at_100;
        eprintln!("heap growth over rotations 100..1000 (same provider): {grown} bytes");
        assert!(
            grown < 64 * 1024,
            "heap grew {grown} bytes over 900 rotations"
        );
        drop(first);

        // Settings change with every rotation (poll_delay 10 ms <-> 11 ms): a new provider each
        // time; the old one goes with its last context, and this worker drops its queue.
        let mut heap_at_100 = 0;
        for i in 1..=1_000 {
            let (next, next_name) = rotate(i, 10 + (i % 2) as u64);
            assert!(!Arc::ptr_eq(next.queues(), current.queues()));
            drop(std::mem::replace(&mut current, next));
            name = next_name;
            sign_once(&current, name).await;
            assert_eq!(queues_on_this_thread(), 1, "reconfiguration {i}");
            assert_eq!(providers.live_providers(), 1, "reconfiguration {i}");
            if i == 100 {
                heap_at_100 = LIVE.load(Ordering::Relaxed);
            }
        }
        let grown = LIVE.load(Ordering::Relaxed) - heap_at_100;
        eprintln!("heap growth over reconfigurations 100..1000 (new provider each): {grown} bytes");
        assert!(
            grown < 64 * 1024,
            "heap grew {grown} bytes over 900 reconfigurations"
        );
    });
}
