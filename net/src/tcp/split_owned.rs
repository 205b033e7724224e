//! Owned halves of a [`TcpStream`]: [`OwnedReadHalf`] and [`OwnedWriteHalf`].

use std::error::Error;
use std::fmt;
use std::io::{self, IoSlice, IoSliceMut};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::task::{Context, Poll};

use weir_reactor::{Interest, Ready};

use super::TcpStream;

/// The read half of a [`TcpStream`], from [`TcpStream::into_split`]; it can move to another
/// task than the write half.
#[derive(Debug)]
pub struct OwnedReadHalf {
    pub(super) inner: Arc<TcpStream>,
}

/// The write half of a [`TcpStream`], from [`TcpStream::into_split`].
///
/// Dropping it shuts down the write direction (the peer reads end of stream), unless
/// [`forget`](Self::forget) was called; so does closing it through the write traits.
#[derive(Debug)]
pub struct OwnedWriteHalf {
    pub(super) inner: Arc<TcpStream>,
    shutdown_on_drop: bool,
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

pub(crate) fn split_owned(stream: Arc<TcpStream>) -> (OwnedReadHalf, OwnedWriteHalf) {
    (
        OwnedReadHalf {
            inner: stream.clone(),
        },
        OwnedWriteHalf {
            inner: stream,
            shutdown_on_drop: true,
        },
    )
}

fn reunite(read: OwnedReadHalf, mut write: OwnedWriteHalf) -> Result<TcpStream, ReuniteError> {
    if !Arc::ptr_eq(&read.inner, &write.inner) {
        return Err(ReuniteError(read, write));
    }
    write.shutdown_on_drop = false;
    drop(write);
    // The two halves held the only two references, and the write half is gone.
    Ok(Arc::try_unwrap(read.inner).expect("a TcpStream's owned halves are its only owners"))
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

    /// Waits for readiness; see [`TcpStream::ready`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.inner.ready(interest).await
    }

    /// Waits until the stream is readable; see [`TcpStream::readable`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn readable(&self) -> io::Result<()> {
        self.inner.readable().await
    }

    /// Reads without waiting; see [`TcpStream::try_read`].
    ///
    /// # Errors
    /// As [`TcpStream::try_read`].
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.try_read(buf)
    }

    /// Vectored read without waiting; see [`TcpStream::try_read_vectored`].
    ///
    /// # Errors
    /// As [`TcpStream::try_read`].
    pub fn try_read_vectored(&self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        self.inner.try_read_vectored(bufs)
    }

    /// The remote address.
    ///
    /// # Errors
    /// As [`TcpStream::peer_addr`].
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }

    /// The local address.
    ///
    /// # Errors
    /// As [`TcpStream::local_addr`].
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
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
        self.shutdown_on_drop = false;
    }

    /// Waits for readiness; see [`TcpStream::ready`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.inner.ready(interest).await
    }

    /// Waits until the stream is writable; see [`TcpStream::writable`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn writable(&self) -> io::Result<()> {
        self.inner.writable().await
    }

    /// Writes without waiting; see [`TcpStream::try_write`].
    ///
    /// # Errors
    /// As [`TcpStream::try_write`].
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.inner.try_write(buf)
    }

    /// Vectored write without waiting; see [`TcpStream::try_write_vectored`].
    ///
    /// # Errors
    /// As [`TcpStream::try_write`].
    pub fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.inner.try_write_vectored(bufs)
    }

    /// The remote address.
    ///
    /// # Errors
    /// As [`TcpStream::peer_addr`].
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }

    /// The local address.
    ///
    /// # Errors
    /// As [`TcpStream::local_addr`].
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// Called by the write traits' `poll_close`/`poll_shutdown`: the direction is already shut.
    pub(super) fn shut_down(&mut self) {
        self.shutdown_on_drop = false;
    }
}

impl Drop for OwnedWriteHalf {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            // Errors (e.g. the connection was reset) are of no use in drop.
            let _ = self.inner.shutdown_std(Shutdown::Write);
        }
    }
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
