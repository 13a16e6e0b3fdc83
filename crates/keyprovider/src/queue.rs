//! Per-worker queues: *when* a batch runs. Each worker runs a current-thread event loop, so
//! its queues live in a thread-local and need no lock; an operation is queued, processed and
//! resumed on the worker that started its handshake. The provider ([`ProviderCore`]) decides
//! how and where a batch is computed; this module only hands it full or flushed batches.
//!
//! A [`Queues`] is shared by every `SSL_CTX` of one certificate field and survives key
//! rotation (the registry hands a rotated key the same `Queues`). A worker's queue for a
//! `Queues` that is gone (its certificate was removed or reconfigured) is dropped the next
//! time that worker creates a queue, so the per-worker map holds only live providers.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::batch::{BatchQueue, BatchingMode, PushOutcome};
use crate::op::{OpClass, PendingOp};
use crate::provider::ProviderCore;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The batching side of one provider: when its batches are handed to the provider.
pub struct Queues {
    id: u64,
    mode: BatchingMode,
    poll_delay: Duration,
    provider: Arc<ProviderCore>,
}

struct WorkerQueue {
    queue: BatchQueue<PendingOp>,
    owner: Weak<Queues>,
}

thread_local! {
    static QUEUES: RefCell<HashMap<(u64, OpClass), WorkerQueue>> = RefCell::new(HashMap::new());
}

/// How many queues this thread holds (live providers times operation classes used here).
pub fn queues_on_this_thread() -> usize {
    QUEUES.with(|q| q.borrow().len())
}

impl Queues {
    pub fn new(mode: BatchingMode, poll_delay: Duration, provider: Arc<ProviderCore>) -> Self {
        Queues {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            mode,
            poll_delay,
            provider,
        }
    }

    pub fn provider(&self) -> &Arc<ProviderCore> {
        &self.provider
    }

    pub fn mode(&self) -> BatchingMode {
        self.mode
    }

    pub fn poll_delay(&self) -> Duration {
        self.poll_delay
    }

    /// Queue an operation on this worker; its reply arrives when its batch is processed.
    pub fn submit(self: &Arc<Self>, op: PendingOp) {
        let class = op.kind.class();
        let outcome = QUEUES.with(|q| {
            let mut map = q.borrow_mut();
            let key = (self.id, class);
            if !map.contains_key(&key) {
                // A new provider on this worker: drop the queues of providers that are gone
                // (never one holding operations: those are flushed before it can go).
                map.retain(|_, w| w.owner.strong_count() > 0 || !w.queue.is_empty());
            }
            map.entry(key)
                .or_insert_with(|| WorkerQueue {
                    queue: BatchQueue::new(self.provider.lanes()),
                    owner: Arc::downgrade(self),
                })
                .queue
                .push(op)
        });
        match outcome {
            PushOutcome::Full(batch) => self.provider.dispatch(class, batch),
            PushOutcome::Queued => {}
            PushOutcome::Arm { generation } => self.arm_flush(class, generation),
        }
    }

    fn arm_flush(self: &Arc<Self>, class: OpClass, generation: u64) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            // Not on a worker event loop (e.g. a blocking caller): process at once.
            self.flush(class, generation);
            return;
        };
        let queues = self.clone();
        match self.mode {
            BatchingMode::Timer => {
                handle.spawn(async move {
                    tokio::time::sleep(queues.poll_delay).await;
                    queues.flush(class, generation);
                });
            }
            BatchingMode::Adaptive => {
                handle.spawn(async move {
                    queues.adaptive_wait(class, generation).await;
                    queues.flush(class, generation);
                });
            }
        }
    }

    /// Adaptive batching: wait while the batch still grows. Spawned tasks run after the work
    /// this worker already has ready. Each yield also lets the event loop collect newly
    /// readable sockets (more ClientHellos); flush once a round passes with no new arrival,
    /// the worker is then idle as far as this queue can tell. `poll_delay` bounds the wait.
    async fn adaptive_wait(&self, class: OpClass, generation: u64) {
        let deadline = tokio::time::Instant::now() + self.poll_delay;
        let mut seen = 0;
        loop {
            tokio::task::yield_now().await;
            let now = self.queued(class, generation);
            if now == 0 || tokio::time::Instant::now() >= deadline {
                return;
            }
            // A batch is computing off the worker: let this one fill until it ends.
            let done = self.provider.batch_done();
            tokio::pin!(done);
            done.as_mut().enable();
            if self.provider.computing() {
                tokio::select! {
                    _ = done => {}
                    _ = tokio::time::sleep_until(deadline) => {}
                }
                continue;
            }
            if now == seen {
                return;
            }
            seen = now;
        }
    }

    /// How many operations the batch of `generation` holds (0 once it was processed).
    fn queued(&self, class: OpClass, generation: u64) -> usize {
        QUEUES.with(|q| {
            q.borrow().get(&(self.id, class)).map_or(0, |w| {
                if w.queue.generation() == generation {
                    w.queue.len()
                } else {
                    0
                }
            })
        })
    }

    fn flush(&self, class: OpClass, generation: u64) {
        let batch = QUEUES.with(|q| {
            q.borrow_mut()
                .get_mut(&(self.id, class))
                .and_then(|w| w.queue.flush(generation))
        });
        if let Some(batch) = batch {
            self.provider.dispatch(class, batch);
        }
    }
}
