//! [`TcpSocket`].

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, RawFd};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use super::{TcpListener, TcpStream};

/// A TCP socket that has not yet been turned into a stream or a listener, for setting options
/// before `bind`/`listen`/`connect`.
///
/// The socket is created non-blocking and close-on-exec. It is registered with a reactor only
/// once it becomes a [`TcpListener`] ([`listen`](Self::listen)) or a [`TcpStream`]
/// ([`connect`](Self::connect)) — the reactor of the thread calling those.
///
/// # Example
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// use weir_net::TcpSocket;
///
/// let socket = TcpSocket::new_v4()?;
/// socket.set_reuseaddr(true)?;
/// socket.set_reuseport(true)?;
/// socket.bind("127.0.0.1:8080".parse().unwrap())?;
/// let listener = socket.listen(1024)?;
/// let (stream, peer) = listener.accept().await?;
/// # drop((stream, peer));
/// # Ok(())
/// # }
/// ```
pub struct TcpSocket {
    inner: Socket,
}

impl TcpSocket {
    /// A new IPv4 TCP socket.
    ///
    /// # Errors
    /// The error of `socket(2)` (e.g. `EMFILE`).
    pub fn new_v4() -> io::Result<TcpSocket> {
        TcpSocket::new(Domain::IPV4)
    }

    /// A new IPv6 TCP socket.
    ///
    /// # Errors
    /// The error of `socket(2)`.
    pub fn new_v6() -> io::Result<TcpSocket> {
        TcpSocket::new(Domain::IPV6)
    }

    pub(crate) fn new_for_addr(addr: SocketAddr) -> io::Result<TcpSocket> {
        TcpSocket::new(Domain::for_address(addr))
    }

    fn new(domain: Domain) -> io::Result<TcpSocket> {
        let ty = Type::STREAM.nonblocking().cloexec();
        let inner = Socket::new(domain, ty, Some(Protocol::TCP))?;
        Ok(TcpSocket { inner })
    }

    /// Sets `SO_REUSEADDR` (allows binding a port with connections in `TIME_WAIT`).
    ///
    /// # Errors
    /// The error of `setsockopt(2)`.
    pub fn set_reuseaddr(&self, reuseaddr: bool) -> io::Result<()> {
        self.inner.set_reuse_address(reuseaddr)
    }

    /// `SO_REUSEADDR`.
    ///
    /// # Errors
    /// The error of `getsockopt(2)`.
    pub fn reuseaddr(&self) -> io::Result<bool> {
        self.inner.reuse_address()
    }

    /// Sets `SO_REUSEPORT` (several sockets may listen on the same address; the kernel spreads
    /// connections among them).
    ///
    /// # Errors
    /// The error of `setsockopt(2)`.
    pub fn set_reuseport(&self, reuseport: bool) -> io::Result<()> {
        self.inner.set_reuse_port(reuseport)
    }

    /// `SO_REUSEPORT`.
    ///
    /// # Errors
    /// The error of `getsockopt(2)`.
    pub fn reuseport(&self) -> io::Result<bool> {
        self.inner.reuse_port()
    }

    /// Sets `SO_SNDBUF` (the kernel doubles the value and applies its limits).
    ///
    /// # Errors
    /// The error of `setsockopt(2)`.
    pub fn set_send_buffer_size(&self, size: u32) -> io::Result<()> {
        self.inner.set_send_buffer_size(size as usize)
    }

    /// `SO_SNDBUF`.
    ///
    /// # Errors
    /// The error of `getsockopt(2)`.
    pub fn send_buffer_size(&self) -> io::Result<u32> {
        self.inner.send_buffer_size().map(saturate)
    }

    /// Sets `SO_RCVBUF` (the kernel doubles the value and applies its limits).
    ///
    /// # Errors
    /// The error of `setsockopt(2)`.
    pub fn set_recv_buffer_size(&self, size: u32) -> io::Result<()> {
        self.inner.set_recv_buffer_size(size as usize)
    }

    /// `SO_RCVBUF`.
    ///
    /// # Errors
    /// The error of `getsockopt(2)`.
    pub fn recv_buffer_size(&self) -> io::Result<u32> {
        self.inner.recv_buffer_size().map(saturate)
    }

    /// Sets `SO_KEEPALIVE`.
    ///
    /// # Errors
    /// The error of `setsockopt(2)`.
    pub fn set_keepalive(&self, keepalive: bool) -> io::Result<()> {
        self.inner.set_keepalive(keepalive)
    }

    /// `SO_KEEPALIVE`.
    ///
    /// # Errors
    /// The error of `getsockopt(2)`.
    pub fn keepalive(&self) -> io::Result<bool> {
        self.inner.keepalive()
    }

    /// Sets `SO_LINGER`.
    ///
    /// # Errors
    /// The error of `setsockopt(2)`.
    pub fn set_linger(&self, dur: Option<Duration>) -> io::Result<()> {
        self.inner.set_linger(dur)
    }

    /// `SO_LINGER`.
    ///
    /// # Errors
    /// The error of `getsockopt(2)`.
    pub fn linger(&self) -> io::Result<Option<Duration>> {
        self.inner.linger()
    }

