//! The connection manager's `stream_idle_timeout` while a request waits for its upstream
//! response: each request body frame is activity; when none has come for the timeout before
//! the response headers, the request is answered `stream timeout` as Envoy 1.39.3 answers it:
//! 504 once the whole request was received, 408 while its body was still coming. The route's
//! `timeout` (and per-try timeout) is watched in the same wait.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body as _, Frame, SizeHint};

use crate::body::Body;

/// When the stream last saw activity, as nanoseconds since the request started, and whether
/// the request body has ended.
#[derive(Clone)]
pub(crate) struct Activity {
    started: Instant,
    last: Arc<AtomicU64>,
    request_complete: Arc<AtomicBool>,
}

impl Activity {
    pub(crate) fn new(started: Instant) -> Self {
        Activity {
            started,
            last: Arc::new(AtomicU64::new(0)),
            request_complete: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The request body has ended (all of it received).
    pub(crate) fn complete(&self) {
        self.request_complete.store(true, Ordering::Relaxed);
    }

    /// The status an idle timeout answers: 504 once the request was received, else 408.
    pub(crate) fn idle_status(&self) -> u16 {
        if self.request_complete.load(Ordering::Relaxed) {
            504
        } else {
            408
        }
    }

    pub(crate) fn touch(&self) {
        let ns = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last.store(ns, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.started + Duration::from_nanos(self.last.load(Ordering::Relaxed))
    }

    /// `body`, counting each of its frames as activity and noting its end.
    pub(crate) fn watch(&self, body: Body) -> Body {
        if body.is_end_stream() {
            self.complete();
        }
        Watched {
            inner: body,
            activity: self.clone(),
        }
        .boxed()
    }
}

/// A request body whose frames and end are reported to its [`Activity`].
struct Watched {
    inner: Body,
    activity: Activity,
}

impl hyper::body::Body for Watched {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(_)) => {
                self.activity.touch();
                if self.inner.is_end_stream() {
                    self.activity.complete();
                }
            }
            Poll::Ready(None) => self.activity.complete(),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Why a wait ended without the response.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Expired {
    /// The route's (or the try's) timeout: `budget` ran out.
    Budget,
    /// `stream_idle_timeout`: no activity for that long.
    Idle,
}

/// Waits for `fut` at most `budget` and while the stream is not idle for `idle`.
pub(crate) async fn wait<F: Future>(
    fut: F,
    budget: Option<Duration>,
    idle: Option<Duration>,
    activity: &Activity,
) -> Result<F::Output, Expired> {
    let deadline = budget.map(|b| Instant::now() + b);
    tokio::pin!(fut);
    loop {
        let idle_at = idle.map(|i| activity.last() + i);
        let Some(wake) = [deadline, idle_at].into_iter().flatten().min() else {
            return Ok(fut.await);
        };
        tokio::select! {
            out = &mut fut => return Ok(out),
            () = tokio::time::sleep_until(wake.into()) => {
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    return Err(Expired::Budget);
                }
                if idle.is_some_and(|i| now >= activity.last() + i) {
                    return Err(Expired::Idle);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn idle_and_budget() {
        let ms = Duration::from_millis;
        let a = Activity::new(Instant::now());
        let r = wait(
            tokio::time::sleep(ms(2000)),
            Some(ms(500)),
            Some(ms(50)),
            &a,
        )
        .await;
        assert_eq!(r, Err(Expired::Idle));
        let a = Activity::new(Instant::now());
        let r = wait(
            tokio::time::sleep(ms(2000)),
            Some(ms(50)),
            Some(ms(500)),
            &a,
        )
        .await;
        assert_eq!(r, Err(Expired::Budget));
        // Activity keeps it going past the idle timeout.
        let a = Activity::new(Instant::now());
        let toucher = a.clone();
        let busy = async move {
            for _ in 0..6 {
                tokio::time::sleep(ms(20)).await;
                toucher.touch();
            }
        };
        assert_eq!(wait(busy, None, Some(ms(60)), &a).await, Ok(()));
    }
}
