//! The io_uring backend: readiness through multishot polls on one ring per reactor, native
//! min_wait windows, an inbox for registrations from other threads.
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | the two halves ([`Registry`], [`Selector`]): building them, registrations |
//! | `wait.rs` | one wait of the owner: drain the inbox, enter, reap |
//! | `ring.rs` | building the ring, queueing submissions, the one `io_uring_enter` of a wait |
//! | `polls.rs` | the owner's table of polls: what each completion means, re-arm, cancellation |
//! | `inbox.rs` | registrations from other threads and the wake-up protocol (loom-modelled) |
//! | `user_data.rs` | what a request's `user_data` encodes |
//! | `bufs.rs` | the provided buffers of the receive fast path |
//!
//! # The ring
//!
//! One ring per reactor, set up with `IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN |
//! COOP_TASKRUN | TASKRUN_FLAG`, not inherited by `fork` (`MADV_DONTFORK`), with a CQ of four
//! times the SQ (at least 1024 entries) for multishot traffic. Only the reactor's owner submits
//! and reaps; with `DEFER_TASKRUN` the kernel posts completions only while the owner enters
//! with `GETEVENTS`, so every wait is one enter that submits what is queued and collects.
//!
//! A single issuer is the thread that *enabled* the ring. A [`Driver`](crate::Driver) is built
//! on one thread and may be moved to another (a runtime builds its reactors before it starts
//! its workers, and a worker's core may move threads): the ring is therefore built disabled
//! (`IORING_SETUP_R_DISABLED`, so that `Driver::new` still reports `EPERM`/`ENOSYS`) and
//! enabled by the first `select`, on the thread that waits. Should the owner move threads later,
//! the kernel refuses its enter (`EEXIST`): the selector then builds a new ring on the new
//! thread and arms every live poll on it again (closing the old ring ends its polls). A new
//! poll reports the fd's state at once, so no readiness is lost in the move.
//!
//! Every wait drains the CQ as far as the caller's `max` allows (what is left stays in the CQ
//! for the next turn). When the kernel flags an overflow (`IORING_SQ_CQ_OVERFLOW`; it keeps the
//! completions, `IORING_FEAT_NODROP` is required), the selector enters again with `GETEVENTS`
//! to flush them and reaps again. A non-blocking `select` with nothing to submit, no deferred
//! task work (`IORING_SQ_TASKRUN`) and no overflow costs no syscall at all.
//!
//! # Readiness
//!
//! A registration is one multishot `POLL_ADD` for its interest plus `POLLRDHUP`. Such a poll
//! reports the fd's state once at arming if it is ready, then once per wake-up of the fd, each
//! completion carrying the mask at that time — what an edge-triggered epoll registration
//! reports, so the readiness words and ticks of the driver see the same. A completion without
//! `IORING_CQE_F_MORE` ends the poll: it is armed again (a CQ overflow or a cancellation we did
//! not ask for ends multishot polls). A poll the kernel refuses (`EBADF`, …) reports every
//! readiness bit, so the next operation meets the fd's real error.
//!
//! `user_data` holds a kind tag and the index and generation of a slot in the owner's poll
//! table, which keeps the driver's token: a re-registration gets a new slot, so it is never
//! confused with the poll it replaces. Deregistration cancels the poll (`ASYNC_CANCEL` by
//! `user_data`) and keeps its slot, marked cancelling, until the final completion; events of a
//! cancelling poll are dropped, and the driver drops events of stale tokens by generation.
//! An fd closed and its number reused by a new registration gets a new slot with a new
//! generation; the old poll's completions name the old slot.
//!
//! The [`Registry`] answers like `epoll_ctl` does, at once: `EEXIST` for an fd registered
//! twice, `ENOENT` for one not registered, `EPERM` for a regular file or a directory (they
//! cannot be polled), `EBADF` for a closed fd.
//!
//! **A pending poll holds a reference to its file**: closing an fd does not release the socket
//! (no FIN, no end of stream for the peer) while a poll on it is in flight. So deregistration
//! cancels the poll before it returns wherever it can:
//! - on the ring's issuer thread (a task dropping its own socket, the usual case):
//!   `IORING_REGISTER_SYNC_CANCEL` by file, then an enter with `GETEVENTS` that runs the
//!   deferred completion and drops the reference;
//! - from another thread while the owner is parked: the owner is woken, submits the
//!   cancellation at once, and the deregistering thread waits for that (at most 5 ms);
//! - from another thread while the owner runs: not waited for; the owner submits the
//!   cancellation at its next turn (waiting stalled the closing worker: with both workers busy
//!   closing connections, a millisecond of spinning per close, a 4× worse p99).
//!
//! Otherwise the cancellation is submitted at the owner's next turn, and the peer sees the
//! close only then (soon while it runs; late if it is busy with a long task). While nobody turns the reactor (a
//! current-thread runtime outside `block_on`, deregistered from another thread), that is the
//! next `block_on` or the driver's drop (the ring goes with the driver, not with the last
//! handle). This is the one observable difference from epoll.
//!
//! # Fast paths
//!
//! With the receive fast path on, a stream registered for it gets a multishot receive into the
//! ring's provided buffers instead of read readiness, and with the accept fast path a listener
//! gets a multishot accept; `polls.rs` says what their completions do, `bufs.rs` holds the
//! buffers, and the queues they fill are `crate::io::ReadAhead` and `crate::io::AcceptQueue`.
//! If the kernel refuses the buffer group, streams are polled as usual (one warning).
//!
//! # Registrations from other threads
//!
//! Any thread may register on any reactor (the listener hand-off, spreading connections to
//! other workers): the operation goes into the reactor's inbox, which the owner drains at the
//! start of every `select`; the owner is woken (an eventfd write) only if it is blocked in the
//! ring's wait. See `inbox.rs` for the protocol. Operations from one thread keep their order,
//! so a deregistration and the registration of a reused fd number apply in the order made.
//!
//! # What I/O stealing becomes
//!
//! Nothing: a ring cannot be reaped from another thread ([`Capabilities::stealing`] is
//! `false`, [`Registry::steal`](crate::sys::Registry::steal) returns no events). The events of a
//! descheduled worker wait in its CQ until it runs again; its *tasks* can still be stolen by
//! idle workers through the executor's run queues.
//!
//! # Waiting, waking and min_wait
//!
//! A wait is one `io_uring_enter(GETEVENTS | EXT_ARG)` with a nanosecond `timespec`, so
//! timeouts are precise. The wake handle is an eventfd watched by a multishot poll;
//! [`Registry::wake`](crate::sys::Registry::wake) marks the wake as the driver's and writes the eventfd (the driver writes
//! it only if the owner is parked). An inbox wake-up writes the same eventfd but reports no
//! event: the selector submits the new operations and waits on for the rest of its timeout.
//!
//! With `IORING_FEAT_MIN_TIMEOUT` (Linux 6.12) the [min_wait](crate::min_wait) window is the
//! kernel's (`min_wait_usec`): the driver asks for as many completions as it has room for
//! (`want`), the kernel holds the wait until `want` arrived or `min_wait` has passed since
//! the wait's *entry* with at least one completion; with none by then, the first one ends the
//! wait. That is weir's window (entered at `t0`, return on a full batch, or on at least one
//! event once `t0 + min_wait` has passed), in one syscall instead of three. A window only
//! exists with `want > 1` (room for one event means return at the first). The window is capped
//! at the wait's timeout, since the kernel lets a min_wait longer than the timeout override it.
//! Completions that are not events (cancellations, a wake of the inbox) count toward `want`,
//! which can only end a window early. One difference from the emulation: a wake-up of the
//! driver that arrives inside the window, before any I/O, ends the wait at the window's end
//! (at most `min_wait` later), not at once, since the kernel cannot be told it is special.
//! Without `IORING_FEAT_MIN_TIMEOUT` the window is built on `select` like on epoll.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::epoll::interest_to_poll;
use super::{Capabilities, Event, SysConfig};
use crate::Interest;
use crate::ahead::{AcceptQueue, Ahead, ReadAhead, SourceKind};