    /// Sets `SO_LINGER` to zero: closing the connection made from this socket discards unsent
    /// data and sends a reset (`RST`) instead of the `FIN` handshake, so the socket skips
    /// `TIME_WAIT` and the peer's next read fails with `ConnectionReset`. Unlike a non-zero
    /// linger, this never makes `close` block.
    ///
    /// # Errors
    /// The error of `setsockopt(2)`.
    pub fn set_zero_linger(&self) -> io::Result<()> {
        self.inner.set_linger(Some(Duration::ZERO))
    }

    /// Sets `TCP_NODELAY`.
    ///
    /// # Errors
    /// The error of `setsockopt(2)`.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.inner.set_tcp_nodelay(nodelay)
    }

    /// `TCP_NODELAY`.
    ///
    /// # Errors
    /// The error of `getsockopt(2)`.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.inner.tcp_nodelay()
    }

    /// The IPv4 type-of-service byte of outgoing packets (`IP_TOS`).
    ///
    /// # Errors
    /// The error of `getsockopt(2)` (e.g. on an IPv6 socket).
    pub fn tos_v4(&self) -> io::Result<u32> {
        self.inner.tos_v4()
    }

    /// Sets `IP_TOS` (the DSCP and ECN bits of outgoing IPv4 packets).
    ///
    /// # Errors
    /// The error of `setsockopt(2)`.
    pub fn set_tos_v4(&self, tos: u32) -> io::Result<()> {
        self.inner.set_tos_v4(tos)
    }

    /// The IPv6 traffic class of outgoing packets (`IPV6_TCLASS`).
    ///
    /// # Errors
    /// The error of `getsockopt(2)` (e.g. on an IPv4 socket).
    pub fn tclass_v6(&self) -> io::Result<u32> {
        self.inner.tclass_v6()
    }

    /// Sets `IPV6_TCLASS`.
    ///
    /// # Errors
    /// The error of `setsockopt(2)`.
    pub fn set_tclass_v6(&self, tclass: u32) -> io::Result<()> {
        self.inner.set_tclass_v6(tclass)
    }

    /// The interface the socket is bound to (`SO_BINDTODEVICE`), if any.
    ///
    /// # Errors
    /// The error of `getsockopt(2)`.
    pub fn device(&self) -> io::Result<Option<Vec<u8>>> {
        self.inner.device()
    }

    /// Binds the socket to an interface by name (`SO_BINDTODEVICE`); `None` removes the
    /// binding. Usually needs `CAP_NET_RAW`.
    ///
    /// # Errors
    /// The error of `setsockopt(2)` (`EPERM` without the capability).
    pub fn bind_device(&self, interface: Option<&[u8]>) -> io::Result<()> {
        self.inner.bind_device(interface)
    }

    /// Binds the socket to `addr`.
    ///
    /// # Errors
    /// The error of `bind(2)` (e.g. `AddrInUse`).
    pub fn bind(&self, addr: SocketAddr) -> io::Result<()> {
        self.inner.bind(&addr.into())
    }

    /// The local address.
    ///
    /// # Errors
    /// The error of `getsockname(2)`, or `InvalidInput` for a non-IP address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not an IP socket address"))
    }

    /// Takes the pending socket error (`SO_ERROR`).
    ///
    /// # Errors
    /// The error of `getsockopt(2)`.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.inner.take_error()
    }

    /// Connects to `addr` and returns the stream, registered with the current reactor.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the connection attempt and closes the socket.
    ///
    /// # Errors
    /// The connection error (e.g. `ConnectionRefused`, read from `SO_ERROR` once the socket is
    /// writable), or an error registering the socket.
    pub async fn connect(self, addr: SocketAddr) -> io::Result<TcpStream> {
        TcpStream::connect_socket(self.inner, addr).await
    }

    /// Starts listening with the given `backlog` (clamped to `i32::MAX`; the kernel further
    /// caps it at `net.core.somaxconn`) and returns the listener, registered with the current
    /// reactor.
    ///
    /// # Errors
    /// The error of `listen(2)` or of registering the socket.
    pub fn listen(self, backlog: u32) -> io::Result<TcpListener> {
        self.inner
            .listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
        TcpListener::from_listening(std::net::TcpListener::from(self.inner), None)
    }

    /// Converts a standard stream (connected or not) into a `TcpSocket`, e.g. to set options,
    /// and puts it in non-blocking mode (`connect`/`listen` need it; a failure to set it, which
    /// only happens for an fd that is not a socket, is ignored here and surfaces later).
    pub fn from_std_stream(std_stream: std::net::TcpStream) -> TcpSocket {
        let _ = std_stream.set_nonblocking(true);
        TcpSocket {
            inner: Socket::from(std_stream),
        }
    }
}

fn saturate(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

impl AsRawFd for TcpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl AsFd for TcpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl IntoRawFd for TcpSocket {
    fn into_raw_fd(self) -> RawFd {
        self.inner.into_raw_fd()
    }
}

impl FromRawFd for TcpSocket {
    /// Wraps a TCP socket fd. It should be non-blocking for `connect`/`listen` to work.
    ///
    /// # Safety
    /// `fd` must be an open TCP socket that the caller owns and hands over.
    unsafe fn from_raw_fd(fd: RawFd) -> TcpSocket {
        TcpSocket {
            // SAFETY: the caller guarantees `fd` is an open socket it transfers to us.
            inner: unsafe { Socket::from_raw_fd(fd) },
        }
    }
}

impl fmt::Debug for TcpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpSocket")
            .field("fd", &self.inner.as_raw_fd())
            .field("local", &self.local_addr().ok())
            .finish()
    }
}
