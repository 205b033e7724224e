//! The clock of a reactor's timers, and the paused test clock ([`pause`], [`resume`],
//! [`advance`]).
//!
//! A reactor reads the OS's monotonic clock, unless its clock was **paused**. A paused clock
//! stands still; it moves when a task calls [`advance`], and when the runtime is idle: the
//! reactor's wait then does not block on the paused clock's account but jumps it to the nearest
//! timer (auto-advance, in `Driver::park`), so `sleep(Duration::from_secs(3600))` completes at
//! once in a test. Auto-advance waits while `spawn_blocking` closures run
//! ([`Handle::inhibit_auto_advance`](crate::Handle::inhibit_auto_advance)): their results come
//! in real time.
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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant as StdInstant};

use parking_lot::Mutex;

use crate::Handle;

/// Set when a clock of this process is paused for the first time, never unset. Until then every
/// clock reads the OS clock, and `Instant::now` need not look for the current reactor.
static EVER_PAUSED: AtomicBool = AtomicBool::new(false);

const NOT_PAUSABLE: &str = "the clock of a multi-thread weir runtime cannot be paused: each \
     worker keeps its own clock. Pause time on a current-thread runtime \
     (`Builder::new_current_thread`, which `#[weir::test]` uses by default), e.g. with \
     `#[weir::test(start_paused = true)]`";
const ALREADY_PAUSED: &str = "`weir::time::pause`: the clock is already paused";
const NOT_PAUSED_RESUME: &str = "`weir::time::resume`: the clock is not paused";
const NOT_PAUSED_ADVANCE: &str = "`weir::time::advance` needs a paused clock: call \
     `weir::time::pause()` first, or start the runtime paused (`#[weir::test(start_paused = \
     true)]`, `Builder::start_paused(true)`)";
const OVERFLOW: &str = "`weir::time::advance`: the paused clock would pass the largest `Instant`";

/// The clock of one reactor.
pub(crate) struct Clock {
    /// The runtime allows pausing (current-thread flavour).
    pausable: bool,
    /// Set at the first pause, never unset: from then on readings come from `state` (after a
    /// resume the clock runs again, but no longer equals the OS clock).
    shifted: AtomicBool,
    /// Mirror of `state.running_since.is_none()`, for the reactor's check before each wait.
    paused: AtomicBool,
    state: Mutex<State>,
    /// Running `spawn_blocking` closures: while any runs, the idle reactor does not advance the
    /// paused clock.
    inhibitors: AtomicUsize,
}

struct State {
    /// The reading at `running_since`; while paused, the frozen reading.
    base: StdInstant,
    /// `Some(t)`: running since the OS instant `t`; `None`: paused.
    running_since: Option<StdInstant>,
}

impl State {
    fn reading(&self) -> StdInstant {
        match self.running_since {
            Some(since) => self.base + since.elapsed(),
            None => self.base,
        }
    }
}

impl Clock {
    /// A running clock that equals the OS clock; `pausable` says whether [`pause`] may stop it.
    pub(crate) fn new(pausable: bool) -> Clock {
        // Readings of this clock, paused or not, are never before the timer queue's base.
        let _ = super::queue::base();
        let now = StdInstant::now();
        Clock {
            pausable,
            shifted: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            state: Mutex::new(State {
                base: now,
                running_since: Some(now),
            }),
            inhibitors: AtomicUsize::new(0),
        }
    }

    /// The current reading.
    pub(crate) fn now(&self) -> StdInstant {
        if !self.shifted.load(Ordering::Acquire) {
            return StdInstant::now();
        }
        self.state.lock().reading()
    }

    pub(crate) fn is_pausable(&self) -> bool {
        self.pausable
    }

