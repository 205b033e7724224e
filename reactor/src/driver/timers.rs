//! Timers: the API the handle offers to `time` (arm, re-arm, cancel, ask whether one fired,
//! hold a paused clock), and their expiry by the owner at each turn. The queue itself is
//! `timer_queue.rs`.

use std::sync::atomic::Ordering;
use std::task::Waker;
use std::time::Instant;

use super::timer_queue::{self, TimerKey};
use super::{Driver, ReactorHandle};

/// What a turn learns from firing due timers.
pub(super) struct Expired {
    /// How many timers fired.
    pub(super) fired: usize,
    /// The clock reading used, and the same in the queue's nanoseconds.
    pub(super) now: Instant,
    pub(super) now_ns: u64,
    /// Asked for by a turn about to block (else `None`): the earliest item left in the queue,
    /// in its nanoseconds, and whether it is a live timer: never later than the earliest armed deadline, so it bounds the next wait. A
    /// cancelled timer's item is left where it is (see `timer_queue.rs`); a wait it bounds
    /// may end for nothing, after which the turn drops such items from the top.
    pub(super) next: Option<(u64, bool)>,
}

/// What [`Driver::expire`] does after firing due timers, under the same lock.
enum After {
    Nothing,
    /// Report the queue's top as [`Expired::next`].
    Bound,
    /// Drop dead items on top.
    Settle,
}

impl Driver {
    /// Fires due timers; returns how many and the clock reading it used.
    pub(super) fn expire_timers(&mut self) -> (usize, Instant) {
        match self.expire(|_| true, After::Nothing) {
            Some(e) => (e.fired, e.now),
            None => (0, self.handle.inner.clock.now()),
        }
    }

    /// [`expire_timers`](Self::expire_timers) after a wait that a cancelled timer's item
    /// bounded and nothing else ended: that item and every other dead one on top are dropped,
    /// so the next wait is bounded by a live timer (no second wake-up for nothing).
    pub(super) fn expire_timers_and_settle(&mut self) -> usize {
        self.expire(|_| true, After::Settle).map_or(0, |e| e.fired)
    }

    /// [`expire_timers`](Self::expire_timers) for a turn that is about to block: with no timer
    /// armed there is nothing to fire and no timeout to compute, so the clock is not read
    /// (`None`). `clock_ns` then keeps the reading of the previous turn's end until the
    /// reading after this wait: the owner is parked in between, and stealing looks at
    /// `clock_ns` only while the owner is not parked (`steal.rs`); a stale cache only makes
    /// `timer_arm` read the clock itself. Also returns the bound of the wait, taken under the
    /// same lock.
    pub(super) fn expire_timers_if_armed(&mut self) -> Option<Expired> {
        self.expire(|armed| armed > 0, After::Bound)
    }

    /// Reads the clock and fires due timers if `read(armed timers)`, all under the timers'
    /// lock (the clock takes no lock of the driver's), then does what `after` says.
    fn expire(&mut self, read: impl FnOnce(usize) -> bool, after: After) -> Option<Expired> {
        let inner = &*self.handle.inner;
        let (fired, now, now_ns, next) = {
            let mut timers = inner.timers.lock();
            if !read(timers.len()) {
                return None;
            }
            let now = inner.clock.now();
            let now_ns = timer_queue::to_ns(now);
            inner.clock_ns.store(now_ns, Ordering::Relaxed);
            let fired = match timers.bound() {
                Some((top, _)) if top <= now_ns => timers.expire(now_ns, &mut self.wake),
                _ => 0,
            };
            let next = match after {
                After::Nothing => None,
                After::Bound => timers.bound(),
                After::Settle => {
                    timers.next_deadline();
                    None
                }
            };
            (fired, now, now_ns, next)
        };
        if fired > 0 {
            inner.metrics.timers_fired.add_owner(fired as u64);
            self.wake.drain(..).for_each(Waker::wake);
        }
        Some(Expired {
            fired,
            now,
            now_ns,
            next,
        })
    }
}

