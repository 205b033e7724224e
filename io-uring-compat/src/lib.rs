//! io_uring as a readiness poller: one ring per owner thread, with the poller's contract of
//! an edge-triggered epoll — register an fd under a token, wait for events, wake the waiter
//! from another thread — and what the ring adds: timeouts to the nanosecond, the kernel's own
//! min_wait window, and two opt-in fast paths that receive a stream's bytes, or accept a
//! listener's connections, ahead of the program.
//!
//! weir's reactor uses it as its io_uring backend; nothing in it knows of weir's reactor.
//!
//! # The API
//!
//! - [`probe()`]: does this kernel offer what the crate needs? Asked once per process, the
//!   refusal named ([`probe::Unavailable`]).
//! - [`Selector::new`] builds both halves of a ring from a [`Config`]: the [`Selector`], which
//!   only the thread that waits uses ([`Selector::select`], [`Selector::select_window`] with
//!   a min_wait window), and the [`Registry`], which any thread may use to register, deregister
//!   and wake ([`Registry::wake`]).
//! - A wait appends [`Event`]s: a token and its [`Ready`] bits, or [`WAKE_TOKEN`].
//! - [`Registry::register_ahead`] registers a socket whose reads (accepts) the caller makes
//!   through an [`Ahead`] first: with a fast path on, the ring fills its queue.
//!
//! | file | job |
//! |---|---|
//! | `lib.rs` | the owner's half ([`Selector`]), building both halves, what a turn applies |
//! | `registry.rs` | the shared half ([`Registry`]): registrations from any thread, deregistration, wake-ups |
//! | `wait.rs` | one wait of the owner: drain the inbox, enter, reap; replacing a ring |
//! | `ring.rs` | building the ring, queueing submissions, the one `io_uring_enter` of a wait, teardown |
//! | `polls.rs` | the owner's table of requests: what each completion means, re-arm, cancellation |
//! | `inbox.rs` | operations from other threads and the wake-up protocol (loom-modelled) |
//! | `user_data.rs` | what a request's `user_data` encodes |
//! | `bufs.rs` | the provided buffers of the receive fast path |
//! | `ahead/` | the fast paths' queues, the one state of a fast-path request, and [`Ahead`] |
//! | `probe.rs` | the probe, once per process |
//! | `napi.rs` | kernel busy poll on a ring |
//! | `event.rs` | [`Event`], [`Ready`] |
//! | `sys.rs` | the plain syscalls of the shared half: pollable?, which socket, the eventfd write |
//!
//! # The ring
//!
//! One ring per [`Selector`], set up with `IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN |
//! COOP_TASKRUN | TASKRUN_FLAG`, not inherited by `fork` (`MADV_DONTFORK`), with a CQ of four
//! times the SQ (at least 1024 entries) for multishot traffic. Only the owner submits
//! and reaps; with `DEFER_TASKRUN` the kernel posts completions only while the owner enters
//! with `GETEVENTS`, so every wait is one enter that submits what is queued and collects.
//!
//! A single issuer is the thread that *enabled* the ring. A selector is built on one thread
//! and may be moved to another (a runtime builds its reactors before it starts its workers,
//! and a worker may move threads): the ring is therefore built disabled
//! (`IORING_SETUP_R_DISABLED`, so that [`Selector::new`] still reports `EPERM`/`ENOSYS`), on a
//! short-lived thread of its own, and enabled by the first `select`, on the thread that waits.
//!
//! **Closing a ring interrupts the threads that used it.** The kernel tears a closed ring down
//! in a worker, which queues task work with `TWA_SIGNAL` on every thread holding an io_uring
//! context for it (its creator and every thread that submitted to it); a blocking socket call
//! with a receive timeout on such a thread then fails with `EINTR`. So no thread but the
//! issuer ever gets such a context, and dropping the selector cancels and reaps every request
//! on the issuer's thread, closes the ring and waits until the kernel has finished with it
//! (`ring.rs`): about 36 ms per ring, spent in the drop. A selector about to move threads is
//! left by its thread first ([`Selector::leave_thread`]): the same
//! teardown there, and a new ring, not enabled yet, with every live poll queued on it, which
//! the next `select` enables wherever it runs. Should the owner move threads without it, the
//! kernel refuses its enter (`EEXIST`): the selector then builds a new ring on the new thread
//! and arms every live poll on it again (the old ring is dropped on a thread of its own, so
//! the owner does not wait for its teardown), and the old thread gets the old ring's task
//! work (weir's `block_in_place` does this: the thread running the closure may see one
//! interrupted call, `EINTR`, when the ring it left is closed). A new poll reports the fd's
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
//! reports. A completion without
//! `IORING_CQE_F_MORE` ends the poll: it is armed again (a CQ overflow or a cancellation we did
//! not ask for ends multishot polls). A poll the kernel refuses (`EBADF`, …) reports every
//! readiness bit, so the next operation meets the fd's real error.
//!
//! `user_data` holds a kind tag and the index and generation of a slot in the owner's poll
//! table, which keeps the caller's token: a re-registration gets a new slot, so it is never
//! confused with the poll it replaces. Deregistration cancels the poll (`ASYNC_CANCEL` by
//! `user_data`) and keeps its slot, marked cancelling, until the final completion; events of a
//! cancelling poll are dropped.
//! An fd closed and its number reused by a new registration gets a new slot with a new
//! generation; the old poll's completions name the old slot.
//!
//! The [`Registry`] answers like `epoll_ctl` does, at once: `EEXIST` for an fd registered
//! twice, `ENOENT` for one not registered, `EPERM` for a regular file or a directory (they
//! cannot be polled), `EBADF` for a closed fd.
//!
//! # Deregistration
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
//! close only then (soon while it runs; late if it is busy with a long task). While nobody
//! waits on the selector, that is its next wait or its drop (the ring goes with the selector,
//! not with the registry). This is the one observable difference from epoll.
//!
//! # Fast paths
//!
//! With the receive fast path on ([`Config::recv_multishot`]), a stream socket registered with
//! [`Registry::register_ahead`] gets a multishot receive into the ring's provided buffers
//! instead of read readiness; with the accept fast path ([`Config::accept_multishot`]) a
//! listener gets a multishot accept. The owner copies each receive's bytes into the stream's
//! bounded queue and gives the buffer back at once (each worker's ring keeps 256 buffers of 4
//! KiB), or queues each accepted socket, and reports the source readable; the caller's reads
//! (accepts) take from the [`Ahead`] before any syscall. At a queue's high-water mark (64 KiB,
//! 64 connections) the owner cancels the request; the reader that drains the queue asks the
//! owner, through the inbox, to arm it again. `polls.rs` says what their completions do, and
//! `ahead/` the one state a request is in. If the kernel refuses the buffer group, streams are
//! polled as usual (one warning).
//!
//! **Why they stay, off by default.** Measured against the readiness ring (weir's benchmark
//! suite, `bench/README.md`, medians of five rounds on a 2-vCPU VM):
//! - the receive path removes the `recvfrom` of every request (2.03 → 1.09 syscalls per HTTP
//!   request), but the kernel runs the same TCP receive in task work instead, and the bytes are
//!   copied once more. Pinned to one core the two tie (24.3 against 24.0 µs of CPU per request
//!   at 30k requests/s; 72.2k against 72.0k requests/s saturated) and connection churn costs 7 %
//!   more CPU. Unpinned, with two workers sharing the cores with the load, the kernel time it
//!   saves goes to the rest: 1.19–1.25× the requests/s and 17–20 % less CPU per request, in two
//!   runs — the only io_uring-specific win, and beyond the ±10 % run-to-run noise;
//! - the accept path removes the `accept4` that ends each batch with `EAGAIN`: 5 % less CPU and
//!   9 % more requests/s under connection churn, the same sign in two runs but at the edge of
//!   the noise; nothing under keep-alive.
//!
//! Neither wins the pinned cost comparison, and both change what a program sees: bytes
//! received ahead are not in the socket (a reader of the raw fd misses them; giving the fd back
//! needs [`Ahead::detach`] and [`Ahead::take_all`]), connections are established whether or
//! not the program accepts, and each ring holds 1 MiB of buffers. So the receive path stays
//! for the unpinned servers it helps, and the accept path with it, since it costs little
//! beside it (the same slot, the same [`Ahead`], the same state; only its queue and its
//! completion are its own); both are off unless asked for. Removing the accept path would be
//! the first cut if a pinned-and-unpinned rerun shows its churn gain to be noise.
//!
//! Writes stay the caller's `send(2)`: a send the ring queued would have to report success
//! before the kernel took the bytes.
//!
//! # Registrations from other threads
//!
//! Any thread may register on any ring (weir hands listeners off and spreads connections to
//! other workers): the operation goes into the ring's inbox, which the owner drains at the
//! start of every `select`; the owner is woken (an eventfd write) only if it is blocked in the
//! ring's wait. See `inbox.rs` for the protocol. Operations from one thread keep their order,
//! so a deregistration and the registration of a reused fd number apply in the order made.
//!
//! # One issuer
//!
//! A ring cannot be reaped from another thread: the events of a descheduled owner wait in its
//! CQ until it runs again. (weir's I/O stealing, which an idle worker does on a peer's epoll,
//! does not exist on io_uring; the peer's *tasks* can still be stolen, and for an owner stuck
//! in one task weir's monitor thread asks `poll(2)` about the fds its tasks wait on, which
//! needs no ring.)
//!
//! # Waiting, waking and min_wait
//!
//! A wait is one `io_uring_enter(GETEVENTS | EXT_ARG)` with a nanosecond `timespec`, so
//! timeouts are precise. The wake handle is an eventfd watched by a multishot poll;
//! [`Registry::wake`] marks the wake as the caller's and writes the eventfd (weir's reactor
//! calls it only if the owner is parked). An inbox wake-up writes the same eventfd but reports
//! no event: the selector submits the new operations and waits on for the rest of its timeout.
//!
//! With `IORING_FEAT_MIN_TIMEOUT` (Linux 6.12) a min_wait window is the kernel's
//! (`min_wait_usec`, [`Selector::select_window`]): the selector asks for as many completions as
//! it has room for
//! (`want`), the kernel holds the wait until `want` arrived or `min_wait` has passed since
//! the wait's *entry* with at least one completion; with none by then, the first one ends the
//! wait. That is weir's min_wait window (entered at `t0`, return on a full batch, or on at
//! least one event once `t0 + min_wait` has passed), in one syscall instead of three. A window only
//! exists with `want > 1` (room for one event means return at the first). The window is capped
//! at the wait's timeout, since the kernel lets a min_wait longer than the timeout override it.
//! Completions that are not events (cancellations, a wake of the inbox) count toward `want`,
//! which can only end a window early. One difference from a window built in userspace: a
//! wake-up that arrives inside the window, before any I/O, ends the wait at the window's end
//! (at most `min_wait` later), not at once, since the kernel cannot be told it is special.
//! Without `IORING_FEAT_MIN_TIMEOUT` ([`Selector::native_window`] is `false`) the caller builds
//! its window on [`Selector::select`], as on epoll.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg(target_os = "linux")]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

