//! The I/O trait implementations of [`TcpStream`] and its halves: `futures_io` always, tokio's
//! with feature `tokio-io`, hyper's with feature `hyper`. All of them forward to the stream's
//! readiness-driven operations (`Registration::poll_io`, which clears the observed readiness
//! when the socket returns `WouldBlock`).

use std::io::{self, IoSlice, IoSliceMut};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, TcpStream, WriteHalf};

/// The stream behind an I/O type, and what closing its write side means for it.
trait Io {
    fn tcp(&self) -> &TcpStream;
    /// After a successful `poll_close`/`poll_shutdown`.
    fn shut_down(&mut self) {}
}

impl Io for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
}
impl Io for ReadHalf<'_> {
    fn tcp(&self) -> &TcpStream {
        self.as_ref()
    }
}
impl Io for WriteHalf<'_> {
    fn tcp(&self) -> &TcpStream {
        self.as_ref()
    }
}
impl Io for OwnedReadHalf {
    fn tcp(&self) -> &TcpStream {
        &self.inner
    }
}
impl Io for OwnedWriteHalf {
    fn tcp(&self) -> &TcpStream {
        &self.inner
    }
    fn shut_down(&mut self) {
        OwnedWriteHalf::shut_down(self);
    }
}

fn close<T: Io>(this: &mut T) -> Poll<io::Result<()>> {
    let r = this.tcp().poll_shutdown_priv();
    if let Poll::Ready(Ok(())) = r {
        this.shut_down();
    }
    r
}

macro_rules! read_impls {
    ($($ty:ty),*) => {$(
        impl futures_io::AsyncRead for $ty {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut [u8],
            ) -> Poll<io::Result<usize>> {
                self.tcp().poll_read_priv(cx, buf)
            }

            fn poll_read_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &mut [IoSliceMut<'_>],
            ) -> Poll<io::Result<usize>> {
                self.tcp().poll_read_vectored_priv(cx, bufs)
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncRead for $ty {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                // SAFETY: `unfilled_mut` requires that no initialised byte is de-initialised:
                // the slice is only handed to `recv(2)`, which writes bytes and never
                // de-initialises any.
                let unfilled = unsafe { buf.unfilled_mut() };
                let n = std::task::ready!(self.tcp().poll_read_uninit(cx, unfilled))?;
                // SAFETY: `recv(2)` reported writing `n` bytes at the start of the unfilled
                // part, so they are initialised.
                unsafe { buf.assume_init(n) };
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
        }

        #[cfg(feature = "hyper")]
        impl hyper::rt::Read for $ty {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                mut buf: hyper::rt::ReadBufCursor<'_>,
            ) -> Poll<io::Result<()>> {
                // SAFETY: `as_mut` requires that no initialised byte is de-initialised: the
                // slice is only handed to `recv(2)`, which never de-initialises memory.
                let unfilled = unsafe { buf.as_mut() };
                let n = std::task::ready!(self.tcp().poll_read_uninit(cx, unfilled))?;
                // SAFETY: `advance` requires `n` more initialised bytes: `recv(2)` wrote `n`
                // bytes at the start of the unfilled part.
                unsafe { buf.advance(n) };
                Poll::Ready(Ok(()))
            }
        }
    )*};
}

macro_rules! write_impls {
    ($($ty:ty),*) => {$(
        impl futures_io::AsyncWrite for $ty {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                self.tcp().poll_write_priv(cx, buf)
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                self.tcp().poll_write_vectored_priv(cx, bufs)
            }

            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }

            /// Shuts down the write direction.
            fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                close(self.get_mut())
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncWrite for $ty {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                self.tcp().poll_write_priv(cx, buf)
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                self.tcp().poll_write_vectored_priv(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }

            /// Shuts down the write direction.
            fn poll_shutdown(
                self: Pin<&mut Self>,
                _cx: &mut Context<'_>,
            ) -> Poll<io::Result<()>> {
                close(self.get_mut())
            }
        }

        #[cfg(feature = "hyper")]
        impl hyper::rt::Write for $ty {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                self.tcp().poll_write_priv(cx, buf)
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                self.tcp().poll_write_vectored_priv(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }

            /// Shuts down the write direction.
            fn poll_shutdown(
                self: Pin<&mut Self>,
                _cx: &mut Context<'_>,
            ) -> Poll<io::Result<()>> {
                close(self.get_mut())
            }
        }
    )*};
}

read_impls!(TcpStream, ReadHalf<'_>, OwnedReadHalf);
write_impls!(TcpStream, WriteHalf<'_>, OwnedWriteHalf);
