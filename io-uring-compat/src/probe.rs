//! Does this kernel offer what the crate's rings need? Asked once per process ([`probe()`]).
//!
//! The probe does what a [`Selector`](crate::Selector) will do, on a small ring, and keeps the
//! answer:
//!
//! 1. `io_uring_setup` with the flags of the crate's rings: `SINGLE_ISSUER`,
//!    `DEFER_TASKRUN`, `COOP_TASKRUN` and `TASKRUN_FLAG` (Linux 6.1).
//! 2. The features the crate cannot do without: `IORING_FEAT_EXT_ARG` (a wait with a
//!    timeout in one `io_uring_enter`) and `IORING_FEAT_NODROP` (no completion is lost when the
//!    CQ overflows). `IORING_FEAT_MIN_TIMEOUT` (native min_wait, Linux 6.12) is only recorded:
//!    without it a caller builds its window in userspace, as on epoll.
//! 3. The opcodes it submits, through `IORING_REGISTER_PROBE`: `POLL_ADD` and `ASYNC_CANCEL`.
//! 4. A multishot poll for real (an eventfd that is already readable must answer with
//!    `IORING_CQE_F_MORE`), then its cancellation: the flag is not covered by the opcode
//!    probe, and a kernel that lacks it (before 5.13) only says so here.
//!
//! The refusals that mean "no io_uring here" — `ENOSYS`, `EPERM`, `EINVAL`, a missing feature
//! or opcode — are kept for the life of the process and named ([`Unavailable`]): which sysctl,
//! which seccomp filter, which kernel version. Any other error (`EMFILE`, `ENOMEM`) says
//! nothing about the kernel; it is returned and not kept, so a later runtime asks again.

use std::fmt;
use std::io;
use std::sync::OnceLock;

use linux::run;

/// What a kernel that passed the probe offers beyond the minimum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Support {
    /// `IORING_FEAT_MIN_TIMEOUT`: `io_uring_enter` takes a min_wait window (Linux 6.12).
    pub min_timeout: bool,
    /// The ring's feature bits (`io_uring_params.features`), for the log.
    pub features: u32,
}

/// Why io_uring cannot be used in this process: the refusal and what it means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable {
    /// The errno behind it, if the kernel answered with one.
    pub errno: Option<i32>,
    /// Its likely cause, in words (`kernel.io_uring_disabled = 2`, a seccomp filter, …).
    pub cause: String,
}

impl Unavailable {
    /// A refusal with its errno (if any) and its cause in words.
    pub fn new(errno: Option<i32>, cause: impl Into<String>) -> Unavailable {
        Unavailable {
            errno,
            cause: cause.into(),
        }
    }

    /// The error of a build that asked for io_uring and allows no fallback.
    pub fn to_error(&self) -> io::Error {
        let kind = match self.errno {
            Some(libc::EPERM) => io::ErrorKind::PermissionDenied,
            _ => io::ErrorKind::Unsupported,
        };
        io::Error::new(
            kind,
            format!(
                "io_uring was asked for strictly (no fallback to epoll) and is unavailable: {self}"
            ),
        )
    }
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.cause)?;
        if let Some(errno) = self.errno {
            write!(f, " ({})", io::Error::from_raw_os_error(errno))?;
        }
        Ok(())
    }
}

/// The probe's kept answer.
static PROBED: OnceLock<Result<Support, Unavailable>> = OnceLock::new();

/// The probe's answer: the first call of the process runs it (a few syscalls on a ring of 8
/// entries), later calls read the kept answer.
///
/// # Errors
/// An error that says nothing about the kernel's io_uring (`EMFILE`, `ENOMEM`, …); it is not
/// kept.
pub fn probe() -> io::Result<&'static Result<Support, Unavailable>> {
    if let Some(r) = PROBED.get() {
        return Ok(r);
    }
    // On a thread of its own, which exits before this returns: the probe's rings are closed
    // there, and the kernel's teardown of a ring interrupts the threads that used it (see
    // `ring.rs`), which must not include the caller's.
    let probed = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("weir-uring-probe".into())
            .spawn_scoped(s, run)
            .map(|h| h.join())
    });
    let answer = match probed {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => return Err(io::Error::other("io_uring probe thread panicked")),
        Err(e) => return Err(e),
    };
    let answer = match answer {
        Ok(support) => Ok(support),
        Err(Failure::Refused(u)) => Err(u),
        Err(Failure::Other(e)) => return Err(e),
    };
    match &answer {
        Ok(s) => tracing::debug!(
            target: "weir::reactor",
            features = format_args!("{:#x}", s.features),
            min_timeout = s.min_timeout,
            "io_uring probe: available"
        ),
        Err(u) => {
            tracing::debug!(target: "weir::reactor", cause = %u, "io_uring probe: unavailable")
        }
    }
    // Two threads may probe at once; both answers are the kernel's, the first is kept.
    Ok(PROBED.get_or_init(|| answer))
}

enum Failure {
    /// io_uring, as the crate uses it, is not available here.
    Refused(Unavailable),
    /// Something else went wrong (resources); ask again later.
    Other(io::Error),
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure::Other(e)
    }
}

