//! Owned halves of a [`TcpStream`]: [`OwnedReadHalf`] and [`OwnedWriteHalf`].

use std::error::Error;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};

use weir_reactor::AsyncFd;

use super::TcpStream;
use crate::io::{OwnedWrite, StreamIo};

/// The read half of a [`TcpStream`], from [`TcpStream::into_split`]; it can move to another
/// task than the write half.
#[derive(Debug)]
pub struct OwnedReadHalf {
    inner: Arc<TcpStream>,
}

/// The write half of a [`TcpStream`], from [`TcpStream::into_split`].
///
/// Dropping it shuts down the write direction (the peer reads end of stream), unless
/// [`forget`](Self::forget) was called; so does closing it through the write traits.
pub struct OwnedWriteHalf {
    inner: OwnedWrite<TcpStream>,
}

/// The halves given to [`OwnedReadHalf::reunite`] came from different streams; here they are
/// back.
#[derive(Debug)]
pub struct ReuniteError(pub OwnedReadHalf, pub OwnedWriteHalf);

impl fmt::Display for ReuniteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tried to reunite halves that are not from the same TcpStream")
    }
}

impl Error for ReuniteError {}

pub(crate) fn split_owned(stream: TcpStream) -> (OwnedReadHalf, OwnedWriteHalf) {
    let (read, write) = OwnedWrite::split(stream);
    (
        OwnedReadHalf { inner: read },
        OwnedWriteHalf { inner: write },
    )
}

fn reunite(read: OwnedReadHalf, write: OwnedWriteHalf) -> Result<TcpStream, ReuniteError> {
    if !write.inner.pairs_with(&read.inner) {
        return Err(ReuniteError(read, write));
    }
    Ok(write.inner.reunite(read.inner))
}

impl OwnedReadHalf {
    /// Puts the stream back together.
    ///
    /// # Errors
    /// [`ReuniteError`] (holding both halves) when they come from different streams.
    pub fn reunite(self, other: OwnedWriteHalf) -> Result<TcpStream, ReuniteError> {
        reunite(self, other)
    }

    /// Polls to peek at incoming data; see [`TcpStream::poll_peek`].
    ///
    /// # Errors
    /// As [`TcpStream::peek`].
    pub fn poll_peek(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.inner.poll_peek(cx, buf)
    }

    /// Receives data without consuming it; see [`TcpStream::peek`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// As [`TcpStream::peek`].
    pub async fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.peek(buf).await
    }

    crate::io::half_methods!(read, TcpStream, SocketAddr);
}

impl OwnedWriteHalf {
    /// Puts the stream back together; see [`OwnedReadHalf::reunite`].
    ///
    /// # Errors
    /// [`ReuniteError`] when the halves come from different streams.
    pub fn reunite(self, other: OwnedReadHalf) -> Result<TcpStream, ReuniteError> {
        reunite(other, self)
    }

    /// Drops the half without shutting down the write direction.
    pub fn forget(mut self) {
        self.inner.keep_open();
    }

    crate::io::half_methods!(write, TcpStream, SocketAddr);
}

impl AsRef<TcpStream> for OwnedReadHalf {
    fn as_ref(&self) -> &TcpStream {
        &self.inner
    }
}

impl AsRef<TcpStream> for OwnedWriteHalf {
    fn as_ref(&self) -> &TcpStream {
        &self.inner
    }
}

impl fmt::Debug for OwnedWriteHalf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt_half("OwnedWriteHalf", f)
    }
}

impl StreamIo for OwnedReadHalf {
    type Socket = std::net::TcpStream;

    fn async_fd(&self) -> &AsyncFd<std::net::TcpStream> {
        self.inner.async_fd()
    }
}

impl StreamIo for OwnedWriteHalf {
    type Socket = std::net::TcpStream;

    fn async_fd(&self) -> &AsyncFd<std::net::TcpStream> {
        self.inner.async_fd()
    }

    /// The write traits shut the direction down: dropping need not.
    fn write_shut_down(&mut self) {
        self.inner.keep_open();
    }
}

crate::io::stream_io_impls!(read for OwnedReadHalf);
crate::io::stream_io_impls!(write for OwnedWriteHalf);
