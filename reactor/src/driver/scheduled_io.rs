//! Per-fd readiness state: what the driver has seen, and who waits for it.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering::AcqRel, Ordering::Acquire};
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;
use slab::Slab;

use crate::{Direction, Ready};

/// Layout of [`ScheduledIo::readiness`]:
///
/// | bits   | content                                                                    |
/// |--------|----------------------------------------------------------------------------|
/// | 0..=7  | [`Ready`] bits seen by the driver and not yet cleared                      |
/// | 8..=23 | tick: bumped by every event the driver delivers (wrapping)                 |
/// | 24     | `SHUTDOWN`: the reactor is gone; set once, never unset                     |
/// | 25     | `READS_AHEAD`: the backend takes the fd's input ahead; set at registration |
const READY_MASK: usize = 0xFF;
const TICK_SHIFT: u32 = 8;
const TICK_MASK: usize = 0xFFFF << TICK_SHIFT;
const SHUTDOWN: usize = 1 << 24;
/// Read readiness comes from the backend's [`Ahead`](crate::io::Ahead) queue, not from the
/// socket. A bit of this word, which every update keeps but for its own bits, rather than a
/// field: the entry does not grow.
const READS_AHEAD: usize = 1 << 25;

/// Readiness observed by a poll, to be handed back to
/// [`Registration::clear_readiness`](crate::Registration::clear_readiness).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadyEvent {
    pub(crate) tick: u16,
    pub(crate) ready: Ready,
    pub(crate) is_shutdown: bool,
}

impl ReadyEvent {
    /// The readiness that was observed.
    pub fn ready(&self) -> Ready {
        self.ready
    }
}

#[derive(Default)]
struct Waiters {
    /// Slot of `poll_*_ready(Direction::Read)`: the last task to poll is the one woken.
    reader: Option<Waker>,
    /// Slot of `poll_*_ready(Direction::Write)`.
    writer: Option<Waker>,
    /// Readiness futures: any number of tasks may wait concurrently, each with its mask.
    list: Slab<(Ready, Option<Waker>)>,
}

pub(crate) struct ScheduledIo {
    /// See the layout above.
    readiness: AtomicUsize,
    waiters: Mutex<Waiters>,
    /// The generation this entry was created with; stale events carry another one.
    generation: u32,
    /// The fd this entry was registered for, for another thread's look at its readiness while
    /// the owner is stuck (`rescue.rs`). Its number may be reused once the fd is closed: a
    /// look then sees another file, which only costs a spurious wake-up.
    fd: RawFd,
}

impl ScheduledIo {
    pub(crate) fn new(generation: u32, fd: RawFd) -> ScheduledIo {
        ScheduledIo {
            readiness: AtomicUsize::new(0),
            waiters: Mutex::new(Waiters::default()),
            generation,
            fd,
        }
    }

    pub(crate) fn generation(&self) -> u32 {
        self.generation
    }

    /// The fd this entry was registered for.
    pub(crate) fn fd(&self) -> RawFd {
        self.fd
    }

    /// Notes that the backend takes this fd's input ahead (once, at registration): its read
    /// readiness is then not the socket's to tell.
    pub(crate) fn set_reads_ahead(&self) {
        self.readiness.fetch_or(READS_AHEAD, AcqRel);
    }

    /// Read readiness comes from the backend's queue, not from the socket.
    pub(crate) fn reads_ahead(&self) -> bool {
        self.readiness.load(Acquire) & READS_AHEAD != 0
    }

    /// The readiness the waiters wait for and do not have: the union of the masks of the
    /// stored wakers (a direction's slot, the readiness futures) that the recorded readiness
    /// does not satisfy yet. `EMPTY` when nobody waits, or once the reactor is gone. (A waker
    /// left in a slot by a task that then found its fd ready stays there; the recorded
    /// readiness tells it from a waiting one.)
    pub(crate) fn waited_for(&self) -> Ready {
        let w = self.waiters.lock();
        let cur = self.readiness.load(Acquire);
        if cur & SHUTDOWN != 0 {
            return Ready::EMPTY;
        }
        let now = Ready::from_usize(cur & READY_MASK);
        let mut want = Ready::EMPTY;
        let mut wait = |mask: Ready| {
            if !now.intersects(mask) {
                want |= mask;
            }
        };
        if w.reader.is_some() {
            wait(Direction::Read.mask());
        }
        if w.writer.is_some() {
            wait(Direction::Write.mask());
        }
        for (_, (mask, waker)) in w.list.iter() {
            if waker.is_some() {
                wait(*mask);
            }
        }
        want
    }

    #[inline]
    fn event(word: usize, mask: Ready) -> ReadyEvent {
        ReadyEvent {
            tick: ((word & TICK_MASK) >> TICK_SHIFT) as u16,
            ready: Ready::from_usize(word & READY_MASK) & mask,
            is_shutdown: word & SHUTDOWN != 0,
        }
    }

