//! tokio's `AsyncRead`, `AsyncWrite` and `AsyncSeek` on [`File`] (feature `tokio-io`), on the
//! same operations as `futures_io`'s traits in `mod.rs`. tokio's seek has two halves: one
//! starts it, the other waits for it (`Inner::poll_seek_done`).

use std::io::{self, SeekFrom};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use super::File;
use super::state::State;

#[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
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

#[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
impl tokio::io::AsyncWrite for File {
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

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.parts().1.poll_flush(cx)
    }

    /// Flushes; the file stays open until dropped.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.parts().1.poll_flush(cx)
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
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