mod bufs;
mod inbox;
mod napi;
mod polls;
mod ring;
mod user_data;
mod wait;

pub(crate) use napi::NapiParams;

use inbox::Inbox;
use polls::Polls;
use ring::{Ring, Sizes};

/// Default SQ size; the CQ gets four times as many entries.
const SQ_ENTRIES: u32 = 256;

/// A registration request for the owner.
#[derive(Debug)]
enum Op {
    Register {
        fd: RawFd,
        token: u64,
        mask: u32,
        /// A fast path: bytes (connections) go into this queue instead of a read-readiness
        /// poll.
        queue: Ahead,
    },
    /// A reader drained the paused queue of `fd`.
    ResumeAhead {
        fd: RawFd,
    },
    Reregister {
        fd: RawFd,
        token: u64,
        mask: u32,
    },
    /// `seq`: 0 when the issuer's thread cancelled the poll itself; otherwise the number of
    /// this remote deregistration, published in `Registry::deregs_done` once the
    /// cancellation has run.
    Deregister {
        fd: RawFd,
        seq: u64,
    },
}

/// See `Registry::issuer`.
struct Issuer {
    /// `None` until the ring is enabled (nothing was submitted yet).
    thread: Option<ThreadId>,
    /// A duplicate of the ring's fd; `None` once the selector is dropped (so that the ring,
    /// and the files its polls hold, are released with it).
    ring: Option<OwnedFd>,
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

/// The shared half: the inbox of registrations, the wake handle.
pub(crate) struct Registry {
    /// Wake handle, watched by a multishot poll on the ring.
    eventfd: OwnedFd,
    inbox: Inbox<Op>,
    /// Registered fds, for `epoll_ctl`'s immediate errors, each with whether it is on a fast
    /// path; ops are pushed while it is locked, so the inbox's order is the order of these
    /// checks.
    fds: Mutex<HashMap<RawFd, bool>>,
    /// The receive fast path is on (asked for, and the kernel took the buffer ring).
    recv_multishot: bool,
    /// The accept fast path is on.
    accept_multishot: bool,
    /// Set by [`wake`](crate::sys::Registry::wake): the next wake-handle completion is the driver's wake-up.
    woken: AtomicBool,
    /// The ring's issuer thread (none before the ring is enabled) and a duplicate of the
    /// ring's fd: a deregistration on the issuer's thread cancels the fd's poll at once (see
    /// `deregister`), and kernel busy poll is registered from there (see `set_napi`).
    issuer: Arc<Mutex<Issuer>>,
    /// Kernel busy poll (`IORING_REGISTER_NAPI`) as last asked for, and whether the owner must
    /// still apply it.
    napi: Mutex<(Option<NapiParams>, bool)>,
    /// Remote deregistrations pushed (numbered from 1, under `fds`' lock).
    deregs_pushed: std::sync::atomic::AtomicU64,
    /// The highest remote deregistration whose cancellation the owner has run.
    deregs_done: std::sync::atomic::AtomicU64,
}

/// The owner's half: the ring and its poll table.
pub(crate) struct Selector {
    /// Declared before `bufs`: the ring is closed before its receives' buffers are freed.
    ring: Ring,
    /// The receive fast path's provided buffers (when it is on).
    bufs: Option<bufs::BufRing>,
    polls: Polls,
    sizes: Sizes,
    /// Drained inbox operations (reused buffer).
    ops: Vec<Op>,
    /// Has the first `select` enabled the ring?
    enabled: bool,
    overflow_flushes: u64,
    migrations: u64,
    /// Shared with the registry; cleared when the selector is dropped.
    issuer: Arc<Mutex<Issuer>>,
}

impl Drop for Selector {
    fn drop(&mut self) {
        // Close the registry's duplicate too: the ring (and every file its polls hold) goes
        // with the selector, not with the last handle.
        let mut issuer = self.issuer.lock();
        issuer.ring = None;
        issuer.thread = None;
    }
}

/// What a test may check of an io_uring reactor's insides.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UringDebug {
    /// The ring's fd.
    pub ring_fd: RawFd,
    /// Poll slots in use (armed, cancelling, failed).
    pub slots: usize,
    /// Enters that flushed completions the kernel kept aside on CQ overflow.
    pub overflow_flushes: u64,
    /// Polls armed again after they ended on their own.
    pub rearms: u64,
    /// Rings rebuilt because the owner moved threads.
    pub migrations: u64,
}

