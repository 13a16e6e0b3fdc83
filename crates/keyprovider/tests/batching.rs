//! The queues of `quickshake.batching`, driven directly: the latency budget in virtual time
//! (`tokio::time::pause`: arrivals at exact instants, engines taking no virtual time), and the
//! shared queues across workers under a storm, with and without engine faults.

use std::sync::Arc;
use std::time::Duration;

use quickshake_keyprovider::engine::software::SoftwareEngine;
use quickshake_keyprovider::engine::{Capabilities, EcdsaLane, Engine, LaneResult, RsaLane};
use quickshake_keyprovider::op::{HandshakeWait, OpKind, PendingOp};
use quickshake_keyprovider::provider::{Placement, ProviderCore, ProviderSettings};
use quickshake_keyprovider::queue::Queues;
use quickshake_keyprovider::stats::ProviderStats;
use quickshake_keyprovider::timer::Timer;
use quickshake_keyprovider::{Batching, BatchingMode, ProviderKey, QueueScope};
use quickshake_stats::Store;
use quickshake_test_support::fault::{FaultEngine, FaultPlan};

#[path = "common/keys.rs"]
mod keys;
use keys::{boring_raw, input};

const BUDGET: Duration = Duration::from_millis(2);

/// BoringSSL one operation at a time, presented as an 8-lane engine whose crossover is 2, as
/// our multi-buffer engines measure on IFMA CPUs: a batch of 1 goes to the scalar path.
struct EightLanes {
    inner: SoftwareEngine,
    caps: Capabilities,
}

impl EightLanes {
    fn new() -> Self {
        let inner = SoftwareEngine::default();
        let mut caps = inner.capabilities().clone();
        caps.name = "eight-lanes".into();
        caps.accelerated = true;
        caps.rsa_min_batch = 2;
        EightLanes { inner, caps }
    }
}

impl Engine for EightLanes {
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }
    fn rsa_private(&self, lanes: &[RsaLane<'_>]) -> Vec<LaneResult> {
        self.inner.rsa_private(lanes)
    }
    fn ecdsa_sign(&self, lanes: &[EcdsaLane<'_>]) -> Vec<LaneResult> {
        self.inner.ecdsa_sign(lanes)
    }
}

struct Setup {
    queues: Arc<Queues>,
    store: Store,
}

/// Queues for `engine`; `timer`: [`Timer::Virtual`] for virtual time.
fn setup(engine: Arc<dyn Engine>, batching: Batching, fallback: bool, timer: Timer) -> Setup {
    let store = Store::new();
    let stats = ProviderStats::new(&store, "listener.test.");
    let core = Arc::new(ProviderCore::new(
        engine,
        ProviderSettings {
            use_crossover: true,
            fallback,
            placement: Placement::Worker,
            batch_key_exchange: false,
        },
        stats,
    ));
    Setup {
        queues: Arc::new(Queues::new(batching, core).with_timer(timer)),
        store,
    }
}

fn budget(scope: QueueScope) -> Batching {
    Batching {
        mode: BatchingMode::Budget,
        poll_delay: Duration::from_millis(10),
        max_batch_delay: BUDGET,
        scope,
    }
}

/// The budget tests' provider: the 8-lane BoringSSL engine, shared queues, the default budget,
/// waits ending in virtual time.
fn virtual_budget() -> Setup {
    setup(
        Arc::new(EightLanes::new()),
        budget(QueueScope::Shared),
        false,
        Timer::Virtual,
    )
}

fn key() -> Arc<ProviderKey> {
    keys::key("rsa2048")
}

fn histogram(store: &Store, name: &str) -> (u64, f64, f64) {
    let h = store
        .find_histogram(&format!("listener.test.cryptomb.{name}"))
        .expect("registered")
        .snapshot();
    (h.count, h.sum, h.max)
}

fn counter(store: &Store, name: &str) -> u64 {
    store
        .counter_value(&format!("listener.test.cryptomb.{name}"))
        .expect("registered")
}

/// Queue one RSA operation of `handshake` and wait for it; the virtual time it took.
async fn sign(
    queues: &Arc<Queues>,
    key: &Arc<ProviderKey>,
    seed: usize,
    handshake: HandshakeWait,
) -> Duration {
    let start = tokio::time::Instant::now();
    let (op, rx) = PendingOp::new(OpKind::RsaSign, key.clone(), input(key, seed));
    queues.submit(op.in_handshake(handshake));
    let out = rx.await.expect("reply").expect("signed");
    assert_eq!(out, boring_raw(key, &input(key, seed)), "op {seed}");
    start.elapsed()
}

/// Open-loop (Poisson) arrivals at `rate` per second for `seconds` of virtual time, from a
/// fixed seed; every handshake's wait.
async fn open_loop(queues: &Arc<Queues>, rate: f64, seconds: f64) -> Vec<Duration> {
    let key = key();
    let n = (rate * seconds) as usize;
    let mut lcg: u64 = 0x2545_f491_4f6c_dd1d;
    let mut at = tokio::time::Instant::now();
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        lcg = lcg
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let u = ((lcg >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        at += Duration::from_secs_f64(-u.ln() / rate);
        tokio::time::sleep_until(at).await;
        let (q, k) = (queues.clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            sign(&q, &k, i, HandshakeWait::default()).await
        }));
    }
    let mut waits = Vec::with_capacity(n);
    for t in tasks {
        waits.push(t.await.expect("task"));
    }
    waits
}

