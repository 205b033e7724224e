//! The clock of one reactor: the OS's monotonic clock, or a paused one that moves only when
//! told (the test clock of [`time::pause`](crate::time::pause) and
//! [`time::advance`](crate::time::advance), whose module documents its behaviour).
//!
//! The timers and the wait of a reactor read this clock; [`Instant::now`](crate::time::Instant)
//! reads the current thread's reactor's clock through it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant as StdInstant};

use parking_lot::Mutex;

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
        let _ = super::timer_queue::base();
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

/// `true` once a clock of this process has been paused (never unset): until then every clock
/// reads the OS clock.
pub(crate) fn ever_paused() -> bool {
    EVER_PAUSED.load(Ordering::Acquire)
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
