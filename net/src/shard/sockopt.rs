//! The socket options read from accepted connections: the NAPI id (NIC receive queue) and the
//! receiving CPU.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// `SO_INCOMING_NAPI_ID` (Linux 4.12); not every libc exports it.
const SO_INCOMING_NAPI_ID: libc::c_int = 56;

/// The NAPI id (NIC receive queue) a connected socket's packets arrive on; 0 for loopback or a
/// device without NAPI.
///
/// # Errors
/// The OS error of `getsockopt` (e.g. `ENOPROTOOPT` on a kernel before 4.12).
pub fn napi_id(socket: &impl AsRawFd) -> io::Result<u32> {
    getsockopt_u32(socket.as_raw_fd(), SO_INCOMING_NAPI_ID)
}

/// The CPU that processed a connected socket's last received packet (`SO_INCOMING_CPU`).
///
/// # Errors
/// The OS error of `getsockopt`.
pub fn incoming_cpu(socket: &impl AsRawFd) -> io::Result<u32> {
    getsockopt_u32(socket.as_raw_fd(), libc::SO_INCOMING_CPU)
}

fn getsockopt_u32(fd: RawFd, opt: libc::c_int) -> io::Result<u32> {
    let mut val: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the value pointer and length describe `val`, a live c_int, and `len` is a live
    // socklen_t; getsockopt writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&raw mut val).cast(),
            &raw mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(val as u32)
}
