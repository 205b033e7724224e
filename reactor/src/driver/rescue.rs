//! Readiness rescue: another thread finds which of a stuck owner's waiting registrations are
//! ready by asking the kernel about their fds with `poll(2)`, for backends whose events no
//! other thread can collect (io_uring: only a ring's own thread may reap it; mio). What it
//! finds reaches the registrations through the same delivery as the owner's events
//! (`Registrations::deliver`).
//!
//! Readiness is a hint in this reactor: an operation retries on `WouldBlock` and then clears
//! what it saw. So a readiness found here and also delivered by the owner later (its ring's
//! completion for the same change) costs at most one extra attempt, and nothing is lost: this
//! only ever adds readiness.
//!
//! One kind of registration is only partly the socket's to tell: one whose input the backend
//! takes ahead ([`Ahead`](crate::io::Ahead), io_uring's opt-in receive and accept fast
//! paths). Its bytes or connections arrive through the owner's ring, which a stuck owner does
//! not reap, so `poll(2)` says nothing useful about its reads: only its writers are rescued.

use std::io;
use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

use super::{ReactorHandle, ScheduledIo};
use crate::sys::Event;
use crate::{Direction, Ready};

/// At most this many fds per `poll(2)` call: the kernel refuses a call with more than
/// `RLIMIT_NOFILE` (`EINVAL`), whose usual soft limit is 1024.
const POLL_CHUNK: usize = 512;

impl ReactorHandle {
    /// Collects this reactor's ready I/O for an owner that is stuck (see
    /// [`is_stuck`](Self::is_stuck) with `min_stall`), by whatever means the backend allows,
    /// and wakes the tasks **on the calling thread**: its events where another thread can
    /// collect them ([`steal_events`](Self::steal_events): epoll), otherwise the readiness of
    /// the registrations that tasks wait on, polled fd by fd
    /// ([`poll_stuck_waiters`](Self::poll_stuck_waiters): io_uring, mio). Returns how many
    /// wakers were woken. weir's monitor thread calls this for a worker it finds stuck in
    /// one poll.
    ///
    /// # Errors
    /// Unexpected OS errors of `epoll_wait` or `poll(2)`.
    pub(crate) fn rescue_stuck(&self, min_stall: Duration) -> io::Result<usize> {
        if self.inner.registry.capabilities().stealing {
            self.steal_events(min_stall)
        } else {
            self.poll_stuck_waiters(min_stall)
        }
    }

    /// Readiness rescue, on any backend: when this reactor's owner is stuck (see
    /// [`is_stuck`](Self::is_stuck) with `min_stall`), asks the kernel with one non-blocking
    /// `poll(2)` which of the fds that tasks wait on are ready for what they wait for, records
    /// that readiness as an event from the owner would, and wakes those tasks **on the
    /// calling thread**. Returns how many wakers were woken (0 when the owner is not stuck or
    /// nobody waits).
    ///
    /// Registrations that another thread made and the owner has not taken into its poller yet
    /// (on io_uring, those still in the ring's inbox) are polled too: their fds are known from
    /// the moment they are registered. The reads of a registration whose input the backend
    /// takes ahead ([`Ahead`](crate::io::Ahead)) are not: that input reaches it through the
    /// owner only. Readiness found here may be found again by the owner later; operations
    /// retry on `WouldBlock`, so that costs at most an attempt.
    ///
    /// Costs one pass over the registrations under their lock (looking at each one's waiters)
    /// and one `poll(2)` over the fds waited on (per 512), on the calling thread; the owner
    /// pays nothing. Meant for a rare caller, such as weir's monitor thread, at most once per
    /// look at a stuck worker: the backends that can steal events do better with
    /// [`steal_events`](Self::steal_events), which [`rescue_stuck`](Self::rescue_stuck)
    /// prefers.
    ///
    /// # Errors
    /// Unexpected OS errors of `poll(2)` (`ENOMEM`).
    pub(crate) fn poll_stuck_waiters(&self, min_stall: Duration) -> io::Result<usize> {
        let inner = &*self.inner;
        if !self.is_stuck(min_stall) {
            return Ok(0);
        }
        // The entries tasks wait on, and for what. Locks in the owner's order: the
        // registrations, then each entry's waiters.
        let waiting: Vec<(u64, Arc<ScheduledIo>, Ready)> = {
            let regs = inner.registrations.lock();
            regs.entries()
                .filter_map(|(token, io)| {
                    let mut want = io.waited_for();
                    if io.reads_ahead() {
                        want = want - Direction::Read.mask();
                    }
                    (!want.is_empty()).then(|| (token, io.clone(), want))
                })
                .collect()
        };
        if waiting.is_empty() {
            return Ok(0);
        }
        let mut events = Vec::new();
        for chunk in waiting.chunks(POLL_CHUNK) {
            let mut fds: Vec<libc::pollfd> = chunk
                .iter()
                .map(|(_, io, want)| libc::pollfd {
                    fd: io.fd(),
                    events: ready_to_poll(*want),
                    revents: 0,
                })
                .collect();
            poll_now(&mut fds)?;
            for ((token, io, _), pfd) in chunk.iter().zip(&fds) {
                // A closed fd (its registration is being dropped) has nothing to rescue.
                if pfd.revents == 0 || pfd.revents & libc::POLLNVAL != 0 {
                    continue;
                }
                let mut ready = poll_to_ready(pfd.revents);
                if io.reads_ahead() {
                    ready = ready - (Ready::READABLE | Ready::READ_CLOSED);
                }
                if !ready.is_empty() {
                    events.push(Event {
                        token: *token,
                        ready,
                    });
                }
            }
        }
        drop(waiting);
        if events.is_empty() {
            return Ok(0);
        }
        let mut wake = Vec::new();
        let delivered = inner.registrations.lock().deliver(&events, &mut wake);
        inner.metrics.events_stolen.add_shared(delivered.io_events);
        let n = wake.len();
        wake.into_iter().for_each(Waker::wake);
        Ok(n)
    }
}

