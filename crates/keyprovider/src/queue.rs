//! The queues: *when* a batch runs, and with whom. The provider ([`ProviderCore`]) decides how
//! and where a batch is computed; this module only hands it full or flushed batches.
//!
//! Two scopes ([`QueueScope`]). Per worker (Envoy's): each worker runs a current-thread event
//! loop, so its queues live in a thread-local and need no lock; an operation is queued,
//! processed and resumed on the worker that started its handshake. Shared (quickshake.batching's
//! default): one queue per provider and operation class behind a mutex held only to push or
//! take (never while computing); the worker whose push fills a batch, or whose flush fires,
//! computes it, and every result goes back on its operation's own channel to the handshake
//! that queued it, on that handshake's worker. No worker waits for another: a worker whose
//! operation sits in a batch another worker computes keeps serving meanwhile.
//!
//! A [`Queues`] is shared by every `SSL_CTX` of one certificate field and survives key
//! rotation (the registry hands a rotated key the same `Queues`). A worker's queue for a
//! `Queues` that is gone (its certificate was removed or reconfigured) is dropped the next
//! time that worker creates a queue, so the per-worker map holds only live providers.
//!
//! Clocks: every instant here is tokio's (`tokio::time::Instant`, as `std` instants), so tests
//! run the budget in virtual time.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::batch::{BatchQueue, Batching, BatchingMode, PushOutcome, QueueScope};
use crate::budget::{decide, ArrivalRate, Decision, Partial};
use crate::op::{OpClass, PendingOp};
use crate::provider::ProviderCore;
use crate::timer::{now, Timer};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The batching side of one provider: when its batches are handed to the provider.
pub struct Queues {
    id: u64,
    batching: Batching,
    provider: Arc<ProviderCore>,
    timer: Timer,
    /// The queues of [`QueueScope::Shared`], one per operation class.
    shared: Mutex<HashMap<OpClass, Slot>>,
}

/// One queue (of one worker, or shared) with what the budget needs to know about it.
struct Slot {
    queue: BatchQueue<PendingOp>,
    /// The least budget any operation of the batch being filled has left (budget mode).
    budget_left: Option<Duration>,
    rate: ArrivalRate,
    /// Since when, and until when, the batch being filled waits for arrivals (budget mode).
    waiting_since: Option<Instant>,
    wait_end: Option<Instant>,
    /// Wakes the waiting flush when its batch was taken full or its wait must end sooner.
    wake: Arc<Notify>,
}

/// A batch taken from a queue, with the wait it chose, if it waited: from when, and until when
/// at most (the budget's end it was aiming at).
struct Taken {
    ops: Vec<PendingOp>,
    waited: Option<(Instant, Instant)>,
}

impl Slot {
    fn new(lanes: usize) -> Self {
        Slot {
            queue: BatchQueue::new(lanes),
            budget_left: None,
            rate: ArrivalRate::default(),
            waiting_since: None,
            wait_end: None,
            wake: Arc::new(Notify::new()),
        }
    }

    fn push(
        &mut self,
        op: PendingOp,
        budget: Option<Duration>,
        now: Instant,
    ) -> (PushOutcome<PendingOp>, Option<(Instant, Instant)>) {
        let waiting = self.waiting_since;
        self.rate.arrival(now, waiting.is_some());
        if waiting.is_some() {
            // The waiting flush decides again with this arrival.
            self.wake.notify_one();
        }
        if let Some(budget) = budget {
            // What the handshake's earlier operations left of its budget.
            let left = budget.saturating_sub(op.handshake.waited());
            self.budget_left = Some(self.budget_left.map_or(left, |x| x.min(left)));
            if let Some(end) = self.wait_end {
                // This operation may not wait as long as the batch was going to. From when it
                // was queued, the instant its chosen wait is counted from (`dispatch`): a
                // worker preempted between queueing it and this push must not stretch it.
                self.wait_end = Some(end.min(op.enqueued + left));
            }
        }
        // The wait this batch chose, bounded by this operation's budget too.
        let chosen = waiting.zip(self.wait_end);
        let outcome = self.queue.push(op);
        if matches!(outcome, PushOutcome::Full(_)) {
            self.taken(now);
            return (outcome, chosen);
        }
        (outcome, None)
    }

    fn flush(&mut self, generation: u64, now: Instant) -> Option<Taken> {
        let ops = self.queue.flush(generation)?;
        let waited = self.waiting_since.zip(self.wait_end);
        self.taken(now);
        Some(Taken { ops, waited })
    }

