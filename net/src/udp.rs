//! [`UdpSocket`]: UDP on the reactor of the worker that creates the socket.

use std::fmt;
use std::io;
use std::net::{self, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::task::{Context, Poll};

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use weir_reactor::{AsyncFd, Direction, Interest};

use crate::addr::{ToSocketAddrs, last_error, resolve};

/// A UDP socket.
///
/// Bound by [`bind`](Self::bind) (or wrapped by [`from_std`](Self::from_std)), it registers with
/// the reactor of the thread that creates it: on a worker, that worker's epoll, so the tasks it
/// wakes run on that worker.
///
/// Without [`connect`](Self::connect), use [`send_to`](Self::send_to) and
/// [`recv_from`](Self::recv_from); after it, [`send`](Self::send) and [`recv`](Self::recv) talk
/// to the one peer (and datagrams from other addresses are dropped by the kernel).
///
/// All methods take `&self`, so an `Arc<UdpSocket>` can be shared by tasks that send and
/// receive at the same time. The `async` methods wake every waiting task; the `poll_*` methods
/// keep one waker per direction (the last task to poll for receiving, and the last to poll for
/// sending), as tokio's do.
///
/// Unlike tokio, [`poll_recv`](Self::poll_recv), [`poll_recv_from`](Self::poll_recv_from),
/// [`poll_peek`](Self::poll_peek) and [`poll_peek_from`](Self::poll_peek_from) take a plain
/// `&mut [u8]` and return the number of bytes received instead of filling a `ReadBuf`. With
/// feature `tokio-io`, tokio's forms are there under the names `poll_recv_read_buf`,
/// `poll_recv_from_read_buf`, `poll_peek_read_buf` and `poll_peek_from_read_buf`, next to
/// tokio's `recv_buf`, `recv_buf_from`, `try_recv_buf` and `try_recv_buf_from` (into a
/// `bytes::BufMut`).
///
/// # Example
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// use weir_net::UdpSocket;
///
/// let sock = UdpSocket::bind("127.0.0.1:0").await?;
/// let mut buf = [0u8; 1500];
/// loop {
///     let (n, from) = sock.recv_from(&mut buf).await?;
///     sock.send_to(&buf[..n], from).await?;
/// }
/// # }
/// ```
pub struct UdpSocket {
    io: AsyncFd<net::UdpSocket>,
}

impl UdpSocket {
    /// Registers a socket that is already non-blocking.
    fn new(sock: net::UdpSocket) -> io::Result<UdpSocket> {
        Ok(UdpSocket {
            io: AsyncFd::new(sock)?,
        })
    }

    /// Creates a socket bound to `addr` (non-blocking, close-on-exec). Every resolved address
    /// is tried in order; the first that binds is used. Port 0 picks a free port (see
    /// [`local_addr`](Self::local_addr)).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future before it completes leaves no socket behind.
    ///
    /// # Errors
    /// The last error of `socket(2)`/`bind(2)` if no address binds (`AddrInUse`,
    /// `AddrNotAvailable`, …), a resolution error, `InvalidInput` if `addr` resolves to
    /// nothing, or a registration error of the reactor.
    pub async fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<UdpSocket> {
        let addrs = resolve(&addr).await?;
        let mut last = None;
        for a in addrs {
            match UdpSocket::bind_addr(a) {
                Ok(sock) => return Ok(sock),
                Err(e) => last = Some(e),
            }
        }
        Err(last_error(last))
    }

    fn bind_addr(addr: SocketAddr) -> io::Result<UdpSocket> {
        let sock = Socket::new(
            Domain::for_address(addr),
            Type::DGRAM.nonblocking(),
            Some(Protocol::UDP),
        )?;
        sock.bind(&addr.into())?;
        UdpSocket::new(net::UdpSocket::from(sock))
    }

    /// Wraps a standard library socket, switching it to non-blocking mode and registering it
    /// with the current reactor.
    ///
    /// # Errors
    /// The OS error of switching to non-blocking mode, or a registration error of the reactor.
    pub fn from_std(sock: net::UdpSocket) -> io::Result<UdpSocket> {
        sock.set_nonblocking(true)?;
        UdpSocket::new(sock)
    }

    /// Deregisters the socket and returns the standard library socket. It stays in
    /// non-blocking mode; call `set_nonblocking(false)` for blocking use.
    ///
    /// # Errors
    /// Never fails at present; the `Result` mirrors tokio's signature.
    pub fn into_std(self) -> io::Result<net::UdpSocket> {
        Ok(self.io.into_inner())
    }

    /// The address the socket is bound to.
    ///
    /// # Errors
    /// The OS error of `getsockname(2)`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The address of the connected peer.
    ///
    /// # Errors
    /// `NotConnected` when the socket is not connected, or another OS error of
    /// `getpeername(2)`.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Connects the socket to `addr`: [`send`](Self::send) goes there, and only datagrams from
    /// there are received. Every resolved address is tried in order; the first that connects is
    /// used. No packet is sent.
    ///
    /// # Cancel safety
    /// Cancel safe, but if the future is dropped while a host name is being resolved, the
    /// socket is left as it was.
    ///
    /// # Errors
    /// The last OS error of `connect(2)` if no address works (e.g. an IPv6 address on an IPv4
    /// socket), a resolution error, or `InvalidInput` if `addr` resolves to nothing.
    pub async fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        let addrs = resolve(&addr).await?;
        let mut last = None;
        for a in addrs {
            match self.io.get_ref().connect(a) {
                Ok(()) => return Ok(()),
                Err(e) => last = Some(e),
            }
        }
        Err(last_error(last))
    }

    // ---- readiness and custom operations (`try_io`, `async_io`) ----

    crate::io::readiness_methods!(UdpSocket, "the socket", poll_recv_ready, poll_send_ready);

    // ---- connected send / recv / peek ----

    /// Sends `buf` as one datagram to the connected peer; returns the number of bytes sent.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, nothing was sent.
    ///
    /// # Errors
    /// `NotConnected` (or `DestinationAddrRequired`) when not connected, `ConnectionRefused`
    /// when an earlier datagram was answered by an ICMP port-unreachable, other OS errors of
    /// `send(2)` (e.g. `EMSGSIZE` for a datagram that is too large), or a shut-down reactor.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .async_io(Interest::WRITABLE, || sock.send(buf))
            .await
    }

    /// Polls to send `buf` to the connected peer. Only the last task to poll for sending is
    /// woken.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub fn poll_send(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .poll_io(cx, Direction::Write, || sock.send(buf))
    }

    /// Sends to the connected peer if the socket is known to be writable.
    ///
    /// # Errors
    /// `WouldBlock` when it is not (readiness is then cleared, so
    /// [`writable`](Self::writable) waits for buffer space), otherwise as
    /// [`send`](Self::send).
    pub fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .try_io(Interest::WRITABLE, || sock.send(buf))
    }

    /// Receives one datagram from the connected peer into `buf`; returns its length. A
    /// datagram longer than `buf` is truncated, the rest discarded.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, no datagram was consumed.
    ///
    /// # Errors
    /// `ConnectionRefused` when a datagram sent earlier was answered by an ICMP
    /// port-unreachable, other OS errors of `recv(2)`, or a shut-down reactor.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .async_io(Interest::READABLE, || sock.recv(buf))
            .await
    }

    /// Polls to receive one datagram from the connected peer into `buf`, returning its length
    /// (unlike tokio, which fills a `ReadBuf`: that form is `poll_recv_read_buf`, feature
    /// `tokio-io`). Only the last task to poll for receiving is woken.
    ///
    /// # Errors
    /// As [`recv`](Self::recv).
    pub fn poll_recv(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .poll_io(cx, Direction::Read, || sock.recv(buf))
    }

    /// Receives from the connected peer if a datagram is known to be queued.
    ///
    /// # Errors
    /// `WouldBlock` when none is (readiness is then cleared, so [`readable`](Self::readable)
    /// waits for the next datagram), otherwise as [`recv`](Self::recv).
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .try_io(Interest::READABLE, || sock.recv(buf))
    }

    /// Copies the next datagram from the connected peer into `buf` without consuming it;
    /// returns its length (truncated to `buf`).
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// As [`recv`](Self::recv).
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .async_io(Interest::READABLE, || sock.peek(buf))
            .await
    }

    /// Polls to peek at the next datagram from the connected peer (a plain byte slice, unlike
    /// tokio's `ReadBuf`: that form is `poll_peek_read_buf`, feature `tokio-io`). Only the
    /// last task to poll for receiving is woken.
    ///
    /// # Errors
    /// As [`recv`](Self::recv).
    pub fn poll_peek(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .poll_io(cx, Direction::Read, || sock.peek(buf))
    }

    /// Peeks at the next datagram from the connected peer if one is known to be queued.
    ///
    /// # Errors
    /// `WouldBlock` when none is, otherwise as [`recv`](Self::recv).
    pub fn try_peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .try_io(Interest::READABLE, || sock.peek(buf))
    }

    // ---- addressed send / recv / peek ----

    /// Sends `buf` as one datagram to `target` (the first address it resolves to); returns the
    /// number of bytes sent.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, nothing was sent.
    ///
    /// # Errors
    /// `InvalidInput` when `target` resolves to nothing, a resolution error, the OS error of
    /// `sendto(2)` (e.g. `EACCES` for a broadcast address without
    /// [`set_broadcast`](Self::set_broadcast)), or a shut-down reactor.
    pub async fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], target: A) -> io::Result<usize> {
        let addr = resolve(&target).await?.into_iter().next().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "no addresses to send data to")
        })?;
        let sock = self.io.get_ref();
        self.io
            .registration()
            .async_io(Interest::WRITABLE, || sock.send_to(buf, addr))
            .await
    }

    /// Polls to send `buf` to `target`. Only the last task to poll for sending is woken.
    ///
    /// # Errors
    /// As [`send_to`](Self::send_to).
    pub fn poll_send_to(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
        target: SocketAddr,
    ) -> Poll<io::Result<usize>> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .poll_io(cx, Direction::Write, || sock.send_to(buf, target))
    }

    /// Sends to `target` if the socket is known to be writable.
    ///
    /// # Errors
    /// `WouldBlock` when it is not (readiness is then cleared), otherwise as
    /// [`send_to`](Self::send_to).
    pub fn try_send_to(&self, buf: &[u8], target: SocketAddr) -> io::Result<usize> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .try_io(Interest::WRITABLE, || sock.send_to(buf, target))
    }

    /// Receives one datagram into `buf`; returns its length (truncated to `buf`) and its
    /// sender.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, no datagram was consumed.
    ///
    /// # Errors
    /// The OS error of `recvfrom(2)` (on Linux an unconnected socket can also report an ICMP
    /// error here, e.g. `ConnectionRefused`), or a shut-down reactor.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .async_io(Interest::READABLE, || sock.recv_from(buf))
            .await
    }

    /// Polls to receive one datagram into `buf`, returning its length and its sender (unlike
    /// tokio, which fills a `ReadBuf`: that form is `poll_recv_from_read_buf`, feature
    /// `tokio-io`). Only the last task to poll for receiving is woken.
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

    /// Receives a datagram and its sender if one is known to be queued.
    ///
    /// # Errors
    /// `WouldBlock` when none is (readiness is then cleared), otherwise as
    /// [`recv_from`](Self::recv_from).
    pub fn try_recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .try_io(Interest::READABLE, || sock.recv_from(buf))
    }

    /// Copies the next datagram into `buf` without consuming it; returns its length
    /// (truncated to `buf`) and its sender.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    pub async fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .async_io(Interest::READABLE, || sock.peek_from(buf))
            .await
    }

    /// Polls to peek at the next datagram (a plain byte slice, unlike tokio's `ReadBuf`: that
    /// form is `poll_peek_from_read_buf`, feature `tokio-io`), returning its length and
    /// sender. Only the last task to poll for receiving is woken.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    pub fn poll_peek_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .poll_io(cx, Direction::Read, || sock.peek_from(buf))
    }

    /// Peeks at the next datagram if one is known to be queued.
    ///
    /// # Errors
    /// `WouldBlock` when none is (readiness is then cleared), otherwise as
    /// [`recv_from`](Self::recv_from).
    pub fn try_peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let sock = self.io.get_ref();
        self.io
            .registration()
            .try_io(Interest::READABLE, || sock.peek_from(buf))
    }

    // ---- into `BufMut` / `ReadBuf` (feature `tokio-io`) ----

    /// Receives one datagram from the connected peer into the spare capacity of `buf`, and
    /// advances `buf` by its length (a `Vec<u8>` or `BytesMut` without spare capacity grows
    /// by at least 64 bytes first). A datagram longer than the spare capacity is truncated.
    /// Feature `tokio-io`.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, no datagram was consumed.
    ///
    /// # Errors
    /// As [`recv`](Self::recv).
    #[cfg(feature = "tokio-io")]
    pub async fn recv_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        let sock = SockRef::from(self.io.get_ref());
        self.io
            .registration()
            .async_io(Interest::READABLE, || {
                crate::buf::recv_buf_mut(buf, |spare| Ok((sock.recv(spare)?, ())))
            })
            .await
            .map(|(n, ())| n)
    }

    /// [`recv_buf`](Self::recv_buf) if a datagram is known to be queued. Feature `tokio-io`.
    ///
    /// # Errors
    /// `WouldBlock` when none is (readiness is then cleared), otherwise as
    /// [`recv`](Self::recv).
    #[cfg(feature = "tokio-io")]
    pub fn try_recv_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        let sock = SockRef::from(self.io.get_ref());
        self.io
            .registration()
            .try_io(Interest::READABLE, || {
                crate::buf::recv_buf_mut(buf, |spare| Ok((sock.recv(spare)?, ())))
            })
            .map(|(n, ())| n)
    }

    /// Receives one datagram into the spare capacity of `buf` and advances `buf` by its
    /// length; returns the length and the sender. Feature `tokio-io`.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, no datagram was consumed.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    #[cfg(feature = "tokio-io")]
    pub async fn recv_buf_from<B: bytes::BufMut>(
        &self,
        buf: &mut B,
    ) -> io::Result<(usize, SocketAddr)> {
        let sock = SockRef::from(self.io.get_ref());
        self.io
            .registration()
            .async_io(Interest::READABLE, || {
                crate::buf::recv_buf_mut(buf, |spare| ip_from(sock.recv_from(spare)?))
            })
            .await
    }

    /// [`recv_buf_from`](Self::recv_buf_from) if a datagram is known to be queued. Feature
    /// `tokio-io`.
    ///
    /// # Errors
    /// `WouldBlock` when none is (readiness is then cleared), otherwise as
    /// [`recv_from`](Self::recv_from).
    #[cfg(feature = "tokio-io")]
    pub fn try_recv_buf_from<B: bytes::BufMut>(
        &self,
        buf: &mut B,
    ) -> io::Result<(usize, SocketAddr)> {
        let sock = SockRef::from(self.io.get_ref());
        self.io.registration().try_io(Interest::READABLE, || {
            crate::buf::recv_buf_mut(buf, |spare| ip_from(sock.recv_from(spare)?))
        })
    }

    /// tokio's `poll_recv`: polls to receive one datagram from the connected peer into the
    /// unfilled part of `buf` (truncated to it), filling it. Only the last task to poll for
    /// receiving is woken. Feature `tokio-io`; [`poll_recv`](Self::poll_recv) takes a slice.
    ///
    /// # Errors
    /// As [`recv`](Self::recv).
    #[cfg(feature = "tokio-io")]
    pub fn poll_recv_read_buf(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let sock = SockRef::from(self.io.get_ref());
        self.io.registration().poll_io(cx, Direction::Read, || {
            crate::buf::recv_read_buf(buf, |spare| Ok((sock.recv(spare)?, ())))
        })
    }

    /// tokio's `poll_recv_from`: as [`poll_recv_read_buf`](Self::poll_recv_read_buf), from
    /// any sender, whose address is returned. Feature `tokio-io`;
    /// [`poll_recv_from`](Self::poll_recv_from) takes a slice.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    #[cfg(feature = "tokio-io")]
    pub fn poll_recv_from_read_buf(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<SocketAddr>> {
        let sock = SockRef::from(self.io.get_ref());
        self.io.registration().poll_io(cx, Direction::Read, || {
            crate::buf::recv_read_buf(buf, |spare| ip_from(sock.recv_from(spare)?))
        })
    }

    /// tokio's `poll_peek`: as [`poll_recv_read_buf`](Self::poll_recv_read_buf), without
    /// consuming the datagram. Feature `tokio-io`; [`poll_peek`](Self::poll_peek) takes a
    /// slice.
    ///
    /// # Errors
    /// As [`recv`](Self::recv).
    #[cfg(feature = "tokio-io")]
    pub fn poll_peek_read_buf(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let sock = SockRef::from(self.io.get_ref());
        self.io.registration().poll_io(cx, Direction::Read, || {
            crate::buf::recv_read_buf(buf, |spare| Ok((sock.peek(spare)?, ())))
        })
    }

    /// tokio's `poll_peek_from`: as [`poll_recv_from_read_buf`](Self::poll_recv_from_read_buf),
    /// without consuming the datagram. Feature `tokio-io`;
    /// [`poll_peek_from`](Self::poll_peek_from) takes a slice.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    #[cfg(feature = "tokio-io")]
    pub fn poll_peek_from_read_buf(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<SocketAddr>> {
        let sock = SockRef::from(self.io.get_ref());
        self.io.registration().poll_io(cx, Direction::Read, || {
            crate::buf::recv_read_buf(buf, |spare| ip_from(sock.peek_from(spare)?))
        })
    }

    /// The sender of the next datagram, without consuming it.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    pub async fn peek_sender(&self) -> io::Result<SocketAddr> {
        self.io
            .registration()
            .async_io(Interest::READABLE, || self.peek_sender_raw())
            .await
    }

    /// Polls for the sender of the next datagram. Only the last task to poll for receiving is
    /// woken.
    ///
    /// # Errors
    /// As [`recv_from`](Self::recv_from).
    pub fn poll_peek_sender(&self, cx: &mut Context<'_>) -> Poll<io::Result<SocketAddr>> {
        self.io
            .registration()
            .poll_io(cx, Direction::Read, || self.peek_sender_raw())
    }

    /// The sender of the next datagram, if one is known to be queued.
    ///
    /// # Errors
    /// `WouldBlock` when none is (readiness is then cleared), otherwise as
    /// [`recv_from`](Self::recv_from).
    pub fn try_peek_sender(&self) -> io::Result<SocketAddr> {
        self.io
            .registration()
            .try_io(Interest::READABLE, || self.peek_sender_raw())
    }

    fn peek_sender_raw(&self) -> io::Result<SocketAddr> {
        SockRef::from(self.io.get_ref())
            .peek_sender()?
            .as_socket()
            .ok_or_else(|| io::Error::other("the sender's address is not an IP address"))
    }

    // ---- options ----

    /// Whether `SO_BROADCAST` is set.
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn broadcast(&self) -> io::Result<bool> {
        self.io.get_ref().broadcast()
    }

    /// Sets `SO_BROADCAST`: allows sending to broadcast addresses.
    ///
    /// # Errors
    /// The OS error of `setsockopt(2)`.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.io.get_ref().set_broadcast(on)
    }

    /// Whether IPv4 multicast sent by this socket loops back to local sockets
    /// (`IP_MULTICAST_LOOP`).
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)` (e.g. on an IPv6 socket).
    pub fn multicast_loop_v4(&self) -> io::Result<bool> {
        self.io.get_ref().multicast_loop_v4()
    }

    /// Sets `IP_MULTICAST_LOOP`.
    ///
    /// # Errors
    /// The OS error of `setsockopt(2)`.
    pub fn set_multicast_loop_v4(&self, on: bool) -> io::Result<()> {
        self.io.get_ref().set_multicast_loop_v4(on)
    }

    /// The time-to-live of outgoing IPv4 multicast (`IP_MULTICAST_TTL`).
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn multicast_ttl_v4(&self) -> io::Result<u32> {
        self.io.get_ref().multicast_ttl_v4()
    }

    /// Sets `IP_MULTICAST_TTL` (1 keeps multicast on the local network).
    ///
    /// # Errors
    /// The OS error of `setsockopt(2)`.
    pub fn set_multicast_ttl_v4(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_multicast_ttl_v4(ttl)
    }

    /// Whether IPv6 multicast sent by this socket loops back (`IPV6_MULTICAST_LOOP`).
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)` (e.g. on an IPv4 socket).
    pub fn multicast_loop_v6(&self) -> io::Result<bool> {
        self.io.get_ref().multicast_loop_v6()
    }

    /// Sets `IPV6_MULTICAST_LOOP`.
    ///
    /// # Errors
    /// The OS error of `setsockopt(2)`.
    pub fn set_multicast_loop_v6(&self, on: bool) -> io::Result<()> {
        self.io.get_ref().set_multicast_loop_v6(on)
    }

    /// Joins the IPv4 multicast group `multiaddr` on the interface with address `interface`
    /// (`Ipv4Addr::UNSPECIFIED` lets the kernel choose).
    ///
    /// # Errors
    /// The OS error of `setsockopt(IP_ADD_MEMBERSHIP)`.
    pub fn join_multicast_v4(&self, multiaddr: Ipv4Addr, interface: Ipv4Addr) -> io::Result<()> {
        self.io.get_ref().join_multicast_v4(&multiaddr, &interface)
    }

    /// Joins the IPv6 multicast group `multiaddr` on the interface with index `interface`
    /// (0 lets the kernel choose).
    ///
    /// # Errors
    /// The OS error of `setsockopt(IPV6_ADD_MEMBERSHIP)`.
    pub fn join_multicast_v6(&self, multiaddr: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.io.get_ref().join_multicast_v6(multiaddr, interface)
    }

    /// Leaves an IPv4 multicast group joined with
    /// [`join_multicast_v4`](Self::join_multicast_v4).
    ///
    /// # Errors
    /// The OS error of `setsockopt(IP_DROP_MEMBERSHIP)`.
    pub fn leave_multicast_v4(&self, multiaddr: Ipv4Addr, interface: Ipv4Addr) -> io::Result<()> {
        self.io.get_ref().leave_multicast_v4(&multiaddr, &interface)
    }

    /// Leaves an IPv6 multicast group joined with
    /// [`join_multicast_v6`](Self::join_multicast_v6).
    ///
    /// # Errors
    /// The OS error of `setsockopt(IPV6_DROP_MEMBERSHIP)`.
    pub fn leave_multicast_v6(&self, multiaddr: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.io.get_ref().leave_multicast_v6(multiaddr, interface)
    }

    /// The unicast time-to-live of outgoing packets (`IP_TTL`).
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get_ref().ttl()
    }

    /// Sets `IP_TTL`.
    ///
    /// # Errors
    /// The OS error of `setsockopt(2)`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
    }

    /// The IPv4 type-of-service byte of outgoing packets (`IP_TOS`).
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn tos_v4(&self) -> io::Result<u32> {
        SockRef::from(self.io.get_ref()).tos_v4()
    }

    /// Sets `IP_TOS` (DSCP and ECN bits).
    ///
    /// # Errors
    /// The OS error of `setsockopt(2)`.
    pub fn set_tos_v4(&self, tos: u32) -> io::Result<()> {
        SockRef::from(self.io.get_ref()).set_tos_v4(tos)
    }

    /// The IPv6 traffic class of outgoing packets (`IPV6_TCLASS`).
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn tclass_v6(&self) -> io::Result<u32> {
        SockRef::from(self.io.get_ref()).tclass_v6()
    }

    /// Sets `IPV6_TCLASS`.
    ///
    /// # Errors
    /// The OS error of `setsockopt(2)`.
    pub fn set_tclass_v6(&self, tclass: u32) -> io::Result<()> {
        SockRef::from(self.io.get_ref()).set_tclass_v6(tclass)
    }

    /// The interface the socket is bound to (`SO_BINDTODEVICE`), if any.
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn device(&self) -> io::Result<Option<Vec<u8>>> {
        SockRef::from(self.io.get_ref()).device()
    }

    /// Binds the socket to an interface by name (`SO_BINDTODEVICE`); `None` removes the
    /// binding. Usually needs `CAP_NET_RAW`.
    ///
    /// # Errors
    /// The OS error of `setsockopt(2)` (`EPERM` without the capability).
    pub fn bind_device(&self, interface: Option<&[u8]>) -> io::Result<()> {
        SockRef::from(self.io.get_ref()).bind_device(interface)
    }

    /// Takes the pending socket error (`SO_ERROR`), if any — for instance an ICMP error that
    /// no receive has reported yet.
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }
}

crate::io::fd_traits!(UdpSocket, std::net::UdpSocket);

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The standard library's Debug shows the fd and the local address.
        fmt::Debug::fmt(self.io.get_ref(), f)
    }
}

/// A received length and its sender's IP address, from socket2's `recv_from`.
#[cfg(feature = "tokio-io")]
fn ip_from((n, addr): (usize, socket2::SockAddr)) -> io::Result<(usize, SocketAddr)> {
    let addr = addr
        .as_socket()
        .ok_or_else(|| io::Error::other("the sender's address is not an IP address"))?;
    Ok((n, addr))
}
