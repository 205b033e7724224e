//! An epoll instance: registration, and waits with a millisecond or a nanosecond timeout.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Readiness bits an event can carry that mean the connection is finished (error, hang-up, or
/// the peer shut down its writing side).
pub(crate) const EV_CLOSED: u32 = (libc::EPOLLERR | libc::EPOLLHUP | libc::EPOLLRDHUP) as u32;

/// An epoll instance.
#[derive(Debug)]
pub(crate) struct Epoll {
    fd: OwnedFd,
}

/// A zeroed event, to fill event buffers with.
pub(crate) const NO_EVENT: libc::epoll_event = libc::epoll_event { events: 0, u64: 0 };

impl Epoll {
    /// A new close-on-exec epoll instance.
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: epoll_create1 has no memory arguments.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call (ignored for DEL).
        let rc = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &raw mut ev) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Registers `fd` for `events`, reported with `token`.
    pub(crate) fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    /// Removes `fd` (errors are ignored: the fd may already be gone).
    pub(crate) fn delete(&self, fd: RawFd) {
        let _ = self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0);
    }

    /// Waits up to `timeout_ms` (-1: forever) for events; returns how many were written to the
    /// front of `events`. EINTR counts as zero events.
    pub(crate) fn wait(
        &self,
        events: &mut [libc::epoll_event],
        timeout_ms: i32,
    ) -> io::Result<usize> {
        let max = events.len().min(i32::MAX as usize) as libc::c_int;
        // SAFETY: `events` is valid for writes of `max` epoll_events.
        let n =
            unsafe { libc::epoll_wait(self.fd.as_raw_fd(), events.as_mut_ptr(), max, timeout_ms) };
        Self::result(n)
    }

    /// Like [`Epoll::wait`] with a nanosecond timeout (`epoll_pwait2`, Linux 5.11+). Returns
    /// `Ok(None)` if the kernel (or a seccomp filter) does not offer `epoll_pwait2`.
    pub(crate) fn wait_ns(
        &self,
        events: &mut [libc::epoll_event],
        timeout_ns: u64,
    ) -> io::Result<Option<usize>> {
        let max = events.len().min(i32::MAX as usize) as libc::c_int;
        let ts = super::clock::timespec_of(timeout_ns);
        // SAFETY: `events` is valid for writes of `max` epoll_events, `ts` is a valid timespec,
        // and a null sigmask means "leave the signal mask alone".
        let n = unsafe {
            libc::epoll_pwait2(
                self.fd.as_raw_fd(),
                events.as_mut_ptr(),
                max,
                &ts,
                std::ptr::null(),
            )
        };
        match Self::result(n) {
            Ok(n) => Ok(Some(n)),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn result(n: libc::c_int) -> io::Result<usize> {
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            Ok(0)
        } else {
            Err(err)
        }
    }
}

impl AsRawFd for Epoll {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