    /// The batch being filled was taken: its wait, if any, is over.
    fn taken(&mut self, now: Instant) {
        if let Some(since) = self.waiting_since.take() {
            self.rate.waited(now, now.saturating_duration_since(since));
            self.wake.notify_one();
        }
        self.wait_end = None;
        self.budget_left = None;
    }

    /// The batch of `generation`, if it is still being filled: its size and least budget left.
    fn current(&self, generation: u64) -> Option<(usize, Duration)> {
        (self.queue.generation() == generation && !self.queue.is_empty())
            .then(|| (self.queue.len(), self.budget_left.unwrap_or_default()))
    }
}

struct WorkerSlot {
    slot: Slot,
    owner: Weak<Queues>,
}

thread_local! {
    static QUEUES: RefCell<HashMap<(u64, OpClass), WorkerSlot>> = RefCell::new(HashMap::new());
}

/// How many per-worker queues this thread holds (live providers times operation classes used here).
pub fn queues_on_this_thread() -> usize {
    QUEUES.with(|q| q.borrow().len())
}

impl Queues {
    pub fn new(batching: Batching, provider: Arc<ProviderCore>) -> Self {
        Queues {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            batching,
            provider,
            timer: Timer::default(),
            shared: Mutex::new(HashMap::new()),
        }
    }

    /// The same queues ending budget waits with `timer` ([`Timer::Virtual`] for tests in
    /// virtual time).
    pub fn with_timer(mut self, timer: Timer) -> Self {
        self.timer = timer;
        self
    }

    pub fn provider(&self) -> &Arc<ProviderCore> {
        &self.provider
    }

    pub fn mode(&self) -> BatchingMode {
        self.batching.mode
    }

    pub fn poll_delay(&self) -> Duration {
        self.batching.poll_delay
    }

    /// The handshake budget operations carry in budget mode.
    fn budget(&self) -> Option<Duration> {
        (self.batching.mode == BatchingMode::Budget).then(|| self.batching.budget())
    }

    /// Run `f` on this provider's queue for `class`: this worker's, or the shared one.
    fn with_slot<R>(self: &Arc<Self>, class: OpClass, f: impl FnOnce(&mut Slot) -> R) -> R {
        let lanes = self.provider.lanes();
        match self.batching.scope {
            QueueScope::Shared => {
                let mut map = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
                f(map.entry(class).or_insert_with(|| Slot::new(lanes)))
            }
            QueueScope::Worker => QUEUES.with(|q| {
                let mut map = q.borrow_mut();
                let key = (self.id, class);
                if !map.contains_key(&key) {
                    // A new provider on this worker: drop the queues of providers that are
                    // gone (never one holding operations: those are flushed before it can go).
                    map.retain(|_, w| w.owner.strong_count() > 0 || !w.slot.queue.is_empty());
                }
                let w = map.entry(key).or_insert_with(|| WorkerSlot {
                    slot: Slot::new(lanes),
                    owner: Arc::downgrade(self),
                });
                f(&mut w.slot)
            }),
        }
    }

