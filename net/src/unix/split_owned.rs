//! Owned halves of a [`UnixStream`]: [`OwnedReadHalf`] and [`OwnedWriteHalf`].

use std::error::Error;
use std::fmt;
use std::io::{self, IoSlice, IoSliceMut};
use std::net::Shutdown;
use std::sync::Arc;

use weir_reactor::{Interest, Ready};

use super::{SocketAddr, UnixStream};

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
#[derive(Debug)]
pub struct OwnedWriteHalf {
    inner: Arc<UnixStream>,
    shutdown_on_drop: bool,
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
    let inner = Arc::new(stream);
    (
        OwnedReadHalf {
            inner: inner.clone(),
        },
        OwnedWriteHalf {
            inner,
            shutdown_on_drop: true,
        },
    )
}

fn reunite(read: OwnedReadHalf, mut write: OwnedWriteHalf) -> Result<UnixStream, ReuniteError> {
    if !Arc::ptr_eq(&read.inner, &write.inner) {
        return Err(ReuniteError(read, write));
    }
    write.shutdown_on_drop = false;
    drop(write);
    match Arc::try_unwrap(read.inner) {
        Ok(stream) => Ok(stream),
        Err(_) => unreachable!("the two halves held the only references to the stream"),
    }
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

    /// Waits until the stream is ready for any of `interest` (see [`UnixStream::ready`]).
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.inner.ready(interest).await
    }

    /// Waits until the stream is readable (see [`UnixStream::readable`]).
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn readable(&self) -> io::Result<()> {
        self.inner.readable().await
    }

    /// See [`UnixStream::try_read`].
    ///
    /// # Errors
    /// As [`UnixStream::try_read`].
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.try_read(buf)
    }

    /// See [`UnixStream::try_read_vectored`].
    ///
    /// # Errors
    /// As [`UnixStream::try_read`].
    pub fn try_read_vectored(&self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        self.inner.try_read_vectored(bufs)
    }

    /// The peer's address.
    ///
    /// # Errors
    /// The OS error of `getpeername(2)`.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }

    /// The local address.
    ///
    /// # Errors
    /// The OS error of `getsockname(2)`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
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
        self.shutdown_on_drop = false;
        drop(self);
    }

    /// Waits until the stream is ready for any of `interest` (see [`UnixStream::ready`]).
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.inner.ready(interest).await
    }

    /// Waits until the stream is writable (see [`UnixStream::writable`]).
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn writable(&self) -> io::Result<()> {
        self.inner.writable().await
    }

    /// See [`UnixStream::try_write`].
    ///
    /// # Errors
    /// As [`UnixStream::try_write`].
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.inner.try_write(buf)
    }

    /// See [`UnixStream::try_write_vectored`].
    ///
    /// # Errors
    /// As [`UnixStream::try_write`].
    pub fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.inner.try_write_vectored(bufs)
    }

    /// The peer's address.
    ///
    /// # Errors
    /// The OS error of `getpeername(2)`.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }

    /// The local address.
    ///
    /// # Errors
    /// The OS error of `getsockname(2)`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn shutdown_write_priv(&mut self) -> io::Result<()> {
        let r = self.inner.shutdown_std(Shutdown::Write);
        if r.is_ok() {
            self.shutdown_on_drop = false;
        }
        r
    }
}

impl Drop for OwnedWriteHalf {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            // Errors are ignored: the peer may be gone already, and drop must not panic.
            let _ = self.inner.shutdown_std(Shutdown::Write);
        }
    }
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

impl_stream_read!(OwnedReadHalf, this => this.inner);
impl_stream_write!(OwnedWriteHalf, this => this.inner);
