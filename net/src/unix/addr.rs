//! The one rule for what a path given to a Unix socket names, and the conversion of the
//! standard library's [`SocketAddr`] to socket2's [`SockAddr`] (the way back, for a received
//! datagram's sender, is `crate::tokio_io`'s, its one user).
//!
//! A path whose first byte is NUL names a socket in Linux's abstract namespace (the bytes
//! after the NUL are the name); any other path names a file. This is what tokio does, and it
//! is the only way to reach an abstract socket through the `AsRef<Path>` methods, since the
//! standard library rejects such paths ("paths must not contain interior null bytes").

use std::ffi::OsStr;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use socket2::SockAddr;

use super::SocketAddr;

/// The address `path` names: abstract when it starts with a NUL byte, a file path otherwise.
///
/// # Errors
/// `InvalidInput` when the path (or name) is too long for `sun_path`, or when a file path
/// contains a NUL byte.
pub(crate) fn from_path(path: &Path) -> io::Result<SocketAddr> {
    match path.as_os_str().as_bytes().strip_prefix(b"\0") {
        Some(name) => SocketAddr::from_abstract_name(name),
        None => SocketAddr::from_pathname(path),
    }
}

/// The raw `sockaddr_un` of `addr`, for the socket2 calls (non-blocking connect, `sendto`).
/// An unnamed address becomes the bare address family, which `bind(2)` answers by choosing an
/// abstract name (autobind) and `connect(2)` refuses.
///
/// # Errors
/// `InvalidInput` when the name does not fit (it always does for an address that was built by
/// the standard library).
pub(crate) fn to_sock_addr(addr: &SocketAddr) -> io::Result<SockAddr> {
    if let Some(path) = addr.as_pathname() {
        SockAddr::unix(path)
    } else if let Some(name) = addr.as_abstract_name() {
        let mut raw = Vec::with_capacity(name.len() + 1);
        raw.push(0);
        raw.extend_from_slice(name);
        SockAddr::unix(OsStr::from_bytes(&raw))
    } else {
        SockAddr::unix("")
    }
}
