//! The per-reactor timer queue: an ordered map from deadline to waker.
//!
//! Deadlines are nanoseconds since a process-wide base instant, so the queue has nanosecond
//! resolution. Insert, cancel and re-arm are O(log n); a cancelled timer's memory is freed at
//! once (no tombstones). Expiry pops from the front. The queue sits behind the reactor's mutex so
//! any thread can add or cancel a timer; only the owning worker expires them.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::task::Waker;
use std::time::{Duration, Instant};

/// Identifies one armed timer. Unique per queue (the sequence number breaks deadline ties).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct TimerKey {
    pub(crate) deadline: u64,
    seq: u64,
}

#[derive(Default)]
pub(crate) struct TimerQueue {
    map: BTreeMap<TimerKey, Waker>,
    seq: u64,
}

impl TimerQueue {
    /// Arms a timer; returns its key and whether it is now the earliest.
    pub(crate) fn insert(&mut self, deadline: u64, waker: Waker) -> (TimerKey, bool) {
        let key = TimerKey {
            deadline,
            seq: self.seq,
        };
        self.seq += 1;
        let earliest = self.map.first_key_value().is_none_or(|(k, _)| key < *k);
        self.map.insert(key, waker);
        (key, earliest)
    }

    /// Replaces the waker of a still-armed timer; `false` if it already fired or was cancelled.
    pub(crate) fn update(&mut self, key: TimerKey, waker: &Waker) -> bool {
        match self.map.get_mut(&key) {
            Some(w) => {
                if !w.will_wake(waker) {
                    *w = waker.clone();
                }
                true
            }
            None => false,
        }
    }

    pub(crate) fn remove(&mut self, key: TimerKey) -> Option<Waker> {
        self.map.remove(&key)
    }

    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.map.first_key_value().map(|(k, _)| k.deadline)
    }

    /// Pops every timer due at `now` into `out`; returns how many.
    pub(crate) fn expire(&mut self, now: u64, out: &mut Vec<Waker>) -> usize {
        let mut n = 0;
        while let Some(entry) = self.map.first_entry() {
            if entry.key().deadline > now {
                break;
            }
            out.push(entry.remove());
            n += 1;
        }
        n
    }

    /// Drops every timer, handing their wakers to `out`.
    pub(crate) fn drain(&mut self, out: &mut Vec<Waker>) {
        out.extend(std::mem::take(&mut self.map).into_values());
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// Nanoseconds since the base instant; instants before it map to 0 (already due).
pub(crate) fn to_ns(t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(base()).as_nanos()).unwrap_or(u64::MAX)
}

/// The instant `ns` nanoseconds after the base (saturating far in the future).
pub(crate) fn from_ns(ns: u64) -> Instant {
    base()
        .checked_add(Duration::from_nanos(ns))
        .unwrap_or_else(far_future)
}

/// About 30 years from now: the deadline used for sleeps whose end does not fit an `Instant`.
pub(crate) fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    #[test]
    fn expire_pops_in_deadline_order_and_cancel_frees() {
        let mut q = TimerQueue::default();
        let (a, first) = q.insert(30, Waker::noop().clone());
        assert!(first);
        let (_, first) = q.insert(10, Waker::noop().clone());
        assert!(first);
        let (c, first) = q.insert(20, Waker::noop().clone());
        assert!(!first);
        assert!(q.remove(c).is_some());
        assert_eq!(q.len(), 2);
        let mut out = Vec::new();
        assert_eq!(q.expire(25, &mut out), 1);
        assert_eq!(q.next_deadline(), Some(30));
        assert!(q.update(a, Waker::noop()));
        assert_eq!(q.expire(30, &mut out), 1);
        assert!(!q.update(a, Waker::noop()));
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn ns_round_trip() {
        let t = Instant::now() + Duration::from_micros(123);
        assert_eq!(from_ns(to_ns(t)), t);
    }
}
