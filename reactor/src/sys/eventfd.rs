//! The eventfd wake-up of the epoll and io_uring backends.

use std::io;

/// Adds one to an eventfd's counter: the wake-up of the epoll and io_uring backends, whose
/// waits watch the eventfd edge-triggered (every write is a new edge, so the counter is never
/// read back on the hot path). Only when it is about to overflow (`EAGAIN`, after 2^64-2
/// writes) is it drained. `EINTR` is retried.
pub(crate) fn signal_eventfd(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let one: u64 = 1;
    loop {
        // SAFETY: writes 8 bytes from a live u64 to `fd`, an open eventfd the caller borrows.
        let n = unsafe {
            libc::write(
                fd.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        if n >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => {
                let mut drain: u64 = 0;
                // SAFETY: reads 8 bytes into a live u64 from the same open eventfd.
                unsafe {
                    libc::read(
                        fd.as_raw_fd(),
                        (&mut drain as *mut u64).cast(),
                        std::mem::size_of::<u64>(),
                    )
                };
            }
            _ => return Err(err),
        }
    }
}
