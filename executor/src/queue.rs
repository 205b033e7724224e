//! A worker's local run queue: bounded, single producer (the owner), many consumers (the owner
//! pops, idle workers steal half).
//!
//! # Layout and invariants
//!
//! A ring of [`CAPACITY`] slots and three positions (all `u32`, wrapping):
//!
//! * `tail` — the next slot the owner writes. Written only by the owner.
//! * `head.real` — the next slot to be taken (by a pop or a steal).
//! * `head.steal` — the first slot a stealer is still copying out. `steal == real` when no steal
//!   is in progress; while one is, `[steal, real)` is that stealer's claim.
//!
//! `steal` and `real` are packed into one `AtomicU64` so both move in one compare-and-swap.
//!
//! * Slots in `[steal, tail)` hold initialised values; all others are free.
//! * The owner writes slot `tail` only while `tail - steal < CAPACITY`, so it never overwrites a
//!   slot being copied by a stealer.
//! * A value is taken by whoever moves `real` past it with a successful CAS (a pop moves it by
//!   one; a steal by half of what is queued, then copies, then sets `steal = real`). At most one
//!   steal is in progress at a time; a second stealer backs off.
//! * When the ring is full, the owner hands the new value to its overflow (the worker's backlog,
//!   `shared_fifo.rs`) and keeps the ring as it is: the ring holds the oldest queued values, so
//!   the backlog continues it in order. (Moving the front half out instead, as a ring that
//!   spills into a rarely-read global queue does, sends the longest-waiting values to the back
//!   of the line: under overload they then wait many rounds while newer ones run.)
//!
//! Modelled with loom in `loom_tests` (capacity 4 under loom).

use std::mem::MaybeUninit;
use std::sync::Arc;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use crate::loom::{AtomicU32, AtomicU64, UnsafeCell};

/// Slots per local queue.
#[cfg(not(loom))]
pub(crate) const CAPACITY: usize = 256;
#[cfg(loom)]
pub(crate) const CAPACITY: usize = 4;
const MASK: u32 = CAPACITY as u32 - 1;

/// Where a value goes when the local queue is full.
pub(crate) trait Overflow<T> {
    fn push(&self, value: T);
}

struct Inner<T> {
    /// `steal << 32 | real`; see the module docs.
    head: AtomicU64,
    tail: AtomicU32,
    buffer: Box<[UnsafeCell<MaybeUninit<T>>]>,
}

// SAFETY: values move between threads through the queue (T: Send); slot access is arbitrated by
// the head/tail protocol above, so no slot is accessed by two threads at once.
unsafe impl<T: Send> Send for Inner<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Inner<T> {}

/// The owner's handle: push, pop. Not `Clone`.
pub(crate) struct Local<T> {
    inner: Arc<Inner<T>>,
}

/// A stealer's handle.
pub(crate) struct Steal<T>(Arc<Inner<T>>);

impl<T> Clone for Steal<T> {
    fn clone(&self) -> Self {
        Steal(self.0.clone())
    }
}

fn unpack(v: u64) -> (u32, u32) {
    ((v >> 32) as u32, v as u32)
}

fn pack(steal: u32, real: u32) -> u64 {
    (u64::from(steal) << 32) | u64::from(real)
}

/// A new queue: its stealer and owner handles.
pub(crate) fn local<T>() -> (Steal<T>, Local<T>) {
    let buffer = (0..CAPACITY)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect();
    let inner = Arc::new(Inner {
        head: AtomicU64::new(0),
        tail: AtomicU32::new(0),
        buffer,
    });
    (Steal(inner.clone()), Local { inner })
}

impl<T> Inner<T> {
    /// # Safety
    /// The caller has exclusive access to slot `pos` and it holds a value (per the invariants).
    unsafe fn take(&self, pos: u32) -> T {
        self.buffer[(pos & MASK) as usize]
            // SAFETY: exclusive access and initialisation are the caller's contract.
            .with(|p| unsafe { (*p).assume_init_read() })
    }

    /// # Safety
    /// The caller has exclusive access to slot `pos` and it is free.
    unsafe fn put(&self, pos: u32, value: T) {
        self.buffer[(pos & MASK) as usize]
            // SAFETY: exclusive access to a free slot is the caller's contract.
            .with_mut(|p| unsafe { (*p).write(value) });
    }

    fn len(&self) -> u32 {
        let (_, real) = unpack(self.head.load(Acquire));
        self.tail.load(Acquire).wrapping_sub(real)
    }
}

