//! [`File`]: an open file whose operations run on the blocking pool, one at a time.

use std::fmt;
use std::fs::{Metadata, Permissions};
use std::future::poll_fn;
use std::io::{self, SeekFrom};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};

use super::{OpenOptions, asyncify};

/// The most bytes one read or write moves between the caller and the blocking pool.
const MAX_BUF: usize = 2 * 1024 * 1024;

/// An open file.
///
/// Read, write and seek it through `futures_io::AsyncRead`/`AsyncWrite`/`AsyncSeek` (always)
/// or tokio's traits of the same names (feature `tokio-io`). Every operation runs the
/// standard library's blocking call on the runtime's blocking pool, one at a time:
///
/// - a read fetches up to the caller's buffer size (at most 2 MiB); bytes fetched beyond what
///   the caller took are handed out by the next read, and given back (by seeking) before a
///   write or seek;
/// - a write copies up to 2 MiB of the caller's bytes and returns at once, while the pool
///   writes them: **call `flush`** (e.g. `AsyncWriteExt::flush`) or [`sync_all`](Self::sync_all)
///   to wait for the write and learn its error. An error of such a background write is
///   returned by the next write, flush or sync. Dropping the file lets a pending write
///   finish, but its error is lost.
///
/// The methods taking `&self` ([`metadata`](Self::metadata), [`sync_all`](Self::sync_all),
/// [`set_len`](Self::set_len)…) first wait for the operation in flight.
///
/// ```no_run
/// use futures::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
/// use std::io::SeekFrom;
///
/// # async fn demo() -> std::io::Result<()> {
/// let mut file = weir::fs::File::create("/tmp/data.bin").await?;
/// file.write_all(b"0123456789").await?;
/// file.seek(SeekFrom::Start(4)).await?;
/// let mut four = [0u8; 4];
/// file.read_exact(&mut four).await?;
/// assert_eq!(&four, b"4567");
/// file.sync_all().await?;
/// # Ok(())
/// # }
/// ```
///
/// # Panics
/// Opening, reading, writing, seeking and the `async` methods panic outside a weir runtime
/// (they need its blocking pool).
pub struct File {
    std: Arc<std::fs::File>,
    inner: Mutex<Inner>,
}

mod state;
#[cfg(feature = "tokio-io")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
mod tokio_io;

use state::{Buf, Inner, Op, State, rewind};

impl File {
    /// Opens the file at `path` for reading.
    ///
    /// # Errors
    /// `NotFound`, `PermissionDenied`, or another error of `open(2)`.
    ///
    /// # Panics
    /// Outside a weir runtime.
    pub async fn open(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new().read(true).open(path).await
    }

    /// Opens the file at `path` for writing, creating it or truncating it to length 0.
    ///
    /// # Errors
    /// `NotFound` when the parent directory does not exist, `PermissionDenied`, or another
    /// error of `open(2)`.
    ///
    /// # Panics
    /// Outside a weir runtime.
    pub async fn create(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .await
    }

    /// Creates a new file at `path` for reading and writing, failing if one exists.
    ///
    /// # Errors
    /// `AlreadyExists` when something exists at `path`, or as [`create`](Self::create).
    ///
    /// # Panics
    /// Outside a weir runtime.
    pub async fn create_new(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .await
    }

    /// [`OpenOptions`] with everything off, to choose how to open a file.
    pub fn options() -> OpenOptions {
        OpenOptions::new()
    }

    /// Wraps a standard library file. Operations continue at its current position.
    pub fn from_std(std: std::fs::File) -> File {
        File {
            std: Arc::new(std),
            inner: Mutex::new(Inner {
                state: State::Idle(Buf::default()),
                write_err: None,
                pos: 0,
            }),
        }
    }

    /// Waits for the operation in flight, gives back bytes read ahead (seeking back over
    /// them), and returns the standard library file, positioned where the caller's reads and
    /// writes left it.
    ///
    /// # Panics
    /// Outside a weir runtime, when bytes read ahead must be given back. When the file
    /// cannot be taken over (another handle to it is still in use on the blocking pool after
    /// a cancelled call) and duplicating the descriptor fails.
    pub async fn into_std(mut self) -> std::fs::File {
        // Errors of what was in flight are the caller's loss here, as with dropping the file.
        let _ = poll_fn(|cx| self.inner_mut().poll_settle(cx)).await;
        let ahead = self.inner_mut().idle_buf().discard();
        if ahead > 0 {
            let file = self.std.clone();
            // The position is off by the read-ahead if this fails; nothing better to do.
            let _ = asyncify(move || rewind(&file, ahead)).await;
        }
        Arc::try_unwrap(self.std).unwrap_or_else(|shared| {
            shared
                .try_clone()
                .expect("duplicating the file descriptor of a File")
        })
    }

    /// Returns the standard library file if nothing is in flight and no bytes are read ahead
    /// (the position is exactly the caller's); otherwise hands the `File` back.
    ///
    /// # Errors
    /// The `File` itself, when an operation is in flight, bytes were read ahead, or an error
    /// of a background write is still to be reported.
    pub fn try_into_std(mut self) -> Result<std::fs::File, File> {
        let inner = self.inner_mut();
        let clean = match &inner.state {
            State::Idle(buf) => buf.unread() == 0 && inner.write_err.is_none(),
            State::Busy(_) => false,
        };
        if !clean {
            return Err(self);
        }
        let File { std, inner } = self;
        Arc::try_unwrap(std).map_err(|std| File { std, inner })
    }

