//! Kernel busy poll per epoll instance (`EPIOCSPARAMS`, Linux 6.9).
//!
//! With busy poll set on an epoll fd, a wait that would block first spins in the kernel on the
//! NAPI instance (NIC receive queue) last seen by that epoll, for up to `usecs`, processing up to
//! `budget` packets per poll. The kernel tracks **one** NAPI id per epoll instance, so it only
//! pays off when each epoll holds the sockets of one NAPI id — what weir's per-worker reactors
//! and NAPI-sharded accept arrange. Sockets with NAPI id 0 (loopback) are unaffected.

use std::fmt;
use std::io;
use std::os::fd::RawFd;

/// Largest `busy_poll_budget` accepted without `CAP_NET_ADMIN`.
pub const UNPRIVILEGED_MAX_BUDGET: u16 = 64;

/// Parameters of `EPIOCSPARAMS`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelBusyPoll {
    /// How long a wait that would block spins first, in microseconds (0 disables busy poll).
    pub usecs: u32,
    /// Packets processed per NAPI poll (0 means the kernel default, 8); above 64 needs
    /// `CAP_NET_ADMIN`.
    pub budget: u16,
    /// Ask the kernel to prefer busy polling over softirq processing (`prefer_busy_poll`).
    pub prefer: bool,
}

impl fmt::Display for KernelBusyPoll {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "usecs={} budget={} prefer={}",
            self.usecs, self.budget, self.prefer
        )
    }
}

/// Applies `params` to the epoll instance `epfd`.
///
/// # Errors
/// `ENOTTY` before Linux 6.9 or on a non-epoll fd; `EOPNOTSUPP` on a kernel built without busy
/// poll; `EPERM` for a budget above [`UNPRIVILEGED_MAX_BUDGET`] without `CAP_NET_ADMIN`;
/// `EINVAL` for `usecs > i32::MAX`.
pub fn set(epfd: RawFd, params: KernelBusyPoll) -> io::Result<()> {
    let raw = libc::epoll_params {
        busy_poll_usecs: params.usecs,
        busy_poll_budget: params.budget,
        prefer_busy_poll: u8::from(params.prefer),
        __pad: 0,
    };
    // SAFETY: EPIOCSPARAMS reads one `struct epoll_params` (8 bytes, matched by libc's
    // definition) from the pointer, which points to a live local for the whole call.
    let rc = unsafe { libc::ioctl(epfd, libc::EPIOCSPARAMS, &raw const raw) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads the busy poll parameters of the epoll instance `epfd` (`EPIOCGPARAMS`).
///
/// # Errors
/// As [`set`]: `ENOTTY` on old kernels or non-epoll fds.
pub fn get(epfd: RawFd) -> io::Result<KernelBusyPoll> {
    let mut raw = libc::epoll_params {
        busy_poll_usecs: 0,
        busy_poll_budget: 0,
        prefer_busy_poll: 0,
        __pad: 0,
    };
    // SAFETY: EPIOCGPARAMS writes one `struct epoll_params` to the pointer, which points to a
    // live, writable local of that type for the whole call.
    let rc = unsafe { libc::ioctl(epfd, libc::EPIOCGPARAMS, &raw mut raw) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(KernelBusyPoll {
        usecs: raw.busy_poll_usecs,
        budget: raw.busy_poll_budget,
        prefer: raw.prefer_busy_poll != 0,
    })
}
