//! The ring itself: building it with the flags the backend relies on, queueing submissions,
//! and the one `io_uring_enter` of a wait.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

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
pub(super) struct Sizes {
    pub(super) sq: u32,
    pub(super) cq: u32,
}

/// One io_uring instance and the submissions that did not fit in its SQ yet.
pub(super) struct Ring {
    ring: IoUring,
    /// Submissions queued by the owner, moved into the SQ at the next enter (in order).
    backlog: VecDeque<squeue::Entry>,
    /// Created with `IORING_SETUP_R_DISABLED` and not enabled yet.
    disabled: bool,
    min_timeout: bool,
}

impl Ring {
    /// Builds a ring: single issuer, deferred task work (completions are posted only when the
    /// owner enters with `GETEVENTS`), cooperative task work with its flag, not inherited by
    /// `fork`. `disabled`: created with `IORING_SETUP_R_DISABLED`, so that the thread which
    /// enables it ([`enable`](Self::enable)) becomes its issuer.
    ///
    /// Fails with `Unsupported` when the kernel lacks a feature the backend needs (`EXT_ARG`,
    /// `NODROP`).
    pub(super) fn new(sizes: Sizes, disabled: bool) -> io::Result<Ring> {
        let mut b = IoUring::builder();
        b.dontfork()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .setup_cqsize(sizes.cq.max(sizes.sq));
        if disabled {
            b.setup_r_disabled();
        }
        let ring = b.build(sizes.sq)?;
        let p = ring.params();
        if !p.is_feature_ext_arg() || !p.is_feature_nodrop() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "io_uring lacks IORING_FEAT_EXT_ARG or IORING_FEAT_NODROP (kernel too old)",
            ));
        }
        let min_timeout = p.is_feature_min_timeout();
        Ok(Ring {
            ring,
            backlog: VecDeque::new(),
            disabled,
            min_timeout,
        })
    }

    /// Enables a ring built disabled; the calling thread becomes its one issuer.
    pub(super) fn enable(&mut self) -> io::Result<()> {
        if self.disabled {
            self.ring.submitter().register_enable_rings()?;
            self.disabled = false;
        }
        Ok(())
    }

    /// `true` if the kernel ends a wait's min_wait window itself (`IORING_FEAT_MIN_TIMEOUT`).
    pub(super) fn min_timeout(&self) -> bool {
        self.min_timeout
    }

    /// The CQ's size.
    pub(super) fn cq_entries(&self) -> u32 {
        self.ring.params().cq_entries()
    }

    /// The ring's fd (for fd-leak tests and `io_uring_register` calls).
    pub(super) fn fd(&self) -> RawFd {
        self.ring.as_raw_fd()
    }

    /// The ring, for `io_uring_register` calls.
    pub(super) fn inner(&self) -> &IoUring {
        &self.ring
    }

    /// Queues a submission for the next enter.
    pub(super) fn push(&mut self, entry: squeue::Entry) {
        self.backlog.push_back(entry);
    }

    /// The kernel holds completions that did not fit in the CQ (`IORING_SQ_CQ_OVERFLOW`).
    pub(super) fn cq_overflow(&mut self) -> bool {
        self.ring.submission().cq_overflow()
    }

    /// `true` if the CQ holds completions not reaped yet.
    pub(super) fn has_completions(&mut self) -> bool {
        !self.ring.completion().is_empty()
    }

    /// The completion queue, to reap.
    pub(super) fn completion(&mut self) -> io_uring::CompletionQueue<'_> {
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

    /// Submits the queued entries and waits for `want` completions (`0`: does not wait), at
    /// most `timeout` (`None`: no limit). A non-zero `min_wait_usec` (kernels with
    /// [`min_timeout`](Self::min_timeout)) makes the kernel hold the wait that long for `want`
    /// completions, then return with whatever arrived (at least one).
    ///
    /// Returns `Ok` on a timeout, a signal or a full CQ (the caller reaps and retries).
    /// `EEXIST`: the calling thread is not the ring's issuer.
    pub(super) fn enter(
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

/// Cancels every request of the ring `ring_fd` on the file `fd` refers to, and waits (at most a
/// second) until they are gone, so that the ring no longer holds a reference to that file.
/// Only the ring's issuer may call it (deferred task work runs on the issuer).
pub(super) fn sync_cancel_fd(ring_fd: RawFd, fd: RawFd) -> io::Result<()> {
    let reg = SyncCancelReg {
        addr: 0,
        fd,
        flags: CANCEL_ALL_OF_FD,
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
