//! [`UnixDatagram`]: a Unix-domain datagram socket.

use std::fmt;
use std::io;
use std::net::Shutdown;
use std::os::unix::net;
use std::path::Path;
use std::task::{Context, Poll};

use socket2::{SockAddr, SockRef};
use weir_reactor::{AsyncFd, Direction, Interest};

use super::SocketAddr;

/// A Unix-domain datagram socket: bound to a path, unbound, or one of a connected pair.
///
/// Datagrams are never split or merged: each `send` is received by exactly one `recv`, which
/// truncates it to the buffer it is given. Sends pass `MSG_NOSIGNAL`.
///
/// `&self` methods may run from several tasks at once (e.g. one sending and one receiving on an
/// `Arc<UnixDatagram>`); the async methods wake every waiting task, the `poll_*` methods only
/// the last poller of each direction.
pub struct UnixDatagram {
    pub(crate) io: AsyncFd<net::UnixDatagram>,
}

impl UnixDatagram {
    fn new(sock: net::UnixDatagram) -> io::Result<UnixDatagram> {
        sock.set_nonblocking(true)?;
        Ok(UnixDatagram {
            io: AsyncFd::new(sock)?,
        })
    }

    /// Creates a socket bound to `path`. A path whose first byte is NUL names a socket in
    /// Linux's abstract namespace (the bytes after the NUL are the name; no file is created).
    ///
    /// # Errors
    /// `InvalidInput` when `path` is too long for a Unix socket address or contains a NUL byte
    /// other than the leading one; otherwise as [`bind_addr`](Self::bind_addr).
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixDatagram> {
        UnixDatagram::bind_addr(&super::addr::from_path(path.as_ref())?)
    }

    /// Creates a socket bound to `addr`: a path, or an abstract name
    /// (`std::os::linux::net::SocketAddrExt::from_abstract_name`). An unnamed address lets the
    /// kernel choose an abstract name.
    ///
    /// # Errors
    /// The OS error of `socket(2)` or `bind(2)` (`AddrInUse` when a file or another socket
    /// already has the address), or a registration error of the reactor.
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixDatagram> {
        UnixDatagram::new(net::UnixDatagram::bind_addr(addr)?)
    }

    /// Creates a socket bound to no address. It can send to named sockets, and receive replies
    /// only if it is [connected](Self::connect) or the peer answers a pair socket.
    ///
    /// # Errors
    /// The OS error of `socket(2)`, or a registration error of the reactor.
    pub fn unbound() -> io::Result<UnixDatagram> {
        UnixDatagram::new(net::UnixDatagram::unbound()?)
    }