/// `true` for the errors that mean the kernel (or a filter in front of it) refuses io_uring
/// or a part of it (a caller falls back to epoll on these), rather than a lack of resources.
pub fn is_refusal(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSYS | libc::EPERM | libc::EINVAL | libc::EOPNOTSUPP)
    ) || e.kind() == io::ErrorKind::Unsupported
}

/// The likely cause of `io_uring_setup` (or [`Selector::new`](crate::Selector::new)) failing
/// with `e`.
pub fn setup_refusal(e: &io::Error) -> Unavailable {
    let errno = e.raw_os_error();
    let cause = match errno {
        Some(libc::EPERM) => match io_uring_disabled() {
            Some(2) => "io_uring is disabled for every process by the sysctl \
                        kernel.io_uring_disabled = 2"
                .to_string(),
            Some(1) => "io_uring is restricted by the sysctl kernel.io_uring_disabled = 1 to \
                        processes in kernel.io_uring_group or with CAP_SYS_ADMIN (or a seccomp \
                        filter blocks io_uring_setup)"
                .to_string(),
            _ => "io_uring_setup is blocked by a seccomp filter (the default profiles of \
                  container runtimes block io_uring)"
                .to_string(),
        },
        Some(libc::ENOSYS) => "io_uring_setup does not exist: a kernel older than 5.1, one \
                               built without CONFIG_IO_URING, or a seccomp filter answering \
                               ENOSYS"
            .to_string(),
        Some(libc::EINVAL) => "the kernel rejects the ring's setup flags (SINGLE_ISSUER, \
                               DEFER_TASKRUN and COOP_TASKRUN need Linux 6.1 or later)"
            .to_string(),
        _ if e.kind() == io::ErrorKind::Unsupported => e.to_string(),
        _ => format!("an io_uring ring could not be set up: {e}"),
    };
    // The errno is printed by `Unavailable`'s Display; don't repeat it for Unsupported.
    Unavailable::new(errno, cause)
}

/// `/proc/sys/kernel/io_uring_disabled` (Linux 6.6), if readable.
fn io_uring_disabled() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The probe itself.
mod linux {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::Duration;

    use io_uring::{IoUring, Probe, cqueue, opcode, types};

    use super::{Failure, Support, Unavailable, is_refusal, setup_refusal};

    /// The opcodes every ring submits, with the name and the first kernel of each.
    const OPCODES: [(u8, &str, &str); 2] = [
        (opcode::PollAdd::CODE, "IORING_OP_POLL_ADD", "5.1"),
        (opcode::AsyncCancel::CODE, "IORING_OP_ASYNC_CANCEL", "5.5"),
    ];

    /// Longest the probe waits for its own completions (they are immediate on a working kernel).
    const PROBE_WAIT: Duration = Duration::from_secs(1);

    pub(super) fn run() -> Result<Support, Failure> {
        let ring: IoUring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .dontfork()
            .build(8)
            .map_err(|e| {
                if is_refusal(&e) {
                    Failure::Refused(setup_refusal(&e))
                } else {
                    Failure::Other(e)
                }
            })?;
        let params = ring.params();
        let missing = |what: &str| Failure::Refused(Unavailable::new(None, what.to_string()));
        if !params.is_feature_ext_arg() {
            return Err(missing(
                "the kernel lacks IORING_FEAT_EXT_ARG (Linux 5.11): waits with a timeout",
            ));
        }
        if !params.is_feature_nodrop() {
            return Err(missing(
                "the kernel lacks IORING_FEAT_NODROP (Linux 5.5): completions kept on CQ overflow",
            ));
        }
        let mut probe = Probe::new();
        if let Err(e) = ring.submitter().register_probe(&mut probe) {
            return Err(if is_refusal(&e) {
                Failure::Refused(Unavailable::new(
                    e.raw_os_error(),
                    "the kernel lacks IORING_REGISTER_PROBE (Linux 5.6)",
                ))
            } else {
                Failure::Other(e)
            });
        }
        for (code, name, since) in OPCODES {
            if !probe.is_supported(code) {
                return Err(missing(&format!(
                    "the kernel does not support {name} (Linux {since})"
                )));
            }
        }
        // The features word is private to the crate; rebuild the bits we report.
        let features = feature_bits(params);
        let min_timeout = params.is_feature_min_timeout();
        multishot_poll(ring)?;
        Ok(Support {
            min_timeout,
            features,
        })
    }

