//! Owned halves of a [`UnixStream`]: [`OwnedReadHalf`] and [`OwnedWriteHalf`].

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use weir_reactor::AsyncFd;

use super::{SocketAddr, UnixStream};
use crate::io::{OwnedWrite, StreamIo};

/// The read half of a [`UnixStream`], made by [`UnixStream::into_split`]; it can move to
/// another task than its write half.
///
/// Implements the read traits of the stream (`futures_io::AsyncRead`, and tokio's / hyper's
/// under their features).
#[derive(Debug)]
pub struct OwnedReadHalf {
    inner: Arc<UnixStream>,
}

/// The write half of a [`UnixStream`], made by [`UnixStream::into_split`].
///
/// Implements the write traits of the stream. Closing it (`poll_close` / `poll_shutdown`)
/// or dropping it shuts down the write direction, so the peer reads end of stream, unless
/// [`forget`](Self::forget) is used.
pub struct OwnedWriteHalf {
    inner: OwnedWrite<UnixStream>,
}

/// [`OwnedReadHalf::reunite`] or [`OwnedWriteHalf::reunite`] was given halves of two
/// different streams; they are handed back unchanged.
#[derive(Debug)]
pub struct ReuniteError(pub OwnedReadHalf, pub OwnedWriteHalf);

impl fmt::Display for ReuniteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tried to reunite halves that are not from the same UnixStream")
    }
}

impl Error for ReuniteError {}

pub(super) fn split_owned(stream: UnixStream) -> (OwnedReadHalf, OwnedWriteHalf) {
    let (read, write) = OwnedWrite::split(stream);
    (
        OwnedReadHalf { inner: read },
        OwnedWriteHalf { inner: write },
    )
}

fn reunite(read: OwnedReadHalf, write: OwnedWriteHalf) -> Result<UnixStream, ReuniteError> {
    if !write.inner.pairs_with(&read.inner) {
        return Err(ReuniteError(read, write));
    }
    Ok(write.inner.reunite(read.inner))
}

impl OwnedReadHalf {
    /// Puts the stream back together. Fails (returning both halves) when `other` belongs to
    /// another stream.
    ///
    /// # Errors
    /// [`ReuniteError`] when the halves are not from the same stream.
    pub fn reunite(self, other: OwnedWriteHalf) -> Result<UnixStream, ReuniteError> {
        reunite(self, other)
    }

    crate::io::half_methods!(read, UnixStream, SocketAddr);
}

impl OwnedWriteHalf {
    /// Puts the stream back together. Fails (returning both halves) when `other` belongs to
    /// another stream.
    ///
    /// # Errors
    /// [`ReuniteError`] when the halves are not from the same stream.
    pub fn reunite(self, other: OwnedReadHalf) -> Result<UnixStream, ReuniteError> {
        reunite(other, self)
    }

    /// Drops the write half without shutting down the write direction.
    pub fn forget(mut self) {
        self.inner.keep_open();
    }

    crate::io::half_methods!(write, UnixStream, SocketAddr);
}

impl AsRef<UnixStream> for OwnedReadHalf {
    fn as_ref(&self) -> &UnixStream {
        &self.inner
    }
}

impl AsRef<UnixStream> for OwnedWriteHalf {
    fn as_ref(&self) -> &UnixStream {
        &self.inner
    }
}

impl fmt::Debug for OwnedWriteHalf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt_half("OwnedWriteHalf", f)
    }
}

impl StreamIo for OwnedReadHalf {
    type Socket = std::os::unix::net::UnixStream;

    fn async_fd(&self) -> &AsyncFd<std::os::unix::net::UnixStream> {
        self.inner.async_fd()
    }
}

impl StreamIo for OwnedWriteHalf {
    type Socket = std::os::unix::net::UnixStream;

    fn async_fd(&self) -> &AsyncFd<std::os::unix::net::UnixStream> {
        self.inner.async_fd()
    }

    /// The write traits shut the direction down: dropping need not.
    fn write_shut_down(&mut self) {
        self.inner.keep_open();
    }
}

crate::io::stream_io_impls!(read for OwnedReadHalf);
crate::io::stream_io_impls!(write for OwnedWriteHalf);
