//! [`UdpSocket`]: UDP on the reactor of the worker that creates the socket.
//!
//! This file holds the type, its creation and connection, and its readiness methods;
//! `datagrams` its send, receive and peek operations, and `options` its socket options; the
//! forms that receive into tokio's buffer types (feature `tokio-io`) are `crate::tokio_io`'s.

mod datagrams;
mod options;

use std::fmt;
use std::io;
use std::net::{self, SocketAddr};

use socket2::{Domain, Protocol, Socket, Type};
use weir_reactor::AsyncFd;

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
    pub(crate) io: AsyncFd<net::UdpSocket>,
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
}

crate::io::fd_traits!(UdpSocket, std::net::UdpSocket);

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The standard library's Debug shows the fd and the local address.
        fmt::Debug::fmt(self.io.get_ref(), f)
    }
}
