//! The shared half ([`Registry`]): registrations from any thread go into the owner's inbox
//! with `epoll_ctl`'s immediate errors; deregistration releases the ring's reference to the
//! file as early as it can (see the [crate docs](crate#deregistration)); wake-ups write the
//! eventfd the ring watches. Kernel busy poll is applied from the issuer's thread.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::ahead::{AcceptQueue, Ahead, Owner, Queue, ReadAhead};
use crate::inbox::Inbox;
use crate::napi::{self, NapiParams};
use crate::sys::{SocketKind, check_pollable, signal_eventfd, socket_kind};
use crate::{Core, Op, ring};

/// See `Shared::issuer`.
pub(crate) struct Issuer {
    /// `None` until the ring is enabled (nothing was submitted yet).
    pub(crate) thread: Option<ThreadId>,
    /// A duplicate of the ring's fd; `None` once the selector is dropped (so that the ring,
    /// and the files its polls hold, are released with it).
    pub(crate) ring: Option<OwnedFd>,
    /// The owner's ring and poll table, for a lossless deregistration on the issuer's thread
    /// (upgraded only under this lock; dangling once the selector is dropped).
    pub(crate) core: Weak<Mutex<Core>>,
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
    pub(crate) fn is_current(&self) -> bool {
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

/// The shared half of a ring: registrations from any thread, deregistrations, wake-ups. Built
/// with its [`Selector`](crate::Selector) by [`Selector::new`](crate::Selector::new).
///
/// It answers like `epoll_ctl` does, at once: `EEXIST` for an fd registered twice, `ENOENT`
/// for one not registered, `EPERM` for a regular file or a directory (they cannot be polled),
/// `EBADF` for a closed fd. The operation itself reaches the ring at the owner's next turn.
pub struct Registry {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("recv_multishot", &self.shared.recv_multishot)
            .field("accept_multishot", &self.shared.accept_multishot)
            .finish_non_exhaustive()
    }
}

/// What the registry's handles and the queues' readers share.
pub(crate) struct Shared {
    /// Wake handle, watched by a multishot poll on the ring.
    pub(crate) eventfd: OwnedFd,
    pub(crate) inbox: Inbox<Op>,
    /// Registered fds, for `epoll_ctl`'s immediate errors, each with whether it is on a fast
    /// path; ops are pushed while it is locked, so the inbox's order is the order of these
    /// checks.
    fds: Mutex<HashMap<RawFd, bool>>,
    /// The receive fast path is on (asked for, and the kernel took the buffer ring).
    recv_multishot: bool,
    /// The accept fast path is on.
    accept_multishot: bool,
    /// Set by [`wake`](Registry::wake): the next wake-handle completion is the caller's
    /// wake-up.
    pub(crate) woken: AtomicBool,
    /// The ring's issuer thread (none before the ring is enabled) and a duplicate of the
    /// ring's fd: a deregistration on the issuer's thread cancels the fd's poll at once (see
    /// `deregister`), and kernel busy poll is registered from there (see `set_napi`).
    pub(crate) issuer: Arc<Mutex<Issuer>>,
    /// Kernel busy poll (`IORING_REGISTER_NAPI`) as last asked for, and whether the owner must
    /// still apply it.
    pub(crate) napi: Mutex<(Option<NapiParams>, bool)>,
    /// Remote deregistrations pushed (numbered from 1, under `fds`' lock).
    deregs_pushed: std::sync::atomic::AtomicU64,
    /// The highest remote deregistration whose cancellation the owner has run.
    pub(crate) deregs_done: std::sync::atomic::AtomicU64,
}

impl Registry {
    pub(crate) fn new(
        eventfd: OwnedFd,
        issuer: Arc<Mutex<Issuer>>,
        recv_multishot: bool,
        accept_multishot: bool,
    ) -> Registry {
        let shared = Arc::new(Shared {
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
        });
        Registry { shared }
    }
}

impl Shared {
    /// Queues `op` for the owner and wakes it if it is blocked.
    fn push(&self, op: Op) {
        if self.inbox.push(op) {
            self.write_eventfd();
        }
    }