    #[inline]
    fn is_ready(word: usize, mask: Ready) -> bool {
        word & SHUTDOWN != 0 || Ready::from_usize(word & READY_MASK).intersects(mask)
    }

    /// Driver: records readiness delivered by an event and moves the wakers it satisfies to
    /// `wake` (woken by the caller after it has released its locks).
    pub(crate) fn set_readiness(&self, ready: Ready, wake: &mut Vec<Waker>) {
        let _ = self.readiness.fetch_update(AcqRel, Acquire, |cur| {
            let tick = ((cur & TICK_MASK) >> TICK_SHIFT).wrapping_add(1) & 0xFFFF;
            Some((cur & !TICK_MASK) | ready.as_usize() | (tick << TICK_SHIFT))
        });
        let mut w = self.waiters.lock();
        if ready.intersects(Direction::Read.mask())
            && let Some(waker) = w.reader.take()
        {
            wake.push(waker);
        }
        if ready.intersects(Direction::Write.mask())
            && let Some(waker) = w.writer.take()
        {
            wake.push(waker);
        }
        for (_, (mask, waker)) in w.list.iter_mut() {
            if ready.intersects(*mask)
                && let Some(waker) = waker.take()
            {
                wake.push(waker);
            }
        }
    }

    /// Marks the entry dead and wakes every waiter (their polls then return an error).
    pub(crate) fn shutdown(&self) {
        self.readiness.fetch_or(SHUTDOWN, AcqRel);
        let mut wake = Vec::new();
        {
            let mut w = self.waiters.lock();
            wake.extend(w.reader.take());
            wake.extend(w.writer.take());
            for (_, (_, waker)) in w.list.iter_mut() {
                wake.extend(waker.take());
            }
        }
        wake.into_iter().for_each(Waker::wake);
    }

    /// `poll_*_ready`: ready if any bit of `dir` is set, else store the waker in `dir`'s slot.
    // Inlined into the I/O operations of other crates: the fast path is one load; storing the
    // waker is out of line.
    #[inline]
    pub(crate) fn poll_ready(&self, cx: &mut Context<'_>, dir: Direction) -> Poll<ReadyEvent> {
        let mask = dir.mask();
        let cur = self.readiness.load(Acquire);
        if Self::is_ready(cur, mask) {
            return Poll::Ready(Self::event(cur, mask));
        }
        self.poll_ready_slow(cx, dir)
    }

    /// `poll_ready` when not ready: store the waker, then look again.
    #[inline(never)]
    fn poll_ready_slow(&self, cx: &mut Context<'_>, dir: Direction) -> Poll<ReadyEvent> {
        let mask = dir.mask();
        let mut w = self.waiters.lock();
        let slot = match dir {
            Direction::Read => &mut w.reader,
            Direction::Write => &mut w.writer,
        };
        match slot {
            Some(old) if old.will_wake(cx.waker()) => {}
            _ => *slot = Some(cx.waker().clone()),
        }
        // Re-check under the lock: the driver sets readiness before it takes the lock, so either
        // it saw our waker or we see its readiness.
        let cur = self.readiness.load(Acquire);
        if Self::is_ready(cur, mask) {
            return Poll::Ready(Self::event(cur, mask));
        }
        Poll::Pending
    }

    /// Readiness futures: like `poll_ready` but with a per-future slot in `key`.
    pub(crate) fn poll_waiter(
        &self,
        cx: &mut Context<'_>,
        key: &mut Option<usize>,
        mask: Ready,
    ) -> Poll<ReadyEvent> {
        let cur = self.readiness.load(Acquire);
        if Self::is_ready(cur, mask) {
            if let Some(k) = key.take() {
                self.waiters.lock().list.try_remove(k);
            }
            return Poll::Ready(Self::event(cur, mask));
        }
        let mut w = self.waiters.lock();
        match *key {
            Some(k) => match w.list.get_mut(k) {
                Some((_, Some(old))) if old.will_wake(cx.waker()) => {}
                Some((_, slot)) => *slot = Some(cx.waker().clone()),
                None => *key = Some(w.list.insert((mask, Some(cx.waker().clone())))),
            },
            None => *key = Some(w.list.insert((mask, Some(cx.waker().clone())))),
        }
        let cur = self.readiness.load(Acquire);
        if Self::is_ready(cur, mask) {
            if let Some(k) = key.take() {
                w.list.try_remove(k);
            }
            return Poll::Ready(Self::event(cur, mask));
        }
        Poll::Pending
    }

    /// Drops a readiness future's slot.
    pub(crate) fn remove_waiter(&self, key: usize) {
        self.waiters.lock().list.try_remove(key);
    }

