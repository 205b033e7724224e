//! Nesting: the owner waits for this reactor from inside another event loop (tokio's
//! current-thread runtime, for the executor's per-worker tokio compatibility) instead of
//! blocking in the backend itself.
//!
//! The outer loop watches [`Driver::nest_fd`] (readable when the backend has events, which
//! includes the wake handle written by [`ReactorHandle::unpark`](super::ReactorHandle::unpark))
//! and a timer of its own, set to the deadline [`Driver::begin_nested_park`] returns. While it
//! waits, the reactor counts as parked: wakers from other threads write the wake handle, and a
//! timer armed earlier than that deadline (from any thread, the owner's included) unparks.
//! [`Driver::end_nested_park`] then delivers what arrived, as a wait would: the min_wait window
//! (held after the first event, the wait having started at `begin`), the timer spin of the
//! last stretch before a deadline, and the wait accounting the adaptive policy learns from.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use super::Driver;
use crate::min_wait::{WaitReport, WindowEnd, WindowReport};
use crate::park_state::Prepare;

/// A park begun by [`Driver::begin_nested_park`], ended by [`Driver::end_nested_park`].
#[derive(Debug)]
#[must_use = "a nested park must be ended with `Driver::end_nested_park`"]
pub struct NestedPark {
    /// When the wait began.
    start: Instant,
    /// The nearest timer's deadline, if any.
    deadline: Option<Instant>,
    /// When the outer loop's timer should fire: the deadline less the timer spin margin.
    wake_at: Option<Instant>,
}

impl NestedPark {
    /// When the outer loop must resume the reactor at the latest (`None`: no timer is armed).
    /// The outer timer fires a little before the nearest deadline; the rest is spun out in
    /// [`Driver::end_nested_park`], which keeps weir's timer precision.
    pub fn wake_at(&self) -> Option<Instant> {
        self.wake_at
    }
}

impl Driver {
    /// The fd that polls readable when this reactor has something to deliver, for waiting on
    /// it from another event loop. `None` where the backend cannot be nested (io_uring: its
    /// ring, set up for single-issuer task running, does not wake pollers reliably).
    pub fn nest_fd(&self) -> Option<RawFd> {
        self.selector.nest_fd(&self.handle.inner.registry)
    }

    /// Starts waiting from another event loop. Fires due timers first and returns `None` when
    /// something became runnable or a wake-up was pending (then the caller must not wait).
    /// Otherwise the reactor counts as parked until [`end_nested_park`](Self::end_nested_park).
    ///
    /// On a paused clock an idle reactor advances the clock to its nearest timer here and
    /// returns `None`, as [`park`](Self::park) would.
    pub fn begin_nested_park(&mut self) -> Option<NestedPark> {
        // Registrations handed over while the worker ran: the outer loop wakes us for events of
        // our epoll only, and a registration not yet made has none. One handed after this
        // finds the reactor notified (the park below is refused) or parked (its wake-up
        // makes the fd readable, and the turn that follows makes it).
        self.handle.make_handed();
        if self.handle.inner.clock.is_paused() {
            // Poll for I/O first; when idle, jump to the nearest timer (auto-advance).
            match self.turn_paused(Some(Duration::ZERO)) {
                Ok(0) => {}
                Ok(_) => return None,
                Err(e) => {
                    tracing::error!(target: "weir::reactor", error = %e, "reactor poll failed");
                    return None;
                }
            }
            if let Some(next) = self.next_timer()
                && self.handle.inner.clock.auto_advance_to(next)
            {
                self.expire_timers();
                return None;
            }
        }
        let (fired, now) = self.expire_timers();
        if fired > 0 {
            return None;
        }
        if self.handle.inner.park.prepare_park() == Prepare::Notified {
            return None;
        }
        let deadline = self.next_timer();
        let wake_at = deadline.map(|d| {
            let margin = self.spin_margin();
            d.checked_sub(margin).unwrap_or(d).max(now)
        });
        Some(NestedPark {
            start: now,
            deadline,
            wake_at,
        })
    }