mod ahead;
mod bufs;
mod event;
mod inbox;
mod napi;
mod polls;
pub mod probe;
mod registry;
mod ring;
mod sys;
mod user_data;
mod wait;

pub use ahead::Ahead;
pub use ahead::accept_queue::ACCEPT_HIGH_WATER;
pub use ahead::read_ahead::{HIGH_WATER, LOW_WATER};
pub use event::{Event, Ready, WAKE_TOKEN};
pub use napi::NapiParams;
pub use probe::probe;
pub use registry::Registry;

use ahead::Queue;
use polls::Polls;
use registry::Issuer;
use ring::{Ring, Sizes};

/// How a ring is built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// SQ entries; 0: 256.
    pub sq_entries: u32,
    /// CQ entries; 0: four times the SQ, at least 1024. (A tiny CQ makes the kernel keep
    /// completions aside on overflow, which the selector then flushes.)
    pub cq_entries: u32,
    /// The receive fast path: stream sockets registered with
    /// [`Registry::register_ahead`] get a multishot receive into provided buffers (see the
    /// [crate docs](crate#fast-paths)).
    pub recv_multishot: bool,
    /// The accept fast path: listening sockets registered with [`Registry::register_ahead`]
    /// get a multishot accept.
    pub accept_multishot: bool,
}

