//! [`UnixStream`]: a connected Unix-domain stream socket.

use std::fmt;
use std::io;
use std::net::Shutdown;
use std::os::fd::OwnedFd;
use std::os::unix::net;
use std::path::Path;
use std::task::{Context, Poll};
use std::time::Duration;

use socket2::{Domain, SockAddr, Socket, Type};
use weir_reactor::AsyncFd;

use super::split::{self, ReadHalf, WriteHalf};
use super::split_owned::{self, OwnedReadHalf, OwnedWriteHalf};
use super::{SocketAddr, UCred, ucred};
use crate::io::StreamIo;

/// First pause of [`UnixStream::connect`] while the listener's backlog is full.
const CONNECT_BACKOFF_MIN: Duration = Duration::from_micros(50);
/// Longest pause of [`UnixStream::connect`] while the listener's backlog is full.
const CONNECT_BACKOFF_MAX: Duration = Duration::from_millis(10);

/// A connected Unix-domain stream socket.
///
/// Created by [`connect`](Self::connect), [`pair`](Self::pair),
/// [`UnixListener::accept`](super::UnixListener::accept) or [`from_std`](Self::from_std). It
/// registers with the reactor of the thread that creates it.
///
/// Read and write it through `futures_io::AsyncRead`/`AsyncWrite` (always), tokio's
/// `AsyncRead`/`AsyncWrite` (feature `tokio-io`), hyper's `rt::Read`/`rt::Write` (feature
/// `hyper`), or the readiness-based `try_*` methods. One task may read while another writes:
/// the two directions are woken independently. To move the directions into different tasks,
/// use [`split`](Self::split) or [`into_split`](Self::into_split).
///
/// Writes use `send(2)` with `MSG_NOSIGNAL`: writing to a stream whose peer is gone fails with
/// [`io::ErrorKind::BrokenPipe`] and never raises `SIGPIPE`.
///
/// Closing (`poll_close`, `poll_shutdown`) shuts down the write direction only; the socket is
/// closed when the `UnixStream` is dropped.
pub struct UnixStream {
    pub(crate) io: AsyncFd<net::UnixStream>,
}

impl UnixStream {
    /// Registers a stream that is already non-blocking.
    pub(crate) fn new(stream: net::UnixStream) -> io::Result<UnixStream> {
        Ok(UnixStream {
            io: AsyncFd::new(stream)?,
        })
    }

    /// Connects to the socket bound at `path`. A path whose first byte is NUL names a socket in
    /// Linux's abstract namespace (the bytes after the NUL are the name).
    ///
    /// While the listener's accept backlog is full (the kernel refuses a non-blocking connect
    /// with `EAGAIN`), the attempt is repeated after short pauses, as a blocking `connect`
    /// would wait; wrap the call in a timeout to bound that.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future closes the socket that was being connected.
    ///
    /// # Errors
    /// `InvalidInput` when `path` is too long for a Unix socket address or contains a NUL byte
    /// other than the leading one; otherwise as [`connect_addr`](Self::connect_addr).
    pub async fn connect<P: AsRef<Path>>(path: P) -> io::Result<UnixStream> {
        let addr = super::addr::from_path(path.as_ref())?;
        UnixStream::connect_addr(&addr).await
    }

    /// Connects to the socket bound at `addr`: a path, or an abstract name
    /// (`std::os::linux::net::SocketAddrExt::from_abstract_name`). A full accept backlog is
    /// waited out as in [`connect`](Self::connect).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future closes the socket that was being connected.
    ///
    /// # Errors
    /// The OS error of `socket(2)` or `connect(2)` (`NotFound` when nothing exists at the
    /// path, `ConnectionRefused` when nothing listens there, `InvalidInput` for an unnamed
    /// address), or a registration error of the reactor.
    pub async fn connect_addr(addr: &SocketAddr) -> io::Result<UnixStream> {
        let sock = Socket::new(Domain::UNIX, Type::STREAM.nonblocking().cloexec(), None)?;
        UnixStream::connect_socket(sock, &super::addr::to_sock_addr(addr)?).await
    }

