//! The state of a [`File`](super::File) between operations: the one operation in flight on
//! the blocking pool, or the idle buffer with its read-ahead, and the bookkeeping that gives
//! read-ahead back before a write or seek.

use std::future::Future;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use weir_executor::JoinHandle;

use super::MAX_BUF;

/// The state of a [`File`] between operations.
pub(super) struct Inner {
    pub(super) state: State,
    /// The error of a background write that nobody has been told about yet; returned by the
    /// next write, flush or sync.
    pub(super) write_err: Option<io::Error>,
    /// The position after the last completed seek: what tokio's `poll_complete` reports when
    /// no seek is pending.
    pub(super) pos: u64,
}

pub(super) enum State {
    /// No operation in flight. The buffer may hold bytes read ahead and not handed out yet.
    Idle(Buf),
    /// An operation runs on the blocking pool; it hands back the buffer with its outcome.
    Busy(JoinHandle<(Op, Buf)>),
}

/// The outcome of an operation run on the blocking pool.
pub(super) enum Op {
    /// Bytes read into the buffer (0: end of file).
    Read(io::Result<usize>),
    Write(io::Result<()>),
    /// The new position.
    Seek(io::Result<u64>),
    SetLen(io::Result<()>),
}

/// Bytes moving between the caller and the file; `data[pos..]` is not handed out yet.
#[derive(Default)]
pub(super) struct Buf {
    pub(super) data: Vec<u8>,
    pub(super) pos: usize,
}

impl Buf {
    pub(super) fn unread(&self) -> usize {
        self.data.len() - self.pos
    }

    /// Copies unread bytes into `dst`; returns how many.
    pub(super) fn copy_to(&mut self, dst: &mut [u8]) -> usize {
        let n = self.unread().min(dst.len());
        dst[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        if self.pos == self.data.len() {
            self.clear();
        }
        n
    }

    pub(super) fn clear(&mut self) {
        self.data.clear();
        self.pos = 0;
    }

    /// Drops the unread bytes; returns how far the file's position is ahead of the caller's.
    pub(super) fn discard(&mut self) -> i64 {
        let ahead = self.unread();
        self.clear();
        // At most MAX_BUF.
        ahead as i64
    }

    /// Reads up to `len` bytes from `file` into the empty buffer (blocking).
    pub(super) fn read_from(&mut self, mut file: &std::fs::File, len: usize) -> io::Result<usize> {
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
pub(super) fn rewind(mut file: &std::fs::File, ahead: i64) -> io::Result<()> {
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
    pub(super) fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Op>>> {
        let State::Busy(handle) = &mut self.state else {
            return Poll::Ready(Ok(None));
        };
        let done = ready!(Pin::new(handle).poll(cx));
        let (op, buf) = match done {
            Ok(done) => done,
            Err(_) => {
                self.state = State::Idle(Buf::default());
                return Poll::Ready(Err(crate::fs::background_failed()));
            }
        };
        self.state = State::Idle(buf);
        Poll::Ready(Ok(Some(op)))
    }

    /// Waits until nothing is in flight. The outcome of what was in flight is kept where it
    /// belongs: read bytes stay in the buffer, a write's error in `write_err`, a seek's
    /// position in `pos`; a failed read or seek nobody waits for anymore is dropped.
    pub(super) fn poll_settle(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(op) = ready!(self.poll_idle(cx))? {
            self.absorb(op);
        }
        Poll::Ready(Ok(()))
    }

    /// Keeps the outcome of an operation whose caller is gone (see
    /// [`poll_settle`](Self::poll_settle)).
    pub(super) fn absorb(&mut self, op: Op) {
        match op {
            Op::Write(Err(e)) | Op::SetLen(Err(e)) => {
                self.write_err.get_or_insert(e);
            }
            Op::Seek(Ok(pos)) => self.pos = pos,
            Op::Read(_) | Op::Write(Ok(())) | Op::Seek(Err(_)) | Op::SetLen(Ok(())) => {}
        }
    }

    /// The idle buffer. Only after `poll_idle` returned ready.
    pub(super) fn idle_buf(&mut self) -> &mut Buf {
        match &mut self.state {
            State::Idle(buf) => buf,
            State::Busy(_) => unreachable!("an operation is in flight"),
        }
    }

    /// Starts `op` on the blocking pool with the idle buffer.
    pub(super) fn start(
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

    pub(super) fn take_write_err(&mut self) -> io::Result<()> {
        match self.write_err.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub(super) fn poll_read(
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

    pub(super) fn poll_write(
        &mut self,
        file: &Arc<std::fs::File>,
        cx: &mut Context<'_>,
        src: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(file, cx, &[io::IoSlice::new(src)])
    }

    /// Takes as many bytes of `srcs`, in order, as one background write holds (`MAX_BUF`), and
    /// writes them all with one `write_all`.
    pub(super) fn poll_write_vectored(
        &mut self,
        file: &Arc<std::fs::File>,
        cx: &mut Context<'_>,
        srcs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if srcs.iter().all(|s| s.is_empty()) {
            return Poll::Ready(Ok(0));
        }
        loop {
            match ready!(self.poll_idle(cx))? {
                None => {
                    self.take_write_err()?;
                    let buf = self.idle_buf();
                    let ahead = buf.discard();
                    let mut n = 0;
                    for src in srcs {
                        let take = src.len().min(MAX_BUF - n);
                        buf.data.extend_from_slice(&src[..take]);
                        n += take;
                        if n == MAX_BUF {
                            break;
                        }
                    }
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

    pub(super) fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            match ready!(self.poll_idle(cx))? {
                None => return Poll::Ready(self.take_write_err()),
                Some(Op::Write(Err(e))) => return Poll::Ready(Err(e)),
                Some(op) => self.absorb(op),
            }
        }
    }

    /// Starts a seek once idle (the first half of both seek traits).
    pub(super) fn start_seek(
        &mut self,
        file: &Arc<std::fs::File>,
        pos: SeekFrom,
    ) -> io::Result<()> {
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
    pub(super) fn poll_seek_done(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
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
    pub(super) fn poll_seek(
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