impl Config {
    fn sizes(&self) -> Sizes {
        let sq = if self.sq_entries == 0 {
            256
        } else {
            self.sq_entries
        };
        let cq = if self.cq_entries == 0 {
            (sq * 4).max(1024)
        } else {
            self.cq_entries
        };
        Sizes { sq, cq }
    }
}

/// An operation for the owner, from the [`Registry`] (any thread) through the inbox.
#[derive(Debug)]
enum Op {
    Register {
        fd: RawFd,
        token: u64,
        mask: u32,
        /// Read ahead: bytes (connections) go into this queue instead of a read-readiness
        /// poll.
        ahead: Option<Queue>,
    },
    /// A reader drained the stopped queue of `fd`.
    Resume {
        fd: RawFd,
    },
    Reregister {
        fd: RawFd,
        token: u64,
        mask: u32,
    },
    /// `seq`: 0 when the issuer's thread cancelled the poll itself; otherwise the number of
    /// this remote deregistration, published in `Shared::deregs_done` once the cancellation
    /// has run.
    Deregister {
        fd: RawFd,
        seq: u64,
    },
    /// A lossless deregistration from another thread: the owner stops the fd's receive and
    /// reaps its completions into the queue before it publishes `seq` in
    /// `Shared::deregs_done`.
    Detach {
        fd: RawFd,
        seq: u64,
    },
}

