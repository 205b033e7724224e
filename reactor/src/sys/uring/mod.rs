//! The io_uring backend: readiness through multishot polls on one ring per reactor, native
//! min_wait windows, an inbox for registrations from other threads.
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | the owner's half ([`Selector`]) and building both halves |
//! | `registry.rs` | the shared half ([`Registry`]): registrations from any thread, deregistration, wake-ups |
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
//! (`IORING_SETUP_R_DISABLED`, so that `Driver::new` still reports `EPERM`/`ENOSYS`), on a
//! short-lived thread of its own, and enabled by the first `select`, on the thread that waits.
//!
//! **Closing a ring interrupts the threads that used it.** The kernel tears a closed ring down
//! in a worker, which queues task work with `TWA_SIGNAL` on every thread holding an io_uring
//! context for it (its creator and every thread that submitted to it); a blocking socket call
//! with a receive timeout on such a thread then fails with `EINTR`. So no thread but the
//! issuer ever gets such a context, and dropping the selector cancels and reaps every request
//! on the issuer's thread, closes the ring and waits until the kernel has finished with it
//! (`ring.rs`): about 36 ms per reactor, spent in the drop. A driver about to move threads is
//! left by its thread first ([`Driver::leave_thread`](crate::Driver::leave_thread)): the same
//! teardown there, and a new ring, not enabled yet, with every live poll queued on it, which
//! the next `select` enables wherever it runs. Should the owner move threads without it, the
//! kernel refuses its enter (`EEXIST`): the selector then builds a new ring on the new thread
//! and arms every live poll on it again (the old ring is dropped on a thread of its own, so
//! the owner does not wait for its teardown), and the old thread gets the old ring's task
//! work. That is what `block_in_place` does: the thread running the closure may see one
//! interrupted call (`EINTR`) when the ring it left is closed. A new poll reports the fd's
//! state at once, so no readiness is lost in the move.
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
//! buffers, and the queues they fill are `crate::ahead::ReadAhead` and
//! `crate::ahead::AcceptQueue` (`reactor/src/ahead/`).
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

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::{Capabilities, Event, SysConfig};
use crate::ahead::Ahead;

mod bufs;
mod inbox;
mod napi;
mod polls;
mod registry;
mod ring;
mod user_data;
mod wait;

pub(crate) use napi::NapiParams;

use polls::Polls;
use registry::Issuer;
pub(crate) use registry::Registry;
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
    /// A lossless deregistration from another thread: the owner stops the fd's receive and
    /// reaps its completions into the queue before it publishes `seq` in
    /// `Registry::deregs_done`.
    Detach {
        fd: RawFd,
        seq: u64,
    },
}

/// What the ring's issuer touches: the ring, its buffers and its poll table. The owner holds it
/// (locked) for each wait; a lossless deregistration on the issuer's thread, between two waits,
/// takes it through the registry ([`Registry::detach`](crate::sys::Registry::detach)).
pub(super) struct Core {
    /// Declared before `bufs`: the ring is closed (and its teardown waited for) before its
    /// receives' buffers are freed.
    ring: Ring,
    /// The receive fast path's provided buffers (when it is on).
    bufs: Option<bufs::BufRing>,
    polls: Polls,
    /// Events reaped outside a wait (a lossless deregistration, a ring torn down by
    /// `leave_thread`), handed out by the next wait.
    pending: Vec<Event>,
}

/// The owner's half: the ring and its poll table.
pub(crate) struct Selector {
    core: Arc<Mutex<Core>>,
    sizes: Sizes,
    /// Drained inbox operations (reused buffer).
    ops: Vec<Op>,
    overflow_flushes: u64,
    migrations: u64,
    /// Shared with the registry; cleared when the selector is dropped.
    issuer: Arc<Mutex<Issuer>>,
    /// The registry's wake handle, for the wake poll of a rebuilt ring.
    eventfd: RawFd,
}

