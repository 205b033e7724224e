//! Borrowed halves of a [`UnixStream`]: [`ReadHalf`] and [`WriteHalf`].

use std::io::{self, IoSlice, IoSliceMut};
use std::net::Shutdown;

use weir_reactor::{Interest, Ready};

use super::{SocketAddr, UnixStream};

/// The read half of a [`UnixStream`], borrowed from it by [`UnixStream::split`].
///
/// Implements the read traits of the stream (`futures_io::AsyncRead`, and tokio's / hyper's
/// under their features).
#[derive(Debug)]
pub struct ReadHalf<'a>(&'a UnixStream);

/// The write half of a [`UnixStream`], borrowed from it by [`UnixStream::split`].
///
/// Implements the write traits of the stream; closing it (`poll_close` / `poll_shutdown`)
/// shuts down the write direction of the stream.
#[derive(Debug)]
pub struct WriteHalf<'a>(&'a UnixStream);

pub(super) fn split(stream: &mut UnixStream) -> (ReadHalf<'_>, WriteHalf<'_>) {
    (ReadHalf(stream), WriteHalf(stream))
}

impl ReadHalf<'_> {
    /// Waits until the stream is ready for any of `interest` (see [`UnixStream::ready`]).
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.0.ready(interest).await
    }

    /// Waits until the stream is readable (see [`UnixStream::readable`]).
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn readable(&self) -> io::Result<()> {
        self.0.readable().await
    }

    /// See [`UnixStream::try_read`].
    ///
    /// # Errors
    /// As [`UnixStream::try_read`].
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }

    /// See [`UnixStream::try_read_vectored`].
    ///
    /// # Errors
    /// As [`UnixStream::try_read`].
    pub fn try_read_vectored(&self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        self.0.try_read_vectored(bufs)
    }

    /// The peer's address.
    ///
    /// # Errors
    /// The OS error of `getpeername(2)`.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.0.peer_addr()
    }

    /// The local address.
    ///
    /// # Errors
    /// The OS error of `getsockname(2)`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl WriteHalf<'_> {
    /// Waits until the stream is ready for any of `interest` (see [`UnixStream::ready`]).
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.0.ready(interest).await
    }

    /// Waits until the stream is writable (see [`UnixStream::writable`]).
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn writable(&self) -> io::Result<()> {
        self.0.writable().await
    }

    /// See [`UnixStream::try_write`].
    ///
    /// # Errors
    /// As [`UnixStream::try_write`].
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    /// See [`UnixStream::try_write_vectored`].
    ///
    /// # Errors
    /// As [`UnixStream::try_write`].
    pub fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.0.try_write_vectored(bufs)
    }

    /// The peer's address.
    ///
    /// # Errors
    /// The OS error of `getpeername(2)`.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.0.peer_addr()
    }

    /// The local address.
    ///
    /// # Errors
    /// The OS error of `getsockname(2)`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }

    fn shutdown_write_priv(&mut self) -> io::Result<()> {
        self.0.shutdown_std(Shutdown::Write)
    }
}

impl AsRef<UnixStream> for ReadHalf<'_> {
    fn as_ref(&self) -> &UnixStream {
        self.0
    }
}

impl AsRef<UnixStream> for WriteHalf<'_> {
    fn as_ref(&self) -> &UnixStream {
        self.0
    }
}

impl_stream_read!(ReadHalf<'_>, this => this.0);
impl_stream_write!(WriteHalf<'_>, this => this.0);
