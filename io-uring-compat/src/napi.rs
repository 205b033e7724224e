//! Kernel busy poll on a ring: `IORING_REGISTER_NAPI` / `IORING_UNREGISTER_NAPI` (Linux 6.9),
//! the io_uring counterpart of epoll's `EPIOCSPARAMS`. Dynamic tracking: the kernel busy-polls
//! the NAPI ids of the sockets the ring's requests touch (several, unlike epoll's one). No
//! privilege is needed; the kernel caps the timeout at 10 ms.

use std::io;
use std::os::fd::RawFd;

/// Kernel busy poll on a ring ([`Registry::set_napi`](crate::Registry::set_napi)): what
/// epoll's `EPIOCSPARAMS` sets, less the budget, which io_uring does not take.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NapiParams {
    /// Busy-poll timeout in microseconds (0: off).
    pub usecs: u32,
    /// `prefer_busy_poll`.
    pub prefer: bool,
}

/// `IORING_REGISTER_NAPI`.
const REGISTER_NAPI: libc::c_uint = 27;
/// `IORING_UNREGISTER_NAPI`.
const UNREGISTER_NAPI: libc::c_uint = 28;

/// `struct io_uring_napi`.
#[repr(C)]
#[derive(Default)]
struct IoUringNapi {
    busy_poll_to: u32,
    prefer_busy_poll: u8,
    /// 0: register (`IO_URING_NAPI_REGISTER_OP`).
    opcode: u8,
    pad: [u8; 2],
    /// 0: dynamic tracking (`IO_URING_NAPI_TRACKING_DYNAMIC`).
    op_param: u32,
    resv: u32,
}

/// Applies `params` to the ring `ring_fd` (`usecs` = 0 unregisters). Only the ring's issuer, or
/// any thread before the ring is enabled, may call it.
///
/// # Errors
/// `EINVAL` before Linux 6.9 (an unknown register opcode); `EEXIST` from a thread that is not
/// the ring's issuer.
pub(crate) fn apply(ring_fd: RawFd, params: NapiParams) -> io::Result<()> {
    let mut arg = IoUringNapi {
        busy_poll_to: params.usecs,
        prefer_busy_poll: u8::from(params.prefer),
        ..IoUringNapi::default()
    };
    let op = if params.usecs == 0 {
        UNREGISTER_NAPI
    } else {
        REGISTER_NAPI
    };
    // SAFETY: both opcodes read (and write back the previous settings into) one
    // `struct io_uring_napi` (16 bytes, matched field by field above) at the pointer, which
    // points to a live, writable local for the whole call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            ring_fd,
            op,
            &raw mut arg,
            1 as libc::c_uint,
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        // Turning off what was never on.
        if op == UNREGISTER_NAPI && e.raw_os_error() == Some(libc::EINVAL) {
            return Ok(());
        }
        return Err(e);
    }
    Ok(())
}
