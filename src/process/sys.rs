//! The OS calls of `weir::process`: `pidfd_open`, waiting for an exit without reaping
//! (`waitid` with `WNOWAIT`), reaping an orphan (`waitpid` with `WNOHANG`), and switching a
//! pipe between blocking and non-blocking mode.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `pidfd_open(2)`: an fd that becomes readable when the process `pid` exits (Linux 5.3).
/// The fd is close-on-exec.
///
/// # Errors
/// `ENOSYS` on older kernels (or where a seccomp filter hides the call), `ESRCH` when no
/// process `pid` exists (any more), `EMFILE`.
pub(super) fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: pidfd_open takes a pid and a flags word, no pointers; the result is checked.
    let ret = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = libc::c_int::try_from(ret).expect("pidfd_open returns an fd");
    // SAFETY: the kernel just created `fd` for us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Blocks until the child `pid` has exited, leaving it unreaped (`waitid(P_PID, WEXITED |
/// WNOWAIT)`), so that its pid stays reserved until the `Child` reaps it.
///
/// # Errors
/// `ECHILD` when `pid` is not an unreaped child of this process.
pub(super) fn wait_exited(pid: u32) -> io::Result<()> {
    let id = libc::id_t::from(pid);
    loop {
        // SAFETY: a zeroed siginfo_t is a valid value of the plain C struct.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a live siginfo_t for waitid to fill.
        let ret =
            unsafe { libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if ret == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Reaps the child `pid` if it has exited (`waitpid(WNOHANG)`). Returns `true` once `pid` is
/// no longer a child to wait for: reaped now, or already gone (`ECHILD`).
pub(super) fn try_reap(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    let mut status = 0;
    loop {
        // SAFETY: `status` is a live int for waitpid to fill.
        let ret = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        match ret {
            0 => return false,
            r if r > 0 => return true,
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => return true,
        }
    }
}

/// Sets or clears `O_NONBLOCK` on `fd`, one of our pipe ends (the child's end is another open
/// file description and keeps its own mode).
///
/// # Errors
/// The error of `fcntl(2)`.
pub(super) fn set_nonblocking(fd: BorrowedFd<'_>, nonblocking: bool) -> io::Result<()> {
    let fd = fd.as_raw_fd();
    // SAFETY: F_GETFL takes no pointer; `fd` is open for the borrow's lifetime.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let wanted = if nonblocking {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    if wanted != flags {
        // SAFETY: F_SETFL takes an int; `fd` is open for the borrow's lifetime.
        let ret = unsafe { libc::fcntl(fd, libc::F_SETFL, wanted) };
        if ret < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
