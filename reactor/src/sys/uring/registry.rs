//! The shared half of the io_uring backend ([`Registry`]): registrations from any thread go
//! into the owner's inbox with `epoll_ctl`'s immediate errors; deregistration releases the
//! ring's reference to the file as early as it can (see the [module docs](super)); wake-ups
//! write the eventfd the ring watches. Kernel busy poll is applied from the issuer's thread.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::inbox::Inbox;
use super::{Core, NapiParams, Op, napi, ring};
use crate::Interest;
use crate::ahead::{AcceptQueue, Ahead, ReadAhead, SourceKind};
use crate::sys::Event;
use crate::sys::epoll::interest_to_poll;

/// See `Registry::issuer`.
pub(super) struct Issuer {
    /// `None` until the ring is enabled (nothing was submitted yet).
    pub(super) thread: Option<ThreadId>,
    /// A duplicate of the ring's fd; `None` once the selector is dropped (so that the ring,
    /// and the files its polls hold, are released with it).
    pub(super) ring: Option<OwnedFd>,
    /// The owner's ring and poll table, for a lossless deregistration on the issuer's thread
    /// (upgraded only under this lock; dangling once the selector is dropped).
    pub(super) core: Weak<Mutex<Core>>,
}

/// Who may do what on the ring, from the calling thread.
enum Access {
    /// The calling thread is the issuer: it may register and cancel on this ring fd.
    Issuer(RawFd),
    /// The ring is not enabled yet: anyone may register on it, and no poll holds a file.
    NotEnabled(RawFd),
    /// Another thread is the issuer.
    Remote,
    /// The selector is gone with its ring.
    Gone,
}

impl Issuer {
    /// Is the calling thread the ring's issuer (the ring is enabled, here)?
    pub(super) fn is_current(&self) -> bool {
        self.ring.is_some() && self.thread == Some(std::thread::current().id())
    }

    fn access(&self) -> Access {
        match (&self.ring, self.thread) {
            (None, _) => Access::Gone,
            (Some(r), None) => Access::NotEnabled(r.as_raw_fd()),
            (Some(r), Some(t)) if t == std::thread::current().id() => Access::Issuer(r.as_raw_fd()),
            (Some(_), Some(_)) => Access::Remote,
        }
    }
}

/// How long a remote deregistration waits for a parked owner to cancel the poll.
const REMOTE_CANCEL_WAIT: Duration = Duration::from_millis(5);
/// How long a lossless deregistration from another thread waits for the owner's next turn.
const REMOTE_DETACH_WAIT: Duration = Duration::from_secs(10);

/// The shared half: the inbox of registrations, the wake handle.
pub(crate) struct Registry {
    /// Wake handle, watched by a multishot poll on the ring.
    pub(super) eventfd: OwnedFd,
    pub(super) inbox: Inbox<Op>,
    /// Registered fds, for `epoll_ctl`'s immediate errors, each with whether it is on a fast
    /// path; ops are pushed while it is locked, so the inbox's order is the order of these
    /// checks.
    fds: Mutex<HashMap<RawFd, bool>>,
    /// The receive fast path is on (asked for, and the kernel took the buffer ring).
    recv_multishot: bool,
    /// The accept fast path is on.
    accept_multishot: bool,
    /// Set by [`wake`](crate::sys::Registry::wake): the next wake-handle completion is the driver's wake-up.
    pub(super) woken: AtomicBool,
    /// The ring's issuer thread (none before the ring is enabled) and a duplicate of the
    /// ring's fd: a deregistration on the issuer's thread cancels the fd's poll at once (see
    /// `deregister`), and kernel busy poll is registered from there (see `set_napi`).
    pub(super) issuer: Arc<Mutex<Issuer>>,
    /// Kernel busy poll (`IORING_REGISTER_NAPI`) as last asked for, and whether the owner must
    /// still apply it.
    pub(super) napi: Mutex<(Option<NapiParams>, bool)>,
    /// Remote deregistrations pushed (numbered from 1, under `fds`' lock).
    deregs_pushed: std::sync::atomic::AtomicU64,
    /// The highest remote deregistration whose cancellation the owner has run.
    pub(super) deregs_done: std::sync::atomic::AtomicU64,
}

