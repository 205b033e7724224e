//! Credentials of the process at the other end of a Unix socket (`SO_PEERCRED`).

use std::io;
use std::mem::{MaybeUninit, size_of};
use std::os::fd::{AsRawFd, RawFd};

/// The credentials of a Unix socket's peer, as the kernel recorded them when the connection
/// (or the socket pair) was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UCred {
    pid: Option<libc::pid_t>,
    uid: libc::uid_t,
    gid: libc::gid_t,
}

impl UCred {
    /// The peer's user id.
    pub fn uid(&self) -> libc::uid_t {
        self.uid
    }

    /// The peer's group id.
    pub fn gid(&self) -> libc::gid_t {
        self.gid
    }

    /// The peer's process id; `None` when the kernel did not report one (pid 0, e.g. a peer in
    /// another pid namespace).
    pub fn pid(&self) -> Option<libc::pid_t> {
        self.pid
    }
}

/// Reads `SO_PEERCRED` of a connected Unix socket.
pub(crate) fn peer_cred(sock: &impl AsRawFd) -> io::Result<UCred> {
    let fd: RawFd = sock.as_raw_fd();
    let mut cred = MaybeUninit::<libc::ucred>::zeroed();
    let mut len = size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` points to writable memory of `len` bytes that lives across the call, and
    // `len` is a valid socklen_t the kernel may update; `fd` is an open socket borrowed from
    // `sock` for the duration of the call.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            cred.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != size_of::<libc::ucred>() {
        return Err(io::Error::other("SO_PEERCRED returned a short ucred"));
    }
    // SAFETY: the memory was zero-initialised (all-zero is a valid `ucred`, a struct of
    // integers) and the kernel filled all of it, as the returned length confirms.
    let cred = unsafe { cred.assume_init() };
    Ok(UCred {
        pid: (cred.pid != 0).then_some(cred.pid),
        uid: cred.uid,
        gid: cred.gid,
    })
}