impl Drop for Selector {
    fn drop(&mut self) {
        let mut core = self.core.lock();
        // Cancel and reap every request first (on the issuer's thread; elsewhere the kernel
        // cancels them): the bytes its receives took go to their queues, the sockets its
        // accepts made to theirs, and the teardown finds nothing to do.
        if self.issuer.lock().is_current() {
            core.cancel_and_reap(self.eventfd);
        }
        // Close the registry's duplicate too: the ring (and every file its polls hold) goes
        // with the selector, not with the last handle. Then the ring itself goes, with `core`
        // (the registry holds it only weakly, and only under the issuer's lock).
        let mut issuer = self.issuer.lock();
        issuer.ring = None;
        issuer.thread = None;
        issuer.core = std::sync::Weak::new();
    }
}

/// What a test may check of an io_uring reactor's insides.
#[cfg(feature = "test-hooks")]
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
#[cfg(feature = "test-hooks")]
#[derive(Clone, Copy, Debug, Default)]
pub struct UringTestHooks {
    /// SQ entries (0: default).
    pub sq_entries: u32,
    /// CQ entries (0: four times the SQ); a tiny CQ forces the overflow path.
    pub cq_entries: u32,
}

#[cfg(feature = "test-hooks")]
thread_local! {
    static HOOKS: std::cell::Cell<UringTestHooks> = const {
        std::cell::Cell::new(UringTestHooks { sq_entries: 0, cq_entries: 0 })
    };
}

/// Sets the test hooks of drivers built on this thread from now on.
#[cfg(feature = "test-hooks")]
pub fn set_test_hooks(hooks: UringTestHooks) {
    HOOKS.with(|h| h.set(hooks));
}

fn sizes() -> Sizes {
    #[cfg(feature = "test-hooks")]
    let hooks = HOOKS.with(std::cell::Cell::get);
    #[cfg(feature = "test-hooks")]
    let (sq, cq) = (hooks.sq_entries, hooks.cq_entries);
    #[cfg(not(feature = "test-hooks"))]
    let (sq, cq) = (0, 0);
    let sq = if sq == 0 { SQ_ENTRIES } else { sq };
    let cq = if cq == 0 { (sq * 4).max(1024) } else { cq };
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
        let mut ring = Ring::new(sizes)?;
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
        let ring_dup = dup(ring.fd())?;
        let recv = bufs.is_some();
        let core = Arc::new(Mutex::new(Core {
            ring,
            bufs,
            polls: Polls::default(),
            pending: Vec::new(),
        }));
        let issuer = Arc::new(Mutex::new(Issuer {
            thread: None,
            ring: Some(ring_dup),
            core: Arc::downgrade(&core),
        }));
        let selector = Selector {
            core,
            sizes,
            ops: Vec::new(),
            overflow_flushes: 0,
            migrations: 0,
            issuer: issuer.clone(),
            eventfd: eventfd.as_raw_fd(),
        };
        let registry = Registry::new(eventfd, issuer, recv, cfg.accept_multishot);
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

    // The rest are this backend's own (`wait.rs`); `Selector::…` names the inherent ones.

    fn native_window(&self) -> bool {
        Selector::native_window(self)
    }

    fn select_window(
        &mut self,
        registry: &Registry,
        out: &mut Vec<Event>,
        max: usize,
        timeout: Option<Duration>,
        window: Duration,
    ) -> io::Result<usize> {
        // The kernel holds the window (see `wait.rs`).
        self.wait(registry, out, max, timeout, Some(window))
    }

    fn leave_thread(&mut self, registry: &Registry) -> io::Result<()> {
        Selector::leave_thread(self, registry)
    }

    #[cfg(feature = "test-hooks")]
    fn terminate_polls(&mut self) -> bool {
        Selector::terminate_polls(self);
        true
    }

    #[cfg(feature = "test-hooks")]
    fn uring_debug_info(&self) -> Option<UringDebug> {
        Some(Selector::debug_info(self))
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
