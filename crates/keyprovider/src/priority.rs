//! Engine batches run on helper threads at a lower scheduling priority than the workers, so a
//! worker keeps answering established connections while signatures are computed: the kernel
//! preempts the batch whenever the worker has something to do, and the batch gets the core
//! whenever the worker is idle. On one core this costs two context switches per batch and
//! takes no CPU from anyone; on several it also lets a batch use an idle core.
//!
//! The gateway's `--handshake-priority idle` puts whole handshake threads in the `SCHED_IDLE`
//! class with [`idle_class_this_thread`] (their batch threads inherit it).
//!
//! `unsafe` is needed for the libc calls (`setpriority`, `sched_setscheduler`), each marked
//! `// SAFETY:`.
#![allow(unsafe_code)]

use std::cell::Cell;

/// Nice value of batch threads (workers run at 0).
pub const BATCH_NICE: i32 = 10;

thread_local! {
    static LOWERED: Cell<bool> = const { Cell::new(false) };
}

/// Lower the calling thread's priority once (Linux: `setpriority` on a thread id applies to
/// that thread only). Failure is harmless: the batch then competes at normal priority.
pub fn lower_this_thread() {
    LOWERED.with(|done| {
        if done.get() {
            return;
        }
        done.set(true);
        // SAFETY: plain syscall wrappers with no pointers; `gettid` cannot fail, and
        // `setpriority(PRIO_PROCESS, tid, nice)` only changes the calling thread's nice value.
        unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, BATCH_NICE);
        }
    });
}

type Job = Box<dyn FnOnce() + Send + 'static>;

thread_local! {
    /// This worker's batch thread (created on first use).
    static BATCH_THREAD: std::cell::RefCell<Option<std::sync::mpsc::Sender<Job>>> = const { std::cell::RefCell::new(None) };
}

/// Run `job` on this worker's own batch thread: one per worker, batches in order (no two
/// batches of a worker compete for the core), at [`BATCH_NICE`]. Returns the job back if the
/// thread cannot be had, for the caller to run inline.
pub fn run_on_batch_thread(job: Job) -> Result<(), Job> {
    BATCH_THREAD.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let (tx, rx) = std::sync::mpsc::channel::<Job>();
            let spawned = std::thread::Builder::new()
                .name("qs-batch".into())
                .spawn(move || {
                    lower_this_thread();
                    while let Ok(job) = rx.recv() {
                        job();
                    }
                });
            if spawned.is_err() {
                return Err(job);
            }
            *slot = Some(tx);
        }
        match slot.as_ref() {
            Some(tx) => tx.send(job).map_err(|e| e.0),
            None => Err(job),
        }
    })
}

/// Put the calling thread in the kernel's `SCHED_IDLE` class: it runs only when no
/// normal-class thread on its CPU wants to, and is preempted as soon as one wakes. Threads it
/// creates afterwards inherit the class. `false` if the kernel refused (the thread then keeps
/// its normal priority).
pub fn idle_class_this_thread() -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `sched_setscheduler(0, ..)` changes the calling thread only (Linux thread ids);
    // `param` is a valid `sched_param` that outlives the call, which only reads it.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0 }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_thread_can_enter_the_idle_class() {
        let policy = std::thread::spawn(|| {
            assert!(
                super::idle_class_this_thread(),
                "sched_setscheduler refused"
            );
            // SAFETY: plain syscall wrapper, no pointers.
            unsafe { libc::sched_getscheduler(0) }
        })
        .join()
        .expect("thread");
        assert_eq!(policy, libc::SCHED_IDLE);
    }
}