impl ReactorHandle {
    /// Arms a timer; wakes the owner if the timer is now the earliest and the owner is not
    /// running (it recomputes its timeout before every wait).
    ///
    /// `owner`: the caller is the owning worker (from `ReactorHandle::current_for_timer`).
    #[cfg(test)]
    pub(crate) fn timer_insert(&self, deadline: Instant, waker: Waker, owner: bool) -> TimerKey {
        self.insert_ns(timer_queue::to_ns(deadline), waker, owner)
    }

    /// Arms a timer for `deadline` unless it is due on this reactor's clock: it is at or
    /// before the owner's last clock reading, or at or before a fresh reading (the owner's
    /// last reading may be older than a deadline taken from
    /// [`Instant::now`](crate::time::Instant::now) just before — an interval's first tick, a
    /// zero sleep — which is due all the same). `None` when due. The deadline is converted
    /// to the queue's nanoseconds once, for the check and the queue.
    pub(crate) fn timer_arm(
        &self,
        deadline: Instant,
        waker: &Waker,
        owner: bool,
    ) -> Option<TimerKey> {
        let ns = timer_queue::to_ns(deadline);
        if self.has_passed_ns(ns) || deadline <= self.inner.clock.now() {
            return None;
        }
        Some(self.insert_ns(ns, waker.clone(), owner))
    }

    /// [`timer_arm`](Self::timer_arm) past the check, `deadline` in the queue's nanoseconds.
    fn insert_ns(&self, deadline: u64, waker: Waker, owner: bool) -> TimerKey {
        let inner = &*self.inner;
        if inner.shutdown.load(Ordering::Acquire) {
            panic!("a timer was armed on a weir runtime that has shut down; it would never fire");
        }
        let (key, earliest) = inner.timers.lock().insert(deadline, waker);
        // The owner recomputes its timeout before it blocks, unless it is parked inside
        // another event loop (nesting), where its own code (a tokio task) may arm a timer.
        if earliest && (!owner || inner.park.is_parked()) {
            self.unpark();
        }
        key
    }

    /// `true` if `deadline` is at or before the owner's last clock reading (so it has passed).
    /// Costs no clock read; `false` says nothing.
    #[cfg(test)]
    pub(crate) fn has_passed(&self, deadline: Instant) -> bool {
        self.has_passed_ns(timer_queue::to_ns(deadline))
    }

