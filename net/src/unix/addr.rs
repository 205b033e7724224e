//! The one rule for what a path given to a Unix socket names, and the conversions between the
//! standard library's [`SocketAddr`] and socket2's [`SockAddr`].
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

/// The standard library's address for a `sockaddr_un` the kernel filled in (the sender of a
/// datagram): a path, an abstract name, or unnamed.
///
/// # Errors
/// `InvalidInput` when `addr` is not a Unix-domain address.
#[cfg(feature = "tokio-io")]
pub(crate) fn from_sock_addr(addr: &SockAddr) -> io::Result<SocketAddr> {
    if let Some(path) = addr.as_pathname() {
        SocketAddr::from_pathname(path)
    } else if let Some(name) = addr.as_abstract_namespace() {
        SocketAddr::from_abstract_name(name)
    } else if addr.is_unnamed() || addr.len() == 0 {
        // For a sender that is not bound, the kernel reports an address of length 0.
        unnamed()
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a Unix-domain socket address",
        ))
    }
}

/// An unnamed address. The standard library has no constructor for one, so the address of an
/// unbound socket is asked once and cloned from then on.
#[cfg(feature = "tokio-io")]
fn unnamed() -> io::Result<SocketAddr> {
    static UNNAMED: std::sync::OnceLock<SocketAddr> = std::sync::OnceLock::new();
    if let Some(addr) = UNNAMED.get() {
        return Ok(addr.clone());
    }
    let addr = std::os::unix::net::UnixDatagram::unbound()?.local_addr()?;
    Ok(UNNAMED.get_or_init(|| addr).clone())
}