    /// The readiness currently recorded (no waker is stored).
    #[inline]
    pub(crate) fn ready_now(&self, mask: Ready) -> ReadyEvent {
        Self::event(self.readiness.load(Acquire), mask)
    }

    /// Clears the bits of `event` — unless an event arrived since it was observed (the tick
    /// moved), in which case the fd may be ready again and nothing is cleared. Closed bits are
    /// never cleared.
    #[inline]
    pub(crate) fn clear_readiness(&self, event: ReadyEvent) {
        let clear = (event.ready - Ready::STICKY).as_usize();
        let _ = self.readiness.fetch_update(AcqRel, Acquire, |cur| {
            let tick = ((cur & TICK_MASK) >> TICK_SHIFT) as u16;
            (tick == event.tick).then_some(cur & !clear)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, AcqRel);
        }
    }

    #[test]
    fn stale_clear_does_not_lose_a_new_event() {
        let io = ScheduledIo::new(0, -1);
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(io.poll_ready(&mut cx, Direction::Read).is_pending());
        let mut wake = Vec::new();
        io.set_readiness(Ready::READABLE, &mut wake);
        assert_eq!(wake.len(), 1);
        let Poll::Ready(ev) = io.poll_ready(&mut cx, Direction::Read) else {
            panic!("readable")
        };
        // A second event arrives before the reader got WouldBlock and cleared.
        io.set_readiness(Ready::READABLE, &mut wake);
        io.clear_readiness(ev);
        assert!(io.poll_ready(&mut cx, Direction::Read).is_ready());
        // With a current tick the clear takes effect, but closed bits stay.
        io.set_readiness(Ready::READ_CLOSED, &mut wake);
        let Poll::Ready(ev) = io.poll_ready(&mut cx, Direction::Read) else {
            panic!("closed")
        };
        io.clear_readiness(ev);
        let now = io.ready_now(Direction::Read.mask());
        assert!(now.ready.is_read_closed());
        assert!(!now.ready.contains(Ready::READABLE));
    }

    /// The read-ahead mark lives in the readiness word: events, clears and a shutdown keep it,
    /// and it is not readiness.
    #[test]
    fn the_read_ahead_mark_survives_every_update() {
        let io = ScheduledIo::new(0, -1);
        assert!(!io.reads_ahead());
        io.set_reads_ahead();
        assert!(io.reads_ahead());
        assert!(io.ready_now(Ready::ALL).ready.is_empty());
        let mut wake = Vec::new();
        io.set_readiness(Ready::READABLE, &mut wake);
        io.clear_readiness(io.ready_now(Ready::ALL));
        assert!(io.ready_now(Ready::ALL).ready.is_empty());
        io.shutdown();
        assert!(io.reads_ahead());
    }

    /// What a rescue looks for: the masks of the waiters that the recorded readiness does not
    /// satisfy.
    #[test]
    fn waited_for_is_what_the_waiters_lack() {
        let io = ScheduledIo::new(0, -1);
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(io.waited_for().is_empty(), "nobody waits");
        assert!(io.poll_ready(&mut cx, Direction::Write).is_pending());
        assert_eq!(io.waited_for(), Direction::Write.mask());
        let mut key = None;
        assert!(
            io.poll_waiter(&mut cx, &mut key, Ready::PRIORITY)
                .is_pending()
        );
        assert_eq!(io.waited_for(), Direction::Write.mask() | Ready::PRIORITY);
        // Writable: the writer's waker is taken; the readiness future's stays, unsatisfied.
        let mut wake = Vec::new();
        io.set_readiness(Ready::WRITABLE, &mut wake);
        assert_eq!(wake.len(), 1);
        assert_eq!(io.waited_for(), Ready::PRIORITY);
        io.remove_waiter(key.unwrap());
        assert!(io.waited_for().is_empty());
        // A waker left in its slot by a task that then saw readiness is not a waiter.
        assert!(io.poll_ready(&mut cx, Direction::Read).is_pending());
        io.readiness.fetch_or(Ready::READABLE.as_usize(), AcqRel);
        assert!(io.waited_for().is_empty());
        io.shutdown();
        assert!(io.waited_for().is_empty());
    }

    #[test]
    fn waiter_list_wakes_every_future() {
        let io = ScheduledIo::new(0, -1);
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let (mut k1, mut k2) = (None, None);
        let m = Direction::Read.mask();
        assert!(io.poll_waiter(&mut cx, &mut k1, m).is_pending());
        assert!(io.poll_waiter(&mut cx, &mut k2, m).is_pending());
        let mut wake = Vec::new();
        io.set_readiness(Ready::READABLE, &mut wake);
        assert_eq!(wake.len(), 2);
        io.remove_waiter(k1.unwrap());
        io.remove_waiter(k2.unwrap());
    }
}
