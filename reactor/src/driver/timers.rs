//! Timers: the API the handle offers to `time` (arm, re-arm, cancel, ask whether one fired,
//! hold a paused clock), and their expiry by the owner at each turn. The queue itself is
//! `timer_queue.rs`.

use std::sync::atomic::Ordering;
use std::task::Waker;
use std::time::Instant;

use super::timer_queue::{self, TimerKey};
use super::{Driver, ReactorHandle};

impl Driver {
    /// Fires due timers; returns how many and the clock reading it used.
    pub(super) fn expire_timers(&mut self) -> (usize, Instant) {
        let inner = &*self.handle.inner;
        let instant = inner.clock.now();
        let now = timer_queue::to_ns(instant);
        inner.clock_ns.store(now, Ordering::Relaxed);
        let n = {
            let mut timers = inner.timers.lock();
            match timers.next_deadline() {
                Some(d) if d <= now => timers.expire(now, &mut self.wake),
                _ => 0,
            }
        };
        if n > 0 {
            inner.metrics.timers_fired.add_owner(n as u64);
            self.wake.drain(..).for_each(Waker::wake);
        }
        (n, instant)
    }
}

impl ReactorHandle {
    /// Arms a timer; wakes the owner if the timer is now the earliest and the owner is not
    /// running (it recomputes its timeout before every wait).
    ///
    /// `owner`: the caller is the owning worker (from `ReactorHandle::current_for_timer`).
    pub(crate) fn timer_insert(&self, deadline: Instant, waker: Waker, owner: bool) -> TimerKey {
        let inner = &*self.inner;
        if inner.shutdown.load(Ordering::Acquire) {
            panic!("a timer was armed on a weir runtime that has shut down; it would never fire");
        }
        let (key, earliest) = inner
            .timers
            .lock()
            .insert(timer_queue::to_ns(deadline), waker);
        // The owner recomputes its timeout before it blocks, unless it is parked inside
        // another event loop (nesting), where its own code (a tokio task) may arm a timer.
        if earliest && (!owner || inner.park.is_parked()) {
            self.unpark();
        }
        key
    }

    /// `true` if `deadline` is at or before the owner's last clock reading (so it has passed).
    /// Costs no clock read; `false` says nothing.
    pub(crate) fn has_passed(&self, deadline: Instant) -> bool {
        timer_queue::to_ns(deadline) <= self.inner.clock_ns.load(Ordering::Relaxed)
    }

    /// `true` if the timer was armed and has fired (its entry is gone, and not because the
    /// reactor shut down). Only meaningful for a key that was not cancelled.
    pub(crate) fn timer_has_fired(&self, key: TimerKey) -> bool {
        !self.inner.timers.lock().contains(key) && !self.is_shutdown()
    }

    /// Fires the timers due at the clock's current reading, from any thread (after
    /// [`time::advance`](crate::time::advance) moved a paused clock). Returns how many.
    pub(crate) fn expire_due_timers(&self) -> usize {
        let inner = &*self.inner;
        let now = timer_queue::to_ns(inner.clock.now());
        inner.clock_ns.fetch_max(now, Ordering::Relaxed);
        let mut wake = Vec::new();
        let n = inner.timers.lock().expire(now, &mut wake);
        if n > 0 {
            inner.metrics.timers_fired.add_shared(n as u64);
            wake.into_iter().for_each(Waker::wake);
        }
        n
    }

    /// Keeps an idle reactor from advancing its paused clock until the matching
    /// [`allow_auto_advance`](Self::allow_auto_advance): for work whose result comes in real
    /// time, such as a `spawn_blocking` closure. Calls nest; each needs its own `allow`. No-op
    /// on a reactor whose clock cannot be paused.
    pub fn inhibit_auto_advance(&self) {
        if self.inner.clock.is_pausable() {
            self.inner.clock.inhibit();
        }
    }

    /// Ends one [`inhibit_auto_advance`](Self::inhibit_auto_advance). Call it once the work's
    /// result is published and its waiters woken, or the idle reactor may advance the clock
    /// first. The last one unparks the owner if the clock is paused, so that an idle reactor
    /// advances again (a clock paused later is unparked by `pause` itself).
    pub fn allow_auto_advance(&self) {
        let clock = &self.inner.clock;
        if clock.is_pausable() && clock.release() && clock.is_paused() {
            self.unpark();
        }
    }

    pub(crate) fn timer_update(&self, key: TimerKey, waker: &Waker) -> bool {
        self.inner.timers.lock().update(key, waker)
    }

    pub(crate) fn timer_cancel(&self, key: TimerKey) {
        let waker = self.inner.timers.lock().remove(key);
        drop(waker);
    }
}
