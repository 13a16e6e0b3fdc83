//! Provider statistics, under Envoy's names where Envoy has them
//! (`listener.<address>.cryptomb.rsa_queue_sizes`, `...ecdsa_queue_sizes`) and quickshake's
//! own beside them in the same `cryptomb.` scope.

use quickshake_stats::{Counter, Gauge, Histogram, Store};

/// Batch-size buckets: one per size, so `le="2"` counts batches of at most 2 (Envoy's default
/// buckets lump sizes together and are shifted by one).
pub const QUEUE_SIZE_BUCKETS: [f64; 8] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
/// Wait of an operation from queueing to result, in ms.
pub const WAIT_BUCKETS: [f64; 17] = [
    0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0,
    1000.0,
];

#[derive(Clone)]
pub struct ProviderStats {
    pub rsa_queue_sizes: Histogram,
    pub ecdsa_queue_sizes: Histogram,
    /// Only for providers that batch key exchanges ([`ProviderStats::with_key_exchange`]).
    pub kex: Option<KexStats>,
    pub rsa_sign: Counter,
    pub rsa_decrypt: Counter,
    pub ecdsa_sign: Counter,
    /// Operations of batches below the engine's crossover, run on the scalar path.
    pub scalar_path: Counter,
    /// Results that failed the public-key check (then redone in software).
    pub verify_failed: Counter,
    pub engine_error: Counter,
    /// Operations redone in software after an engine error or a failed check.
    pub software_retry: Counter,
    /// Operations that failed their handshake.
    pub failed: Counter,
    /// Certificates served with the key in-process because no engine was usable (`fallback: true`).
    pub fallback: Gauge,
    pub op_wait_ms: Histogram,
    /// Each operation's wait from queueing to the start of its batch, in ms: the latency
    /// batching adds (budget mode keeps a handshake's total within `max_batch_delay`).
    pub batch_delay_ms: Histogram,
    /// Operations whose handshake waited longer than its budget in all (budget mode): the
    /// worker was late to flush; stays 0 unless it is overloaded.
    pub budget_exceeded: Counter,
    store: Store,
    scope: String,
}

impl ProviderStats {
    /// `scope` is the listener scope, e.g. `listener.0.0.0.0_9000.`.
    pub fn new(store: &Store, scope: &str) -> Self {
        let p = format!("{scope}cryptomb.");
        let c = |n: &str| store.counter(&format!("{p}{n}"));
        ProviderStats {
            rsa_queue_sizes: store.histogram(&format!("{p}rsa_queue_sizes"), &QUEUE_SIZE_BUCKETS),
            ecdsa_queue_sizes: store
                .histogram(&format!("{p}ecdsa_queue_sizes"), &QUEUE_SIZE_BUCKETS),
            kex: None,
            rsa_sign: c("rsa_sign"),
            rsa_decrypt: c("rsa_decrypt"),
            ecdsa_sign: c("ecdsa_sign"),
            scalar_path: c("scalar_path"),
            verify_failed: c("verify_failed"),
            engine_error: c("engine_error"),
            software_retry: c("software_retry"),
            failed: c("failed"),
            fallback: store.gauge(&format!("{p}fallback")),
            op_wait_ms: store.histogram(&format!("{p}op_wait_ms"), &WAIT_BUCKETS),
            batch_delay_ms: store.histogram(&format!("{p}batch_delay_ms"), &WAIT_BUCKETS),
            budget_exceeded: c("budget_exceeded"),
            store: store.clone(),
            scope: p,
        }
    }

    /// Mark the engine in use: gauge `cryptomb.engine.<name>` = 1.
    /// These stats with the key-exchange ones registered (`x25519`, `x25519_inline`,
    /// `x25519_queue_sizes`), for a provider that batches X25519.
    pub fn with_key_exchange(mut self) -> Self {
        let p = &self.scope;
        self.kex = Some(KexStats {
            queue_sizes: self
                .store
                .histogram(&format!("{p}x25519_queue_sizes"), &QUEUE_SIZE_BUCKETS),
            batched: self.store.counter(&format!("{p}x25519")),
            inline: self.store.counter(&format!("{p}x25519_inline")),
        });
        self
    }

    pub fn set_engine(&self, name: &str) {
        let safe: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.store
            .gauge(&format!("{}engine.{safe}", self.scope))
            .set(1);
    }
}

/// A key-exchange batching provider's stats: batch sizes, exchanges computed by the engine and
/// those handed back to the handshake (below the crossover, an engine error, a low-order share).
#[derive(Clone)]
pub struct KexStats {
    pub queue_sizes: Histogram,
    pub batched: Counter,
    pub inline: Counter,
}