#[tokio::test(start_paused = true)]
async fn the_budget_is_never_exceeded_whatever_the_load() {
    for rate in [50.0, 300.0, 600.0, 1000.0, 5000.0] {
        let s = virtual_budget();
        let waits = open_loop(&s.queues, rate, 0.5).await;
        let worst = waits.iter().max().copied().unwrap_or_default();
        assert!(worst <= BUDGET, "{rate}/s: a handshake waited {worst:?}");
        assert_eq!(counter(&s.store, "budget_exceeded"), 0, "{rate}/s");
        let (count, _, max_ms) = histogram(&s.store, "batch_delay_ms");
        assert_eq!(count as usize, waits.len());
        assert!(max_ms <= 2.0, "{rate}/s: batch_delay_ms max {max_ms}");
        let (batches, ops, _) = histogram(&s.store, "rsa_queue_sizes");
        let mean = ops / batches as f64;
        eprintln!("{rate}/s: mean batch {mean:.2}, worst wait {worst:?}");
        // Tokio's timer wheel has millisecond ticks in virtual time too: arrivals land on
        // ticks, so batch sizes here only show that batching happens, not how much.
        if rate >= 1000.0 {
            assert!(mean > 1.5, "{rate}/s: batches of {mean:.2} on average");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn lone_handshakes_at_low_load_never_wait() {
    let s = virtual_budget();
    let waits = open_loop(&s.queues, 20.0, 2.0).await;
    assert!(waits.iter().all(|w| w.is_zero()), "{waits:?}");
    let (_, sum_ms, _) = histogram(&s.store, "batch_delay_ms");
    assert_eq!(sum_ms, 0.0);
}

#[tokio::test(start_paused = true)]
async fn a_closed_loop_client_does_not_wait_for_itself() {
    // One client, a new handshake as soon as the last ended, 1 ms apart (its own round trip):
    // a gap-rate estimator sees 1,000/s; nothing ever arrives while it waits.
    let s = virtual_budget();
    let key = key();
    let mut waited = 0;
    for i in 0..2000 {
        if !sign(&s.queues, &key, i, HandshakeWait::default())
            .await
            .is_zero()
        {
            waited += 1;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(
        waited <= 20,
        "{waited} of 2000 closed-loop handshakes waited"
    );
}

#[tokio::test(start_paused = true)]
async fn a_handshakes_operations_share_one_budget() {
    // Two operations of one handshake in a row, each alone at a load that makes both wait:
    // together they stay within the budget.
    let s = virtual_budget();
    let key = key();
    // Warm the estimator with 600/s of open-loop arrivals.
    open_loop(&s.queues, 600.0, 0.5).await;
    for i in 0..50 {
        let handshake = HandshakeWait::default();
        let first = sign(&s.queues, &key, 2 * i, handshake.clone()).await;
        let second = sign(&s.queues, &key, 2 * i + 1, handshake.clone()).await;
        assert!(first + second <= BUDGET, "{first:?} + {second:?}");
        assert!(handshake.waited() <= BUDGET);
    }
    assert_eq!(counter(&s.store, "budget_exceeded"), 0);
}

#[tokio::test(start_paused = true)]
async fn an_operation_queued_late_does_not_stretch_its_handshakes_budget() {
    // A worker preempted between creating an operation and pushing it (seen live with two
    // workers on a loaded machine): the operation joins a waiting batch with little budget
    // left, counted from when it was created; the batch must end within that.
    let s = virtual_budget();
    let key = key();
    open_loop(&s.queues, 600.0, 0.5).await;
    for i in 0..20 {
        // A fresh handshake starts a batch that waits for company.
        let (first, first_rx) = PendingOp::new(OpKind::RsaSign, key.clone(), input(&key, 2 * i));
        s.queues
            .submit(first.in_handshake(HandshakeWait::default()));
        tokio::time::sleep(Duration::from_micros(300)).await;
        // A handshake with 200 µs of its budget left creates its operation, then is held up
        // 500 µs before queueing it.
        let late = HandshakeWait::default();
        late.add(BUDGET - Duration::from_micros(200));
        let (op, rx) = PendingOp::new(OpKind::RsaSign, key.clone(), input(&key, 2 * i + 1));
        tokio::time::sleep(Duration::from_micros(500)).await;
        s.queues.submit(op.in_handshake(late.clone()));
        rx.await.expect("reply").expect("signed");
        first_rx.await.expect("reply").expect("signed");
        assert!(late.waited() <= BUDGET, "{:?}", late.waited());
    }
    assert_eq!(counter(&s.store, "budget_exceeded"), 0);
}

/// `workers` threads, each its own current-thread event loop like a worker, queue `per_worker`
/// operations at once into one provider and check every result is their own.
fn storm(s: &Setup, workers: usize, per_worker: usize) {
    let key = key();
    std::thread::scope(|scope| {
        for w in 0..workers {
            let (queues, key) = (s.queues.clone(), key.clone());
            scope.spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(async move {
                    let mut tasks = Vec::new();
                    for i in 0..per_worker {
                        let (q, k) = (queues.clone(), key.clone());
                        let seed = w * 10_000 + i;
                        tasks.push(tokio::spawn(async move {
                            sign(&q, &k, seed, HandshakeWait::default()).await
                        }));
                        if i % 3 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                    for t in tasks {
                        t.await.expect("every result reaches its own handshake");
                    }
                });
            });
        }
    });
}

#[test]
fn shared_batches_return_each_result_to_its_own_worker() {
    let s = setup(
        Arc::new(EightLanes::new()),
        budget(QueueScope::Shared),
        false,
        Timer::Precise,
    );
    storm(&s, 4, 150);
    let (batches, ops, _) = histogram(&s.store, "rsa_queue_sizes");
    assert_eq!(ops as usize, 600);
    assert!(batches < 600, "some batches held several operations");
    assert_eq!(counter(&s.store, "failed"), 0);
}

#[test]
fn engine_faults_in_a_shared_batch_fall_back_per_operation() {
    let engine = FaultEngine::new(
        Box::new(EightLanes::new()),
        FaultPlan {
            error_every: Some(3),
            corrupt_every: Some(5),
            ..FaultPlan::default()
        },
    );
    let s = setup(
        Arc::new(engine),
        budget(QueueScope::Shared),
        true,
        Timer::Precise,
    );
    storm(&s, 3, 120);
    assert_eq!(counter(&s.store, "failed"), 0);
    assert!(
        counter(&s.store, "engine_error") > 0,
        "faults were injected"
    );
    assert!(
        counter(&s.store, "verify_failed") > 0,
        "corruptions were caught"
    );
    assert!(counter(&s.store, "software_retry") > 0);
}

#[test]
fn per_worker_queues_still_batch_each_workers_own() {
    let mut b = budget(QueueScope::Worker);
    b.mode = BatchingMode::Adaptive;
    let s = setup(Arc::new(EightLanes::new()), b, false, Timer::Precise);
    storm(&s, 2, 100);
    let (_, ops, _) = histogram(&s.store, "rsa_queue_sizes");
    assert_eq!(ops as usize, 200);
    assert_eq!(counter(&s.store, "failed"), 0);
}
