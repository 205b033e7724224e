//! The OS calls of [`crate::signal`]: the eventfds that wake reactors, and the process-wide
//! handler installed through `signal-hook-registry`. Nothing else in the module names an OS call.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// The highest signal number of this system (`SIGRTMAX`).
pub(super) fn max_signal() -> i32 {
    libc::SIGRTMAX()
}

/// The first real-time signal the C library leaves to applications (`SIGRTMIN`); the numbers
/// between the standard signals and this one are the C library's own.
pub(super) fn first_realtime_signal() -> i32 {
    libc::SIGRTMIN()
}

/// A new eventfd, counter 0, non-blocking and close-on-exec.
///
/// # Errors
/// The OS error of `eventfd` (e.g. `EMFILE`).
pub(super) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers; the result is checked before use.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by eventfd, so it is open and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads (and so resets) an eventfd's counter.
///
/// # Errors
/// `WouldBlock` when the counter is already 0.
pub(super) fn read_eventfd(mut fd: &File) -> io::Result<u64> {
    let mut buf = [0u8; 8];
    // An eventfd read transfers exactly 8 bytes or fails.
    fd.read_exact(&mut buf)?;
    Ok(u64::from_ne_bytes(buf))
}

/// Installs (once per signal number, by the caller's bookkeeping) the process-wide handler for
/// `signum`. Each delivery sets bit `signum - 1` of `pending` and adds one to the eventfd `fd`.
///
/// Handlers already installed by others keep running (`signal-hook-registry` chains them).
/// The handler is never removed.
///
/// # Safety
/// `fd` must be an eventfd that stays open for the rest of the process's life: the handler may
/// run at any moment, on any thread, until the process exits. `signum` must not be one of
/// `signal_hook_registry::FORBIDDEN` (the registry panics on those).
///
/// # Errors
/// The OS error of `sigaction` (e.g. `EINVAL` for a signal the C library reserves).
pub(super) unsafe fn install_handler(
    signum: i32,
    pending: &'static AtomicU64,
    fd: RawFd,
) -> io::Result<()> {
    let bit = 1u64 << (signum - 1);
    let action = move || {
        // Only async-signal-safe work: one lock-free atomic RMW and one write(2). Errors are
        // ignored: EAGAIN means the counter is already non-zero, i.e. a wake-up is pending.
        pending.fetch_or(bit, Ordering::SeqCst);
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to `fd`, which the caller guarantees stays an
        // open eventfd for the life of the process; write(2) is async-signal-safe.
        unsafe { libc::write(fd, (&raw const one).cast(), 8) };
    };
    // SAFETY: `action` is async-signal-safe and cannot panic (see above: an atomic RMW and a
    // raw write, both infallible in Rust terms); the fd it writes outlives every delivery by
    // this function's contract; `signum` is not FORBIDDEN by this function's contract.
    unsafe { signal_hook_registry::register(signum, action) }?;
    Ok(())
}
