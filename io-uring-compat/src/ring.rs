//! The ring itself: building it with the flags the backend relies on, queueing submissions,
//! the one `io_uring_enter` of a wait, and closing it so that nothing of it outlives its drop.
//!
//! # Teardown
//!
//! Closing a ring fd does not end the ring: the kernel tears it down later, in a worker
//! (`io_ring_exit_work`), which cancels what is left and then queues task work with
//! `TWA_SIGNAL` on every thread that has an io_uring context for the ring — the thread that
//! created it and every thread that submitted to it. That task work interrupts whatever the
//! thread is blocked in: a `read` on a socket with `SO_RCVTIMEO` then fails with `EINTR`
//! (measured: about 17 ms after the close, on a thread that had dropped its ring). So:
//! - a ring is created on a short-lived thread of its own ([`Ring::new`]), which has exited
//!   (and dropped its context) before anyone uses the ring; only the thread that enables the
//!   ring ever submits to it;
//! - dropping a [`Ring`] closes it and **waits until the kernel has finished tearing it
//!   down**, so the task work has run (on the dropping thread, if it was the issuer) before the
//!   drop returns. The end is observed through a sentinel: the write end of a pipe registered
//!   as the ring's one fixed file, which the kernel releases when it frees the ring; its read
//!   end then reports `POLLHUP`. This costs about 36 ms per ring on this kernel (most of it the
//!   kernel's own wait for its references to drain), bounded by [`TEARDOWN_WAIT`].
//!
//! The ring's requests are cancelled and reaped by its owner before the drop (see
//! `Core::cancel_and_reap`), so the teardown finds nothing to cancel.

use std::collections::VecDeque;
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use io_uring::{IoUring, squeue};

/// `IORING_ENTER_GETEVENTS`.
const ENTER_GETEVENTS: u32 = 1;
/// `IORING_ENTER_EXT_ARG`.
const ENTER_EXT_ARG: u32 = 1 << 3;

/// `struct __kernel_timespec`.
#[repr(C)]
struct KernelTimespec {
    tv_sec: i64,
    tv_nsec: i64,
}

/// `struct io_uring_getevents_arg`: the argument of an enter with `IORING_ENTER_EXT_ARG`.
#[repr(C)]
struct GetEventsArg {
    sigmask: u64,
    sigmask_sz: u32,
    min_wait_usec: u32,
    ts: u64,
}

/// Sizes of a ring.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sizes {
    pub(crate) sq: u32,
    pub(crate) cq: u32,
}

/// How long dropping a ring waits for the kernel to finish tearing it down (see the
/// [module docs](self)); past it the drop returns anyway (a forked child that has not exec'd
/// yet still holds the ring's fd, for instance).
const TEARDOWN_WAIT: Duration = Duration::from_secs(2);

/// One io_uring instance and the submissions that did not fit in its SQ yet.
pub(crate) struct Ring {
    /// Dropped first, in `Drop`, then the teardown is waited for.
    ring: ManuallyDrop<IoUring>,
    /// The read end of the teardown sentinel: `POLLHUP` once the kernel has freed the ring.
    sentinel: OwnedFd,
    /// Submissions queued by the owner, moved into the SQ at the next enter (in order).
    backlog: VecDeque<squeue::Entry>,
    /// Created with `IORING_SETUP_R_DISABLED` and not enabled yet.
    disabled: bool,
    min_timeout: bool,
}

