//! Sleeps with microsecond precision for the latency budget. Tokio's timer fires at the first
//! millisecond tick at or after its deadline, so a 2 ms budget aimed a tick early would wait
//! 1–2 ms (1.5 on average) and batches would be a quarter smaller than the budget allows. A
//! Linux `timerfd` registered with the event loop wakes the worker within microseconds of the
//! deadline; it costs a few system calls per wait (create, arm, register, read, close).
//! Where a timerfd cannot be had, tokio's timer aimed a tick early; in virtual time (tests:
//! [`Timer::Virtual`]), tokio's timer.
//!
//! `unsafe` is needed for the libc calls (`timerfd_create`, `timerfd_settime`, `read`), each
//! marked `// SAFETY:`.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Now, on the event loop's clock (virtual in tests that pause time): every instant the
/// queues and the provider compare is taken here.
pub fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Which timer ends a budget's wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Timer {
    /// A `timerfd` (microseconds), tokio's timer where none can be had.
    #[default]
    Precise,
    /// Tokio's timer, aimed a millisecond tick early so a wait still ends within its budget.
    Tokio,
    /// Tokio's timer aimed exactly at the end: for tests in virtual time (`tokio::time::pause`),
    /// where tokio's timer fires exactly when it is due.
    Virtual,
}

/// Tokio's timer resolution.
const TICK: Duration = Duration::from_millis(1);

impl Timer {
    /// Sleep until `deadline` (on the event loop's clock), never past it by more than the
    /// timer's precision allows.
    pub async fn sleep_until(self, deadline: Instant) {
        if self == Timer::Precise && precise_sleep_until(deadline).await.is_ok() {
            return;
        }
        let end = tokio::time::Instant::from_std(deadline);
        let aim = match self {
            Timer::Virtual => end,
            Timer::Precise | Timer::Tokio => end.checked_sub(TICK).unwrap_or(end),
        };
        tokio::time::sleep_until(aim.max(tokio::time::Instant::now())).await;
    }
}

thread_local! {
    /// Whether this thread's event loop has I/O (every worker's does): `None` until known.
    static HAS_IO: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Register `fd` with the current event loop. An event loop without I/O (tokio panics there)
/// is found once per thread and answered with an error after that, so the caller falls back
/// to tokio's timer; nothing here panics.
fn register(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    if HAS_IO.with(Cell::get) == Some(false) {
        return Err(io::Error::other("event loop without I/O"));
    }
    let registered = std::panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `fd` is an open descriptor owned by the `OwnedFd` the `AsyncFd` holds until
        // it is dropped, and `OwnedFd::as_raw_fd` always returns that descriptor.
        unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
    }));
    match registered {
        Ok(Ok(afd)) => {
            HAS_IO.with(|h| h.set(Some(true)));
            Ok(afd)
        }
        Ok(Err(e)) => Err(io::Error::other(e.to_string())),
        Err(_) => {
            HAS_IO.with(|h| h.set(Some(false)));
            Err(io::Error::other("event loop without I/O"))
        }
    }
}

/// A timerfd fires within microseconds, but the worker then still has to get to the waiting
/// task: aim this much early so that a wait ends within its budget.
const WAKE_MARGIN: Duration = Duration::from_micros(150);

async fn precise_sleep_until(deadline: Instant) -> io::Result<()> {
    let remaining = deadline
        .checked_sub(WAKE_MARGIN)
        .unwrap_or(deadline)
        .saturating_duration_since(Instant::now());
    if remaining.is_zero() {
        return Ok(());
    }
    // SAFETY: no pointers; returns a new descriptor or -1.
    let raw = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a descriptor we just created and own alone; `OwnedFd` closes it.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: remaining.as_secs().try_into().unwrap_or(libc::time_t::MAX),
            // Below 1e9, so it fits every `c_long`.
            tv_nsec: remaining.subsec_nanos().into(),
        },
    };
    // SAFETY: `fd` is a valid timerfd; `spec` lives across the call; a null old-value pointer
    // is allowed.
    if unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let afd = register(fd)?;
    loop {
        let mut guard = afd.readable().await?;
        let mut expirations = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live 8-byte buffer from a valid descriptor.
        let n = unsafe {
            libc::read(
                afd.get_ref().as_raw_fd(),
                expirations.as_mut_ptr().cast(),
                expirations.len(),
            )
        };
        if n == 8 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::WouldBlock {
            return Err(err);
        }
        guard.clear_ready();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_precise_sleep_ends_within_a_fraction_of_a_millisecond() {
        for ms in [0.3, 1.2, 2.0] {
            let start = Instant::now();
            let deadline = start + Duration::from_secs_f64(ms / 1000.0);
            Timer::Precise.sleep_until(deadline).await;
            let end = Instant::now();
            assert!(
                end + WAKE_MARGIN >= deadline,
                "woke {:?} early",
                deadline - end
            );
            // Generous: a loaded CI machine may run the worker late.
            assert!(
                end - deadline < Duration::from_millis(20),
                "{:?} late",
                end - deadline
            );
        }
    }
}