/// One `poll(2)` of `fds` that does not block; `EINTR` is retried.
fn poll_now(fds: &mut [libc::pollfd]) -> io::Result<()> {
    loop {
        // SAFETY: `fds` is a valid, exclusively borrowed array of `fds.len()` pollfd structs
        // for the kernel to fill in; a zero timeout never blocks.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
        if n >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `POLLRDHUP` where the OS has it: the peer shut down its writing.
#[cfg(any(target_os = "linux", target_os = "android"))]
const POLLRDHUP: libc::c_short = libc::POLLRDHUP;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const POLLRDHUP: libc::c_short = 0;

/// The `poll(2)` events that tell the readiness `want` (hang-ups and errors are always
/// reported).
fn ready_to_poll(want: Ready) -> libc::c_short {
    let mut events = 0;
    if want.intersects(Ready::READABLE | Ready::READ_CLOSED) {
        events |= libc::POLLIN | POLLRDHUP;
    }
    if want.intersects(Ready::WRITABLE | Ready::WRITE_CLOSED) {
        events |= libc::POLLOUT;
    }
    if want.intersects(Ready::PRIORITY) {
        events |= libc::POLLPRI;
    }
    events
}

/// The readiness `poll(2)`'s `revents` report, read as the epoll backend reads an event.
fn poll_to_ready(revents: libc::c_short) -> Ready {
    let has = |b: libc::c_short| revents & b != 0;
    let mut ready = Ready::EMPTY;
    if has(libc::POLLIN) || has(libc::POLLPRI) {
        ready |= Ready::READABLE;
    }
    if has(libc::POLLOUT) {
        ready |= Ready::WRITABLE;
    }
    // Hang-up closes both halves; POLLRDHUP with data means the peer shut down its write side.
    if has(libc::POLLHUP) || (has(libc::POLLIN) && POLLRDHUP != 0 && has(POLLRDHUP)) {
        ready |= Ready::READ_CLOSED;
    }
    if has(libc::POLLHUP) || (has(libc::POLLOUT) && has(libc::POLLERR)) || revents == libc::POLLERR
    {
        ready |= Ready::WRITE_CLOSED;
    }
    if has(libc::POLLERR) {
        ready |= Ready::ERROR;
    }
    if has(libc::POLLPRI) {
        ready |= Ready::PRIORITY;
    }
    ready
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Wake, Waker};
    use std::time::Duration;

    use super::{poll_to_ready, ready_to_poll};
    use crate::config::DriverConfig;
    use crate::driver::Driver;
    use crate::{Backend, Direction, Interest, ReactorHandle, Ready};

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn poll_bits_read_as_epoll_bits() {
        let p = |bits: libc::c_short| poll_to_ready(bits);
        assert_eq!(p(libc::POLLIN), Ready::READABLE);
        assert_eq!(p(libc::POLLOUT), Ready::WRITABLE);
        assert_eq!(
            p(libc::POLLIN | libc::POLLRDHUP),
            Ready::READABLE | Ready::READ_CLOSED
        );
        assert_eq!(p(libc::POLLHUP), Ready::READ_CLOSED | Ready::WRITE_CLOSED);
        assert_eq!(p(libc::POLLERR), Ready::WRITE_CLOSED | Ready::ERROR);
        assert_eq!(p(libc::POLLPRI), Ready::READABLE | Ready::PRIORITY);
        let read = ready_to_poll(Direction::Read.mask());
        assert_eq!(read, libc::POLLIN | libc::POLLRDHUP);
        assert_eq!(ready_to_poll(Direction::Write.mask()), libc::POLLOUT);
    }

    /// A driver on `backend`, or `None` (the skip printed) where the kernel refuses it.
    fn driver_on(backend: Backend) -> Option<Driver> {
        match Driver::new(&DriverConfig {
            backend,
            backend_strict: true,
            ..DriverConfig::default()
        }) {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!("skipped on {backend:?}: {e}");
                None
            }
        }
    }

    /// On every backend, with an owner that never turns: only the registrations some task
    /// waits on are looked at, and a ready one wakes its task, from another thread.
    #[test]
    fn a_waiting_registration_of_a_stuck_owner_is_woken_from_another_thread() {
        for backend in [Backend::Epoll, Backend::Mio, Backend::IoUring] {
            let Some(driver) = driver_on(backend) else {
                continue;
            };
            let handle = driver.handle().clone();
            let (mut to_a, a) = UnixStream::pair().unwrap();
            let (mut to_b, b) = UnixStream::pair().unwrap();
            let (io_a, tok_a, _) = handle
                .add_source(a.as_raw_fd(), Interest::READABLE, false)
                .unwrap();
            let (io_b, tok_b, _) = handle
                .add_source(b.as_raw_fd(), Interest::READABLE, false)
                .unwrap();
            let count = Arc::new(Count(AtomicUsize::new(0)));
            let waker = Waker::from(count.clone());
            let mut cx = Context::from_waker(&waker);
            assert!(io_a.poll_ready(&mut cx, Direction::Read).is_pending());
            let rescue = |h: &ReactorHandle| {
                let h = h.clone();
                std::thread::spawn(move || h.poll_stuck_waiters(Duration::ZERO).unwrap())
                    .join()
                    .unwrap()
            };
            // Nothing ready yet: nothing woken.
            assert_eq!(rescue(&handle), 0, "{backend:?}");
            // Both become readable; only `a` has a waiter.
            to_a.write_all(b"a").unwrap();
            to_b.write_all(b"b").unwrap();
            assert_eq!(rescue(&handle), 1, "{backend:?}");
            assert_eq!(count.0.load(Ordering::SeqCst), 1);
            assert!(io_a.ready_now(Ready::ALL).ready.is_readable());
            assert!(
                io_b.ready_now(Ready::ALL).ready.is_empty(),
                "nobody waits on b ({backend:?})"
            );
            assert_eq!(handle.stats().events_stolen, 1, "{backend:?}");
            // The task saw it: no waiter is left, nothing more is done.
            assert!(io_a.poll_ready(&mut cx, Direction::Read).is_ready());
            assert_eq!(rescue(&handle), 0, "{backend:?}");
            assert_eq!(count.0.load(Ordering::SeqCst), 1);
            for (sock, tok) in [(&a, tok_a), (&b, tok_b)] {
                handle.deregister_source(sock.as_raw_fd()).unwrap();
                handle.remove_source(tok);
            }
            drop(driver);
        }
    }

    /// An owner that has not been away from its reactor for `min_stall` is left alone.
    #[test]
    fn an_owner_not_stuck_for_min_stall_is_left_alone() {
        let mut driver = Driver::new(&DriverConfig::default()).unwrap();
        let handle = driver.handle().clone();
        let (mut to_a, a) = UnixStream::pair().unwrap();
        let (io_a, tok_a, _) = handle
            .add_source(a.as_raw_fd(), Interest::READABLE, false)
            .unwrap();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        driver.poll().unwrap();
        assert!(io_a.poll_ready(&mut cx, Direction::Read).is_pending());
        to_a.write_all(b"a").unwrap();
        assert_eq!(
            handle
                .poll_stuck_waiters(Duration::from_secs(3600))
                .unwrap(),
            0
        );
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        handle.deregister_source(a.as_raw_fd()).unwrap();
        handle.remove_source(tok_a);
    }
}
