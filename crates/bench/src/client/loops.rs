//! The two ways a run issues requests: closed loop (one worker per connection slot, each
//! starting its next request when the last one ends) and open loop (a dispatcher starting
//! requests on the schedule's timetable, capped at `--connections` outstanding, recording how
//! late each start was so coordinated omission shows).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quickshake_keyprovider::timer::Timer;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::request::one_request;
use super::shared::{Shared, PHASE_DONE};
use crate::report::ErrorKind;
use crate::schedule::{late_threshold, Schedule};

pub(super) async fn closed_worker(sh: Arc<Shared>, slot: usize) {
    let mut conn = None;
    loop {
        if sh.phase.load(Ordering::Relaxed) == PHASE_DONE || !sh.take_budget() {
            break;
        }
        sh.in_flight.fetch_add(1, Ordering::AcqRel);
        let failed = one_request(&sh, &mut conn, slot, Instant::now()).await;
        sh.request_done();
        // Back off a little on connect/TLS failures so a dead server does not spin the CPU.
        if matches!(failed, Some(ErrorKind::Connect | ErrorKind::Tls)) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

pub(super) async fn open_dispatcher(
    sh: Arc<Shared>,
    schedule: Schedule,
    t0: Instant,
    tasks: Arc<Mutex<JoinSet<()>>>,
) {
    let cap = Arc::new(Semaphore::new(sh.cfg.connections.max(1)));
    let threshold = late_threshold(schedule.rate());
    for i in 0u64.. {
        let intended = t0 + schedule.offset(i);
        // Tokio's timer has millisecond ticks: at 600/s it would start requests 1 or 2 ms apart
        // instead of 1.667. A timerfd keeps the timetable to microseconds (a uniform 150 us
        // early, its wake-up margin).
        Timer::Precise.sleep_until(intended).await;
        if sh.phase.load(Ordering::Relaxed) == PHASE_DONE || !sh.take_budget() {
            break;
        }
        let (permit, capped) = match cap.clone().try_acquire_owned() {
            Ok(p) => (p, false),
            Err(_) => match cap.clone().acquire_owned().await {
                Ok(p) => (p, true),
                Err(_) => break,
            },
        };
        let lag = Instant::now().saturating_duration_since(intended);
        if sh.measuring() {
            if let Ok(mut p) = sh.punctuality.lock() {
                p.record(lag, threshold, capped);
            }
        }
        sh.in_flight.fetch_add(1, Ordering::AcqRel);
        let sh2 = sh.clone();
        let slot = (i % sh.cfg.connections.max(1) as u64) as usize;
        let task = async move {
            let mut conn = if sh2.cfg.keepalive {
                sh2.idle.lock().ok().and_then(|mut v| v.pop())
            } else {
                None
            };
            one_request(&sh2, &mut conn, slot, intended).await;
            if let Some(c) = conn {
                if let Ok(mut v) = sh2.idle.lock() {
                    v.push(c);
                }
            }
            sh2.request_done();
            drop(permit);
        };
        if let Ok(mut t) = tasks.lock() {
            t.spawn(task);
            // Reap finished tasks so the set does not grow with the run.
            while t.try_join_next().is_some() {}
        }
    }
}