/// Fault injection and introspection for tests. Set on the thread that builds the driver,
/// before `Driver::new`.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UringTestHooks {
    /// SQ entries (0: default).
    pub sq_entries: u32,
    /// CQ entries (0: four times the SQ); a tiny CQ forces the overflow path.
    pub cq_entries: u32,
}

thread_local! {
    static HOOKS: std::cell::Cell<UringTestHooks> = const {
        std::cell::Cell::new(UringTestHooks { sq_entries: 0, cq_entries: 0 })
    };
}

/// Sets the test hooks of drivers built on this thread from now on.
#[doc(hidden)]
pub fn set_test_hooks(hooks: UringTestHooks) {
    HOOKS.with(|h| h.set(hooks));
}

fn sizes() -> Sizes {
    let hooks = HOOKS.with(std::cell::Cell::get);
    let sq = if hooks.sq_entries == 0 {
        SQ_ENTRIES
    } else {
        hooks.sq_entries
    };
    let cq = if hooks.cq_entries == 0 {
        (sq * 4).max(1024)
    } else {
        hooks.cq_entries
    };
    Sizes { sq, cq }
}

/// A close-on-exec duplicate of `fd`.
fn dup(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) takes no pointers; the result is checked before use.
    let fd = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
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
        if let Err(e) = super::signal_eventfd(std::os::fd::AsFd::as_fd(&self.eventfd)) {
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

impl super::Registry for Registry {
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
            return super::Registry::register(self, fd, token, interest).map(|()| Ahead::None);
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

    /// Marks the wake-up as the driver's and writes the eventfd: the ring's wait returns with a
    /// [`WAKE_TOKEN`](super::WAKE_TOKEN) event.
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

impl super::Selector for Selector {
    type Registry = Registry;

    const CAPABILITIES: Capabilities = Capabilities {
        // The enter's `timespec`.
        precise_timeouts: true,
        // `min_wait_usec`, on kernels with IORING_FEAT_MIN_TIMEOUT (see `native_window`).
        native_min_wait: true,
        // Through the inbox.
        remote_registration: true,
        // Only the issuer may reap.
        stealing: false,
    };

    fn new(cfg: &SysConfig) -> io::Result<(Selector, Registry)> {
        let sizes = sizes();
        let mut ring = Ring::new(sizes, true)?;
        let bufs = if cfg.recv_multishot {
            recv_buffers(&ring)
        } else {
            None
        };
        // SAFETY: eventfd takes no pointers; the result is checked before use.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `efd` was just returned by the kernel and is owned by nobody else.
        let eventfd = unsafe { OwnedFd::from_raw_fd(efd) };
        ring.push(polls::wake_poll(eventfd.as_raw_fd()));
        let issuer = Arc::new(Mutex::new(Issuer {
            thread: None,
            ring: Some(dup(ring.fd())?),
        }));
        let registry = Registry {
            eventfd,
            inbox: Inbox::new(),
            fds: Mutex::new(HashMap::new()),
            recv_multishot: bufs.is_some(),
            accept_multishot: cfg.accept_multishot,
            woken: AtomicBool::new(false),
            issuer: issuer.clone(),
            napi: Mutex::new((None, false)),
            deregs_pushed: std::sync::atomic::AtomicU64::new(0),
            deregs_done: std::sync::atomic::AtomicU64::new(0),
        };
        let selector = Selector {
            ring,
            bufs,
            polls: Polls::default(),
            sizes,
            ops: Vec::new(),
            enabled: false,
            overflow_flushes: 0,
            migrations: 0,
            issuer,
        };
        Ok((selector, registry))
    }

    fn precise(&self) -> bool {
        true
    }

    fn select(
        &mut self,
        registry: &Registry,
        out: &mut Vec<Event>,
        max: usize,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        self.wait(registry, out, max, timeout, None)
    }
}

/// The provided buffers of the receive fast path, registered on `ring` (not enabled yet); `None`
/// with one warning per process when the kernel refuses them (reads then use the socket).
fn recv_buffers(ring: &Ring) -> Option<bufs::BufRing> {
    let built = bufs::BufRing::new().and_then(|mut b| {
        // SAFETY: a new ring, which never had the group.
        unsafe { b.register(ring.inner()) }.map(|()| b)
    });
    match built {
        Ok(b) => Some(b),
        Err(e) => {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                tracing::warn!(
                    target: "weir::reactor",
                    error = %e,
                    "io_uring receive fast path unavailable (provided-buffer ring refused); \
                     streams are polled for readiness instead"
                )
            });
            None
        }
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
