//! Helpers shared by the reactor's tests: pipes, and whether io_uring can be set up here.

#![allow(dead_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

use weir_reactor::Backend;
use weir_reactor::for_executor::{Driver, DriverConfig};

pub(crate) fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
    assert_eq!(r, 0);
    // SAFETY: both fds are new and owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

pub(crate) fn write1(fd: &OwnedFd) {
    // SAFETY: writes one byte from a static buffer to an open fd.
    let n = unsafe { libc::write(fd.as_raw_fd(), b"x".as_ptr().cast(), 1) };
    assert_eq!(n, 1);
}

/// `true` if an io_uring reactor can be built here; otherwise prints why the caller's test is
/// skipped (io_uring disabled by `kernel.io_uring_disabled` or a seccomp profile: `EPERM`; an
/// old kernel: `ENOSYS`, `EINVAL`, or a missing feature).
pub(crate) fn uring(test: &str) -> bool {
    static AVAILABLE: OnceLock<Result<(), String>> = OnceLock::new();
    let res = AVAILABLE.get_or_init(|| {
        let mut d = Driver::new(&DriverConfig {
            backend: Backend::IoUring,
            ..DriverConfig::default()
        })
        .map_err(|e| e.to_string())?;
        d.poll().map_err(|e| e.to_string())?;
        Ok(())
    });
    match res {
        Ok(()) => true,
        Err(e) => {
            eprintln!("skipping {test}: io_uring cannot be set up here ({e})");
            false
        }
    }
}
