//! [`TcpStream`]: one type. One idea: kept in one file with its I/O, options and conversions (the
//! hand-back of read-ahead bytes on `into_std` included), so that each reads next to the state
//! it uses.

use std::fmt;
use std::io;
use std::mem::ManuallyDrop;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::task::{Context, Poll};
use std::time::Duration;

use socket2::SockRef;
use weir_reactor::{AsyncFd, Direction, Interest, ReactorHandle};

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
    pub(crate) io: AsyncFd<std::net::TcpStream>,
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
        // Registered for readiness only, never for io_uring's read-ahead: a receive armed on a
        // connecting socket would take the handshake's error (`SO_ERROR`) checked below.
        let io = AsyncFd::with_interest(
            std::net::TcpStream::from(socket),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        let stream = TcpStream { io };
        // Writable (or error/hang-up) once the handshake has finished either way.
        stream
            .io
            .registration()
            .readiness(Interest::WRITABLE)
            .await?;
        if let Some(e) = stream.io.get_ref().take_error()? {
            return Err(e);
        }
        // The fields are evaluated only when the event is enabled.
        tracing::debug!(
            target: "weir::net",
            fd = stream.io.as_raw_fd(),
            local = ?stream.local_addr().ok(),
            peer = %addr,
            "connected"
        );
        Ok(stream)
    }

    fn register(std: std::net::TcpStream, handle: Option<&ReactorHandle>) -> io::Result<TcpStream> {
        let interest = Interest::READABLE | Interest::WRITABLE;
        let io = AsyncFd::with_ahead(std, interest, handle)?;
        Ok(TcpStream { io })
    }

    /// Wraps a socket accepted with `accept4(SOCK_NONBLOCK)`. On a worker of a multi-worker
    /// runtime it is registered with the less loaded of two reactors, the accepting worker's
    /// and a peer's in turn (`weir_executor::placement`), so that a listener's
    /// connections spread over every worker's epoll; the connection's task moves to that worker
    /// at its first wake-up (a task woken by a worker's reactor is queued on that worker).
    /// Elsewhere it is registered with the current reactor.
    ///
    /// Placed on another worker, the socket's `epoll_ctl` is that worker's to make
    /// ([`AsyncFd::handed_over`]): the accepting worker never waits for another worker's epoll.
    pub(crate) fn from_accepted(std: std::net::TcpStream) -> io::Result<TcpStream> {
        match weir_executor::placement::for_accepted_connection() {
            Some(h) => {
                let interest = Interest::READABLE | Interest::WRITABLE;
                let io = AsyncFd::handed_over(std, interest, &h)?;
                Ok(TcpStream { io })
            }
            None => TcpStream::register(std, None),
        }
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
        handle: &ReactorHandle,
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
    /// No byte is lost in the handover. With io_uring's receive fast path
    /// ([`Builder::io_uring_recv_multishot`](weir_executor::Builder::io_uring_recv_multishot))
    /// the reactor receives a stream's bytes ahead of its reads: its multishot receive is
    /// stopped and its completions collected first, so that every byte of the stream is then
    /// either queued in weir or still in the socket. From a thread other than the reactor's
    /// owner that waits for the owner's next turn.
    ///
    /// # Errors
    /// Only on that fast path: `InvalidData` when bytes were received ahead and not read yet,
    /// which the standard stream cannot give back. The error carries them and the standard
    /// stream: [`IntoStdError::from_io`] takes them out. `TimedOut`, carrying the same, when the
    /// reactor's owner did not turn for 10 s to stop its receive (bytes it receives afterwards
    /// are not in the error). Read until `WouldBlock` first to get `Ok`.
    pub fn into_std(self) -> io::Result<std::net::TcpStream> {
        // Not a close: skip `Drop` (its log line), and move `io` out.
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped nor used again, so `io` is read exactly once and
        // ends up with a single owner.
        let io = unsafe { std::ptr::read(&this.io) };
        let (stream, buffered, detached) = io.into_parts();
        match detached {
            Ok(()) if buffered.is_empty() => Ok(stream),
            Ok(()) => {
                let msg = format!(
                    "into_std: {} bytes were received ahead by the io_uring reactor and not \
                     read; a std::net::TcpStream cannot return them (they and the stream are \
                     in this error: IntoStdError::from_io)",
                    buffered.len()
                );
                Err(IntoStdError::wrap(
                    io::ErrorKind::InvalidData,
                    msg,
                    stream,
                    buffered,
                ))
            }
            Err(e) => {
                let msg = format!(
                    "into_std: {e}; {} bytes received ahead so far (they and the stream are in \
                     this error: IntoStdError::from_io)",
                    buffered.len()
                );
                Err(IntoStdError::wrap(e.kind(), msg, stream, buffered))
            }
        }
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

    crate::io::readiness_methods!(TcpStream, "the stream");

    crate::io::stream_try_methods!(TcpStream);

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
            .async_io(Interest::READABLE, || {
                crate::io::read_ahead_or(&self.io, buf, false, |b| self.io.get_ref().peek(b))
            })
            .await
    }

    /// Polls to peek at incoming data (only the last task to poll is woken). Unlike tokio's,
    /// this takes a plain byte slice (tokio's `ReadBuf` form is `poll_peek_read_buf`, feature
    /// `tokio-io`); returns how many bytes were copied.
    ///
    /// # Errors
    /// As [`peek`](Self::peek).
    pub fn poll_peek(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.io.registration().poll_io(cx, Direction::Read, || {
            crate::io::read_ahead_or(&self.io, buf, false, |b| self.io.get_ref().peek(b))
        })
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

    /// Sets `SO_LINGER`. A non-zero duration makes dropping the stream block the dropping
    /// thread (a worker, in async code) while unsent data drains; prefer
    /// [`set_zero_linger`](Self::set_zero_linger) or the shut-down-then-read-to-end pattern.
    ///
    /// # Errors
    /// The error of `setsockopt(2)`.
    pub fn set_linger(&self, linger: Option<Duration>) -> io::Result<()> {
        SockRef::from(self.io.get_ref()).set_linger(linger)
    }

    /// Sets `SO_LINGER` to zero: dropping the stream discards unsent data and sends a reset
    /// (`RST`) instead of the `FIN` handshake, so the socket skips `TIME_WAIT` and the peer's
    /// next read fails with `ConnectionReset`. It never blocks. [`linger`](Self::linger) then
    /// reports `Some(Duration::ZERO)`.
    ///
    /// # Errors
    /// The error of `setsockopt(2)`.
    pub fn set_zero_linger(&self) -> io::Result<()> {
        SockRef::from(self.io.get_ref()).set_linger(Some(Duration::ZERO))
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

/// What [`TcpStream::into_std`] refused to drop: the standard stream (deregistered, in
/// non-blocking mode) and the bytes the reactor had received ahead of it, which come before
/// anything the standard stream reads.
///
/// `into_std` returns it inside its `io::Error`; take it out with
/// [`from_io`](Self::from_io).
pub struct IntoStdError {
    message: String,
    stream: std::net::TcpStream,
    buffered: Vec<u8>,
}

impl IntoStdError {
    fn wrap(
        kind: io::ErrorKind,
        message: String,
        stream: std::net::TcpStream,
        buffered: Vec<u8>,
    ) -> io::Error {
        io::Error::new(
            kind,
            IntoStdError {
                message,
                stream,
                buffered,
            },
        )
    }

    /// Takes the stream and its bytes out of an error of [`TcpStream::into_std`]; any other
    /// error comes back unchanged.
    ///
    /// # Errors
    /// `err` itself, when it does not carry an `IntoStdError`.
    pub fn from_io(err: io::Error) -> Result<IntoStdError, io::Error> {
        if !err.get_ref().is_some_and(|e| e.is::<IntoStdError>()) {
            return Err(err);
        }
        let inner = err.into_inner().expect("checked above");
        Ok(*inner.downcast::<IntoStdError>().expect("checked above"))
    }

    /// The bytes received ahead and not read, in order.
    pub fn buffered(&self) -> &[u8] {
        &self.buffered
    }

    /// The standard stream and the bytes that precede what it reads.
    pub fn into_parts(self) -> (std::net::TcpStream, Vec<u8>) {
        (self.stream, self.buffered)
    }
}

impl fmt::Debug for IntoStdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IntoStdError")
            .field("stream", &self.stream)
            .field("buffered", &self.buffered.len())
            .finish()
    }
}

impl fmt::Display for IntoStdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for IntoStdError {}

impl Drop for TcpStream {
    /// Logs the close at debug level (target `weir::net`); the socket is deregistered and
    /// closed by `io`'s own drop.
    fn drop(&mut self) {
        if !tracing::enabled!(target: "weir::net", tracing::Level::DEBUG) {
            return;
        }
        let sock = self.io.get_ref();
        let (state, reason) = close_reason(sock.as_raw_fd());
        tracing::debug!(
            target: "weir::net",
            fd = sock.as_raw_fd(),
            local = ?sock.local_addr().ok(),
            peer = ?sock.peer_addr().ok(),
            tcp_state = state,
            reason,
            error = ?sock.take_error().ok().flatten(),
            "closed"
        );
    }
}

/// Why a TCP connection is being closed, as far as the kernel's connection state tells
/// (`TCP_INFO`): `(state name, reason)`. Costs one `getsockopt(2)`, made only when the close is
/// logged — nothing is tracked while the connection is in use.
fn close_reason(fd: RawFd) -> (&'static str, &'static str) {
    // `tcpi_state` is the first byte of `struct tcp_info`; the kernel copies no more than the
    // length it is given.
    let mut state: u8 = 0;
    let mut len = 1 as libc::socklen_t;
    // SAFETY: `state` is a live byte and `len` says so; `fd` is open (borrowed from the stream
    // being dropped).
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut state).cast(),
            &mut len,
        )
    };
    if r != 0 || len < 1 {
        return ("unknown", "unknown");
    }
    // The values of the kernel's `enum tcp_state` (include/net/tcp_states.h).
    match state {
        1 => ("ESTABLISHED", "closed locally while open"),
        2 => ("SYN_SENT", "connect abandoned"),
        3 => ("SYN_RECV", "closed during the handshake"),
        4 => ("FIN_WAIT1", "closed locally after shutting down writes"),
        5 => ("FIN_WAIT2", "closed locally after shutting down writes"),
        6 => ("TIME_WAIT", "both sides closed"),
        7 => ("CLOSE", "reset or aborted"),
        8 => ("CLOSE_WAIT", "peer closed first"),
        9 => ("LAST_ACK", "both sides closed"),
        11 => ("CLOSING", "both sides closed"),
        _ => ("unknown", "unknown"),
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

crate::io::fd_traits!(TcpStream, std::net::TcpStream);

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