    /// Creates a pair of connected, unnamed sockets (`socketpair(2)`).
    ///
    /// # Errors
    /// The OS error of `socketpair(2)`, or a registration error of the reactor.
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        let (a, b) = net::UnixDatagram::pair()?;
        Ok((UnixDatagram::new(a)?, UnixDatagram::new(b)?))
    }

    /// Wraps a standard library socket, switching it to non-blocking mode and registering it
    /// with the current reactor.
    ///
    /// # Errors
    /// The OS error of switching to non-blocking mode, or a registration error of the reactor.
    pub fn from_std(sock: net::UnixDatagram) -> io::Result<UnixDatagram> {
        UnixDatagram::new(sock)
    }

    /// Deregisters the socket and returns the standard library socket. It stays in
    /// non-blocking mode.
    ///
    /// # Errors
    /// Never fails at present; the `Result` mirrors tokio's signature.
    pub fn into_std(self) -> io::Result<net::UnixDatagram> {
        Ok(self.io.into_inner())
    }

    /// Connects the socket to the socket bound at `path`: `send`/`recv` then talk to it only.
    /// A path whose first byte is NUL names an abstract socket.
    ///
    /// # Errors
    /// The OS error of `connect(2)` (`NotFound`, `ConnectionRefused`), or `InvalidInput` when
    /// `path` is too long or contains a NUL byte other than the leading one.
    pub fn connect<P: AsRef<Path>>(&self, path: P) -> io::Result<()> {
        let addr = super::addr::from_path(path.as_ref())?;
        self.io.get_ref().connect_addr(&addr)
    }

    /// The address this socket is bound to.
    ///
    /// # Errors
    /// The OS error of `getsockname(2)`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The address of the connected peer.
    ///
    /// # Errors
    /// `NotConnected` when not connected, or another OS error of `getpeername(2)`.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Takes the pending socket error (`SO_ERROR`), if any.
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }

    /// Shuts down the read, write or both directions (`shutdown(2)`). A receive after a read
    /// shutdown returns `Ok(0)`; a send after a write shutdown fails with `BrokenPipe`.
    ///
    /// # Errors
    /// The OS error of `shutdown(2)`.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.io.get_ref().shutdown(how)
    }

    crate::io::readiness_methods!(UnixDatagram, "the socket", poll_recv_ready, poll_send_ready);

    // ---- connected send / recv ----

    /// Sends `buf` as one datagram to the connected peer; returns its length.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, nothing was sent.
    ///
    /// # Errors
    /// `NotConnected` when not connected, `ConnectionRefused` when the peer is gone,
    /// `BrokenPipe` after a write shutdown, other OS errors of `send(2)`, or a shut-down
    /// reactor.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io
            .registration()
            .async_io(Interest::WRITABLE, || self.send_raw(buf))
            .await
    }

    /// Receives one datagram from the connected peer into `buf` (the rest of a longer
    /// datagram is discarded); returns the number of bytes written to `buf`.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, no datagram was consumed.
    ///
    /// # Errors
    /// The OS error of `recv(2)`, or a shut-down reactor.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .async_io(Interest::READABLE, || sock.recv(buf))
            .await
    }

    /// Sends to the connected peer if the socket is known to be writable.
    ///
    /// # Errors
    /// `WouldBlock` when not writable (readiness is then cleared), otherwise as
    /// [`send`](Self::send).
    pub fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io
            .registration()
            .try_io(Interest::WRITABLE, || self.send_raw(buf))
    }

    /// Receives from the connected peer if a datagram is known to be queued.
    ///
    /// # Errors
    /// `WouldBlock` when none is queued (readiness is then cleared), otherwise as
    /// [`recv`](Self::recv).
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .try_io(Interest::READABLE, || sock.recv(buf))
    }

    /// Polls to send `buf` to the connected peer. Only the last task to poll for writing is
    /// woken.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub fn poll_send(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.io
            .registration()
            .poll_io(cx, Direction::Write, || self.send_raw(buf))
    }

    /// Polls to receive a datagram from the connected peer into `buf` (unlike tokio, a plain
    /// byte slice; the number of bytes received is returned; tokio's `ReadBuf` form is
    /// `poll_recv_read_buf`, feature `tokio-io`). Only the last task to poll for
    /// reading is woken.
    ///
    /// # Errors
    /// As [`recv`](Self::recv).
    pub fn poll_recv(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .poll_io(cx, Direction::Read, || sock.recv(buf))
    }

    // ---- addressed send / recv ----

    /// Sends `buf` as one datagram to the socket bound at `target` (a path whose first byte
    /// is NUL names an abstract socket); returns its length.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, nothing was sent.
    ///
    /// # Errors
    /// `InvalidInput` when `target` is too long for a Unix socket address or contains a NUL
    /// byte other than the leading one, `NotFound` /
    /// `ConnectionRefused` when no socket is bound there, other OS errors of `sendto(2)`, or a
    /// shut-down reactor.
    pub async fn send_to<P: AsRef<Path>>(&self, buf: &[u8], target: P) -> io::Result<usize> {
        let addr = target_addr(target.as_ref())?;
        self.io
            .registration()
            .async_io(Interest::WRITABLE, || self.send_to_raw(buf, &addr))
            .await
    }

    /// Receives one datagram into `buf`, returning its length (after truncation to `buf`) and
    /// the sender's address (unnamed if the sender is not bound).
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, no datagram was consumed.
    ///
    /// # Errors
    /// The OS error of `recvfrom(2)`, or a shut-down reactor.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .async_io(Interest::READABLE, || sock.recv_from(buf))
            .await
    }

    /// Sends to `target` if the socket is known to be writable.
    ///
    /// # Errors
    /// `WouldBlock` when not writable (readiness is then cleared), otherwise as
    /// [`send_to`](Self::send_to).
    pub fn try_send_to<P: AsRef<Path>>(&self, buf: &[u8], target: P) -> io::Result<usize> {
        let addr = target_addr(target.as_ref())?;
        self.io
            .registration()
            .try_io(Interest::WRITABLE, || self.send_to_raw(buf, &addr))
    }

    /// Receives a datagram and its sender's address if one is known to be queued.
    ///
    /// # Errors
    /// `WouldBlock` when none is queued (readiness is then cleared), otherwise as
    /// [`recv_from`](Self::recv_from).
    pub fn try_recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .try_io(Interest::READABLE, || sock.recv_from(buf))
    }

    /// Polls to send `buf` to `target`. Only the last task to poll for writing is woken.
    ///
    /// # Errors
    /// As [`send_to`](Self::send_to).
    pub fn poll_send_to<P: AsRef<Path>>(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
        target: P,
    ) -> Poll<io::Result<usize>> {
        let addr = target_addr(target.as_ref())?;
        self.io
            .registration()
            .poll_io(cx, Direction::Write, || self.send_to_raw(buf, &addr))
    }

    /// Polls to receive a datagram into `buf` (a plain byte slice, unlike tokio's `ReadBuf`,
    /// whose form is `poll_recv_from_read_buf`, feature `tokio-io`),
    /// returning its length and the sender's address. Only the last task to poll for reading
    /// is woken.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .poll_io(cx, Direction::Read, || sock.recv_from(buf))
    }

    fn send_raw(&self, buf: &[u8]) -> io::Result<usize> {
        SockRef::from(self.io.get_ref()).send_with_flags(buf, libc::MSG_NOSIGNAL)
    }

    fn send_to_raw(&self, buf: &[u8], addr: &SockAddr) -> io::Result<usize> {
        SockRef::from(self.io.get_ref()).send_to_with_flags(buf, addr, libc::MSG_NOSIGNAL)
    }
}

crate::io::fd_traits!(UnixDatagram, std::os::unix::net::UnixDatagram);

impl fmt::Debug for UnixDatagram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.io.get_ref(), f)
    }
}

/// The raw address of a `send_to` target.
fn target_addr(target: &Path) -> io::Result<SockAddr> {
    super::addr::to_sock_addr(&super::addr::from_path(target)?)
}
