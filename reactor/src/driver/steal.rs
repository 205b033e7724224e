//! I/O stealing: a thread other than the owner collects this reactor's ready events and wakes
//! their tasks, when the owner has not turned its reactor for a while (see
//! [`ReactorHandle::steal_events`]). The events reach their registrations through the same
//! delivery as the owner's (`Registrations::deliver`).

use std::io;
use std::sync::atomic::Ordering;
use std::task::Waker;
use std::time::Duration;

use super::{ReactorHandle, timer_queue};
use crate::sys::Event;

thread_local! {
    /// Reused buffers of [`ReactorHandle::steal_events`] (events, wakers), per stealing thread.
    static STEAL_BUF: std::cell::Cell<(Vec<Event>, Vec<Waker>)> =
        const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

impl ReactorHandle {
    /// I/O stealing: when this reactor's owner is not blocked in it (it is running tasks, or
    /// the OS has descheduled it) and has not turned it for at least `min_stall`, collects up
    /// to 64 ready events without blocking and wakes their tasks **on the calling thread**, so
    /// a connection whose worker cannot run is not left waiting. The caller chooses the stall:
    /// weir's workers call this on their peers' reactors before they park and during their
    /// periodic maintenance, each with a stall of some hundred µs (the peer was descheduled or
    /// is stuck in a long poll; a peer that is merely busy turns its reactor more often). A
    /// zero `min_stall` steals whenever the owner is not parked. Returns how many wakers were
    /// woken (0 when the owner is parked: it will see the events itself).
    ///
    /// A wake-up meant for the owner that this collects is passed on (the eventfd is written
    /// again). Never blocks; a backend that cannot be polled from another thread (mio) never
    /// steals.
    ///
    /// # Errors
    /// Unexpected OS errors of `epoll_wait`.
    pub fn steal_events(&self, min_stall: Duration) -> io::Result<usize> {
        let inner = &*self.inner;
        if !inner.registry.capabilities().stealing
            || inner.park.is_parked()
            || inner.shutdown.load(Ordering::Acquire)
        {
            return Ok(0);
        }
        if !min_stall.is_zero() {
            let last = inner.clock_ns.load(Ordering::Relaxed);
            let now = timer_queue::to_ns(inner.clock.now());
            if now.saturating_sub(last) < u64::try_from(min_stall.as_nanos()).unwrap_or(u64::MAX) {
                return Ok(0);
            }
        }
        // Fresh buffers while the thread exits (its thread-locals are gone).
        let (mut events, mut wake) = STEAL_BUF.try_with(|cell| cell.take()).unwrap_or_default();
        events.clear();
        let res = inner.registry.steal(&mut events, 64);
        let mut io_events = 0u64;
        if !events.is_empty() {
            let delivered = inner.registrations.lock().deliver(&events, &mut wake);
            io_events = delivered.io_events;
            if delivered.wakes > 0 {
                // The owner may have parked since the check above: hand its wake-up back.
                let _ = inner.registry.wake();
            }
        }
        inner.metrics.events_stolen.add_shared(io_events);
        let n = wake.len();
        wake.drain(..).for_each(Waker::wake);
        let _ = STEAL_BUF.try_with(|cell| cell.set((events, wake)));
        res.map(|_| n)
    }
}
