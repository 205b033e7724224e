//! The per-reactor timer queue: a binary min-heap of deadlines over a slab of entries.
//!
//! Deadlines are nanoseconds since a process-wide base instant, so the queue has nanosecond
//! resolution. Arming pushes onto the heap (O(log n), O(1) for a deadline no earlier than the
//! others, the common case of a timeout armed "now + d"); the entry that holds the waker lives in
//! a slab. Cancelling frees the slab entry at once, waker included, and leaves its heap item
//! behind, dead: most timers (a request's timeout, a header-read timer) are cancelled long before
//! they are due, and taking them out of the heap would cost a sift per cancel. A dead item is
//! recognised by its generation. When the dead outnumber the live by more than [`SLACK`], the
//! heap is rebuilt from the live ones (linear, amortised over the cancels that made it due), so
//! the heap never holds more than about twice the armed timers. In steady state nothing is
//! allocated: the heap and the slab keep their capacity.
//!
//! Expiry pops due items from the top, dead ones included. The owner bounds its wait by the top
//! item, live or dead ([`TimerQueue::bound`]): a dead item's deadline is never later than the
//! earliest live one, so the wait ends no later than it must, and a busy owner does not pop the
//! items that cancelled timeouts leave behind (the rebuild takes them out). Only after a wait
//! that a dead item ended for nothing does the owner drop the dead items on top
//! ([`TimerQueue::next_deadline`]). The queue sits behind the reactor's mutex so any thread can
//! add or cancel a timer; only the owning worker expires them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::OnceLock;
use std::task::Waker;
use std::time::{Duration, Instant};

use slab::Slab;

/// Identifies one armed timer. The generation tells a live entry from a later one that reused
/// its slot after it fired or was cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TimerKey {
    slot: u32,
    generation: u32,
}

struct Entry {
    waker: Waker,
    generation: u32,
}

/// A heap item: live while the slab holds an entry of the same generation in `slot`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct HeapItem {
    deadline: u64,
    slot: u32,
    generation: u32,
}

/// How many dead heap items beyond the live count trigger a rebuild.
const SLACK: usize = 64;

#[derive(Default)]
pub(crate) struct TimerQueue {
    /// Min-heap on `deadline`; holds live and dead items.
    heap: BinaryHeap<Reverse<HeapItem>>,
    entries: Slab<Entry>,
    next_generation: u32,
}

/// `true` if `item` still has its entry (it was neither cancelled nor fired).
fn is_live(entries: &Slab<Entry>, item: &HeapItem) -> bool {
    entries
        .get(item.slot as usize)
        .is_some_and(|e| e.generation == item.generation)
}

impl TimerQueue {
    /// Arms a timer; returns its key and whether it is earlier than everything in the heap,
    /// dead items included: then the owner must recompute its wait. A timer earliest among
    /// the armed ones but later than a dead item needs no wake-up: the dead item's deadline
    /// already bounds the owner's wait (it was in the heap when the owner computed it, or was
    /// earliest when armed and woke the owner).
    pub(crate) fn insert(&mut self, deadline: u64, waker: Waker) -> (TimerKey, bool) {
        let generation = self.next_generation;
        self.next_generation = self.next_generation.wrapping_add(1);
        let slot = self.entries.insert(Entry { waker, generation });
        let slot = u32::try_from(slot).expect("more than 2^32 armed timers on one reactor");
        // Against the top even if it is dead: its deadline still bounds the owner's wait (it
        // was armed, and the owner's timeout was computed with it or before it), so a timer
        // later than it needs no wake-up; and no pops here.
        let earliest = self
            .heap
            .peek()
            .is_none_or(|Reverse(top)| deadline < top.deadline);
        self.heap.push(Reverse(HeapItem {
            deadline,
            slot,
            generation,
        }));
        (TimerKey { slot, generation }, earliest)
    }

    fn entry(&self, key: TimerKey) -> Option<&Entry> {
        self.entries
            .get(key.slot as usize)
            .filter(|e| e.generation == key.generation)
    }