    /// `true` while paused.
    pub(crate) fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }

    /// Stops the clock at its current reading.
    pub(crate) fn pause(&self) -> Result<(), &'static str> {
        if !self.pausable {
            return Err(NOT_PAUSABLE);
        }
        let mut state = self.state.lock();
        if state.running_since.is_none() {
            return Err(ALREADY_PAUSED);
        }
        // Read before `shifted` is set: until then the reading is the OS clock's.
        state.base = if self.shifted.load(Ordering::Acquire) {
            state.reading()
        } else {
            StdInstant::now()
        };
        state.running_since = None;
        self.shifted.store(true, Ordering::Release);
        self.paused.store(true, Ordering::Release);
        EVER_PAUSED.store(true, Ordering::Release);
        Ok(())
    }

    /// Lets a paused clock run again from where it stands.
    pub(crate) fn resume(&self) -> Result<(), &'static str> {
        let mut state = self.state.lock();
        if state.running_since.is_some() {
            return Err(NOT_PAUSED_RESUME);
        }
        state.running_since = Some(StdInstant::now());
        self.paused.store(false, Ordering::Release);
        Ok(())
    }

    /// Moves a paused clock forward by `by`.
    pub(crate) fn advance(&self, by: Duration) -> Result<(), &'static str> {
        let mut state = self.state.lock();
        if state.running_since.is_some() {
            return Err(NOT_PAUSED_ADVANCE);
        }
        state.base = state.base.checked_add(by).ok_or(OVERFLOW)?;
        Ok(())
    }

    /// Auto-advance: moves a paused clock forward to `to`, unless blocking closures hold it.
    /// Returns whether the clock now reads at least `to`.
    pub(crate) fn auto_advance_to(&self, to: StdInstant) -> bool {
        if self.inhibitors.load(Ordering::Acquire) > 0 {
            return false;
        }
        let mut state = self.state.lock();
        if state.running_since.is_some() {
            return false;
        }
        if state.base < to {
            state.base = to;
        }
        true
    }

    pub(crate) fn inhibit(&self) {
        self.inhibitors.fetch_add(1, Ordering::AcqRel);
    }

    /// Ends one inhibition; `true` if it was the last.
    pub(crate) fn release(&self) -> bool {
        self.inhibitors.fetch_sub(1, Ordering::AcqRel) == 1
    }
}

/// The reading of the current thread's clock: its reactor's (possibly paused) clock, or the OS
/// clock outside any runtime.
pub(crate) fn now() -> StdInstant {
    if !EVER_PAUSED.load(Ordering::Acquire) {
        return StdInstant::now();
    }
    crate::driver::with_current_clock(|clock| clock.map_or_else(StdInstant::now, Clock::now))
}

#[track_caller]
fn current(what: &str) -> Handle {
    match Handle::try_current() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paused_clock_moves_only_when_told() {
        let clock = Clock::new(true);
        assert!(!clock.is_paused());
        clock.pause().unwrap();
        assert_eq!(clock.pause(), Err(ALREADY_PAUSED));
        let t0 = clock.now();
        std::thread::sleep(Duration::from_millis(1));
        assert_eq!(clock.now(), t0, "a paused clock stands still");
        clock.advance(Duration::from_secs(5)).unwrap();
        assert_eq!(clock.now(), t0 + Duration::from_secs(5));
        assert!(clock.auto_advance_to(t0 + Duration::from_secs(7)));
        assert!(clock.auto_advance_to(t0), "never backwards");
        assert_eq!(clock.now(), t0 + Duration::from_secs(7));
        clock.inhibit();
        assert!(!clock.auto_advance_to(t0 + Duration::from_secs(9)));
        assert!(clock.release());
        clock.resume().unwrap();
        assert_eq!(clock.resume(), Err(NOT_PAUSED_RESUME));
        assert_eq!(clock.advance(Duration::ZERO), Err(NOT_PAUSED_ADVANCE));
        assert!(
            clock.now() >= t0 + Duration::from_secs(7),
            "runs on from where it stood"
        );
        assert!(!clock.auto_advance_to(t0 + Duration::from_secs(60)));
    }

    #[test]
    fn only_a_pausable_clock_pauses() {
        let clock = Clock::new(false);
        assert_eq!(clock.pause(), Err(NOT_PAUSABLE));
        assert!(!clock.is_paused());
    }
}