impl<T> Local<T> {
    /// Values queued (racy against stealers; exact for the owner's own pushes).
    pub(crate) fn len(&self) -> usize {
        self.inner.len() as usize
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Room left before the next push overflows.
    pub(crate) fn remaining(&self) -> usize {
        let (steal, _) = unpack(self.inner.head.load(Acquire));
        let tail = self.inner.tail.load(Relaxed);
        CAPACITY - tail.wrapping_sub(steal) as usize
    }

    /// Pushes to the back; when full, gives `value` to `overflow` instead. Returns `true` if
    /// it did.
    pub(crate) fn push_back(&mut self, value: T, overflow: &impl Overflow<T>) -> bool {
        let (steal, _) = unpack(self.inner.head.load(Acquire));
        // Only the owner writes `tail`.
        let tail = self.inner.tail.load(Relaxed);
        if tail.wrapping_sub(steal) < CAPACITY as u32 {
            // SAFETY: `tail - steal < CAPACITY`, so slot `tail` is outside `[steal, tail)`: free,
            // and no stealer reads it; only the owner writes slots.
            unsafe { self.inner.put(tail, value) };
            self.inner.tail.store(tail.wrapping_add(1), Release);
            return false;
        }
        overflow.push(value);
        true
    }

    /// Pops from the front.
    pub(crate) fn pop(&mut self) -> Option<T> {
        let mut head = self.inner.head.load(Acquire);
        let pos = loop {
            let (steal, real) = unpack(head);
            let tail = self.inner.tail.load(Relaxed);
            if real == tail {
                return None;
            }
            let next_real = real.wrapping_add(1);
            let next = if steal == real {
                pack(next_real, next_real)
            } else {
                pack(steal, next_real)
            };
            match self
                .inner
                .head
                .compare_exchange(head, next, AcqRel, Acquire)
            {
                Ok(_) => break real,
                Err(actual) => head = actual,
            }
        };
        // SAFETY: our CAS moved `real` past `pos`, which was in `[real, tail)`: initialised and
        // now ours alone.
        Some(unsafe { self.inner.take(pos) })
    }
}

impl<T> Drop for Local<T> {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

impl<T> Steal<T> {
    /// Values queued (racy).
    pub(crate) fn len(&self) -> usize {
        self.0.len() as usize
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Steals half of this queue into `dst`, returning one of the stolen values to run at once.
    /// Returns `None` if there was nothing to steal, another steal is in progress, or `dst` is
    /// more than half full.
    pub(crate) fn steal_into(&self, dst: &mut Local<T>) -> Option<T> {
        let dst_tail = dst.inner.tail.load(Relaxed);
        let (dst_steal, _) = unpack(dst.inner.head.load(Acquire));
        if dst_tail.wrapping_sub(dst_steal) > (CAPACITY / 2) as u32 {
            return None;
        }
        let n = self.steal_into2(dst, dst_tail);
        if n == 0 {
            return None;
        }
        let last = dst_tail.wrapping_add(n - 1);
        // SAFETY: slot `last` of `dst` was just written by `steal_into2` and is beyond `dst`'s
        // published tail, so only we (the owner of `dst`) can see it.
        let ret = unsafe { dst.inner.take(last) };
        if n > 1 {
            dst.inner.tail.store(last, Release);
        }
        Some(ret)
    }

    /// Copies half of `self` into `dst` from `dst_tail` on, without publishing them.
    fn steal_into2(&self, dst: &mut Local<T>, dst_tail: u32) -> u32 {
        let src = &*self.0;
        let mut prev = src.head.load(Acquire);
        let (claim_start, n) = loop {
            let (steal, real) = unpack(prev);
            let src_tail = src.tail.load(Acquire);
            if steal != real {
                return 0;
            }
            let queued = src_tail.wrapping_sub(real);
            let n = queued - queued / 2;
            if n == 0 {
                return 0;
            }
            let next = pack(steal, real.wrapping_add(n));
            match src.head.compare_exchange(prev, next, AcqRel, Acquire) {
                Ok(_) => break (real, n),
                Err(actual) => prev = actual,
            }
        };
        for i in 0..n {
            // SAFETY: `[claim_start, claim_start + n)` is our claim (real moved past it, steal
            // still pins it, so the owner neither pops nor overwrites it).
            let v = unsafe { src.take(claim_start.wrapping_add(i)) };
            // SAFETY: `dst` is at most half full, so these `n <= CAPACITY/2` slots past its tail
            // are free, and only its owner (us) writes them.
            unsafe { dst.inner.put(dst_tail.wrapping_add(i), v) };
        }
        // Release the claim: `steal` catches up with `real` (which the owner may have moved).
        let mut prev = src.head.load(Acquire);
        loop {
            let (_, real) = unpack(prev);
            match src
                .head
                .compare_exchange(prev, pack(real, real), AcqRel, Acquire)
            {
                Ok(_) => return n,
                Err(actual) => prev = actual,
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[derive(Default)]
    struct Sink(RefCell<Vec<u32>>);
    impl Overflow<u32> for Sink {
        fn push(&self, value: u32) {
            self.0.borrow_mut().push(value);
        }
    }

    #[test]
    fn fifo_and_a_full_ring_keeps_its_values() {
        let (_steal, mut local) = local::<u32>();
        let sink = Sink::default();
        for i in 0..CAPACITY as u32 {
            assert!(!local.push_back(i, &sink));
        }
        assert!(local.push_back(999, &sink));
        assert_eq!(*sink.0.borrow(), vec![999], "only the new value overflows");
        assert_eq!(local.len(), CAPACITY);
        assert_eq!(local.pop(), Some(0), "the oldest stays first");
    }

    #[test]
    fn steal_takes_half_and_returns_one() {
        let (steal, mut a) = local::<u32>();
        let (_s2, mut b) = local::<u32>();
        let sink = Sink::default();
        for i in 0..10 {
            a.push_back(i, &sink);
        }
        let got = steal.steal_into(&mut b).unwrap();
        assert_eq!(got, 4, "last of the stolen half");
        assert_eq!(b.len(), 4);
        assert_eq!(a.len(), 5);
        let mut all: Vec<u32> = std::iter::from_fn(|| a.pop()).collect();
        all.extend(std::iter::from_fn(|| b.pop()));
        all.push(got);
        all.sort();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn concurrent_steals_lose_nothing() {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
        const N: usize = 200_000;
        let (steal, mut local) = local::<usize>();
        let done = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(AtomicUsize::new(0));
        let sum = Arc::new(AtomicUsize::new(0));
        let stealers: Vec<_> = (0..2)
            .map(|_| {
                let (steal, done, seen, sum) =
                    (steal.clone(), done.clone(), seen.clone(), sum.clone());
                std::thread::spawn(move || {
                    let (_s, mut mine) = super::local::<usize>();
                    while !done.load(SeqCst) || !steal.is_empty() {
                        if let Some(v) = steal.steal_into(&mut mine) {
                            seen.fetch_add(1, SeqCst);
                            sum.fetch_add(v, SeqCst);
                        }
                        while let Some(v) = mine.pop() {
                            seen.fetch_add(1, SeqCst);
                            sum.fetch_add(v, SeqCst);
                        }
                    }
                })
            })
            .collect();
        struct Count(Arc<AtomicUsize>, Arc<AtomicUsize>);
        impl Overflow<usize> for Count {
            fn push(&self, v: usize) {
                self.0.fetch_add(1, SeqCst);
                self.1.fetch_add(v, SeqCst);
            }
        }
        let over = Count(seen.clone(), sum.clone());
        for i in 0..N {
            local.push_back(i, &over);
            if i % 3 == 0
                && let Some(v) = local.pop()
            {
                seen.fetch_add(1, SeqCst);
                sum.fetch_add(v, SeqCst);
            }
        }
        while let Some(v) = local.pop() {
            seen.fetch_add(1, SeqCst);
            sum.fetch_add(v, SeqCst);
        }
        done.store(true, SeqCst);
        for s in stealers {
            s.join().unwrap();
        }
        assert_eq!(seen.load(SeqCst), N);
        assert_eq!(sum.load(SeqCst), N * (N - 1) / 2);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::loom::Mutex;
    use loom::thread;

    #[derive(Default)]
    struct Sink(Mutex<Vec<usize>>);
    impl Overflow<usize> for Sink {
        fn push(&self, value: usize) {
            self.0.lock().push(value);
        }
    }

    /// The owner pushes (overflowing) and pops while a stealer steals: every value is taken
    /// exactly once.
    #[test]
    fn push_pop_steal_lose_nothing() {
        loom::model(|| {
            let (steal, mut local) = local::<usize>();
            let sink = std::sync::Arc::new(Sink::default());
            let th = thread::spawn(move || {
                let (_s, mut mine) = super::local::<usize>();
                let mut got = Vec::new();
                got.extend(steal.steal_into(&mut mine));
                got.extend(std::iter::from_fn(|| mine.pop()));
                got
            });
            let mut got = Vec::new();
            for i in 0..CAPACITY + 2 {
                local.push_back(i, &*sink);
                if i == 1 {
                    got.extend(local.pop());
                }
            }
            got.extend(std::iter::from_fn(|| local.pop()));
            got.extend(th.join().unwrap());
            got.extend(sink.0.lock().drain(..));
            got.sort();
            assert_eq!(got, (0..CAPACITY + 2).collect::<Vec<_>>());
        });
    }

    /// Two stealers and a popping owner.
    #[test]
    fn two_stealers() {
        loom::model(|| {
            let (steal, mut local) = local::<usize>();
            let sink = Sink::default();
            for i in 0..3 {
                local.push_back(i, &sink);
            }
            let ths: Vec<_> = (0..2)
                .map(|_| {
                    let steal = steal.clone();
                    thread::spawn(move || {
                        let (_s, mut mine) = super::local::<usize>();
                        let mut got: Vec<usize> = steal.steal_into(&mut mine).into_iter().collect();
                        got.extend(std::iter::from_fn(|| mine.pop()));
                        got
                    })
                })
                .collect();
            let mut got: Vec<usize> = local.pop().into_iter().collect();
            for t in ths {
                got.extend(t.join().unwrap());
            }
            got.extend(std::iter::from_fn(|| local.pop()));
            got.sort();
            assert_eq!(got, vec![0, 1, 2]);
        });
    }
}