    /// Replaces the waker of an armed timer (kept if it would wake the same task). `false` if
    /// the timer fired or was cancelled.
    pub(crate) fn update(&mut self, key: TimerKey, waker: &Waker) -> bool {
        match self.entries.get_mut(key.slot as usize) {
            Some(e) if e.generation == key.generation => {
                if !e.waker.will_wake(waker) {
                    e.waker = waker.clone();
                }
                true
            }
            _ => false,
        }
    }

    /// `true` while the timer is armed (neither fired nor cancelled).
    pub(crate) fn contains(&self, key: TimerKey) -> bool {
        self.entry(key).is_some()
    }

    /// Cancels; returns the waker if the timer was still armed. Its heap item stays, dead,
    /// until it reaches the top or the heap is rebuilt.
    pub(crate) fn remove(&mut self, key: TimerKey) -> Option<Waker> {
        self.entry(key)?;
        let waker = self.entries.remove(key.slot as usize).waker;
        if self.heap.len() > 2 * self.entries.len() + SLACK {
            let entries = &self.entries;
            self.heap.retain(|Reverse(item)| is_live(entries, item));
        }
        Some(waker)
    }

    /// The top of the heap: the earliest item's deadline, and whether it is a live timer. It
    /// is never later than the earliest armed deadline, so it bounds a wait without the pops
    /// that [`next_deadline`](Self::next_deadline) may need; `None` only for an empty heap.
    pub(crate) fn bound(&self) -> Option<(u64, bool)> {
        self.heap
            .peek()
            .map(|Reverse(top)| (top.deadline, is_live(&self.entries, top)))
    }

    /// The earliest armed deadline (dead items on top are dropped on the way).
    pub(crate) fn next_deadline(&mut self) -> Option<u64> {
        while let Some(Reverse(top)) = self.heap.peek() {
            if is_live(&self.entries, top) {
                return Some(top.deadline);
            }
            self.heap.pop();
        }
        None
    }

    /// Removes every timer due at `now` (deadline ≤ now), pushing their wakers to `out` in
    /// deadline order; returns how many.
    pub(crate) fn expire(&mut self, now: u64, out: &mut Vec<Waker>) -> usize {
        let mut n = 0;
        while let Some(&Reverse(top)) = self.heap.peek() {
            if top.deadline > now {
                break;
            }
            self.heap.pop();
            if is_live(&self.entries, &top) {
                out.push(self.entries.remove(top.slot as usize).waker);
                n += 1;
            }
        }
        n
    }

    /// Removes every timer, pushing their wakers to `out` (shutdown).
    pub(crate) fn drain(&mut self, out: &mut Vec<Waker>) {
        self.heap.clear();
        out.extend(self.entries.drain().map(|e| e.waker));
    }

    /// Number of armed timers.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The process-wide base instant of nanosecond deadlines. Every reactor's clock takes it when
/// it is created, so no reading of a clock (paused or not) is before it.
pub(crate) fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// Nanoseconds since the base instant; instants before it map to 0 (already due).
pub(crate) fn to_ns(t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(base()).as_nanos()).unwrap_or(u64::MAX)
}

