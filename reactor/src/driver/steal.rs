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
    /// I/O stealing: when this reactor's owner is not in it (neither parked nor in a turn: it
    /// is running tasks, or the OS has descheduled it) and has not turned it for at least
    /// `min_stall`, collects up
    /// to 64 ready events without blocking and wakes their tasks **on the calling thread**, so
    /// a connection whose worker cannot run is not left waiting. The caller chooses the stall:
    /// weir's workers call this on their peers' reactors before they park and during their
    /// periodic maintenance, each with a stall of some hundred µs (the peer was descheduled or
    /// is stuck in a long poll; a peer that is merely busy turns its reactor more often). A
    /// zero `min_stall` steals whenever the owner is not parked. Returns how many wakers were
    /// woken (0 when the owner is parked: it will see the events itself; 0 too while the
    /// owner is in a turn: an owner that stays in its epoll call is held there, most likely by
    /// the epoll's mutex, which a thief's `epoll_wait` would wait for as well).
    ///
    /// A wake-up meant for the owner that this collects is passed on (the eventfd is written
    /// again). Never blocks; a backend whose events another thread cannot collect (io_uring,
    /// mio) never steals: for those, [`poll_stuck_waiters`](Self::poll_stuck_waiters) asks
    /// the kernel about the fds tasks wait on instead.
    ///
    /// # Errors
    /// Unexpected OS errors of `epoll_wait`.
    pub(crate) fn steal_events(&self, min_stall: Duration) -> io::Result<usize> {
        let inner = &*self.inner;
        if !inner.registry.capabilities().stealing || !self.is_stuck(min_stall) {
            return Ok(0);
        }
        // Sockets handed to the owner (accepted on another worker) are not in its epoll until
        // its next turn: made here, their events are not left waiting for the owner either.
        self.make_handed_for_owner();
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

impl ReactorHandle {
    /// `true` if this reactor's owner is neither parked in it nor in a turn of it, and has not
    /// turned it for at least `min_stall` (a zero `min_stall`: at all): it is running tasks, or
    /// one task holds it, or the OS has descheduled it. Its events then wait for it unless
    /// another thread collects them ([`steal_events`](Self::steal_events)). Two loads and a
    /// clock read.
    pub(crate) fn is_stuck(&self, min_stall: Duration) -> bool {
        let inner = &*self.inner;
        if inner.park.is_parked()
            || inner.turning.load(Ordering::Relaxed)
            || inner.shutdown.load(Ordering::Acquire)
        {
            return false;
        }
        if min_stall.is_zero() {
            return true;
        }
        let last = inner.clock_ns.load(Ordering::Relaxed);
        let now = timer_queue::to_ns(inner.clock.now());
        now.saturating_sub(last) >= u64::try_from(min_stall.as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Wake, Waker};
    use std::time::Duration;

    use crate::config::DriverConfig;
    use crate::driver::Driver;
    use crate::{Backend, Direction, Interest, ReactorHandle};

    /// A waker that, when the owner's turn wakes it, makes another socket readable and has
    /// another thread try to steal that event at once.
    struct StealDuringTurn {
        handle: ReactorHandle,
        writer: Mutex<UnixStream>,
        stolen: AtomicUsize,
    }

    impl Wake for StealDuringTurn {
        fn wake(self: Arc<Self>) {
            self.writer.lock().unwrap().write_all(b"b").unwrap();
            let handle = self.handle.clone();
            std::thread::scope(|s| {
                s.spawn(|| handle.steal_events(Duration::ZERO).unwrap())
                    .join()
                    .unwrap()
            });
            let stolen = self.handle.stats().events_stolen as usize;
            self.stolen.store(stolen, Ordering::SeqCst);
        }
    }

    /// A thief leaves an owner in its turn alone (it could be held there by its epoll's mutex,
    /// which the thief's `epoll_wait` would wait for too); once the turn is over, it steals.
    #[test]
    fn a_thief_leaves_an_owner_in_its_turn_alone() {
        let mut driver = Driver::new(&DriverConfig::default()).unwrap();
        let handle = driver.handle().clone();
        if handle.backend() != Backend::Epoll {
            eprintln!("skipped: the default backend here is not epoll (WEIR_BACKEND?)");
            return;
        }
        let (mut to_a, a) = UnixStream::pair().unwrap();
        let (to_b, b) = UnixStream::pair().unwrap();
        let (io_a, tok_a, _) = handle
            .add_source(a.as_raw_fd(), Interest::READABLE, false)
            .unwrap();
        let (_io_b, tok_b, _) = handle
            .add_source(b.as_raw_fd(), Interest::READABLE, false)
            .unwrap();
        let thief = Arc::new(StealDuringTurn {
            handle: handle.clone(),
            writer: Mutex::new(to_b),
            stolen: AtomicUsize::new(usize::MAX),
        });
        let waker = Waker::from(thief.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(io_a.poll_ready(&mut cx, Direction::Read).is_pending());
        to_a.write_all(b"a").unwrap();
        // The turn collects a's event and wakes the waker, which tries to steal b's event.
        driver.poll().unwrap();
        assert_eq!(
            thief.stolen.load(Ordering::SeqCst),
            0,
            "stolen during the turn"
        );
        // Between turns the same event is the thief's.
        thief.writer.lock().unwrap().write_all(b"b").unwrap();
        let h = handle.clone();
        std::thread::spawn(move || h.steal_events(Duration::ZERO).unwrap())
            .join()
            .unwrap();
        assert_eq!(handle.stats().events_stolen, 1);
        for (sock, tok) in [(&a, tok_a), (&b, tok_b)] {
            handle.deregister_source(sock.as_raw_fd()).unwrap();
            handle.remove_source(tok);
        }
    }
}