    /// The feature bits the log reports (those the crate exposes).
    fn feature_bits(p: &io_uring::Parameters) -> u32 {
        let bits = [
            p.is_feature_single_mmap(),
            p.is_feature_nodrop(),
            p.is_feature_submit_stable(),
            p.is_feature_rw_cur_pos(),
            p.is_feature_cur_personality(),
            p.is_feature_fast_poll(),
            p.is_feature_poll_32bits(),
            p.is_feature_sqpoll_nonfixed(),
            p.is_feature_ext_arg(),
            p.is_feature_native_workers(),
            p.is_feature_resource_tagging(),
            p.is_feature_skip_cqe_on_success(),
            p.is_feature_linked_file(),
            p.is_feature_recvsend_bundle(),
            p.is_feature_min_timeout(),
        ];
        // IORING_FEAT_* bit positions of the functions above, in order.
        const POSITIONS: [u32; 15] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15];
        bits.iter()
            .zip(POSITIONS)
            .filter(|(on, _)| **on)
            .fold(0, |acc, (_, pos)| acc | 1 << pos)
    }

    /// A multishot poll on a readable eventfd must complete at once with `F_MORE`; then it is
    /// cancelled and both completions are collected, leaving the ring empty.
    fn multishot_poll(mut ring: IoUring) -> Result<(), Failure> {
        // SAFETY: eventfd takes no pointers; the result is checked before use.
        let fd = unsafe { libc::eventfd(1, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(Failure::Other(io::Error::last_os_error()));
        }
        // SAFETY: a new fd that nothing else owns.
        let efd = unsafe { OwnedFd::from_raw_fd(fd) };
        const POLL: u64 = 1;
        const CANCEL: u64 = 2;
        let poll = opcode::PollAdd::new(types::Fd(efd.as_raw_fd()), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(POLL);
        // SAFETY: the entry refers to `efd` only, which outlives the request: the request is
        // cancelled and its final completion collected below before `efd` is dropped (or the ring
        // is dropped first, which ends every request).
        unsafe { ring.submission().push(&poll) }.map_err(|_| io::Error::other("probe SQ full"))?;
        wait(&ring, 1)?;
        let first = ring.completion().next();
        match first {
            Some(c) if c.user_data() == POLL && c.result() > 0 && cqueue::more(c.flags()) => {}
            Some(c) if c.user_data() == POLL && c.result() == -libc::EINVAL => {
                return Err(Failure::Refused(Unavailable::new(
                    Some(libc::EINVAL),
                    "the kernel does not support multishot IORING_OP_POLL_ADD (Linux 5.13)",
                )));
            }
            Some(c) => {
                return Err(Failure::Refused(Unavailable::new(
                    (c.result() < 0).then_some(-c.result()),
                    format!(
                        "a multishot IORING_OP_POLL_ADD did not report readiness as expected \
                         (result {}, flags {:#x})",
                        c.result(),
                        c.flags()
                    ),
                )));
            }
            None => {
                return Err(Failure::Refused(Unavailable::new(
                    None,
                    "a multishot IORING_OP_POLL_ADD on a readable eventfd did not complete",
                )));
            }
        }
        let cancel = opcode::AsyncCancel::new(POLL).build().user_data(CANCEL);
        // SAFETY: a cancellation carries no pointers.
        unsafe { ring.submission().push(&cancel) }
            .map_err(|_| io::Error::other("probe SQ full"))?;
        wait(&ring, 2)?;
        let mut poll_ended = false;
        for c in ring.completion() {
            if c.user_data() == POLL && !cqueue::more(c.flags()) {
                poll_ended = true;
            }
        }
        if !poll_ended {
            return Err(Failure::Refused(Unavailable::new(
                None,
                "IORING_OP_ASYNC_CANCEL did not end a multishot poll",
            )));
        }
        drop(ring);
        drop(efd);
        Ok(())
    }

    /// Submits and waits for `want` completions, at most [`PROBE_WAIT`].
    fn wait(ring: &IoUring, want: usize) -> Result<(), Failure> {
        let ts = types::Timespec::from(PROBE_WAIT);
        let args = types::SubmitArgs::new().timespec(&ts);
        match ring.submitter().submit_with_args(want, &args) {
            Ok(_) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ETIME) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(()),
            Err(e) if is_refusal(&e) => Err(Failure::Refused(Unavailable::new(
                e.raw_os_error(),
                "io_uring_enter with IORING_ENTER_EXT_ARG failed",
            ))),
            Err(e) => Err(Failure::Other(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_named() {
        let u = setup_refusal(&io::Error::from_raw_os_error(libc::ENOSYS));
        assert!(u.cause.contains("5.1"), "{u}");
        assert_eq!(u.errno, Some(libc::ENOSYS));
        let u = setup_refusal(&io::Error::from_raw_os_error(libc::EINVAL));
        assert!(u.cause.contains("6.1"), "{u}");
        let u = setup_refusal(&io::Error::from_raw_os_error(libc::EPERM));
        assert!(
            u.cause.contains("seccomp") || u.cause.contains("io_uring_disabled"),
            "{u}"
        );
        assert_eq!(u.to_error().kind(), io::ErrorKind::PermissionDenied);
        assert!(is_refusal(&io::Error::from_raw_os_error(libc::EPERM)));
        assert!(!is_refusal(&io::Error::from_raw_os_error(libc::EMFILE)));
    }

    #[test]
    fn probe_answers_and_keeps_its_answer() {
        let a = probe().expect("the probe runs");
        let b = probe().expect("the probe runs");
        assert!(std::ptr::eq(a, b), "the answer is kept");
        match a {
            Ok(s) => assert!(s.features & (1 << 8) != 0, "EXT_ARG is required"),
            Err(u) => eprintln!("io_uring unavailable here: {u}"),
        }
    }
}
