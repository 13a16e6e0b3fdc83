//! The batching state machine, free of I/O and timers so it is unit-tested directly.
//!
//! Envoy's CryptoMB semantics: a queue per worker, provider and operation class (RSA, ECDSA),
//! sized to the engine's lanes (8 for every engine today); the first operation into
//! an empty queue arms the flush (a `poll_delay` timer that later arrivals do not reset, or in
//! adaptive mode an idle flush); a full queue is processed at once; when the armed flush fires
//! it processes whatever the same batch still holds. A generation number tells a stale flush
//! (its batch was already processed full) from a live one.

use std::time::Duration;

/// When a partial batch is processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchingMode {
    /// Envoy's: after `poll_delay` from the first operation of the batch.
    Timer,
    /// quickshake's: as soon as the worker has no other runnable work.
    Adaptive,
    /// quickshake's default: as adaptive, then wait for more operations only while the arrival
    /// rate says they come within the handshake's latency budget and would lower the CPU per
    /// operation (`crate::budget`).
    Budget,
}

impl BatchingMode {
    pub fn name(self) -> &'static str {
        match self {
            BatchingMode::Timer => "timer",
            BatchingMode::Adaptive => "adaptive",
            BatchingMode::Budget => "budget",
        }
    }
}

/// Which handshakes share a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueScope {
    /// Envoy's: one queue per worker; a batch holds one worker's handshakes.
    Worker,
    /// One queue per provider for every worker: N workers at a fraction of saturation still
    /// fill batches. The worker that fills (or flushes) a batch computes it; each result goes
    /// back to the handshake that queued it, on its own worker.
    Shared,
}

impl QueueScope {
    pub fn name(self) -> &'static str {
        match self {
            QueueScope::Worker => "per_worker",
            QueueScope::Shared => "shared",
        }
    }
}

/// When and with whom a provider's operations are batched, fixed at construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    pub mode: BatchingMode,
    /// Envoy's timer (timer mode); the longest a partial batch waits in the other modes.
    pub poll_delay: Duration,
    /// The latency budget of a handshake (budget mode): no handshake waits longer in all.
    pub max_batch_delay: Duration,
    pub scope: QueueScope,
}

impl Batching {
    /// Envoy's per-worker timer or adaptive batching, as before budgets and shared queues.
    pub fn per_worker(mode: BatchingMode, poll_delay: Duration) -> Self {
        Batching {
            mode,
            poll_delay,
            max_batch_delay: poll_delay,
            scope: QueueScope::Worker,
        }
    }

    /// The most a handshake's operations wait for their batches in all (budget mode):
    /// `max_batch_delay`, never more than `poll_delay`.
    pub fn budget(&self) -> Duration {
        self.max_batch_delay.min(self.poll_delay)
    }

    /// How `doctor` and `/config_dump` describe it.
    pub fn describe(&self) -> String {
        let how = match self.mode {
            BatchingMode::Timer => format!("timer ({:?})", self.poll_delay),
            BatchingMode::Adaptive => format!("adaptive (at most {:?})", self.poll_delay),
            BatchingMode::Budget => format!("budget ({:?})", self.budget()),
        };
        format!("{how}, {} queues", self.scope.name())
    }
}

/// What the caller must do after `push`.
#[derive(Debug, PartialEq, Eq)]
pub enum PushOutcome<T> {
    /// The queue filled: process these now.
    Full(Vec<T>),
    /// First operation of a new batch: arm a flush for this generation.
    Arm { generation: u64 },
    /// Queued behind an armed flush.
    Queued,
}

/// One worker's queue for one provider and operation class.
#[derive(Debug)]
pub struct BatchQueue<T> {
    items: Vec<T>,
    capacity: usize,
    generation: u64,
}

impl<T> BatchQueue<T> {
    pub fn new(capacity: usize) -> Self {
        BatchQueue {
            items: Vec::with_capacity(capacity),
            capacity: capacity.max(1),
            generation: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// The generation of the batch being filled.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn push(&mut self, item: T) -> PushOutcome<T> {
        self.items.push(item);
        if self.items.len() >= self.capacity {
            return PushOutcome::Full(self.take());
        }
        if self.items.len() == 1 {
            PushOutcome::Arm {
                generation: self.generation,
            }
        } else {
            PushOutcome::Queued
        }
    }

    /// The armed flush for `generation` fired: the partial batch, unless it was already
    /// processed (the queue filled meanwhile).
    pub fn flush(&mut self, generation: u64) -> Option<Vec<T>> {
        if generation != self.generation || self.items.is_empty() {
            return None;
        }
        Some(self.take())
    }

    fn take(&mut self) -> Vec<T> {
        self.generation = self.generation.wrapping_add(1);
        std::mem::replace(&mut self.items, Vec::with_capacity(self.capacity))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_arms_full_flushes_at_once() {
        let mut q = BatchQueue::new(8);
        assert_eq!(q.push(0), PushOutcome::Arm { generation: 0 });
        for i in 1..7 {
            assert_eq!(q.push(i), PushOutcome::Queued);
        }
        assert_eq!(q.push(7), PushOutcome::Full((0..8).collect()));
        assert!(q.is_empty());
        // The timer armed for generation 0 fires late: nothing to do.
        assert_eq!(q.flush(0), None);
        // The next operation starts a new batch with a new timer.
        assert_eq!(q.push(8), PushOutcome::Arm { generation: 1 });
        assert_eq!(q.flush(1), Some(vec![8]));
        assert_eq!(q.flush(1), None);
    }

    #[test]
    fn stale_flush_does_not_cut_a_newer_batch_short() {
        let mut q = BatchQueue::new(2);
        assert_eq!(q.push('a'), PushOutcome::Arm { generation: 0 });
        assert_eq!(q.push('b'), PushOutcome::Full(vec!['a', 'b']));
        assert_eq!(q.push('c'), PushOutcome::Arm { generation: 1 });
        assert_eq!(
            q.flush(0),
            None,
            "generation 0's timer must not flush generation 1"
        );
        assert_eq!(q.len(), 1);
        assert_eq!(q.flush(1), Some(vec!['c']));
    }
}
