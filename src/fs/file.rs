//! [`File`]: an open file whose operations run on the blocking pool, one at a time.

use std::fmt;
use std::fs::{Metadata, Permissions};
use std::future::{Future, poll_fn};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};

use weir_executor::JoinHandle;

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

/// The state of a [`File`] between operations.
struct Inner {
    state: State,
    /// The error of a background write that nobody has been told about yet; returned by the
    /// next write, flush or sync.
    write_err: Option<io::Error>,
    /// The position after the last completed seek: what tokio's `poll_complete` reports when
    /// no seek is pending.
    pos: u64,
}

enum State {
    /// No operation in flight. The buffer may hold bytes read ahead and not handed out yet.
    Idle(Buf),
    /// An operation runs on the blocking pool; it hands back the buffer with its outcome.
    Busy(JoinHandle<(Op, Buf)>),
}

/// The outcome of an operation run on the blocking pool.
enum Op {
    /// Bytes read into the buffer (0: end of file).
    Read(io::Result<usize>),
    Write(io::Result<()>),
    /// The new position.
    Seek(io::Result<u64>),
    SetLen(io::Result<()>),
}

/// Bytes moving between the caller and the file; `data[pos..]` is not handed out yet.
#[derive(Default)]
struct Buf {
    data: Vec<u8>,
    pos: usize,
}

impl Buf {
    fn unread(&self) -> usize {
        self.data.len() - self.pos
    }

    /// Copies unread bytes into `dst`; returns how many.
    fn copy_to(&mut self, dst: &mut [u8]) -> usize {
        let n = self.unread().min(dst.len());
        dst[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        if self.pos == self.data.len() {
            self.clear();
        }
        n
    }

    fn clear(&mut self) {
        self.data.clear();
        self.pos = 0;
    }

    /// Drops the unread bytes; returns how far the file's position is ahead of the caller's.
    fn discard(&mut self) -> i64 {
        let ahead = self.unread();
        self.clear();
        // At most MAX_BUF.
        ahead as i64
    }

    /// Reads up to `len` bytes from `file` into the empty buffer (blocking).
    fn read_from(&mut self, mut file: &std::fs::File, len: usize) -> io::Result<usize> {
        debug_assert_eq!(self.unread(), 0);
        self.clear();
        self.data.resize(len, 0);
        let r = loop {
            match file.read(&mut self.data) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => break r,
            }
        };
        self.data.truncate(*r.as_ref().unwrap_or(&0));
        r
    }
}

/// Seeks `file` back over `ahead` bytes read ahead, if any (blocking).
fn rewind(mut file: &std::fs::File, ahead: i64) -> io::Result<()> {
    if ahead > 0 {
        file.seek(SeekFrom::Current(-ahead))?;
    }
    Ok(())
}

