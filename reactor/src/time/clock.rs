//! Reading the current thread's clock, and the paused test clock ([`pause`], [`resume`],
//! [`advance`]). The clock itself (the state a reactor keeps) is the driver's `clock.rs`.
//!
//! A reactor reads the OS's monotonic clock, unless its clock was **paused**. A paused clock
//! stands still; it moves when a task calls [`advance`], and when the runtime is idle: the
//! reactor's wait then does not block on the paused clock's account but jumps it to the nearest
//! timer (auto-advance, in `Driver::park`), so `sleep(Duration::from_secs(3600))` completes at
//! once in a test. Auto-advance waits while `spawn_blocking` closures run
//! ([`ReactorHandle::inhibit_auto_advance`](crate::ReactorHandle::inhibit_auto_advance)): their
//! results come in real time.
//!
//! Only a current-thread runtime's clock can be paused: its one reactor serves every thread of
//! the runtime. The workers of a multi-thread runtime each own a reactor and a clock, which
//! cannot be moved together.
//!
//! Once paused, a clock reads its state under a lock; after [`resume`] it runs again from where
//! it stood, so it stays behind or ahead of the OS clock by what was paused and advanced.
//! [`Instant::now`](super::Instant::now) reads the clock of the current thread's reactor.
//! Until some clock of the process has been paused, it reads the OS clock directly.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant as StdInstant};

use crate::ReactorHandle;
use crate::context;
use crate::driver::clock;

/// The reading of the current thread's clock: its reactor's (possibly paused) clock, or the OS
/// clock outside any runtime.
pub(crate) fn now() -> StdInstant {
    if !clock::ever_paused() {
        return StdInstant::now();
    }
    context::with_current_clock(|c| c.map_or_else(StdInstant::now, clock::Clock::now))
}

#[track_caller]
fn current(what: &str) -> ReactorHandle {
    match ReactorHandle::try_current() {
        Some(handle) => handle,
        None => panic!(
            "`weir::time::{what}` must be called inside a weir runtime: in `Runtime::block_on`, \
             a task, or after `Runtime::enter`"
        ),
    }
}

/// Pauses the runtime's clock.
///
/// While paused, [`Instant::now`](super::Instant::now) stands still and timers fire only when
/// the clock is moved: by [`advance`], or — when the runtime is idle (no task to run, no I/O
/// ready) — by jumping straight to the nearest timer's deadline. A test that sleeps an hour
/// thus completes at once, and deterministically. `#[weir::test(start_paused = true)]` and
/// `Builder::start_paused(true)` start the runtime paused.
///
/// Auto-advance does not wait for I/O that has not arrived yet: in a paused test, a timeout
/// around I/O from outside the process (or another runtime) may fire first. It does wait for
/// `spawn_blocking` closures to finish.
///
/// # Panics
/// Outside a weir runtime; on a multi-thread runtime (each worker keeps its own clock, so only
/// a current-thread runtime's clock can be paused); if the clock is already paused.
///
/// # Example
/// ```ignore
/// use std::time::Duration;
/// use weir::time::{Instant, sleep};
///
/// #[weir::test]
/// async fn an_hour_in_no_time() {
///     weir::time::pause();
///     let start = Instant::now();
///     sleep(Duration::from_secs(3600)).await; // completes at once
///     assert_eq!(start.elapsed(), Duration::from_secs(3600));
/// }
/// ```
#[track_caller]
pub fn pause() {
    let handle = current("pause");
    if let Err(message) = handle.inner.clock.pause() {
        panic!("{message}");
    }
    // A wait already bounded by a timer in real time must start over on the paused clock.
    handle.unpark();
}

/// Lets a paused clock run again, from the reading it stands at.
///
/// # Panics
/// Outside a weir runtime, or if the clock is not paused.
#[track_caller]
pub fn resume() {
    let handle = current("resume");
    if let Err(message) = handle.inner.clock.resume() {
        panic!("{message}");
    }
    handle.unpark();
}

/// Moves the paused clock forward by `duration`, fires the timers that are now due, and yields
/// once so that their tasks can run.
///
/// A sleep due at the new reading has completed when this returns; a task woken by one has been
/// scheduled (whether it already ran depends on the tasks queued before it).
///
/// # Panics
/// Outside a weir runtime, if the clock is not paused ([`pause`]), or if the clock would pass
/// the largest `Instant`.
///
/// # Example
/// ```ignore
/// use std::time::Duration;
/// use weir::time::{advance, sleep};
///
/// #[weir::test(start_paused = true)]
/// async fn fires_after_advance() {
///     let nap = weir::spawn(sleep(Duration::from_millis(10)));
///     advance(Duration::from_millis(10)).await;
///     // The sleep fired during `advance`; its task completes without the clock moving.
///     nap.await.unwrap();
/// }
/// ```
pub async fn advance(duration: Duration) {
    let handle = current("advance");
    if let Err(message) = handle.inner.clock.advance(duration) {
        panic!("{message}");
    }
    handle.expire_due_timers();
    YieldOnce(false).await;
}

/// Returns `Pending` once (waking its task at once), then `Ready`.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