impl Registry {
    pub(super) fn new(
        eventfd: OwnedFd,
        issuer: Arc<Mutex<Issuer>>,
        recv_multishot: bool,
        accept_multishot: bool,
    ) -> Registry {
        Registry {
            eventfd,
            inbox: Inbox::new(),
            fds: Mutex::new(HashMap::new()),
            recv_multishot,
            accept_multishot,
            woken: AtomicBool::new(false),
            issuer,
            napi: Mutex::new((None, false)),
            deregs_pushed: std::sync::atomic::AtomicU64::new(0),
            deregs_done: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

/// `EPERM` for what epoll cannot watch either (regular files, directories), `EBADF` for a
/// closed fd.
fn check_pollable(fd: RawFd) -> io::Result<()> {
    // SAFETY: `stat` is plain data; fstat writes one `struct stat` into it and reads nothing.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a live, writable `struct stat`; an invalid `fd` is reported as EBADF.
    if unsafe { libc::fstat(fd, &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG | libc::S_IFDIR => Err(io::Error::from_raw_os_error(libc::EPERM)),
        _ => Ok(()),
    }
}

impl Registry {
    /// Queues `op` for the owner and wakes it if it is blocked.
    fn push(&self, op: Op) {
        if self.inbox.push(op) {
            self.write_eventfd();
        }
    }

    fn write_eventfd(&self) {
        if let Err(e) = crate::sys::signal_eventfd(std::os::fd::AsFd::as_fd(&self.eventfd)) {
            tracing::error!(target: "weir::reactor", error = %e, "eventfd write failed");
        }
    }
}

impl Registry {
    /// Kernel busy poll on this ring (`IORING_REGISTER_NAPI`, dynamic tracking: the kernel
    /// busy-polls the NAPI ids of the sockets this ring polls). Applied at once on the ring's
    /// issuer thread or before the ring is enabled (a runtime being built), where its errors
    /// are returned; from any other thread it is applied at the owner's next turn, and an
    /// error is logged as a warning there. A ring rebuilt on another thread gets it again.
    ///
    /// `usecs` = 0 turns busy poll off.
    pub(crate) fn set_napi(&self, params: NapiParams) -> io::Result<()> {
        let issuer = self.issuer.lock();
        if let Access::Issuer(ring) | Access::NotEnabled(ring) = issuer.access() {
            napi::apply(ring, params)?;
            *self.napi.lock() = (Some(params), false);
            return Ok(());
        }
        drop(issuer);
        *self.napi.lock() = (Some(params), true);
        Ok(())
    }

    /// Kernel busy poll as last set ([`set_napi`](Self::set_napi)); zero when never set.
    pub(crate) fn napi(&self) -> NapiParams {
        self.napi.lock().0.unwrap_or_default()
    }
}

impl crate::sys::Registry for Registry {
    fn register(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        check_pollable(fd)?;
        let mut fds = self.fds.lock();
        if fds.contains_key(&fd) {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        fds.insert(fd, false);
        let mask = interest_to_poll(interest);
        self.push(Op::Register {
            fd,
            token,
            mask,
            queue: Ahead::None,
        });
        Ok(())
    }

    fn register_ahead(
        &self,
        fd: RawFd,
        token: u64,
        interest: Interest,
        kind: SourceKind,
    ) -> io::Result<Ahead> {
        let on = match kind {
            SourceKind::Stream => self.recv_multishot,
            SourceKind::Listener => self.accept_multishot,
            SourceKind::Plain => false,
        };
        if !on || !interest.is_readable() {
            return crate::sys::Registry::register(self, fd, token, interest).map(|()| Ahead::None);
        }
        check_pollable(fd)?;
        let mut fds = self.fds.lock();
        if fds.contains_key(&fd) {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        fds.insert(fd, true);
        let queue = match kind {
            SourceKind::Listener => Ahead::Accept(Arc::new(AcceptQueue::new(fd))),
            _ => Ahead::Read(Arc::new(ReadAhead::new(fd))),
        };
        let mask = interest_to_poll(interest);
        self.push(Op::Register {
            fd,
            token,
            mask,
            queue: queue.clone(),
        });
        Ok(queue)
    }

    fn resume_ahead(&self, fd: RawFd) {
        let fds = self.fds.lock();
        if fds.get(&fd) == Some(&true) {
            self.push(Op::ResumeAhead { fd });
        }
    }

    fn reregister(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        let fds = self.fds.lock();
        match fds.get(&fd) {
            None => return Err(io::Error::from_raw_os_error(libc::ENOENT)),
            Some(true) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "a source on an io_uring fast path (bytes received or connections \
                     accepted ahead) cannot change its interest",
                ));
            }
            Some(false) => {}
        }
        let mask = interest_to_poll(interest);
        self.push(Op::Reregister { fd, token, mask });
        Ok(())
    }

    /// Stops reporting `fd`, releasing the ring's reference to its file before returning
    /// wherever that can be done without waiting on a running owner:
    /// - on the ring's issuer thread (a task dropping its own socket, the usual case), by a
    ///   synchronous cancellation;
    /// - from another thread while the owner is parked, by waking it and waiting (at most
    ///   [`REMOTE_CANCEL_WAIT`]) until it has submitted the cancellation;
    /// - from another thread while the owner runs, not at all: the owner cancels at its next
    ///   turn (waiting for it stalled the deregistering worker — measured: a millisecond of
    ///   spinning per closed connection when every worker is busy).
    ///
    /// Past the bound the cancellation happens at the owner's next turn.
    fn deregister(&self, fd: RawFd) -> io::Result<()> {
        let mut fds = self.fds.lock();
        if fds.remove(&fd).is_none() {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        let issuer = self.issuer.lock();
        match issuer.access() {
            Access::Issuer(ring_fd) => {
                // The queued operation frees the poll's slot at the owner's next turn.
                self.push(Op::Deregister { fd, seq: 0 });
                drop(fds);
                if let Err(e) = ring::sync_cancel_fd(ring_fd, fd)
                    && e.raw_os_error() != Some(libc::ENOENT)
                {
                    tracing::debug!(target: "weir::reactor", fd, error = %e, "io_uring sync cancel failed");
                }
                return Ok(());
            }
            // Nothing submitted yet, or the ring is gone: no poll holds the file.
            Access::NotEnabled(_) | Access::Gone => {
                self.push(Op::Deregister { fd, seq: 0 });
                return Ok(());
            }
            Access::Remote => {}
        }
        drop(issuer);
        let seq = self.deregs_pushed.fetch_add(1, Ordering::Relaxed) + 1;
        let parked = self.inbox.push(Op::Deregister { fd, seq });
        drop(fds);
        if parked {
            self.write_eventfd();
        }
        // A running owner cancels at its next turn, not waited for. A parked one was woken and
        // cancels at once; that is waited for, briefly (an owner that does not turn leaves the
        // cancellation for later).
        if !parked {
            return Ok(());
        }
        let start = Instant::now();
        while self.deregs_done.load(Ordering::Acquire) < seq && start.elapsed() < REMOTE_CANCEL_WAIT
        {
            std::thread::yield_now();
        }
        Ok(())
    }

    /// [`deregister`](Self::deregister), losslessly for a stream on the receive fast path:
    /// its multishot receive is stopped and its completions reaped into the read-ahead queue
    /// before this returns, so every byte of the stream is either in that queue or still in
    /// the socket. On the ring's issuer thread (between two waits) this runs at once; from
    /// another thread, or while the owner waits, it is the owner's next turn, waited for
    /// (the owner is woken if parked).
    ///
    /// # Errors
    /// `ENOENT` for an fd not registered; `TimedOut` when the owner did not turn within
    /// [`REMOTE_DETACH_WAIT`] (the deregistration then happens at its next turn, and bytes
    /// received meanwhile go to the queue).
    fn detach(&self, fd: RawFd) -> io::Result<()> {
        let mut fds = self.fds.lock();
        match fds.get(&fd) {
            None => return Err(io::Error::from_raw_os_error(libc::ENOENT)),
            Some(false) => {
                drop(fds);
                return crate::sys::Registry::deregister(self, fd);
            }
            Some(true) => {}
        }
        fds.remove(&fd);
        let issuer = self.issuer.lock();
        match issuer.access() {
            // Nothing was submitted (the owner cannot enable the ring while the issuer's lock
            // is held, and drains the inbox only after): the registration and this are drained
            // together and the receive never runs. Or the ring is gone, its completions
            // reaped.
            Access::NotEnabled(_) | Access::Gone => {
                self.push(Op::Deregister { fd, seq: 0 });
                return Ok(());
            }
            Access::Issuer(_) => {
                // Between two waits on this thread the core is free; taken, the owner runs
                // on another thread (moved without leaving this one): ask it instead.
                if let Some(core) = issuer.core.upgrade()
                    && let Some(mut core) = core.try_lock()
                {
                    // The registration may still be in the inbox (made since the last turn):
                    // this deregistration follows it there, so that both are drained together
                    // and nothing is armed on the fd (whose number may be reused by then).
                    self.push(Op::Deregister { fd, seq: 0 });
                    core.detach(fd, self.eventfd.as_raw_fd(), &self.woken);
                    return Ok(());
                }
            }
            Access::Remote => {}
        }
        drop(issuer);
        let seq = self.deregs_pushed.fetch_add(1, Ordering::Relaxed) + 1;
        let parked = self.inbox.push(Op::Detach { fd, seq });
        drop(fds);
        if parked {
            self.write_eventfd();
        }
        let start = Instant::now();
        let mut spins = 0u32;
        while self.deregs_done.load(Ordering::Acquire) < seq {
            if start.elapsed() >= REMOTE_DETACH_WAIT {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the io_uring reactor's owner did not turn to stop the stream's receive",
                ));
            }
            if spins < 1000 {
                spins += 1;
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        Ok(())
    }

    /// Marks the wake-up as the driver's and writes the eventfd: the ring's wait returns with a
    /// [`WAKE_TOKEN`](crate::sys::WAKE_TOKEN) event.
    fn wake(&self) -> io::Result<()> {
        self.woken.store(true, Ordering::SeqCst);
        self.write_eventfd();
        Ok(())
    }

    /// A ring cannot be reaped from another thread: no stealing.
    fn steal(&self, _out: &mut Vec<Event>, _max: usize) -> io::Result<usize> {
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_refused_like_epoll() {
        let f = std::fs::File::open("/proc/self/exe").unwrap();
        let e = check_pollable(f.as_raw_fd()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM));
        let e = check_pollable(-1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
    }
}