    /// Connects the non-blocking stream socket `sock` to `addr` and registers it.
    pub(crate) async fn connect_socket(sock: Socket, addr: &SockAddr) -> io::Result<UnixStream> {
        let mut pause = CONNECT_BACKOFF_MIN;
        loop {
            match sock.connect(addr) {
                Ok(()) => break,
                // A Unix stream connect never completes asynchronously on Linux: it either
                // connects at once or fails. `EAGAIN` means the backlog is full right now.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    weir_reactor::time::sleep(pause).await;
                    pause = (pause * 2).min(CONNECT_BACKOFF_MAX);
                }
                Err(e) => return Err(e),
            }
        }
        // Registered only once connected: an unconnected stream socket reports a hang-up.
        UnixStream::new(net::UnixStream::from(OwnedFd::from(sock)))
    }

    /// Creates a pair of connected sockets (`socketpair(2)`).
    ///
    /// # Errors
    /// The OS error of `socketpair(2)`, or a registration error of the reactor.
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = net::UnixStream::pair()?;
        a.set_nonblocking(true)?;
        b.set_nonblocking(true)?;
        Ok((UnixStream::new(a)?, UnixStream::new(b)?))
    }

    /// Wraps a standard library stream, switching it to non-blocking mode and registering it
    /// with the current reactor.
    ///
    /// The stream should be connected: an unconnected stream socket reports a hang-up, which
    /// the reactor records as a permanent close of both directions.
    ///
    /// # Errors
    /// The OS error of switching to non-blocking mode, or a registration error of the reactor.
    pub fn from_std(stream: net::UnixStream) -> io::Result<UnixStream> {
        stream.set_nonblocking(true)?;
        UnixStream::new(stream)
    }

    /// Deregisters the stream and returns the standard library stream. It stays in
    /// non-blocking mode; call `set_nonblocking(false)` for blocking use.
    ///
    /// # Errors
    /// Never fails at present; the `Result` mirrors tokio's signature.
    pub fn into_std(self) -> io::Result<net::UnixStream> {
        Ok(self.io.into_inner())
    }

    /// The address this socket is bound to (usually unnamed for a client).
    ///
    /// # Errors
    /// The OS error of `getsockname(2)`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The address of the peer (unnamed when the peer is a client that did not bind).
    ///
    /// # Errors
    /// The OS error of `getpeername(2)`.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// The credentials of the peer process (`SO_PEERCRED`).
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn peer_cred(&self) -> io::Result<UCred> {
        ucred::peer_cred(self.io.get_ref())
    }

    /// Takes the pending socket error (`SO_ERROR`), if any.
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }

    /// Shuts down the write direction: the peer reads end of stream, reading keeps working.
    /// The inherent counterpart of `AsyncWriteExt::shutdown` / `close`, with the same effect,
    /// so `stream.shutdown().await` means the same with or without those traits in scope.
    ///
    /// # Cancel safety
    /// Cancel safe: the shutdown happens on the first poll.
    ///
    /// # Errors
    /// The OS error of `shutdown(2)`.
    pub async fn shutdown(&self) -> io::Result<()> {
        crate::io::shutdown_write(self.io.get_ref())
    }

    /// Shuts down the write direction; always ready.
    ///
    /// # Errors
    /// As [`shutdown`](Self::shutdown).
    pub fn poll_shutdown(&self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(crate::io::shutdown_write(self.io.get_ref()))
    }

    /// Shuts down the read, write or both directions (`shutdown(2)`).
    ///
    /// After a read shutdown, reads return end of stream; after a write shutdown, writes fail
    /// with `BrokenPipe` and the peer reads end of stream.
    ///
    /// # Errors
    /// The OS error of `shutdown(2)` (`NotConnected` if the peer is already gone on some
    /// kernels).
    pub fn shutdown_std(&self, how: Shutdown) -> io::Result<()> {
        self.io.get_ref().shutdown(how)
    }

    crate::io::readiness_methods!(UnixStream, "the socket");

    crate::io::stream_try_methods!(UnixStream);

    /// Splits the stream into a read half and a write half that borrow it, to read and write
    /// from two places at once (e.g. two futures of one `join`). Costs nothing.
    ///
    /// With `futures::AsyncReadExt` in scope, `stream.split()` resolves to that trait's
    /// by-value `split`; write `UnixStream::split(&mut stream)` or `(&mut stream).split()`.
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        split::split(self)
    }

    /// Splits the stream into owned halves that can move to different tasks; an `Arc` is
    /// shared between them. [`OwnedReadHalf::reunite`] puts them back together.
    ///
    /// Dropping the write half shuts down the write direction (unless
    /// [`OwnedWriteHalf::forget`] is used).
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        split_owned::split_owned(self)
    }
}

impl StreamIo for UnixStream {
    type Socket = net::UnixStream;

    fn async_fd(&self) -> &AsyncFd<net::UnixStream> {
        &self.io
    }
}

crate::io::stream_io_impls!(read for UnixStream);
crate::io::stream_io_impls!(write for UnixStream);

crate::io::fd_traits!(UnixStream, std::os::unix::net::UnixStream);

impl fmt::Debug for UnixStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The standard library's Debug shows the fd and both addresses.
        fmt::Debug::fmt(self.io.get_ref(), f)
    }
}