    /// [`has_passed`](Self::has_passed) in the queue's nanoseconds.
    fn has_passed_ns(&self, deadline: u64) -> bool {
        deadline <= self.inner.clock_ns.load(Ordering::Relaxed)
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
    pub(crate) fn inhibit_auto_advance(&self) {
        if self.inner.clock.is_pausable() {
            self.inner.clock.inhibit();
        }
    }

    /// Ends one [`inhibit_auto_advance`](Self::inhibit_auto_advance). Call it once the work's
    /// result is published and its waiters woken, or the idle reactor may advance the clock
    /// first. The last one unparks the owner if the clock is paused, so that an idle reactor
    /// advances again (a clock paused later is unparked by `pause` itself).
    pub(crate) fn allow_auto_advance(&self) {
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

/// The handle's timer API on a reactor with a paused clock, against a `BTreeMap` model:
/// random arms, re-arms, cancels and clock moves, expired by the owner or from another thread.
#[cfg(test)]
mod proptests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    use std::task::Wake;
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::config::DriverConfig;

    struct Logged(usize, Arc<Mutex<Vec<usize>>>);
    impl Wake for Logged {
        fn wake(self: Arc<Self>) {
            self.1.lock().unwrap().push(self.0);
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert {
            after: u64,
        },
        Cancel {
            i: usize,
        },
        Update {
            i: usize,
        },
        /// Advance the paused clock by `by` ns, then expire as the owner (or as another thread).
        Advance {
            by: u64,
            owner: bool,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            // Small steps too, so that deadlines meet the clock exactly.
            2 => (0..4u64).prop_map(|after| Op::Insert { after }),
            3 => (0..1_000u64).prop_map(|after| Op::Insert { after }),
            2 => any::<usize>().prop_map(|i| Op::Cancel { i }),
            1 => any::<usize>().prop_map(|i| Op::Update { i }),
            1 => (0..4u64, any::<bool>()).prop_map(|(by, owner)| Op::Advance { by, owner }),
            2 => (0..600u64, any::<bool>()).prop_map(|(by, owner)| Op::Advance { by, owner }),
        ]
    }

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum State {
        Armed,
        Fired,
        Cancelled,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn handle_timers_match_a_btreemap(ops in proptest::collection::vec(op(), 1..100)) {
            let cfg = DriverConfig {
                pausable_clock: true,
                start_paused: true,
                ..DriverConfig::default()
            };
            let mut driver = Driver::new(&cfg).unwrap();
            let handle = driver.handle().clone();
            let t0 = handle.inner.clock.now();
            let log = Arc::new(Mutex::new(Vec::new()));
            // (deadline offset, key index) of the armed timers.
            let mut model: BTreeMap<(u64, usize), ()> = BTreeMap::new();
            // Per key: its deadline offset, state, and the id of the waker it should wake.
            let mut keys: Vec<(TimerKey, u64, State, usize)> = Vec::new();
            let mut wakers = 0usize;
            let mut now = 0u64;
            // The clock reading of the last expiry, if any.
            let mut seen = None;
            for op in ops {
                match op {
                    Op::Insert { after } => {
                        let deadline = now + after;
                        wakers += 1;
                        let w = Waker::from(Arc::new(Logged(wakers, log.clone())));
                        let key = handle.timer_insert(t0 + Duration::from_nanos(deadline), w, true);
                        model.insert((deadline, keys.len()), ());
                        keys.push((key, deadline, State::Armed, wakers));
                    }
                    Op::Cancel { i } if !keys.is_empty() => {
                        let i = i % keys.len();
                        handle.timer_cancel(keys[i].0);
                        if keys[i].2 == State::Armed {
                            model.remove(&(keys[i].1, i));
                            keys[i].2 = State::Cancelled;
                        }
                    }
                    Op::Update { i } if !keys.is_empty() => {
                        let i = i % keys.len();
                        wakers += 1;
                        let w = Waker::from(Arc::new(Logged(wakers, log.clone())));
                        let armed = keys[i].2 == State::Armed;
                        prop_assert_eq!(handle.timer_update(keys[i].0, &w), armed);
                        if armed {
                            keys[i].3 = wakers;
                        }
                    }
                    Op::Advance { by, owner } => {
                        now += by;
                        handle.inner.clock.advance(Duration::from_nanos(by)).unwrap();
                        let n = if owner {
                            driver.expire_timers().0
                        } else {
                            handle.expire_due_timers()
                        };
                        seen = Some(now);
                        let due: Vec<(u64, usize)> =
                            model.range(..(now + 1, 0)).map(|(k, _)| *k).collect();
                        prop_assert_eq!(n, due.len());
                        let mut want: Vec<usize> = due.iter().map(|&(_, i)| keys[i].3).collect();
                        for &(d, i) in &due {
                            model.remove(&(d, i));
                            keys[i].2 = State::Fired;
                        }
                        let mut fired = std::mem::take(&mut *log.lock().unwrap());
                        want.sort_unstable();
                        fired.sort_unstable();
                        prop_assert_eq!(fired, want, "each due timer woke its latest waker once");
                    }
                    _ => {}
                }
                prop_assert_eq!(
                    driver.next_timer().map(|t| t.duration_since(t0).as_nanos() as u64),
                    model.keys().next().map(|k| k.0)
                );
                for &(key, deadline, state, _) in &keys {
                    if state != State::Cancelled {
                        prop_assert_eq!(handle.timer_has_fired(key), state == State::Fired);
                    }
                    let passed = handle.has_passed(t0 + Duration::from_nanos(deadline));
                    prop_assert_eq!(passed, seen.is_some_and(|s| deadline <= s));
                }
            }
        }
    }
}
