//! [`TcpStream`].

use std::fmt;
use std::io::{self, IoSlice, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::task::{Context, Poll};
use std::time::Duration;

use socket2::SockRef;
use weir_reactor::{AsyncFd, Direction, Handle, Interest, Ready};

use super::TcpSocket;
use super::split::{ReadHalf, WriteHalf};
use super::split_owned::{OwnedReadHalf, OwnedWriteHalf};
use crate::addr::{ToSocketAddrs, last_error, resolve};
use crate::io::StreamIo;

/// A TCP connection, registered with the reactor of the thread that created it.
///
/// Created by [`connect`](Self::connect), by [`TcpListener::accept`](super::TcpListener::accept),
/// by [`TcpSocket::connect`], or from a standard stream with [`from_std`](Self::from_std).
///
/// Reading and writing go through `futures_io::AsyncRead`/`AsyncWrite` (and, with feature
/// `tokio-io`, tokio's traits; with feature `hyper`, `hyper::rt::Read`/`Write`), or through the
/// readiness API: [`ready`](Self::ready)/[`readable`](Self::readable)/
/// [`writable`](Self::writable) followed by [`try_read`](Self::try_read)/
/// [`try_write`](Self::try_write).
///
/// Writes use `send(2)` with `MSG_NOSIGNAL`: writing to a connection the peer has closed returns
/// `EPIPE`/`ECONNRESET` and never raises `SIGPIPE`.
///
/// Dropping the stream deregisters it and closes the socket.
///
/// # Example
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// let stream = weir_net::TcpStream::connect("127.0.0.1:8080").await?;
/// stream.writable().await?;
/// let n = stream.try_write(b"hello")?;
/// # let _ = n;
/// # Ok(())
/// # }
/// ```
pub struct TcpStream {
    io: AsyncFd<std::net::TcpStream>,
}

impl TcpStream {
    /// Opens a connection to `addr`, trying each address it resolves to in turn.
    ///
    /// The connect is non-blocking: the future waits for the socket to become writable, then
    /// reads `SO_ERROR`. To bound the wait, wrap it in `weir::time::timeout`.
    ///
    /// # Cancel safety
    /// Not cancel safe in the sense that a dropped future abandons the connection attempt in
    /// progress (the half-open socket is closed); nothing else is lost.
    ///
    /// # Errors
    /// The last address's error (e.g. `ConnectionRefused`), `InvalidInput` if `addr` resolves to
    /// no address, a resolver error, or an error registering the socket with the reactor.
    pub async fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        let addrs = resolve(&addr).await?;
        let mut last = None;
        for a in addrs {
            let attempt = match TcpSocket::new_for_addr(a) {
                Ok(socket) => socket.connect(a).await,
                Err(e) => Err(e),
            };
            match attempt {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last_error(last))
    }

    /// Finishes a non-blocking connect of `socket` to `addr`.
    pub(crate) async fn connect_socket(
        socket: socket2::Socket,
        addr: SocketAddr,
    ) -> io::Result<TcpStream> {
        match socket.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        let stream = TcpStream::register(std::net::TcpStream::from(socket), None)?;
        // Writable (or error/hang-up) once the handshake has finished either way.
        stream
            .io
            .registration()
            .readiness(Interest::WRITABLE)
            .await?;
        if let Some(e) = stream.io.get_ref().take_error()? {
            return Err(e);
        }
        Ok(stream)
    }

    fn register(std: std::net::TcpStream, handle: Option<&Handle>) -> io::Result<TcpStream> {
        let interest = Interest::READABLE | Interest::WRITABLE;
        let io = match handle {
            Some(h) => AsyncFd::with_handle(std, interest, h)?,
            None => AsyncFd::with_interest(std, interest)?,
        };
        Ok(TcpStream { io })
    }

    /// Wraps a socket accepted with `accept4(SOCK_NONBLOCK)`: registers it with the current
    /// reactor.
    pub(crate) fn from_accepted(std: std::net::TcpStream) -> io::Result<TcpStream> {
        TcpStream::register(std, None)
    }

    /// Wraps a connected standard stream, putting it in non-blocking mode and registering it
    /// with the current reactor (a worker's own, or the fallback reactor outside a runtime).
    ///
    /// # Errors
    /// The error of setting non-blocking mode or of registering the fd.
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        TcpStream::register(stream, None)
    }

    /// Wraps a connected standard stream that is **already non-blocking** (as those of
    /// [`TcpListener::poll_accept_std`](super::TcpListener::poll_accept_std) are), registering it
    /// with the reactor of `handle` — its readiness then wakes tasks on that reactor's worker.
    ///
    /// # Errors
    /// The error of registering the fd (e.g. the reactor has shut down).
    pub fn from_std_with_handle(
        stream: std::net::TcpStream,
        handle: &Handle,
    ) -> io::Result<TcpStream> {
        debug_assert!(
            is_nonblocking(stream.as_raw_fd()),
            "TcpStream::from_std_with_handle needs a non-blocking stream"
        );
        TcpStream::register(stream, Some(handle))
    }

    /// Deregisters the stream and returns the standard stream. It stays in non-blocking mode;
    /// call `set_nonblocking(false)` for blocking use.
    ///
    /// # Errors
    /// None at present; the `Result` mirrors tokio's signature.
    pub fn into_std(self) -> io::Result<std::net::TcpStream> {
        Ok(self.io.into_inner())
    }

    /// The local address of the connection.
    ///
    /// # Errors
    /// The error of `getsockname(2)`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The remote address of the connection.
    ///
    /// # Errors
    /// The error of `getpeername(2)` (e.g. `NotConnected`).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Takes the pending socket error (`SO_ERROR`), if any.
    ///
    /// # Errors
    /// The error of `getsockopt(2)`.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }

    /// Waits until the stream is ready for any of `interest` and returns the readiness seen.
    ///
    /// Readiness is a hint: a following `try_read`/`try_write` may still return `WouldBlock`,
    /// which clears it so the next `ready` waits again. Any number of tasks may wait at once.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future loses no readiness.
    ///
    /// # Errors
    /// When the reactor the stream is registered with has shut down.
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        crate::io::ready(&self.io, interest).await
    }

    /// Waits until the stream is readable (data, end of stream, or an error is pending).
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor the stream is registered with has shut down.
    pub async fn readable(&self) -> io::Result<()> {
        self.ready(Interest::READABLE).await.map(drop)
    }

    /// Waits until the stream is writable.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor the stream is registered with has shut down.
    pub async fn writable(&self) -> io::Result<()> {
        self.ready(Interest::WRITABLE).await.map(drop)
    }

    /// Polls for read readiness. Only the last task to poll is woken; use
    /// [`readable`](Self::readable) for several waiters.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        crate::io::poll_ready(&self.io, cx, Direction::Read)
    }

    /// Polls for write readiness. Only the last task to poll is woken; use
    /// [`writable`](Self::writable) for several waiters.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        crate::io::poll_ready(&self.io, cx, Direction::Write)
    }

    /// Reads without waiting. `Ok(0)` means end of stream (or an empty `buf`).
    ///
    /// # Errors
    /// `WouldBlock` if no data is known to be available (readiness is then cleared, so
    /// [`readable`](Self::readable) waits for the next event), or the OS error of `read(2)`.
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        crate::io::try_read(&self.io, buf)
    }

    /// Vectored [`try_read`](Self::try_read) (`readv(2)`).
    ///
    /// # Errors
    /// As [`try_read`](Self::try_read).
    pub fn try_read_vectored(&self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        crate::io::try_read_vectored(&self.io, bufs)
    }

    /// Writes without waiting; returns how many bytes were written.
    ///
    /// # Errors
    /// `WouldBlock` if the socket is not known to be writable (readiness is then cleared), or
    /// the OS error of `send(2)` — `BrokenPipe`/`ConnectionReset` once the peer has gone.
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        crate::io::try_write(&self.io, buf)
    }

    /// Vectored [`try_write`](Self::try_write) (`sendmsg(2)`).
    ///
    /// # Errors
    /// As [`try_write`](Self::try_write).
    pub fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        crate::io::try_write_vectored(&self.io, bufs)
    }

    /// Runs a custom non-blocking operation `f` if the stream is known to be ready for
    /// `interest`, clearing that readiness if `f` returns `WouldBlock`.
    ///
    /// # Errors
    /// `WouldBlock` when not ready, otherwise whatever `f` returns.
    pub fn try_io<R>(
        &self,
        interest: Interest,
        f: impl FnOnce() -> io::Result<R>,
    ) -> io::Result<R> {
        self.io.registration().try_io(interest, f)
    }

    /// Waits for `interest` and runs the non-blocking operation `f` until it does not return
    /// `WouldBlock`.
    ///
    /// # Cancel safety
    /// Cancel safe as long as `f` is.
    ///
    /// # Errors
    /// Whatever `f` returns other than `WouldBlock`, or a shut-down reactor.
    pub async fn async_io<R>(
        &self,
        interest: Interest,
        f: impl FnMut() -> io::Result<R>,
    ) -> io::Result<R> {
        self.io.registration().async_io(interest, f).await
    }

    /// Receives data without removing it from the socket's queue, waiting for some to arrive.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is consumed before the future completes.
    ///
    /// # Errors
    /// The OS error of `recv(2)` with `MSG_PEEK`, or a shut-down reactor.
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io
            .registration()
            .async_io(Interest::READABLE, || self.io.get_ref().peek(buf))
            .await
    }

    /// Polls to peek at incoming data (only the last task to poll is woken). Unlike tokio's,
    /// this takes a plain byte slice (tokio's `ReadBuf` is only available with feature
    /// `tokio-io`); returns how many bytes were copied.
    ///
    /// # Errors
    /// As [`peek`](Self::peek).
    pub fn poll_peek(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.io
            .registration()
            .poll_io(cx, Direction::Read, || self.io.get_ref().peek(buf))
    }

    /// Shuts down the write half (sends FIN); reads keep working. The inherent counterpart of
    /// `AsyncWriteExt::shutdown`/`close`.
    ///
    /// # Cancel safety
    /// Cancel safe: the shutdown happens on the first poll.
    ///
    /// # Errors
    /// The OS error of `shutdown(2)`; `NotConnected` (the peer already reset the connection)
    /// is reported as success, as in tokio.
    pub async fn shutdown(&self) -> io::Result<()> {
        crate::io::shutdown_write(self.io.get_ref())
    }

    /// Shuts down the write half; always ready.
    ///
    /// # Errors
    /// As [`shutdown`](Self::shutdown).
    pub fn poll_shutdown(&self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(crate::io::shutdown_write(self.io.get_ref()))
    }

    /// `TCP_NODELAY`.
    ///
    /// # Errors
    /// The error of `getsockopt(2)`.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.io.get_ref().nodelay()
    }

    /// Sets `TCP_NODELAY` (disables Nagle's algorithm when `true`).
    ///
    /// # Errors
    /// The error of `setsockopt(2)`.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.io.get_ref().set_nodelay(nodelay)
    }

    /// `SO_LINGER`.
    ///
    /// # Errors
    /// The error of `getsockopt(2)`.
    pub fn linger(&self) -> io::Result<Option<Duration>> {
        SockRef::from(self.io.get_ref()).linger()
    }

    /// Sets `SO_LINGER`. `Some(Duration::ZERO)` makes closing the stream send a reset.
    ///
    /// # Errors
    /// The error of `setsockopt(2)`.
    pub fn set_linger(&self, linger: Option<Duration>) -> io::Result<()> {
        SockRef::from(self.io.get_ref()).set_linger(linger)
    }

    /// `IP_TTL`.
    ///
    /// # Errors
    /// The error of `getsockopt(2)`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get_ref().ttl()
    }

    /// Sets `IP_TTL`.
    ///
    /// # Errors
    /// The error of `setsockopt(2)`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
    }

    /// Splits the stream into a read half and a write half borrowing it, at no cost. The halves
    /// can be used concurrently (e.g. in `join!`), but not moved to other tasks; for that, use
    /// [`into_split`](Self::into_split).
    ///
    /// With `futures::io::AsyncReadExt` in scope, `stream.split()` resolves to that trait's
    /// by-value `split` (method lookup tries by-value receivers first); write
    /// `TcpStream::split(&mut stream)` to get these halves.
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        super::split::split(self)
    }

    /// Splits the stream into owned halves (sharing it through an `Arc`) that can move to
    /// different tasks. [`OwnedReadHalf::reunite`] puts them back together. Dropping the write
    /// half shuts down the write direction, unless [`OwnedWriteHalf::forget`] was called.
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        super::split_owned::split_owned(self)
    }
}

/// `true` if `O_NONBLOCK` is set on `fd` (debug assertions only).
fn is_nonblocking(fd: RawFd) -> bool {
    // SAFETY: F_GETFL takes no pointer argument; `fd` is open (borrowed from a live stream).
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    flags >= 0 && flags & libc::O_NONBLOCK != 0
}

impl StreamIo for TcpStream {
    type Socket = std::net::TcpStream;

    fn async_fd(&self) -> &AsyncFd<std::net::TcpStream> {
        &self.io
    }
}

crate::io::stream_io_impls!(read for TcpStream);
crate::io::stream_io_impls!(write for TcpStream);

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.io.as_raw_fd()
    }
}

impl AsFd for TcpStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}

impl TryFrom<std::net::TcpStream> for TcpStream {
    type Error = io::Error;

    /// [`TcpStream::from_std`].
    fn try_from(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        TcpStream::from_std(stream)
    }
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpStream")
            .field("fd", &self.io.as_raw_fd())
            .field("local", &self.local_addr().ok())
            .field("peer", &self.peer_addr().ok())
            .field("registration", self.io.registration())
            .finish()
    }
}
