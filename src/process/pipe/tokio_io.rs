//! tokio's `AsyncRead` on [`ChildStdout`] and [`ChildStderr`], and `AsyncWrite` on
//! [`ChildStdin`] (feature `tokio-io`), on the same pipe operations as `futures_io`'s traits in
//! `pipe.rs`.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::{ChildStderr, ChildStdin, ChildStdout};

macro_rules! async_read {
    ($ty:ident) => {
        #[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
        impl tokio::io::AsyncRead for $ty {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                let n = std::task::ready!(self.pipe.poll_read(cx, buf.initialize_unfilled()))?;
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
        }
    };
}

async_read!(ChildStdout);
async_read!(ChildStderr);

#[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
impl tokio::io::AsyncWrite for ChildStdin {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.pipe.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.pipe.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Does nothing: drop the `ChildStdin` to close the pipe.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