    /// Queue an operation; its reply arrives when its batch is processed.
    pub fn submit(self: &Arc<Self>, op: PendingOp) {
        let class = op.kind.class();
        let budget = self.budget();
        let (outcome, waited) = self.with_slot(class, |s| s.push(op, budget, now()));
        match outcome {
            PushOutcome::Full(ops) => self.dispatch(class, Taken { ops, waited }),
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
        handle.spawn(async move {
            match queues.batching.mode {
                BatchingMode::Timer => tokio::time::sleep(queues.batching.poll_delay).await,
                BatchingMode::Adaptive => queues.adaptive_wait(class, generation).await,
                BatchingMode::Budget => {
                    queues.budget_wait(class, generation).await;
                }
            }
            queues.flush(class, generation);
        });
    }

    /// Adaptive batching: wait while the batch still grows. Spawned tasks run after the work
    /// this worker already has ready. Each yield also lets the event loop collect newly
    /// readable sockets (more ClientHellos); flush once a round passes with no new arrival,
    /// the worker is then idle as far as this queue can tell. `poll_delay` bounds the wait.
    async fn adaptive_wait(self: &Arc<Self>, class: OpClass, generation: u64) {
        let deadline = tokio::time::Instant::now() + self.batching.poll_delay;
        let mut seen = 0;
        loop {
            tokio::task::yield_now().await;
            let now = self.queued(class, generation);
            if now == 0 || tokio::time::Instant::now() >= deadline {
                return;
            }
            if self.wait_for_computing_batch(deadline).await {
                continue;
            }
            if now == seen {
                return;
            }
            seen = now;
        }
    }

    /// Budget batching: as adaptive while the batch grows, then, once the worker is idle,
    /// wait for more operations only as [`decide`] says, never longer than the budget its
    /// operations have left.
    async fn budget_wait(self: &Arc<Self>, class: OpClass, generation: u64) -> Option<()> {
        let lanes = self.provider.lanes();
        let min_batch = self.provider.min_batch(class);
        let mut seen = 0;
        loop {
            tokio::task::yield_now().await;
            let t = now();
            let (len, left) = self.with_slot(class, |s| s.current(generation))?;
            if left.is_zero() {
                return None;
            }
            let until = tokio::time::Instant::from_std(t + left);
            if self.wait_for_computing_batch(until).await {
                continue;
            }
            if len != seen {
                // Still growing (a burst being read, or handshakes resumed by the last
                // batch): collect it before deciding.
                seen = len;
                continue;
            }
            // The budget's end for this batch: a later operation with less budget left brings
            // it forward (`Slot::push`). Read again under the lock: with shared queues another
            // worker may have queued an operation with less budget left since `left` was read.
            let wake = self.with_slot(class, |s| {
                let (_, left) = s.current(generation)?;
                s.waiting_since = Some(t);
                s.wait_end = Some(t + left);
                Some(s.wake.clone())
            })?;
            // Decide, and again at each arrival; a full batch is processed by the push that
            // filled it.
            loop {
                let t = now();
                let (len, deadline, rate) = self.with_slot(class, |s| {
                    let (len, _) = s.current(generation)?;
                    Some((len, s.wait_end?, s.rate.rate(t)))
                })?;
                let partial = Partial {
                    len,
                    lanes,
                    min_batch,
                    deadline,
                };
                let decision = decide(&partial, rate, t);
                tracing::trace!(?class, len, ?deadline, rate, ?decision, "budget decision");
                let Decision::WaitUntil(end) = decision else {
                    return None;
                };
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = self.timer.sleep_until(end) => return None,
                }
            }
        }
    }

    /// While a batch computes off the worker (on the batch thread), let this one fill until
    /// it ends or `deadline`. True when it waited.
    async fn wait_for_computing_batch(&self, deadline: tokio::time::Instant) -> bool {
        let done = self.provider.batch_done();
        tokio::pin!(done);
        done.as_mut().enable();
        if !self.provider.computing() {
            return false;
        }
        tokio::select! {
            _ = done => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
        true
    }

    /// How many operations the batch of `generation` holds (0 once it was processed).
    fn queued(self: &Arc<Self>, class: OpClass, generation: u64) -> usize {
        self.with_slot(class, |s| s.current(generation).map_or(0, |(len, _)| len))
    }

    fn flush(self: &Arc<Self>, class: OpClass, generation: u64) {
        if let Some(taken) = self.with_slot(class, |s| s.flush(generation, now())) {
            self.dispatch(class, taken);
        }
    }

    /// Hand a batch to the provider, after counting each operation's wait for it, and, in
    /// budget mode, the wait the batch chose against its handshake's budget.
    ///
    /// The chosen wait ends when the batch is taken or at the end it aimed at, whichever is
    /// first: a flush that runs after that end ran late because the worker had other work
    /// ready (a batch computing, handshakes being served), time an inline key spends the same
    /// way; `batch_delay_ms` records the whole time queued, lateness included.
    fn dispatch(&self, class: OpClass, taken: Taken) {
        let t = now();
        let stats = self.provider.stats();
        let budget = self.budget();
        for op in &taken.ops {
            let queued = t.saturating_duration_since(op.enqueued);
            stats.batch_delay_ms.record(queued.as_secs_f64() * 1000.0);
            let Some(budget) = budget else { continue };
            let chosen = taken.waited.map_or(Duration::ZERO, |(from, end)| {
                t.min(end).saturating_duration_since(from.max(op.enqueued))
            });
            if op.handshake.add(chosen) > budget {
                stats.budget_exceeded.inc();
            }
        }
        self.provider.dispatch(class, taken.ops);
    }
}