/// How far ahead "never" is: about 30 years (also the deadline of a timer meant never to
/// fire, `time::Instant::far_future`).
pub(crate) const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// The instant `ns` nanoseconds after the base (saturating to [`FAR_FUTURE`] from now).
pub(crate) fn from_ns(ns: u64) -> Instant {
    base()
        .checked_add(Duration::from_nanos(ns))
        .unwrap_or_else(|| Instant::now() + FAR_FUTURE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
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
        assert!(q.remove(c).is_none(), "a key cancels once");
        assert_eq!(q.len(), 2);
        let mut out = Vec::new();
        assert_eq!(q.expire(25, &mut out), 1);
        assert_eq!(q.next_deadline(), Some(30));
        assert!(q.update(a, Waker::noop()));
        assert_eq!(q.expire(30, &mut out), 1);
        assert!(!q.update(a, Waker::noop()));
        assert_eq!(q.len(), 0);
        // The freed slot is reused, and the stale key does not touch its new occupant.
        let (d, _) = q.insert(40, Waker::noop().clone());
        assert!(q.remove(a).is_none());
        assert!(q.remove(d).is_some());
    }

    #[test]
    fn a_cancelled_timer_bounds_the_wait_until_settled() {
        let mut q = TimerQueue::default();
        let (a, _) = q.insert(10, Waker::noop().clone());
        q.insert(20, Waker::noop().clone());
        assert!(q.remove(a).is_some());
        // Its item stays on top: a bound no later than the live timer, no pop needed.
        assert_eq!(q.bound(), Some((10, false)));
        // Expiring at its deadline fires nothing and drops it.
        assert_eq!(q.expire(10, &mut Vec::new()), 0);
        assert_eq!(q.bound(), Some((20, true)));
        // Settling drops dead items on top without expiring anything.
        let (b, _) = q.insert(15, Waker::noop().clone());
        assert!(q.remove(b).is_some());
        assert_eq!(q.next_deadline(), Some(20));
        assert_eq!(q.bound(), Some((20, true)));
    }

    /// Random inserts, cancels and expiries against a BTreeMap model.
    #[test]
    fn matches_an_ordered_map() {
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut q = TimerQueue::default();
        let mut model: BTreeMap<(u64, u64), TimerKey> = BTreeMap::new();
        let mut live: Vec<((u64, u64), TimerKey)> = Vec::new();
        let mut now = 0u64;
        for seq in 0..20_000u64 {
            match next() % 4 {
                0 | 1 => {
                    let d = now + next() % 1000;
                    let (k, _) = q.insert(d, Waker::noop().clone());
                    model.insert((d, seq), k);
                    live.push(((d, seq), k));
                }
                2 if !live.is_empty() => {
                    let i = (next() as usize) % live.len();
                    let (mk, k) = live.swap_remove(i);
                    let in_model = model.remove(&mk).is_some();
                    assert_eq!(q.remove(k).is_some(), in_model);
                }
                _ => {
                    now += next() % 300;
                    let mut out = Vec::new();
                    let n = q.expire(now, &mut out);
                    let due: Vec<_> = model.range(..(now + 1, 0)).map(|(k, _)| *k).collect();
                    assert_eq!(n, due.len());
                    for k in due {
                        model.remove(&k);
                    }
                }
            }
            assert_eq!(q.len(), model.len());
            assert_eq!(q.next_deadline(), model.keys().next().map(|k| k.0));
        }
    }

    #[test]
    fn cancelled_items_do_not_pile_up() {
        let mut q = TimerQueue::default();
        let mut live = std::collections::VecDeque::new();
        for i in 0..10_000u64 {
            // A timeout per request, armed "now + 30 s" and cancelled soon after, 8 at a time.
            live.push_back(q.insert(i + 30_000, Waker::noop().clone()).0);
            if live.len() > 8 {
                assert!(q.remove(live.pop_front().unwrap()).is_some());
            }
            assert!(
                q.heap.len() <= 2 * q.len() + SLACK + 1,
                "heap {}",
                q.heap.len()
            );
        }
        assert_eq!(q.len(), 8);
        assert_eq!(q.next_deadline(), Some(9_992 + 30_000));
        let mut out = Vec::new();
        assert_eq!(q.expire(u64::MAX, &mut out), 8);
        assert!(q.heap.is_empty());
    }

    #[test]
    fn ns_round_trip() {
        let t = Instant::now() + Duration::from_micros(123);
        assert_eq!(from_ns(to_ns(t)), t);
    }
}