    /// Ends a nested wait: the reactor is no longer parked, and the events and timers that
    /// are due are delivered. `io_ready`: the outer loop saw [`nest_fd`](Self::nest_fd)
    /// readable (then an open min_wait window is held before collecting).
    ///
    /// Returns how many wakers were woken, and `true` when the event buffer was filled (more
    /// events may be pending: the fd's readiness must not be cleared yet).
    ///
    /// # Errors
    /// Only unexpected OS errors from the poller.
    pub fn end_nested_park(
        &mut self,
        park: NestedPark,
        io_ready: bool,
    ) -> io::Result<(usize, bool)> {
        let inner = &*self.handle.inner;
        inner.park.finish_park();
        let timed = self.policy.needs_timing();
        let window = self.policy.window().filter(|_| io_ready);
        // The clock is read only where it decides something: the adaptive policy's timing, a
        // window to hold, or (without I/O) whether the outer timer woke us for the spin.
        let first = if timed || window.is_some() || (!io_ready && park.deadline.is_some()) {
            Some(inner.clock.now())
        } else {
            None
        };
        // Held from the start of the wait, as a wait with a window would.
        let mut held = None;
        if let (Some(w), Some(first)) = (window, first) {
            let mut end = (park.start + w, WindowEnd::Elapsed);
            if let Some(d) = park.deadline
                && d < end.0
            {
                end = (d, WindowEnd::Deadline);
            }
            if first < end.0 {
                std::thread::sleep(end.0 - first);
                held = Some(end.1);
            }
        }
        // Woken by the outer timer before the deadline: spin out the last stretch.
        let mut woken = 0;
        let mut spun = false;
        if !io_ready
            && let (Some(d), Some(at), Some(first)) = (park.deadline, park.wake_at, first)
            && first >= at
            && first < d
        {
            self.events.clear();
            self.spin_until(d)?;
            woken += self.deliver_events();
            spun = true;
        }
        if io_ready || spun || self.handle.inner.clock.is_paused() {
            woken += self.turn(Some(Duration::ZERO))?;
        } else {
            // Resumed for a task woken on this thread (or by the outer timer at a deadline):
            // the backend has signalled nothing, so polling it would be a wasted syscall. What
            // arrives from now on makes the fd readable, and the outer loop resumes us again.
            self.events.clear();
            woken += self.expire_timers().0;
        }
        let events = self.events.len();
        let more = events >= self.max_events;
        if timed || held.is_some() {
            let first = first.expect("read for a timed wait or a window");
            let done = self.handle.inner.clock.now();
            let report = WaitReport {
                events,
                blocked: first.saturating_duration_since(park.start),
                span: Some((park.start, done)),
                window: held.map(|end| WindowReport {
                    spent: done.saturating_duration_since(first),
                    full: more,
                    end,
                    gathered: events.saturating_sub(1),
                }),
            };
            self.record_wait(&report);
        } else {
            self.record_wait(&WaitReport {
                events,
                blocked: Duration::ZERO,
                span: None,
                window: None,
            });
        }
        Ok((woken, more))
    }
}

/// The timer the outer loop watches beside [`Driver::nest_fd`] while the reactor is parked in
/// it: set to [`NestedPark::wake_at`] with [`arm`](Self::arm), it becomes readable then (a
/// timerfd; Linux only, [`new`](Self::new) fails elsewhere).
#[derive(Debug)]
pub struct NestTimer {
    fd: crate::sys::TimerFd,
    /// When it is set to fire (`None`: disarmed, or fired).
    armed: Option<Instant>,
}

impl NestTimer {
    /// A disarmed timer.
    ///
    /// # Errors
    /// The OS error of `timerfd_create`; `Unsupported` off Linux.
    pub fn new() -> io::Result<NestTimer> {
        Ok(NestTimer {
            fd: crate::sys::TimerFd::new()?,
            armed: None,
        })
    }

    /// The fd the outer loop watches: readable once the timer fired.
    pub fn fd(&self) -> RawFd {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }

    /// Makes the timer fire at `at` at the latest (`now`: the caller's clock reading). A timer
    /// set earlier, still ahead, is left: waking early costs one turn of the outer loop,
    /// setting it again costs a system call per park.
    pub fn arm(&mut self, at: Instant, now: Instant) {
        if self.armed.is_some_and(|a| a <= at && a > now) {
            return;
        }
        match self.fd.set(at.saturating_duration_since(now)) {
            Ok(()) => self.armed = Some(at),
            Err(e) => {
                tracing::error!(target: "weir::reactor", error = %e, "timerfd_settime failed; weir's timers may be late");
            }
        }
    }

    /// The outer loop saw the timer fire: the next [`arm`](Self::arm) sets it again.
    pub fn fired(&mut self) {
        self.armed = None;
    }
}
