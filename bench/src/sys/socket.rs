//! Sockets: a listener, `accept4` with its outcomes named, a nonblocking `connect`, and one
//! nonblocking `send` or `recv` (a single syscall each, so the raw servers' fast path is
//! exactly one call).

use std::io;
use std::mem::size_of;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Returns `Err(last OS error)` when a syscall returned a negative value, else the value.
fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Sets an `int` socket option.
fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    opt: libc::c_int,
    val: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option pointer and length describe `val`, a live c_int that the kernel only
    // reads during the call.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&raw const val).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// A non-blocking, close-on-exec TCP listener on `addr` (`SO_REUSEADDR`, backlog 1024 as weir's
/// and tokio's listeners); returns it and the bound port.
pub(crate) fn listen(addr: SocketAddr) -> io::Result<(OwnedFd, u16)> {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain syscall with constant arguments; no pointers.
    let fd = check(unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    setsockopt_int(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;

    // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid (unspecified) value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in.
            unsafe { (&raw mut storage).cast::<libc::sockaddr_in>().write(sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in6.
            unsafe { (&raw mut storage).cast::<libc::sockaddr_in6>().write(sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    // SAFETY: the address pointer and length describe the initialised prefix of `storage`,
    // which lives across the call.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const storage).cast(),
            len as libc::socklen_t,
        )
    })?;
    // SAFETY: plain syscall on a socket we own.
    check(unsafe { libc::listen(fd.as_raw_fd(), 1024) })?;

    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: the pointer and length describe `storage`, live and writable; getsockname writes
    // at most `len` bytes.
    check(unsafe { libc::getsockname(fd.as_raw_fd(), (&raw mut storage).cast(), &raw mut len) })?;
    let port = if i32::from(storage.ss_family) == libc::AF_INET {
        // SAFETY: the kernel wrote a sockaddr_in (family AF_INET) into `storage`.
        let sin = unsafe { &*(&raw const storage).cast::<libc::sockaddr_in>() };
        u16::from_be(sin.sin_port)
    } else {
        // SAFETY: the kernel wrote a sockaddr_in6 (family AF_INET6) into `storage`.
        let sin6 = unsafe { &*(&raw const storage).cast::<libc::sockaddr_in6>() };
        u16::from_be(sin6.sin6_port)
    };
    Ok((fd, port))
}

/// The outcome of one `accept4`.
pub(crate) enum Accepted {
    /// A new non-blocking, close-on-exec connection with TCP_NODELAY set.
    Conn(OwnedFd),
    /// The queue is empty.
    Empty,
    /// A connection died in the queue or a signal interrupted: try again.
    Retry,
    /// Out of fds or socket memory: the connection stays queued; try again later.
    Exhausted,
    /// Any other error.
    Failed(io::Error),
}

/// Accepts one connection from the non-blocking listener `listener`.
pub(crate) fn accept(listener: RawFd) -> Accepted {
    // SAFETY: null address pointers are allowed (the peer address is not wanted).
    let rc = unsafe {
        libc::accept4(
            listener,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    };
    if rc >= 0 {
        // SAFETY: accept4 returned a new fd that nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(rc) };
        let _ = setsockopt_int(rc, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
        return Accepted::Conn(fd);
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error().unwrap_or(0) {
        libc::EAGAIN => Accepted::Empty,
        libc::EINTR | libc::ECONNABORTED | libc::EPROTO => Accepted::Retry,
        libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM => Accepted::Exhausted,
        _ => Accepted::Failed(err),
    }
}

/// `recv(fd, buf, MSG_DONTWAIT)`: bytes read (0 at end of stream) or the OS error.
#[inline]
pub(crate) fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length describe `buf`, live and writable for the call.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `send(fd, buf, MSG_DONTWAIT | MSG_NOSIGNAL)`: bytes written or the OS error.
#[inline]
pub(crate) fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length describe `buf`, live and readable for the call.
    let n = unsafe {
        libc::send(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// A new non-blocking, close-on-exec TCP socket (TCP_NODELAY on) that has started connecting
/// to `addr`: `connect(2)` returned at once, with the handshake done or still in progress
/// (`EINPROGRESS`); the socket reports writable when it completes (or an error when it fails).
pub(crate) fn connect_nonblocking(addr: SocketAddr) -> io::Result<OwnedFd> {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain syscall with constant arguments; no pointers.
    let fd = check(unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    setsockopt_int(fd.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
    let (storage, len) = sockaddr_of(addr);
    // SAFETY: the address pointer and length describe the initialised prefix of `storage`,
    // which lives across the call.
    let rc = unsafe { libc::connect(fd.as_raw_fd(), (&raw const storage).cast(), len) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(err);
        }
    }
    Ok(fd)
}

/// `addr` as a `sockaddr_storage` and the length of its initialised prefix.
fn sockaddr_of(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid (unspecified) value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in.
            unsafe { (&raw mut storage).cast::<libc::sockaddr_in>().write(sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in6.
            unsafe { (&raw mut storage).cast::<libc::sockaddr_in6>().write(sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}