impl Ring {
    /// Builds a ring, disabled (`IORING_SETUP_R_DISABLED`): the thread that enables it
    /// ([`enable`](Self::enable)) becomes its one issuer. Single issuer, deferred task work
    /// (completions are posted only when the owner enters with `GETEVENTS`), cooperative task
    /// work with its flag, not inherited by `fork`. Built on a thread of its own that exits
    /// before this returns, so that the calling thread gets no io_uring context for the ring
    /// (see the [module docs](self)).
    ///
    /// Fails with `Unsupported` when the kernel lacks a feature the backend needs (`EXT_ARG`,
    /// `NODROP`).
    pub(crate) fn new(sizes: Sizes) -> io::Result<Ring> {
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("weir-uring-setup".into())
                .spawn_scoped(s, || Ring::build(sizes))?
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("io_uring setup thread panicked")))
        })
    }

    fn build(sizes: Sizes) -> io::Result<Ring> {
        let mut b = IoUring::builder();
        b.dontfork()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .setup_r_disabled()
            .setup_cqsize(sizes.cq.max(sizes.sq));
        let ring = b.build(sizes.sq)?;
        let p = ring.params();
        if !p.is_feature_ext_arg() || !p.is_feature_nodrop() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "io_uring lacks IORING_FEAT_EXT_ARG or IORING_FEAT_NODROP (kernel too old)",
            ));
        }
        let min_timeout = p.is_feature_min_timeout();
        let (sentinel, write_end) = pipe()?;
        // The kernel keeps its own reference to the write end until it frees the ring.
        ring.submitter().register_files(&[write_end.as_raw_fd()])?;
        drop(write_end);
        Ok(Ring {
            ring: ManuallyDrop::new(ring),
            sentinel,
            backlog: VecDeque::new(),
            disabled: true,
            min_timeout,
        })
    }

    /// `true` once [`enable`](Self::enable) has run: the enabling thread is the issuer.
    pub(crate) fn enabled(&self) -> bool {
        !self.disabled
    }

    /// Forgets the submissions not handed to the kernel yet (a ring being torn down).
    pub(crate) fn clear_backlog(&mut self) {
        self.backlog.clear();
    }

    /// Takes back a submission not handed to the kernel yet; `false` if it was submitted.
    pub(crate) fn unqueue(&mut self, user_data: u64) -> bool {
        match self
            .backlog
            .iter()
            .position(|e| e.get_user_data() == user_data)
        {
            Some(i) => {
                self.backlog.remove(i);
                true
            }
            None => false,
        }
    }

    /// Enables a ring built disabled; the calling thread becomes its one issuer.
    pub(crate) fn enable(&mut self) -> io::Result<()> {
        if self.disabled {
            self.ring.submitter().register_enable_rings()?;
            self.disabled = false;
        }
        Ok(())
    }

    /// `true` if the kernel ends a wait's min_wait window itself (`IORING_FEAT_MIN_TIMEOUT`).
    pub(crate) fn min_timeout(&self) -> bool {
        self.min_timeout
    }

    /// The CQ's size.
    pub(crate) fn cq_entries(&self) -> u32 {
        self.ring.params().cq_entries()
    }

    /// The ring's fd (for fd-leak tests and `io_uring_register` calls).
    pub(crate) fn fd(&self) -> RawFd {
        self.ring.as_raw_fd()
    }

    /// The ring, for `io_uring_register` calls.
    pub(crate) fn inner(&self) -> &IoUring {
        &self.ring
    }

    /// Queues a submission for the next enter.
    pub(crate) fn push(&mut self, entry: squeue::Entry) {
        self.backlog.push_back(entry);
    }

    /// The kernel holds completions that did not fit in the CQ (`IORING_SQ_CQ_OVERFLOW`).
    pub(crate) fn cq_overflow(&mut self) -> bool {
        self.ring.submission().cq_overflow()
    }

    /// `true` if the CQ holds completions not reaped yet.
    pub(crate) fn has_completions(&mut self) -> bool {
        !self.ring.completion().is_empty()
    }

    /// The completion queue, to reap.
    pub(crate) fn completion(&mut self) -> io_uring::CompletionQueue<'_> {
        self.ring.completion()
    }

    /// Moves the backlog into the SQ; when the SQ is full, submits it (without waiting) and
    /// goes on. Leaves what cannot be submitted now (`EBUSY`: the CQ overflowed) in the backlog.
    fn fill_sq(&mut self) -> io::Result<()> {
        while !self.backlog.is_empty() {
            {
                let mut sq = self.ring.submission();
                while let Some(e) = self.backlog.front() {
                    // SAFETY: the entries queued here are polls, cancellations and multishot
                    // receives, which point to no user memory of their own (a poll carries an
                    // fd and a mask, a cancellation a user_data value, a receive a buffer
                    // group, whose memory outlives the ring: see `bufs.rs`).
                    if unsafe { sq.push(e) }.is_err() {
                        break;
                    }
                    self.backlog.pop_front();
                }
            }
            if self.backlog.is_empty() {
                break;
            }
            match self.ring.submitter().submit() {
                Ok(_) => {}
                Err(e) if is_transient(&e) => break,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// `true` if a non-blocking enter would do nothing: nothing to submit, no deferred task
    /// work (`IORING_SQ_TASKRUN`) and no overflowed completions to flush.
    fn idle(&mut self) -> bool {
        if !self.backlog.is_empty() {
            return false;
        }
        let sq = self.ring.submission();
        sq.is_empty() && !sq.taskrun() && !sq.cq_overflow()
    }

    /// Enters with `GETEVENTS` without submitting or waiting: runs the deferred task work
    /// (posting the completions it holds) and flushes completions kept aside on overflow.
    pub(crate) fn enter_no_submit(&mut self) -> io::Result<()> {
        // SAFETY: no submission, no argument: the kernel reads no user memory.
        match unsafe {
            self.ring
                .submitter()
                .enter::<libc::sigset_t>(0, 0, ENTER_GETEVENTS, None)
        } {
            Ok(_) => Ok(()),
            Err(e) if is_transient(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Submits the queued entries and waits for `want` completions (`0`: does not wait), at
    /// most `timeout` (`None`: no limit). A non-zero `min_wait_usec` (kernels with
    /// [`min_timeout`](Self::min_timeout)) makes the kernel hold the wait that long for `want`
    /// completions, then return with whatever arrived (at least one).
    ///
    /// Returns `Ok` on a timeout, a signal or a full CQ (the caller reaps and retries).
    /// `EEXIST`: the calling thread is not the ring's issuer.
    pub(crate) fn enter(
        &mut self,
        want: u32,
        timeout: Option<Duration>,
        min_wait_usec: u32,
    ) -> io::Result<()> {
        self.fill_sq()?;
        if want == 0 && self.idle() {
            // Nothing the kernel could tell us: a non-blocking poll costs no syscall.
            return Ok(());
        }
        let ts = timeout.map(|d| KernelTimespec {
            tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(d.subsec_nanos()),
        });
        let arg = GetEventsArg {
            sigmask: 0,
            sigmask_sz: 0,
            min_wait_usec,
            ts: ts.as_ref().map_or(0, |t| t as *const KernelTimespec as u64),
        };
        let to_submit = self.ring.submission().len() as u32;
        // SAFETY: `arg` is a `struct io_uring_getevents_arg` (passed with its size, as
        // EXT_ARG requires) whose `ts` is 0 or points to `ts`, a `struct __kernel_timespec`
        // living on this frame until the call returns; the SQ entries submitted point to no
        // user memory (see `fill_sq`).
        let res = unsafe {
            self.ring.submitter().enter(
                to_submit,
                want,
                ENTER_GETEVENTS | ENTER_EXT_ARG,
                Some(&arg),
            )
        };
        match res {
            Ok(_) => Ok(()),
            Err(e) if is_transient(&e) || e.raw_os_error() == Some(libc::ETIME) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `ring` is dropped exactly once, here, and not used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.ring) };
        if !wait_hang_up(&self.sentinel, TEARDOWN_WAIT) {
            tracing::debug!(
                target: "weir::reactor",
                "io_uring ring teardown not finished after {TEARDOWN_WAIT:?}"
            );
        }
    }
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two fds into the live two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just returned by the kernel and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Waits until the pipe read end `fd` reports `POLLHUP` (every write end is closed), at most
/// `limit`. A signal or task work interrupting the wait only makes it wait again.
fn wait_hang_up(fd: &OwnedFd, limit: Duration) -> bool {
    let start = Instant::now();
    loop {
        let left = limit.saturating_sub(start.elapsed());
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: poll reads and writes one live `pollfd`.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc > 0 && pfd.revents & libc::POLLHUP != 0 {
            return true;
        }
        if rc < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
        if start.elapsed() >= limit {
            return false;
        }
    }
}

/// `struct io_uring_sync_cancel_reg`.
#[repr(C)]
struct SyncCancelReg {
    addr: u64,
    fd: i32,
    flags: u32,
    timeout: KernelTimespec,
    opcode: u8,
    pad: [u8; 7],
    pad2: [u64; 3],
}

/// `IORING_REGISTER_SYNC_CANCEL`.
const REGISTER_SYNC_CANCEL: libc::c_uint = 24;
/// `IORING_ASYNC_CANCEL_ALL | IORING_ASYNC_CANCEL_FD`.
const CANCEL_ALL_OF_FD: u32 = 1 | 2;
/// `IORING_ASYNC_CANCEL_ANY`.
const CANCEL_ANY: u32 = 1 << 2;

/// Cancels every request of the ring `ring_fd` on the file `fd` refers to, and waits (at most a
/// second) until they are gone, so that the ring no longer holds a reference to that file.
/// Only the ring's issuer may call it (deferred task work runs on the issuer).
pub(crate) fn sync_cancel_fd(ring_fd: RawFd, fd: RawFd) -> io::Result<()> {
    sync_cancel(ring_fd, fd, CANCEL_ALL_OF_FD)
}

/// Cancels every request of the ring `ring_fd` and waits (at most a second) until they are
/// gone; their final completions are in the CQ (or kept aside on overflow) when this returns.
/// Only the ring's issuer may call it.
pub(crate) fn sync_cancel_all(ring_fd: RawFd) -> io::Result<()> {
    sync_cancel(ring_fd, -1, CANCEL_ANY)
}

fn sync_cancel(ring_fd: RawFd, fd: RawFd, flags: u32) -> io::Result<()> {
    let reg = SyncCancelReg {
        addr: 0,
        fd,
        flags,
        timeout: KernelTimespec {
            tv_sec: 1,
            tv_nsec: 0,
        },
        opcode: 0,
        pad: [0; 7],
        pad2: [0; 3],
    };
    // SAFETY: IORING_REGISTER_SYNC_CANCEL reads one `struct io_uring_sync_cancel_reg` (matched
    // field by field above, 64 bytes) from the pointer, which points to a live local for the
    // whole call; `ring_fd` is an io_uring fd (an error, not undefined behaviour, otherwise).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            ring_fd,
            REGISTER_SYNC_CANCEL,
            &raw const reg,
            1 as libc::c_uint,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // The cancelled polls complete as deferred task work, which holds their file references
    // until the issuer enters with GETEVENTS: run it now (nothing is submitted or waited for).
    // SAFETY: io_uring_enter with no submissions, no wait and no argument reads no user
    // memory; `ring_fd` is an io_uring fd.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_io_uring_enter,
            ring_fd,
            0 as libc::c_uint,
            0 as libc::c_uint,
            ENTER_GETEVENTS,
            std::ptr::null::<libc::c_void>(),
            0usize,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Errors after which the caller reaps and tries again: a signal, or a CQ too full to submit.
fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINTR | libc::EBUSY | libc::EAGAIN)
    )
}
