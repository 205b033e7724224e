//! `sleep` and `sleep_until`, and their future [`Sleep`]: a deadline armed on the reactor of the
//! thread that first polls it, and cancelled when the future is dropped.

use std::fmt;
use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use super::Instant;
use super::console::TimerTrace;
use crate::driver::TimerKey;
use crate::{ReactorHandle, coop};

/// Waits until `duration` has elapsed.
///
/// Equivalent to `sleep_until(Instant::now() + duration)`, on the current runtime's clock
/// ([`Instant::now`]; a paused clock is honoured). A duration too large for an `Instant`
/// sleeps for about 30 years.
///
/// # Precision
/// Never returns before the deadline; see the [module docs](crate::time) for how late.
///
/// # Outside a runtime
/// Polled outside any weir runtime, the timer lives on the [fallback reactor](crate::fallback).
/// It panics only if that reactor cannot start (e.g. no fds or threads left).
///
/// # Example
/// ```ignore
/// weir::time::sleep(std::time::Duration::from_micros(100)).await;
/// ```
#[track_caller]
pub fn sleep(duration: Duration) -> Sleep {
    sleep_until(Instant::now().saturating_add(duration))
}

/// Waits until `deadline`.
///
/// # Outside a runtime
/// Polled outside any weir runtime, the timer lives on the [fallback reactor](crate::fallback).
/// It panics only if that reactor cannot start (e.g. no fds or threads left).
#[track_caller]
pub fn sleep_until(deadline: Instant) -> Sleep {
    sleep_from(deadline, "sleep")
}

/// Waits for `duration`, as [`sleep`], but tokio-console does not list this timer (see
/// [`sleep_until_unlisted`]).
pub fn sleep_unlisted(duration: Duration) -> Sleep {
    sleep_until_unlisted(Instant::now().saturating_add(duration))
}

/// Waits until `deadline`, as [`sleep_until`], but tokio-console does not list this timer as a
/// resource (with the feature `console`; without it the two are the same).
///
/// For timers that a library arms on every request or connection, such as hyper's header-read
/// timer (weir's hyper timer, `WeirTimer`, makes its sleeps this way): listed,
/// each would be a resource of its own, filling the console's resource view with one entry per
/// request, and console-subscriber keeps every closed resource for its retention period (an
/// hour by default), scanning them all on each of its turns.
pub fn sleep_until_unlisted(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        entry: None,
        fired: false,
        trace: TimerTrace::unlisted(),
    }
}

/// A sleep made by `source` (`sleep`, `timeout`, `interval`: the console's async-op source).
#[track_caller]
pub(super) fn sleep_from(deadline: Instant, source: &'static str) -> Sleep {
    Sleep {
        deadline,
        entry: None,
        fired: false,
        trace: TimerTrace::new(source, deadline, Location::caller()),
    }
}

struct Armed {
    handle: ReactorHandle,
    key: TimerKey,
}

/// Future of [`sleep`] and [`sleep_until`].
///
/// Dropping an armed `Sleep` cancels its timer in O(log n) and frees its entry.
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    deadline: Instant,
    entry: Option<Armed>,
    /// A poll returned `Ready` (and no reset since).
    fired: bool,
    /// The timer's spans for tokio-console (`console/`): none for an unlisted sleep, and
    /// nothing at all without the feature `console`.
    trace: TimerTrace,
}

impl Sleep {
    /// The instant this sleep completes at.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// `true` once the sleep has fired: a poll completed it, or its armed timer was fired by its
    /// reactor. A sleep that was never polled has not fired, even if its deadline is in the
    /// past; [`reset`](Self::reset) makes it unfired again.
    pub fn is_elapsed(&self) -> bool {
        self.fired
            || self
                .entry
                .as_ref()
                .is_some_and(|armed| armed.handle.timer_has_fired(armed.key))
    }

    /// Moves the deadline; the timer is re-armed on the next poll.
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        let this = self.get_mut();
        this.disarm();
        this.deadline = deadline;
        this.fired = false;
        this.trace.reset(deadline);
    }

    fn disarm(&mut self) {
        if let Some(armed) = self.entry.take() {
            armed.handle.timer_cancel(armed.key);
        }
    }
}

impl Future for Sleep {
    type Output = ();

    /// A timer's entry disappears only when its owner's clock passed the deadline (or the
    /// reactor shut down, which is checked). Before arming, the deadline is compared with the
    /// owner's last clock reading, then with a fresh one: a deadline that has passed completes
    /// at once, as tokio's does.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Sleep {
            deadline,
            entry,
            fired,
            trace,
        } = self.get_mut();
        trace.poll(|| poll_timer(*deadline, entry, fired, cx))
    }
}

#[inline(always)]
fn poll_timer(
    deadline: Instant,
    entry: &mut Option<Armed>,
    fired: &mut bool,
    cx: &mut Context<'_>,
) -> Poll<()> {
    ready!(coop::poll_budget(cx));
    if let Some(armed) = &*entry {
        if armed.handle.timer_update(armed.key, cx.waker()) {
            return Poll::Pending;
        }
        if !armed.handle.is_shutdown() {
            // Fired: the owner read a clock at or past the deadline before removing it.
            *entry = None;
            *fired = true;
            coop::spend();
            return Poll::Ready(());
        }
        // The reactor shut down and dropped its timers: arming again reports that.
        *entry = None;
    }
    let (handle, owner) = ReactorHandle::current_for_timer();
    match handle.timer_arm(deadline.into_std(), cx.waker(), owner) {
        Some(key) => {
            *entry = Some(Armed { handle, key });
            Poll::Pending
        }
        None => {
            *fired = true;
            coop::spend();
            Poll::Ready(())
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.disarm();
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .field("armed", &self.entry.is_some())
            .field("fired", &self.fired)
            .finish()
    }
}