impl Inner {
    /// Waits for the operation in flight, if any, and puts its buffer back. Returns its
    /// outcome, or `None` if nothing was in flight.
    ///
    /// # Errors
    /// When the blocking closure did not run or panicked (the runtime shut down); the buffer
    /// (and any read-ahead) is then lost, and the file's position is unknown.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Op>>> {
        let State::Busy(handle) = &mut self.state else {
            return Poll::Ready(Ok(None));
        };
        let done = ready!(Pin::new(handle).poll(cx));
        let (op, buf) = match done {
            Ok(done) => done,
            Err(e) => {
                self.state = State::Idle(Buf::default());
                return Poll::Ready(Err(e.into()));
            }
        };
        self.state = State::Idle(buf);
        Poll::Ready(Ok(Some(op)))
    }

    /// Waits until nothing is in flight. The outcome of what was in flight is kept where it
    /// belongs: read bytes stay in the buffer, a write's error in `write_err`, a seek's
    /// position in `pos`; a failed read or seek nobody waits for anymore is dropped.
    fn poll_settle(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(op) = ready!(self.poll_idle(cx))? {
            self.absorb(op);
        }
        Poll::Ready(Ok(()))
    }

    /// Keeps the outcome of an operation whose caller is gone (see
    /// [`poll_settle`](Self::poll_settle)).
    fn absorb(&mut self, op: Op) {
        match op {
            Op::Write(Err(e)) | Op::SetLen(Err(e)) => {
                self.write_err.get_or_insert(e);
            }
            Op::Seek(Ok(pos)) => self.pos = pos,
            Op::Read(_) | Op::Write(Ok(())) | Op::Seek(Err(_)) | Op::SetLen(Ok(())) => {}
        }
    }

    /// The idle buffer. Only after `poll_idle` returned ready.
    fn idle_buf(&mut self) -> &mut Buf {
        match &mut self.state {
            State::Idle(buf) => buf,
            State::Busy(_) => unreachable!("an operation is in flight"),
        }
    }

    /// Starts `op` on the blocking pool with the idle buffer.
    fn start(
        &mut self,
        file: &Arc<std::fs::File>,
        op: impl FnOnce(&std::fs::File, &mut Buf) -> Op + Send + 'static,
    ) {
        let mut buf = std::mem::take(self.idle_buf());
        let file = file.clone();
        self.state = State::Busy(weir_executor::spawn_blocking(move || {
            let op = op(&file, &mut buf);
            (op, buf)
        }));
    }

    fn take_write_err(&mut self) -> io::Result<()> {
        match self.write_err.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn poll_read(
        &mut self,
        file: &Arc<std::fs::File>,
        cx: &mut Context<'_>,
        dst: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            match ready!(self.poll_idle(cx))? {
                None => {
                    let buf = self.idle_buf();
                    if buf.unread() > 0 || dst.is_empty() {
                        return Poll::Ready(Ok(buf.copy_to(dst)));
                    }
                    let len = dst.len().min(MAX_BUF);
                    self.start(file, move |f, buf| Op::Read(buf.read_from(f, len)));
                }
                Some(Op::Read(Ok(0))) => return Poll::Ready(Ok(0)),
                Some(Op::Read(Ok(_))) => {} // hand it out on the next turn
                Some(Op::Read(Err(e))) => return Poll::Ready(Err(e)),
                Some(op) => self.absorb(op),
            }
        }
    }

    fn poll_write(
        &mut self,
        file: &Arc<std::fs::File>,
        cx: &mut Context<'_>,
        src: &[u8],
    ) -> Poll<io::Result<usize>> {
        if src.is_empty() {
            return Poll::Ready(Ok(0));
        }
        loop {
            match ready!(self.poll_idle(cx))? {
                None => {
                    self.take_write_err()?;
                    let buf = self.idle_buf();
                    let ahead = buf.discard();
                    let n = src.len().min(MAX_BUF);
                    buf.data.extend_from_slice(&src[..n]);
                    self.start(file, move |mut f, buf| {
                        let r = rewind(f, ahead).and_then(|()| f.write_all(&buf.data));
                        buf.clear();
                        Op::Write(r)
                    });
                    return Poll::Ready(Ok(n));
                }
                Some(Op::Write(Err(e))) => return Poll::Ready(Err(e)),
                Some(op) => self.absorb(op),
            }
        }
    }

    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            match ready!(self.poll_idle(cx))? {
                None => return Poll::Ready(self.take_write_err()),
                Some(Op::Write(Err(e))) => return Poll::Ready(Err(e)),
                Some(op) => self.absorb(op),
            }
        }
    }

    /// Starts a seek once idle (the first half of both seek traits).
    fn start_seek(&mut self, file: &Arc<std::fs::File>, pos: SeekFrom) -> io::Result<()> {
        let ahead = self.idle_buf().discard();
        let pos = match pos {
            // The caller's position is behind the file's by the bytes read ahead.
            SeekFrom::Current(off) => {
                SeekFrom::Current(off.checked_sub(ahead).ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidInput, "seek offset out of range")
                })?)
            }
            pos => pos,
        };
        self.start(file, move |mut f, _| Op::Seek(f.seek(pos)));
        Ok(())
    }

    /// Waits for the seek in flight (the second half of both seek traits); when none is in
    /// flight, reports the position after the last seek.
    #[cfg(feature = "tokio-io")]
    fn poll_seek_done(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        loop {
            match ready!(self.poll_idle(cx))? {
                None => return Poll::Ready(Ok(self.pos)),
                Some(Op::Seek(r)) => {
                    if let Ok(pos) = r {
                        self.pos = pos;
                    }
                    return Poll::Ready(r);
                }
                Some(op) => self.absorb(op),
            }
        }
    }

    /// futures-io's one-call seek: waits for what is in flight, starts the seek, waits for it.
    /// A call that finds a seek in flight takes it as its own (the caller polls again with the
    /// same `pos` until it completes).
    fn poll_seek(
        &mut self,
        file: &Arc<std::fs::File>,
        cx: &mut Context<'_>,
        pos: SeekFrom,
    ) -> Poll<io::Result<u64>> {
        loop {
            match ready!(self.poll_idle(cx))? {
                None => self.start_seek(file, pos)?,
                Some(Op::Seek(r)) => {
                    if let Ok(pos) = r {
                        self.pos = pos;
                    }
                    return Poll::Ready(r);
                }
                Some(op) => self.absorb(op),
            }
        }
    }
}

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

#[cfg(feature = "tokio-io")]
impl tokio::io::AsyncRead for File {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let (file, inner) = self.parts();
        let n = ready!(inner.poll_read(file, cx, buf.initialize_unfilled()))?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

#[cfg(feature = "tokio-io")]
impl tokio::io::AsyncWrite for File {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let (file, inner) = self.parts();
        inner.poll_write(file, cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.parts().1.poll_flush(cx)
    }

    /// Flushes; the file stays open until dropped.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.parts().1.poll_flush(cx)
    }
}

#[cfg(feature = "tokio-io")]
impl tokio::io::AsyncSeek for File {
    /// Starts a seek.
    ///
    /// # Errors
    /// `Other` when an operation is in flight: call `poll_complete` first (tokio's
    /// `AsyncSeekExt::seek` does).
    fn start_seek(self: Pin<&mut Self>, pos: SeekFrom) -> io::Result<()> {
        let (file, inner) = self.parts();
        if let State::Busy(_) = inner.state {
            return Err(io::Error::other(
                "another operation of this File is in flight: call poll_complete before start_seek",
            ));
        }
        inner.start_seek(file, pos)
    }

    fn poll_complete(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        self.parts().1.poll_seek_done(cx)
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

impl fmt::Debug for File {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("File")
            .field("fd", &self.std.as_raw_fd())
            .finish_non_exhaustive()
    }
}
