//! Borrowed halves of a [`TcpStream`]: [`ReadHalf`] and [`WriteHalf`].

use std::io;
use std::net::SocketAddr;
use std::task::{Context, Poll};

use weir_reactor::AsyncFd;

use super::TcpStream;
use crate::io::StreamIo;

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

    crate::io::half_methods!(read, TcpStream, SocketAddr);
}

impl WriteHalf<'_> {
    crate::io::half_methods!(write, TcpStream, SocketAddr);
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

impl StreamIo for ReadHalf<'_> {
    type Socket = std::net::TcpStream;

    fn async_fd(&self) -> &AsyncFd<std::net::TcpStream> {
        self.0.async_fd()
    }
}

impl StreamIo for WriteHalf<'_> {
    type Socket = std::net::TcpStream;

    fn async_fd(&self) -> &AsyncFd<std::net::TcpStream> {
        self.0.async_fd()
    }
}

crate::io::stream_io_impls!(read for ReadHalf<'_>);
crate::io::stream_io_impls!(write for WriteHalf<'_>);
