//! Per-worker queues. Each worker runs a current-thread event loop, so its queues live in a
//! thread-local and need no lock; an operation is queued, processed and resumed on the worker
//! that started its handshake.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;

use crate::batch::{BatchQueue, BatchingMode, PushOutcome};
use crate::key::ProviderKey;
use crate::provider::ProviderCore;

/// Which queue an operation waits in (and which histogram its batch is counted in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpClass {
    Rsa,
    Ecdsa,
}

/// What an operation computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    RsaSign,
    RsaDecrypt,
    EcdsaSign,
}

impl OpKind {
    pub fn class(self) -> OpClass {
        match self {
            OpKind::RsaSign | OpKind::RsaDecrypt => OpClass::Rsa,
            OpKind::EcdsaSign => OpClass::Ecdsa,
        }
    }
}

/// Why an operation produced no result (its handshake fails).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    #[error("engine failed and fallback is off: {0}")]
    Engine(String),
    #[error("result failed the public-key check twice")]
    Verify,
    #[error("unsupported operation for this key")]
    Unsupported,
}

pub type OpResult = Result<Vec<u8>, OpError>;

/// One queued operation. It holds the key it started with.
pub struct PendingOp {
    pub kind: OpKind,
    pub key: Arc<ProviderKey>,
    /// RSA: the padded block or ciphertext (modulus length). ECDSA: the digest.
    pub input: Vec<u8>,
    pub enqueued: Instant,
    pub reply: oneshot::Sender<OpResult>,
}

thread_local! {
    static QUEUES: RefCell<HashMap<(u64, OpClass), BatchQueue<PendingOp>>> = RefCell::new(HashMap::new());
}

/// Queue an operation on this worker; the receiver resolves when its batch is processed.
pub fn submit(core: &Arc<ProviderCore>, op: PendingOp) {
    let class = op.kind.class();
    let lanes = core.lanes();
    let outcome = QUEUES.with(|q| {
        q.borrow_mut()
            .entry((core.id, class))
            .or_insert_with(|| BatchQueue::new(lanes))
            .push(op)
    });
    match outcome {
        PushOutcome::Full(batch) => core.dispatch(class, batch),
        PushOutcome::Queued => {}
        PushOutcome::Arm { generation } => arm_flush(core.clone(), class, generation),
    }
}

fn arm_flush(core: Arc<ProviderCore>, class: OpClass, generation: u64) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        // Not on a worker event loop (e.g. a blocking caller): process at once.
        flush(&core, class, generation);
        return;
    };
    match core.mode {
        BatchingMode::Timer => {
            let delay = core.poll_delay;
            handle.spawn(async move {
                tokio::time::sleep(delay).await;
                flush(&core, class, generation);
            });
        }
        BatchingMode::Adaptive => {
            handle.spawn(async move {
                // Spawned tasks run after the work this worker already has ready. Each yield
                // also lets the event loop collect newly readable sockets (more ClientHellos);
                // flush once a round passes with no new arrival, the worker is then idle as far
                // as this queue can tell. `poll_delay` bounds the wait.
                let deadline = tokio::time::Instant::now() + core.poll_delay;
                let mut seen = 0;
                loop {
                    tokio::task::yield_now().await;
                    let now = queued(&core, class, generation);
                    if now == 0 || tokio::time::Instant::now() >= deadline {
                        break;
                    }
                    // A batch is computing on a batch thread: let this one fill until it ends.
                    let done = core.batch_done.notified();
                    tokio::pin!(done);
                    done.as_mut().enable();
                    if core.in_flight.load(std::sync::atomic::Ordering::Acquire) > 0 {
                        tokio::select! {
                            _ = done => {}
                            _ = tokio::time::sleep_until(deadline) => {}
                        }
                        continue;
                    }
                    if now == seen {
                        break;
                    }
                    seen = now;
                }
                flush(&core, class, generation);
            });
        }
    }
}

/// How many operations the batch of `generation` holds (0 once it was processed).
fn queued(core: &ProviderCore, class: OpClass, generation: u64) -> usize {
    QUEUES.with(|q| {
        q.borrow().get(&(core.id, class)).map_or(0, |b| {
            if b.generation() == generation {
                b.len()
            } else {
                0
            }
        })
    })
}

fn flush(core: &Arc<ProviderCore>, class: OpClass, generation: u64) {
    let batch = QUEUES.with(|q| {
        q.borrow_mut()
            .get_mut(&(core.id, class))
            .and_then(|b| b.flush(generation))
    });
    if let Some(batch) = batch {
        core.dispatch(class, batch);
    }
}
