//! A timerfd: the timer another event loop watches while this reactor is nested in it
//! (`driver/nested.rs`), so that the loop wakes for weir's nearest timer. Linux only: elsewhere
//! making one fails with `Unsupported`.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// A non-blocking `CLOCK_MONOTONIC` timerfd.
#[derive(Debug)]
pub(crate) struct TimerFd(std::os::fd::OwnedFd);

impl TimerFd {
    #[cfg(target_os = "linux")]
    pub(crate) fn new() -> io::Result<TimerFd> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain syscall; the flags are valid for timerfd_create.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by timerfd_create and is owned by nobody else.
        Ok(TimerFd(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }))
    }

    #[cfg(not(target_os = "linux"))]
    pub(crate) fn new() -> io::Result<TimerFd> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "a timerfd needs Linux",
        ))
    }

    /// Makes it expire once, `after` from now (at least 1 ns: zero would disarm it).
    #[cfg(target_os = "linux")]
    pub(crate) fn set(&self, after: Duration) -> io::Result<()> {
        let after = after.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: libc::time_t::try_from(after.as_secs()).unwrap_or(libc::time_t::MAX),
                // Below 10^9: fits any `c_long`.
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: the fd is a live timerfd owned by `self`; `spec` outlives the call and the
        // old value is not asked for (null).
        let r =
            unsafe { libc::timerfd_settime(self.0.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    pub(crate) fn set(&self, _after: Duration) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "a timerfd needs Linux",
        ))
    }
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}
