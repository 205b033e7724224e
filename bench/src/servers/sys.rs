//! Thin libc wrappers for the raw servers (`raw_epoll`, `busy_loop`).

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
pub(super) fn listen(addr: SocketAddr) -> io::Result<(OwnedFd, u16)> {
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
pub(super) enum Accepted {
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
pub(super) fn accept(listener: RawFd) -> Accepted {
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
pub(super) fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
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
fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
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

/// One echo connection of the raw servers: the socket and the bytes a short write left
/// unsent. While bytes are pending the connection is not read (no unbounded buffering).
#[derive(Debug)]
pub(super) struct EchoConn {
    /// The connected socket (closed on drop).
    pub(super) fd: OwnedFd,
    /// Unsent bytes (`pending[sent..]`); empty on the fast path.
    pending: Vec<u8>,
    /// How much of `pending` has been sent.
    sent: usize,
}

/// Why a connection must close.
#[derive(Debug)]
pub(super) struct Closed;

impl EchoConn {
    /// A connection with nothing pending.
    pub(super) fn new(fd: OwnedFd) -> EchoConn {
        EchoConn {
            fd,
            pending: Vec::new(),
            sent: 0,
        }
    }

    /// Whether a short write left bytes to send.
    #[inline]
    pub(super) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Sends `data` (just read) with one `send`; a short write means the socket buffer is
    /// full, so what it did not take is kept for [`flush`](Self::flush).
    #[inline]
    pub(super) fn echo(&mut self, data: &[u8]) -> Result<(), Closed> {
        debug_assert!(!self.has_pending());
        let done = loop {
            match send(self.fd.as_raw_fd(), data) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break 0,
                Err(_) => return Err(Closed),
            }
        };
        if done < data.len() {
            self.pending.extend_from_slice(&data[done..]);
            self.sent = 0;
        }
        Ok(())
    }

    /// Appends `data` behind the pending bytes (sent by [`flush`](Self::flush)).
    pub(super) fn queue(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
    }

    /// Sends pending bytes; `Ok(true)` once all are gone (the buffer is released).
    pub(super) fn flush(&mut self) -> Result<bool, Closed> {
        while self.sent < self.pending.len() {
            match send(self.fd.as_raw_fd(), &self.pending[self.sent..]) {
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(_) => return Err(Closed),
            }
        }
        self.pending = Vec::new();
        self.sent = 0;
        Ok(true)
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds.
pub(super) fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until `CLOCK_MONOTONIC` reaches `deadline_ns` (absolute; retried on signals).
pub(super) fn sleep_until_ns(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is a live timespec; the remaining-time pointer may be null with
        // TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &raw const ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

/// Sets this thread's timer slack to 1 ns, so short sleeps end on time (the default slack is
/// 50 µs).
pub(super) fn set_timer_slack_1ns() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument; no pointers.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}
