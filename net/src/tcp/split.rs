//! Borrowed halves of a [`TcpStream`]: [`ReadHalf`] and [`WriteHalf`].

use std::io::{self, IoSlice, IoSliceMut};
use std::net::SocketAddr;
use std::task::{Context, Poll};

use weir_reactor::{Interest, Ready};

use super::TcpStream;

/// The read half of a [`TcpStream`], from [`TcpStream::split`].
///
/// Reading goes through `futures_io::AsyncRead` (and tokio's/hyper's traits with their
/// features) or the readiness methods below. It costs nothing: it is a shared reference.
#[derive(Debug)]
pub struct ReadHalf<'a>(&'a TcpStream);

/// The write half of a [`TcpStream`], from [`TcpStream::split`].
///
/// Closing it (`poll_close`/`poll_shutdown` of the write traits) shuts down the write direction
/// of the stream.
#[derive(Debug)]
pub struct WriteHalf<'a>(&'a TcpStream);

pub(crate) fn split(stream: &mut TcpStream) -> (ReadHalf<'_>, WriteHalf<'_>) {
    (ReadHalf(stream), WriteHalf(stream))
}

impl ReadHalf<'_> {
    /// Polls to peek at incoming data; see [`TcpStream::poll_peek`].
    ///
    /// # Errors
    /// As [`TcpStream::peek`].
    pub fn poll_peek(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.0.poll_peek(cx, buf)
    }

    /// Receives data without consuming it; see [`TcpStream::peek`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// As [`TcpStream::peek`].
    pub async fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.peek(buf).await
    }

    /// Waits for readiness; see [`TcpStream::ready`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.0.ready(interest).await
    }

    /// Waits until the stream is readable; see [`TcpStream::readable`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn readable(&self) -> io::Result<()> {
        self.0.readable().await
    }

    /// Reads without waiting; see [`TcpStream::try_read`].
    ///
    /// # Errors
    /// As [`TcpStream::try_read`].
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }

    /// Vectored read without waiting; see [`TcpStream::try_read_vectored`].
    ///
    /// # Errors
    /// As [`TcpStream::try_read`].
    pub fn try_read_vectored(&self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        self.0.try_read_vectored(bufs)
    }

    /// The remote address.
    ///
    /// # Errors
    /// As [`TcpStream::peer_addr`].
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.0.peer_addr()
    }

    /// The local address.
    ///
    /// # Errors
    /// As [`TcpStream::local_addr`].
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl WriteHalf<'_> {
    /// Waits for readiness; see [`TcpStream::ready`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.0.ready(interest).await
    }

    /// Waits until the stream is writable; see [`TcpStream::writable`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn writable(&self) -> io::Result<()> {
        self.0.writable().await
    }

    /// Writes without waiting; see [`TcpStream::try_write`].
    ///
    /// # Errors
    /// As [`TcpStream::try_write`].
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    /// Vectored write without waiting; see [`TcpStream::try_write_vectored`].
    ///
    /// # Errors
    /// As [`TcpStream::try_write`].
    pub fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.0.try_write_vectored(bufs)
    }

    /// The remote address.
    ///
    /// # Errors
    /// As [`TcpStream::peer_addr`].
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.0.peer_addr()
    }

    /// The local address.
    ///
    /// # Errors
    /// As [`TcpStream::local_addr`].
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl AsRef<TcpStream> for ReadHalf<'_> {
    fn as_ref(&self) -> &TcpStream {
        self.0
    }
}

impl AsRef<TcpStream> for WriteHalf<'_> {
    fn as_ref(&self) -> &TcpStream {
        self.0
    }
}
