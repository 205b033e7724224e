use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;

use super::sleep::sleep_from;
use super::{Instant, Sleep};

/// Requires `future` to complete within `duration`.
///
/// The future is polled first, so one that is ready completes even with a zero duration.
///
/// # Cancel safety
/// As cancel safe as `future`: dropping the `Timeout` drops it.
#[track_caller]
pub fn timeout<F: IntoFuture>(duration: Duration, future: F) -> Timeout<F::IntoFuture> {
    Timeout {
        value: future.into_future(),
        delay: sleep_from(Instant::now().saturating_add(duration), "timeout"),
    }
}

/// Requires `future` to complete before `deadline`.
#[track_caller]
pub fn timeout_at<F: IntoFuture>(deadline: Instant, future: F) -> Timeout<F::IntoFuture> {
    Timeout {
        value: future.into_future(),
        delay: sleep_from(deadline, "timeout"),
    }
}

pin_project! {
    /// Future of [`timeout`]: `Ok(output)`, or `Err(Elapsed)` once the deadline passed.
    #[must_use = "futures do nothing unless polled"]
    pub struct Timeout<F> {
        #[pin]
        value: F,
        delay: Sleep,
    }
}

impl<F> Timeout<F> {
    /// The wrapped future.
    pub fn get_ref(&self) -> &F {
        &self.value
    }

    /// The wrapped future, mutably.
    pub fn get_mut(&mut self) -> &mut F {
        &mut self.value
    }

    /// Consumes the timeout, returning the wrapped future.
    pub fn into_inner(self) -> F {
        self.value
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.value.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        // The delay is polled without a budget limit, so a future that ran its task's budget
        // dry still times out.
        match crate::coop::unconstrained(|| Pin::new(this.delay).poll(cx)) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed(()))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<F: fmt::Debug> fmt::Debug for Timeout<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("value", &self.value)
            .field("deadline", &self.delay.deadline())
            .finish()
    }
}

/// The deadline of a [`timeout`] passed. Also reachable as `time::error::Elapsed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elapsed(());

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(_: Elapsed) -> std::io::Error {
        std::io::ErrorKind::TimedOut.into()
    }
}
