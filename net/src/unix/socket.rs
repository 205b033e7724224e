//! [`UnixSocket`]: a Unix-domain socket before it becomes a listener, a stream or a datagram
//! socket.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::net;
use std::path::Path;

use socket2::{Domain, Socket, Type};

use super::{UnixDatagram, UnixListener, UnixStream, addr};

/// A Unix-domain socket that is not yet a [`UnixListener`], a [`UnixStream`] or a
/// [`UnixDatagram`]: for binding a client socket before it connects, or for choosing the
/// listen backlog.
///
/// The socket is created non-blocking and close-on-exec. It registers with a reactor only when
/// it becomes one of the other types (the reactor of the thread calling
/// [`listen`](Self::listen), [`connect`](Self::connect) or [`datagram`](Self::datagram)).
///
/// As everywhere in weir, a path whose first byte is NUL names a socket in Linux's abstract
/// namespace.
///
/// # Example
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// use weir_net::unix::UnixSocket;
///
/// let socket = UnixSocket::new_stream()?;
/// socket.bind("/tmp/server.sock")?;
/// let listener = socket.listen(1024)?;
/// let (stream, _peer) = listener.accept().await?;
/// # drop(stream);
/// # Ok(())
/// # }
/// ```
pub struct UnixSocket {
    inner: Socket,
}

impl UnixSocket {
    /// A new stream socket (`SOCK_STREAM`), for [`listen`](Self::listen) or
    /// [`connect`](Self::connect).
    ///
    /// # Errors
    /// The error of `socket(2)` (e.g. `EMFILE`).
    pub fn new_stream() -> io::Result<UnixSocket> {
        UnixSocket::new(Type::STREAM)
    }

    /// A new datagram socket (`SOCK_DGRAM`), for [`datagram`](Self::datagram).
    ///
    /// # Errors
    /// The error of `socket(2)`.
    pub fn new_datagram() -> io::Result<UnixSocket> {
        UnixSocket::new(Type::DGRAM)
    }

    fn new(ty: Type) -> io::Result<UnixSocket> {
        let inner = Socket::new(Domain::UNIX, ty.nonblocking().cloexec(), None)?;
        Ok(UnixSocket { inner })
    }

    /// Binds the socket to `path` (a file path, or an abstract name after a leading NUL).
    ///
    /// # Errors
    /// `InvalidInput` when `path` is too long for a Unix socket address or contains a NUL byte
    /// other than the leading one; the error of `bind(2)` (`AddrInUse` when the address is
    /// taken).
    pub fn bind(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let addr = addr::to_sock_addr(&addr::from_path(path.as_ref())?)?;
        self.inner.bind(&addr)
    }

    /// Starts listening with the given `backlog` (clamped to `i32::MAX`; the kernel caps it at
    /// `net.core.somaxconn`) and returns the listener, registered with the current reactor.
    ///
    /// # Errors
    /// `InvalidInput` for a datagram socket; the error of `listen(2)` or of registering the
    /// socket.
    pub fn listen(self, backlog: u32) -> io::Result<UnixListener> {
        self.expect(Type::STREAM, "listen cannot be called on a datagram socket")?;
        self.inner
            .listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
        UnixListener::from_std(net::UnixListener::from(OwnedFd::from(self.inner)))
    }

    /// Connects to the socket bound at `path` and returns the stream, registered with the
    /// current reactor. A full accept backlog is waited out as in [`UnixStream::connect`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future closes the socket.
    ///
    /// # Errors
    /// `InvalidInput` for a datagram socket or an invalid path; the error of `connect(2)`
    /// (`NotFound`, `ConnectionRefused`) or of registering the socket.
    pub async fn connect(self, path: impl AsRef<Path>) -> io::Result<UnixStream> {
        self.expect(
            Type::STREAM,
            "connect cannot be called on a datagram socket",
        )?;
        let addr = addr::to_sock_addr(&addr::from_path(path.as_ref())?)?;
        UnixStream::connect_socket(self.inner, &addr).await
    }

    /// Turns the socket into a [`UnixDatagram`], registered with the current reactor.
    ///
    /// # Errors
    /// `InvalidInput` for a stream socket; the error of registering the socket.
    pub fn datagram(self) -> io::Result<UnixDatagram> {
        self.expect(Type::DGRAM, "datagram cannot be called on a stream socket")?;
        UnixDatagram::from_std(net::UnixDatagram::from(OwnedFd::from(self.inner)))
    }

    /// Fails with `InvalidInput` and `msg` unless the socket's type is `ty`.
    fn expect(&self, ty: Type, msg: &'static str) -> io::Result<()> {
        if self.inner.r#type()? == ty {
            Ok(())
        } else {
            Err(io::Error::new(io::ErrorKind::InvalidInput, msg))
        }
    }
}

impl AsRawFd for UnixSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl AsFd for UnixSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl IntoRawFd for UnixSocket {
    fn into_raw_fd(self) -> RawFd {
        self.inner.into_raw_fd()
    }
}

impl FromRawFd for UnixSocket {
    /// Wraps a Unix-domain socket fd. It should be non-blocking for `connect` to work.
    ///
    /// # Safety
    /// `fd` must be an open Unix-domain socket that the caller owns and hands over.
    unsafe fn from_raw_fd(fd: RawFd) -> UnixSocket {
        UnixSocket {
            // SAFETY: the caller guarantees `fd` is an open socket it transfers to us.
            inner: unsafe { Socket::from_raw_fd(fd) },
        }
    }
}

impl fmt::Debug for UnixSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixSocket")
            .field("fd", &self.inner.as_raw_fd())
            .field("type", &self.inner.r#type().ok())
            .finish()
    }
}
