//! The few plain system calls the shared half makes: whether an fd can be polled at all,
//! which fast path a socket can have, and the eventfd write that wakes the owner.

use std::io;
use std::os::fd::RawFd;

/// `EPERM` for what epoll cannot watch either (regular files, directories), `EBADF` for a
/// closed fd.
pub(crate) fn check_pollable(fd: RawFd) -> io::Result<()> {
    // SAFETY: `stat` is plain data; fstat writes one `struct stat` into it and reads nothing.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a live, writable `struct stat`; an invalid `fd` is reported as EBADF.
    if unsafe { libc::fstat(fd, &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG | libc::S_IFDIR => Err(io::Error::from_raw_os_error(libc::EPERM)),
        _ => Ok(()),
    }
}

/// Adds one to an eventfd's counter. The ring watches the eventfd with a multishot poll,
/// which completes at every write, so the counter is never read back, except to drain it when
/// it is about to overflow (`EAGAIN`). `EINTR` is retried.
pub(crate) fn signal_eventfd(fd: RawFd) -> io::Result<()> {
    let one: u64 = 1;
    loop {
        // SAFETY: writes 8 bytes from a live u64 to `fd`, the registry's open eventfd.
        let n = unsafe { libc::write(fd, (&raw const one).cast(), size_of::<u64>()) };
        if n >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => {
                let mut drained: u64 = 0;
                // SAFETY: reads 8 bytes into a live u64 from the same open eventfd.
                unsafe { libc::read(fd, (&raw mut drained).cast(), size_of::<u64>()) };
            }
            _ => return Err(err),
        }
    }
}

/// What a socket registered to be read ahead is, for the fast paths: `SO_ACCEPTCONN`, then
/// `SO_TYPE`. `None` for what no fast path serves (not a socket, a datagram socket).
pub(crate) fn socket_kind(fd: RawFd, accept: bool, recv: bool) -> Option<SocketKind> {
    let opt = |name: libc::c_int| -> Option<libc::c_int> {
        let mut value: libc::c_int = 0;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes (one c_int) into `value` and updates
        // `len`; both are live locals. A bad `fd` is an error, not undefined behaviour.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                name,
                (&raw mut value).cast(),
                &raw mut len,
            )
        };
        (rc == 0).then_some(value)
    };
    if opt(libc::SO_ACCEPTCONN)? != 0 {
        return accept.then_some(SocketKind::Listener);
    }
    (recv && opt(libc::SO_TYPE)? == libc::SOCK_STREAM).then_some(SocketKind::Stream)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SocketKind {
    Stream,
    Listener,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn regular_files_are_refused_like_epoll() {
        let f = std::fs::File::open("/proc/self/exe").unwrap();
        let e = check_pollable(f.as_raw_fd()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM));
        let e = check_pollable(-1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn sockets_are_told_apart() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let fd = listener.as_raw_fd();
        assert_eq!(socket_kind(fd, true, true), Some(SocketKind::Listener));
        assert_eq!(socket_kind(fd, false, true), None, "accept path off");
        let stream = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let fd = stream.as_raw_fd();
        assert_eq!(socket_kind(fd, true, true), Some(SocketKind::Stream));
        assert_eq!(socket_kind(fd, true, false), None, "receive path off");
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(socket_kind(udp.as_raw_fd(), true, true), None);
        let file = std::fs::File::open("/proc/self/exe").unwrap();
        assert_eq!(socket_kind(file.as_raw_fd(), true, true), None);
    }
}
