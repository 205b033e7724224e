//! Per-reactor counters. Written by the owning worker (plain load + store, no locked
//! instruction) except where noted; read by anyone through [`ReactorStats`].

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A counter with one writer (the owning worker) and any number of readers. Also the
/// executor's counters' type (through `for_executor`; hidden from the docs).
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// A counter at zero.
    pub const fn new() -> Counter {
        Counter(AtomicU64::new(0))
    }

    /// Adds `n`. Only the owner thread may call this: the read-modify-write is not atomic.
    #[inline]
    pub fn add_owner(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }
    /// Adds `n` and returns the value before. Only the owner thread may call this.
    #[inline]
    pub fn add_owner_get(&self, n: u64) -> u64 {
        let v = self.0.load(Relaxed);
        self.0.store(v.wrapping_add(n), Relaxed);
        v
    }
    /// Adds `n` atomically (any thread).
    #[inline]
    pub fn add_shared(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }
    /// The current value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Upper bounds (inclusive) of the events-per-wait histogram buckets; the last bucket is open.
pub const EVENT_BUCKETS: [u64; 8] = [0, 1, 3, 7, 15, 31, 63, u64::MAX];

/// Index of the bucket holding a wait that returned `n` events.
pub fn event_bucket(n: usize) -> usize {
    EVENT_BUCKETS
        .iter()
        .position(|&hi| n as u64 <= hi)
        .unwrap_or(EVENT_BUCKETS.len() - 1)
}

#[derive(Debug, Default)]
pub(crate) struct ReactorMetrics {
    pub(crate) waits: Counter,
    pub(crate) polls: Counter,
    pub(crate) events: Counter,
    pub(crate) events_per_wait: [Counter; 8],
    pub(crate) windows_opened: Counter,
    pub(crate) windows_full: Counter,
    pub(crate) window_ns: Counter,
    pub(crate) window_events: Counter,
    pub(crate) window_probes_kept: Counter,
    pub(crate) window_probes_refused: Counter,
    pub(crate) timers_fired: Counter,
    pub(crate) timer_spin_ns: Counter,
    pub(crate) wakes_received: Counter,
    /// Any thread: eventfd writes made to wake this reactor's owner.
    pub(crate) wakes_sent: Counter,
    /// Any thread: unpark requests that found the owner running (no syscall).
    pub(crate) unparks_running: Counter,
    /// Any thread: I/O events of this reactor collected by another thread (I/O stealing, or a
    /// readiness rescue of a stuck owner, `driver/rescue.rs`).
    pub(crate) events_stolen: Counter,
    /// Any thread with this reactor current: leaf operations that returned `Pending` for want
    /// of budget (`coop.rs`).
    pub(crate) budget_forced_yields: Counter,
    /// Registrations another thread handed to the owner, made by the owner.
    pub(crate) registrations_handed: Counter,
}

/// A snapshot of one reactor's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReactorStats {
    /// Blocking waits (the worker parked in its driver).
    pub waits: u64,
    /// Non-blocking polls (zero timeout: maintenance and spinning).
    pub polls: u64,
    /// I/O events delivered (blocking and non-blocking), wake-ups excluded.
    pub events: u64,
    /// Blocking waits by number of events returned; bucket `i` holds waits with at most
    /// [`EVENT_BUCKETS`]`[i]` events (and more than the previous bound).
    pub events_per_wait: [u64; 8],
    /// min_wait windows opened.
    pub windows_opened: u64,
    /// Windows whose collecting poll filled the event buffer (`maxevents`).
    pub windows_full: u64,
    /// Total time spent inside windows, in nanoseconds.
    pub window_nanos: u64,
    /// Events gathered by windows' collecting polls (beyond the first wait's).
    pub window_events: u64,
    /// Adaptive min_wait: probes that found windows worth their cost here (windows allowed
    /// until the next probe).
    pub window_probes_kept: u64,
    /// Adaptive min_wait: probes that found windows save too little (no window until the
    /// next probe).
    pub window_probes_refused: u64,
    /// Timers that fired.
    pub timers_fired: u64,
    /// Time spent spinning just before timer deadlines (the timer spin margin), nanoseconds.
    pub timer_spin_nanos: u64,
    /// Wake-up events received on the eventfd / mio waker.
    pub wakes_received: u64,
    /// eventfd writes made to wake this reactor's parked owner.
    pub wakes_sent: u64,
    /// Wake requests that found the owner running and cost no syscall.
    pub unparks_running: u64,
    /// I/O events of this reactor that another thread collected and whose tasks it woke while
    /// this reactor's owner was busy or stuck: events an idle worker or the monitor thread
    /// stole from its epoll (I/O stealing), or, on backends whose events no other thread can
    /// collect (io_uring, mio), fds found ready by the monitor's `poll(2)` of the ones tasks
    /// wait on; not included in `events`.
    pub events_stolen: u64,
    /// Leaf operations (I/O, timers, join handles) that returned `Pending` because their
    /// task had spent its cooperative budget, on threads where this reactor is current.
    pub budget_forced_yields: u64,
    /// Registrations other threads handed to this reactor (connections accepted on another
    /// worker and placed here) that the owner made itself, so that the accepting worker did
    /// not wait for this reactor's epoll.
    pub registrations_handed: u64,
    /// Registered fds right now.
    pub registrations: u64,
    /// Armed timers right now.
    pub timers_armed: u64,
}

impl ReactorMetrics {
    pub(crate) fn snapshot(&self, registrations: u64, timers_armed: u64) -> ReactorStats {
        let mut epw = [0; 8];
        for (o, c) in epw.iter_mut().zip(&self.events_per_wait) {
            *o = c.get();
        }
        ReactorStats {
            waits: self.waits.get(),
            polls: self.polls.get(),
            events: self.events.get(),
            events_per_wait: epw,
            windows_opened: self.windows_opened.get(),
            windows_full: self.windows_full.get(),
            window_nanos: self.window_ns.get(),
            window_events: self.window_events.get(),
            window_probes_kept: self.window_probes_kept.get(),
            window_probes_refused: self.window_probes_refused.get(),
            timers_fired: self.timers_fired.get(),
            timer_spin_nanos: self.timer_spin_ns.get(),
            wakes_received: self.wakes_received.get(),
            wakes_sent: self.wakes_sent.get(),
            unparks_running: self.unparks_running.get(),
            events_stolen: self.events_stolen.get(),
            budget_forced_yields: self.budget_forced_yields.get(),
            registrations_handed: self.registrations_handed.get(),
            registrations,
            timers_armed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets() {
        assert_eq!(event_bucket(0), 0);
        assert_eq!(event_bucket(1), 1);
        assert_eq!(event_bucket(2), 2);
        assert_eq!(event_bucket(3), 2);
        assert_eq!(event_bucket(4), 3);
        assert_eq!(event_bucket(64), 7);
        assert_eq!(event_bucket(10_000), 7);
    }
}