/// Random operation sequences against a `BTreeMap` model of the armed timers.
#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    use std::task::Wake;

    /// A waker that logs its id when woken, so a test can tell which timer fired.
    struct Logged(u64, Arc<Mutex<Vec<u64>>>);
    impl Wake for Logged {
        fn wake(self: Arc<Self>) {
            self.1.lock().unwrap().push(self.0);
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Arm a timer `after` ns from now.
        Insert {
            after: u64,
        },
        /// Cancel the `i`-th key ever handed out (armed, fired or cancelled).
        Cancel {
            i: usize,
        },
        /// Give the `i`-th key a new waker.
        Update {
            i: usize,
        },
        /// Move the clock by `by` ns and expire.
        Expire {
            by: u64,
        },
        Drain,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0..100u64).prop_map(|after| Op::Insert { after }),
            3 => any::<usize>().prop_map(|i| Op::Cancel { i }),
            2 => any::<usize>().prop_map(|i| Op::Update { i }),
            3 => (0..60u64).prop_map(|by| Op::Expire { by }),
            1 => Just(Op::Drain),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn matches_a_btreemap(ops in proptest::collection::vec(op(), 1..200)) {
            let log = Arc::new(Mutex::new(Vec::new()));
            let waker = |id: u64| Waker::from(Arc::new(Logged(id, log.clone())));
            let mut q = TimerQueue::default();
            // (deadline, arm order) -> (index of the key, id of its current waker)
            let mut model: BTreeMap<(u64, usize), (usize, u64)> = BTreeMap::new();
            // Every key handed out, with its model entry while it is armed.
            let mut keys: Vec<(TimerKey, (u64, usize))> = Vec::new();
            let (mut now, mut next_id) = (0u64, 0u64);
            for op in ops {
                match op {
                    Op::Insert { after } => {
                        let deadline = now + after;
                        let earliest = model.keys().next().is_none_or(|&(d, _)| deadline < d);
                        next_id += 1;
                        let (key, first) = q.insert(deadline, waker(next_id));
                        // `first` may be false for the earliest live timer when a dead item
                        // on top is earlier still (it bounds the owner's wait); never true
                        // for a timer that is not the earliest.
                        prop_assert!(!first || earliest);
                        let mk = (deadline, keys.len());
                        model.insert(mk, (keys.len(), next_id));
                        keys.push((key, mk));
                    }
                    Op::Cancel { i } if !keys.is_empty() => {
                        let (key, mk) = keys[i % keys.len()];
                        let armed = model.remove(&mk).is_some();
                        prop_assert_eq!(q.remove(key).is_some(), armed);
                    }
                    Op::Update { i } if !keys.is_empty() => {
                        let (key, mk) = keys[i % keys.len()];
                        next_id += 1;
                        let armed = model.get_mut(&mk).map(|e| e.1 = next_id).is_some();
                        prop_assert_eq!(q.update(key, &waker(next_id)), armed);
                    }
                    Op::Expire { by } => {
                        now += by;
                        let mut out = Vec::new();
                        let n = q.expire(now, &mut out);
                        let due: Vec<_> = model.range(..(now + 1, 0)).map(|(k, v)| (*k, v.1)).collect();
                        prop_assert_eq!(n, due.len());
                        out.into_iter().for_each(Waker::wake);
                        let fired = std::mem::take(&mut *log.lock().unwrap());
                        // Each due timer fired once, with its latest waker, in deadline order.
                        let mut want: Vec<u64> = due.iter().map(|d| d.1).collect();
                        let mut got = fired.clone();
                        want.sort_unstable();
                        got.sort_unstable();
                        prop_assert_eq!(got, want);
                        let deadline_of = |id: u64| due.iter().find(|d| d.1 == id).unwrap().0.0;
                        prop_assert!(fired.windows(2).all(|w| deadline_of(w[0]) <= deadline_of(w[1])));
                        for (k, _) in due {
                            model.remove(&k);
                        }
                    }
                    Op::Drain => {
                        let mut out = Vec::new();
                        q.drain(&mut out);
                        prop_assert_eq!(out.len(), model.len());
                        model.clear();
                    }
                    _ => {}
                }
                prop_assert_eq!(q.len(), model.len());
                // The wait bound: never later than the earliest armed deadline, exact when
                // it is a live timer's, and present while any timer is armed.
                let earliest = model.keys().next().map(|k| k.0);
                match (q.bound(), earliest) {
                    (Some((b, live)), Some(e)) => {
                        prop_assert!(b <= e);
                        prop_assert!(!live || b == e);
                    }
                    (Some((_, live)), None) => prop_assert!(!live),
                    (None, e) => prop_assert_eq!(e, None),
                }
                prop_assert_eq!(q.next_deadline(), earliest);
                for (key, mk) in &keys {
                    prop_assert_eq!(q.contains(*key), model.contains_key(mk));
                }
            }
        }
    }
}
