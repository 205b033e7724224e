//! [`UnixListener`]: accepts connections on a Unix-domain socket path.

use std::fmt;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures_core::Stream;
use weir_reactor::{AsyncFd, Direction, Interest};

use super::{SocketAddr, UnixStream};

/// A Unix-domain socket listening for stream connections.
///
/// It registers with the reactor of the thread that creates it; each accepted [`UnixStream`]
/// registers with the reactor of the thread that accepts it.
///
/// The socket file stays on disk when the listener is dropped; remove it yourself (binding to
/// an existing path fails with [`io::ErrorKind::AddrInUse`]).
pub struct UnixListener {
    io: AsyncFd<net::UnixListener>,
}

impl UnixListener {
    /// Creates a listener bound to `path` (non-blocking, close-on-exec).
    ///
    /// A path whose first byte is NUL names a socket in Linux's abstract namespace: the bytes
    /// after the NUL are the name, no file is created, and the name disappears with the
    /// socket. [`bind_addr`](Self::bind_addr) takes such an address built with
    /// `SocketAddr::from_abstract_name`.
    ///
    /// # Errors
    /// `InvalidInput` when `path` is too long for a Unix socket address or contains a NUL byte
    /// other than the leading one; otherwise as [`bind_addr`](Self::bind_addr).
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixListener> {
        UnixListener::bind_addr(&super::addr::from_path(path.as_ref())?)
    }

    /// Creates a listener bound to `addr`: a path, or an abstract name
    /// (`std::os::linux::net::SocketAddrExt::from_abstract_name`). An unnamed address lets the
    /// kernel choose an abstract name, which [`local_addr`](Self::local_addr) reports.
    ///
    /// # Errors
    /// The OS error of `socket(2)`, `bind(2)` or `listen(2)` — `AddrInUse` when a file or
    /// another socket already has the address — or a registration error of the reactor.
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixListener> {
        UnixListener::from_std(net::UnixListener::bind_addr(addr)?)
    }

    /// Wraps a standard library listener, switching it to non-blocking mode and registering it
    /// with the current reactor.
    ///
    /// # Errors
    /// The OS error of switching to non-blocking mode, or a registration error of the reactor.
    pub fn from_std(listener: net::UnixListener) -> io::Result<UnixListener> {
        listener.set_nonblocking(true)?;
        Ok(UnixListener {
            io: AsyncFd::with_interest(listener, Interest::READABLE)?,
        })
    }

    /// Deregisters the listener and returns the standard library listener. It stays in
    /// non-blocking mode.
    ///
    /// # Errors
    /// Never fails at present; the `Result` mirrors tokio's signature.
    pub fn into_std(self) -> io::Result<net::UnixListener> {
        Ok(self.io.into_inner())
    }

    /// The address the listener is bound to.
    ///
    /// # Errors
    /// The OS error of `getsockname(2)`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// Takes the pending socket error (`SO_ERROR`), if any.
    ///
    /// # Errors
    /// The OS error of `getsockopt(2)`.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }

    /// Accepts a connection and returns it with the peer's address (usually unnamed).
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before it completes, no connection has been
    /// taken from the backlog.
    ///
    /// # Errors
    /// The OS error of `accept4(2)` (e.g. `EMFILE` when out of fds), or a registration error of
    /// the reactor.
    pub async fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (stream, addr) = self
            .io
            .registration()
            .async_io(Interest::READABLE, || self.accept_std())
            .await?;
        Ok((UnixStream::new(stream)?, addr))
    }

    /// Polls to accept a connection. Only the last task to poll is woken.
    ///
    /// # Errors
    /// As [`accept`](Self::accept).
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(UnixStream, SocketAddr)>> {
        let (stream, addr) = ready!(
            self.io
                .registration()
                .poll_io(cx, Direction::Read, || self.accept_std())
        )?;
        Poll::Ready(UnixStream::new(stream).map(|s| (s, addr)))
    }

    /// A [`Stream`] of accepted connections. It never ends; an accept error is yielded as an
    /// item, and the stream can be polled again after it.
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    fn accept_std(&self) -> io::Result<(net::UnixStream, SocketAddr)> {
        let (stream, addr) = self.io.get_ref().accept()?;
        stream.set_nonblocking(true)?;
        // The fields (a `getsockname(2)`) are evaluated only when the event is enabled.
        tracing::debug!(
            target: "weir::net",
            fd = stream.as_raw_fd(),
            local = ?self.io.get_ref().local_addr().ok(),
            peer = ?addr,
            "accepted"
        );
        Ok((stream, addr))
    }
}

crate::io::fd_traits!(UnixListener, std::os::unix::net::UnixListener);

impl fmt::Debug for UnixListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.io.get_ref(), f)
    }
}

/// The [`Stream`] of connections returned by [`UnixListener::incoming`].
#[must_use = "streams do nothing unless polled"]
pub struct Incoming<'a> {
    listener: &'a UnixListener,
}

impl Stream for Incoming<'_> {
    type Item = io::Result<UnixStream>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let r = ready!(self.listener.poll_accept(cx));
        Poll::Ready(Some(r.map(|(stream, _addr)| stream)))
    }
}

impl fmt::Debug for Incoming<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Incoming")
            .field("listener", self.listener)
            .finish()
    }
}