    pub(crate) fn write_eventfd(&self) {
        if let Err(e) = signal_eventfd(self.eventfd.as_raw_fd()) {
            tracing::error!(target: "weir::reactor", error = %e, "eventfd write failed");
        }
    }
}

impl Registry {
    /// Starts reporting the readiness of `fd` under `token`, edge-triggered, as an
    /// edge-triggered epoll registration would: an event when readiness *changes*. `mask` is
    /// the `poll(2)` events to watch (`POLLIN`, `POLLOUT`, `POLLPRI`, and `POLLRDHUP` for the
    /// peer's shutdown); errors and hang-ups are always reported. `token` is never
    /// [`WAKE_TOKEN`](crate::WAKE_TOKEN).
    ///
    /// # Errors
    /// `EEXIST` if `fd` is registered, `EPERM` for a regular file or a directory, `EBADF` for
    /// a closed fd.
    pub fn register(&self, fd: RawFd, token: u64, mask: u32) -> io::Result<()> {
        check_pollable(fd)?;
        let mut fds = self.shared.fds.lock();
        if fds.contains_key(&fd) {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        fds.insert(fd, false);
        self.shared.push(Op::Register {
            fd,
            token,
            mask,
            ahead: None,
        });
        Ok(())
    }

    /// Registers a socket whose reads (or accepts) the caller makes through the returned
    /// [`Ahead`] first, as [`register`](Self::register) does, so that the ring may take its
    /// input ahead of the program: with the receive fast path on
    /// ([`Config::recv_multishot`](crate::Config::recv_multishot)) a stream socket gets a
    /// multishot receive into the ring's provided buffers instead of read readiness, and with
    /// the accept fast path ([`Config::accept_multishot`](crate::Config::accept_multishot)) a
    /// listening socket a multishot accept. Read readiness is then reported when something is
    /// queued. Anything else — a fast path off, a `mask` without `POLLIN`, a datagram socket,
    /// not a socket — is registered for readiness as usual, and `None` is returned.
    ///
    /// Whether `fd` listens is asked of the kernel (`SO_ACCEPTCONN`, and `SO_TYPE`), and only
    /// while a fast path is on.
    ///
    /// # Errors
    /// As [`register`](Self::register).
    pub fn register_ahead(&self, fd: RawFd, token: u64, mask: u32) -> io::Result<Option<Ahead>> {
        let shared = &self.shared;
        let reads = mask & libc::POLLIN as u32 != 0;
        let kind = if reads && (shared.recv_multishot || shared.accept_multishot) {
            socket_kind(fd, shared.accept_multishot, shared.recv_multishot)
        } else {
            None
        };
        let Some(kind) = kind else {
            return self.register(fd, token, mask).map(|()| None);
        };
        check_pollable(fd)?;
        let mut fds = shared.fds.lock();
        if fds.contains_key(&fd) {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        fds.insert(fd, true);
        let queue = match kind {
            SocketKind::Listener => Queue::Accept(Arc::new(AcceptQueue::new())),
            SocketKind::Stream => Queue::Read(Arc::new(ReadAhead::new())),
        };
        shared.push(Op::Register {
            fd,
            token,
            mask,
            ahead: Some(queue.clone()),
        });
        let owner: Weak<dyn Owner> = Arc::downgrade(shared) as Weak<Shared>;
        Ok(Some(Ahead::new(fd, queue, owner)))
    }

    /// Changes the interest (`mask`) or the token of a registered fd.
    ///
    /// # Errors
    /// `ENOENT` for an fd not registered; `Unsupported` for a source read ahead.
    pub fn reregister(&self, fd: RawFd, token: u64, mask: u32) -> io::Result<()> {
        let fds = self.shared.fds.lock();
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
        self.shared.push(Op::Reregister { fd, token, mask });
        Ok(())
    }

    /// Stops reporting `fd`, releasing the ring's reference to its file before returning
    /// wherever that can be done without waiting on a running owner:
    /// - on the ring's issuer thread (a task dropping its own socket, the usual case), by a
    ///   synchronous cancellation;
    /// - from another thread while the owner is parked, by waking it and waiting (at most
    ///   5 ms) until it has submitted the cancellation;
    /// - from another thread while the owner runs, not at all: the owner cancels at its next
    ///   turn (waiting for it stalled the deregistering thread: a millisecond of spinning per
    ///   closed connection when every worker is busy).
    ///
    /// Past the bound the cancellation happens at the owner's next turn. Events already
    /// collected may still carry `fd`'s token.
    ///
    /// # Errors
    /// `ENOENT` for an fd not registered.
    pub fn deregister(&self, fd: RawFd) -> io::Result<()> {
        self.shared.deregister(fd)
    }

    /// Makes a blocked (or the next) [`select`](crate::Selector::select) return with a
    /// [`WAKE_TOKEN`](crate::WAKE_TOKEN) event: marks the wake-up as the caller's and writes
    /// the eventfd. Callable from any thread; one syscall.
    ///
    /// # Errors
    /// The eventfd's write error (none in practice).
    pub fn wake(&self) -> io::Result<()> {
        self.shared.woken.store(true, Ordering::SeqCst);
        signal_eventfd(self.shared.eventfd.as_raw_fd())
    }

    /// Kernel busy poll on this ring (`IORING_REGISTER_NAPI`, dynamic tracking: the kernel
    /// busy-polls the NAPI ids of the sockets this ring polls). Applied at once on the ring's
    /// issuer thread or before the ring is enabled, where its errors are returned; from any
    /// other thread it is applied at the owner's next turn, and an error is logged as a
    /// warning there. A ring rebuilt on another thread gets it again. `usecs` = 0 turns busy
    /// poll off.
    ///
    /// # Errors
    /// `EINVAL` before Linux 6.9.
    pub fn set_napi(&self, params: NapiParams) -> io::Result<()> {
        let shared = &self.shared;
        let issuer = shared.issuer.lock();
        if let Access::Issuer(ring) | Access::NotEnabled(ring) = issuer.access() {
            napi::apply(ring, params)?;
            *shared.napi.lock() = (Some(params), false);
            return Ok(());
        }
        drop(issuer);
        *shared.napi.lock() = (Some(params), true);
        Ok(())
    }

    /// Kernel busy poll as last set ([`set_napi`](Self::set_napi)); zero when never set.
    pub fn napi(&self) -> NapiParams {
        self.shared.napi.lock().0.unwrap_or_default()
    }
}

impl Shared {
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
}

impl Owner for Shared {
    fn resume(&self, fd: RawFd) {
        let fds = self.fds.lock();
        if fds.get(&fd) == Some(&true) {
            self.push(Op::Resume { fd });
        }
    }

    /// [`deregister`](Shared::deregister), losslessly for a stream read ahead: its multishot
    /// receive is stopped and its completions reaped into the queue before this returns. On
    /// the ring's issuer thread (between two waits) this runs at once; from another thread,
    /// or while the owner waits, it is the owner's next turn, waited for (the owner is woken
    /// if parked), at most [`REMOTE_DETACH_WAIT`].
    fn detach(&self, fd: RawFd) -> io::Result<()> {
        let mut fds = self.fds.lock();
        match fds.get(&fd) {
            None => return Err(io::Error::from_raw_os_error(libc::ENOENT)),
            Some(false) => {
                drop(fds);
                return self.deregister(fd);
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
}
