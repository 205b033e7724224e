//! Borrowed halves of a [`UnixStream`]: [`ReadHalf`] and [`WriteHalf`].

use weir_reactor::AsyncFd;

use super::{SocketAddr, UnixStream};
use crate::io::StreamIo;

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
    crate::io::half_methods!(read, UnixStream, SocketAddr);
}

impl WriteHalf<'_> {
    crate::io::half_methods!(write, UnixStream, SocketAddr);
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

impl StreamIo for ReadHalf<'_> {
    type Socket = std::os::unix::net::UnixStream;

    fn async_fd(&self) -> &AsyncFd<std::os::unix::net::UnixStream> {
        self.0.async_fd()
    }
}

impl StreamIo for WriteHalf<'_> {
    type Socket = std::os::unix::net::UnixStream;

    fn async_fd(&self) -> &AsyncFd<std::os::unix::net::UnixStream> {
        self.0.async_fd()
    }
}

crate::io::stream_io_impls!(read for ReadHalf<'_>);
crate::io::stream_io_impls!(write for WriteHalf<'_>);