    /// The metadata of the file (`fstat(2)`), after the operation in flight.
    ///
    /// # Errors
    /// The error of `fstat(2)`, or the runtime shut down.
    ///
    /// # Panics
    /// Outside a weir runtime.
    pub async fn metadata(&self) -> io::Result<Metadata> {
        self.settle().await?;
        let file = self.std.clone();
        asyncify(move || file.metadata()).await
    }

    /// A new `File` for the same open file (`dup(2)`): position and flags are shared.
    ///
    /// # Errors
    /// The error of `fcntl(F_DUPFD_CLOEXEC)` (e.g. `EMFILE`).
    ///
    /// # Panics
    /// Outside a weir runtime.
    pub async fn try_clone(&self) -> io::Result<File> {
        self.settle().await?;
        let file = self.std.clone();
        let clone = asyncify(move || file.try_clone()).await?;
        Ok(File::from_std(clone))
    }

    /// Waits for a pending write, then flushes the file's data and metadata to the device
    /// (`fsync(2)`).
    ///
    /// # Errors
    /// The error of a pending background write, or of `fsync(2)`.
    ///
    /// # Panics
    /// Outside a weir runtime.
    pub async fn sync_all(&self) -> io::Result<()> {
        self.settle().await?;
        self.lock().take_write_err()?;
        let file = self.std.clone();
        asyncify(move || file.sync_all()).await
    }

    /// As [`sync_all`](Self::sync_all), without flushing metadata that is not needed to read
    /// the data back (`fdatasync(2)`).
    ///
    /// # Errors
    /// The error of a pending background write, or of `fdatasync(2)`.
    ///
    /// # Panics
    /// Outside a weir runtime.
    pub async fn sync_data(&self) -> io::Result<()> {
        self.settle().await?;
        self.lock().take_write_err()?;
        let file = self.std.clone();
        asyncify(move || file.sync_data()).await
    }

    /// Truncates or extends the file to `size` bytes (extending with zeros), after the
    /// operation in flight. The position does not change: it may end up past the end.
    ///
    /// # Cancel safety
    /// The call runs to completion even if the future is dropped; later operations wait for
    /// it.
    ///
    /// # Errors
    /// The error of a pending background write, `InvalidInput` when the file is not open for
    /// writing, or another error of `ftruncate(2)`.
    ///
    /// # Panics
    /// Outside a weir runtime.
    pub async fn set_len(&self, size: u64) -> io::Result<()> {
        let mut started = false;
        poll_fn(|cx| {
            let mut inner = self.lock();
            if !started {
                ready!(inner.poll_settle(cx))?;
                inner.take_write_err()?;
                let ahead = inner.idle_buf().discard();
                // Through the state machine, so that a later read or write waits for it even
                // if this future is dropped.
                inner.start(&self.std, move |f, _| {
                    Op::SetLen(rewind(f, ahead).and_then(|()| f.set_len(size)))
                });
                started = true;
            }
            match ready!(inner.poll_idle(cx))? {
                Some(Op::SetLen(r)) => Poll::Ready(r),
                // Another `&self` call waited for this one and kept its outcome.
                Some(op) => {
                    inner.absorb(op);
                    Poll::Ready(Ok(()))
                }
                None => Poll::Ready(Ok(())),
            }
        })
        .await
    }

    /// Changes the permissions of the file (`fchmod(2)`).
    ///
    /// # Errors
    /// `PermissionDenied` when the caller does not own the file, or another error of
    /// `fchmod(2)`.
    ///
    /// # Panics
    /// Outside a weir runtime.
    pub async fn set_permissions(&self, perm: Permissions) -> io::Result<()> {
        self.settle().await?;
        let file = self.std.clone();
        asyncify(move || file.set_permissions(perm)).await
    }

    /// Waits until no operation is in flight (see `Inner::poll_settle`).
    async fn settle(&self) -> io::Result<()> {
        poll_fn(|cx| self.lock().poll_settle(cx)).await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Nothing panics while the lock is held except on a broken invariant, after which the
        // state is still consistent enough to use.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn inner_mut(&mut self) -> &mut Inner {
        self.inner.get_mut().unwrap_or_else(PoisonError::into_inner)
    }

    fn parts(self: Pin<&mut Self>) -> (&Arc<std::fs::File>, &mut Inner) {
        let this = self.get_mut();
        let inner = this.inner.get_mut().unwrap_or_else(PoisonError::into_inner);
        (&this.std, inner)
    }
}

impl futures_io::AsyncRead for File {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let (file, inner) = self.parts();
        inner.poll_read(file, cx, buf)
    }
}

impl futures_io::AsyncWrite for File {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let (file, inner) = self.parts();
        inner.poll_write(file, cx, buf)
    }

    /// Takes bytes from every slice, in order (up to one background write's buffer).
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let (file, inner) = self.parts();
        inner.poll_write_vectored(file, cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.parts().1.poll_flush(cx)
    }

    /// Flushes; the file stays open until dropped.
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.parts().1.poll_flush(cx)
    }
}

impl futures_io::AsyncSeek for File {
    fn poll_seek(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        pos: SeekFrom,
    ) -> Poll<io::Result<u64>> {
        let (file, inner) = self.parts();
        inner.poll_seek(file, cx, pos)
    }
}

impl From<std::fs::File> for File {
    fn from(std: std::fs::File) -> File {
        File::from_std(std)
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.std.as_raw_fd()
    }
}

impl AsFd for File {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.std.as_fd()
    }
}

/// tokio's layout with weir's name: `weir::fs::File { std: File { fd: 3, .. }, .. }`.
impl fmt::Debug for File {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("weir::fs::File")
            .field("std", &*self.std)
            .finish_non_exhaustive()
    }
}