/// What the ring's issuer touches: the ring, its buffers and its poll table. The owner holds it
/// (locked) for each wait; a lossless deregistration on the issuer's thread, between two waits,
/// takes it through the registry ([`Ahead::detach`]).
struct Core {
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

/// The owner's half of a ring: the ring and its table of requests. Only the thread that waits
/// uses it; it may move to another thread between waits ([`leave_thread`](Self::leave_thread)
/// first, to leave nothing of the ring behind).
pub struct Selector {
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

impl std::fmt::Debug for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Selector")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
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
        // with the selector, not with the registry. Then the ring itself goes, with `core`
        // (the registry holds it only weakly, and only under the issuer's lock).
        let mut issuer = self.issuer.lock();
        issuer.ring = None;
        issuer.thread = None;
        issuer.core = std::sync::Weak::new();
    }
}

/// What a selector has done, for tests and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// The ring's fd.
    pub ring_fd: RawFd,
    /// Slots of the request table in use (armed, cancelling, failed).
    pub slots: usize,
    /// Enters that flushed completions the kernel kept aside on CQ overflow.
    pub overflow_flushes: u64,
    /// Requests armed again after they ended on their own.
    pub rearms: u64,
    /// Rings rebuilt because the owner moved threads.
    pub migrations: u64,
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

impl Selector {
    /// Builds a ring (not enabled yet: the first wait enables it on its thread) and both of
    /// its halves, with the wake handle's poll queued.
    ///
    /// Does not ask the [`probe()`]; a caller that wants a refusal named asks it first.
    ///
    /// # Errors
    /// The kernel's refusal of the ring (`ENOSYS`, `EPERM`, `EINVAL`; `Unsupported` for a
    /// missing feature), or a resource error (`EMFILE`, `ENOMEM`).
    pub fn new(config: &Config) -> io::Result<(Selector, Registry)> {
        let sizes = config.sizes();
        let mut ring = Ring::new(sizes)?;
        let bufs = if config.recv_multishot {
            bufs::BufRing::for_ring(&ring)
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
        let registry = Registry::new(eventfd, issuer, recv, config.accept_multishot);
        Ok((selector, registry))
    }

    /// Appends events to `out`, blocking up to `timeout` if none are ready (`None` blocks until
    /// an event or a wake-up, `Some(ZERO)` never blocks), and returns how many it appended: at
    /// most `max - out.len()`. The timeout is honoured to the nanosecond. `EINTR` is zero
    /// events. `registry` is the half built with this selector.
    ///
    /// # Errors
    /// The ring's enter failing for good (a signal or a full CQ is not an error).
    pub fn select<E: From<Event>>(
        &mut self,
        registry: &Registry,
        out: &mut Vec<E>,
        max: usize,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        self.wait(registry, out, max, timeout, None)
    }

    /// [`select`](Self::select) whose min_wait `window` the kernel holds: it returns once the
    /// batch is full, or once `window` has passed since the call with at least one completion
    /// in (see the [crate docs](crate#waiting-waking-and-min_wait)). Only where
    /// [`native_window`](Self::native_window) says so; elsewhere a plain `select`.
    ///
    /// # Errors
    /// As [`select`](Self::select).
    pub fn select_window<E: From<Event>>(
        &mut self,
        registry: &Registry,
        out: &mut Vec<E>,
        max: usize,
        timeout: Option<Duration>,
        window: Duration,
    ) -> io::Result<usize> {
        let window = self.native_window().then_some(window);
        self.wait(registry, out, max, timeout, window)
    }

    /// What this selector has done.
    pub fn stats(&self) -> Stats {
        let core = self.core.lock();
        Stats {
            ring_fd: core.ring.fd(),
            slots: core.polls.len(),
            overflow_flushes: self.overflow_flushes,
            rearms: core.polls.rearms(),
            migrations: self.migrations,
        }
    }
}
