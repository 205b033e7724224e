//! tokio's I/O on the stream types (TCP and Unix) and their halves: `AsyncRead` and
//! `AsyncWrite` (as `futures_io`'s, in `crate::io::traits`: flushing is a no-op, shutting down
//! shuts the write direction), `try_read_buf` into a `BufMut`, and TCP's `poll_peek` into a
//! `ReadBuf`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use socket2::SockRef;
use weir_reactor::{Direction, Interest};

use crate::io::uninit::{poll_read_uninit, read_ahead_or_uninit};
use crate::io::{StreamIo, poll_shutdown, poll_write, poll_write_vectored};
use crate::{tcp, unix};

/// tokio's `AsyncRead` for stream types and their read halves.
macro_rules! async_read {
    ($($ty:ty),+ $(,)?) => {$(
        #[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
        impl tokio::io::AsyncRead for $ty {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                let io = StreamIo::async_fd(&*self);
                // SAFETY: `unfilled_mut` requires that no initialised byte is de-initialised:
                // the slice is only handed to `recv(2)` (`poll_read_uninit`), which writes
                // bytes and never de-initialises any.
                let unfilled = unsafe { buf.unfilled_mut() };
                let n = ready!(poll_read_uninit(io, cx, unfilled))?;
                // SAFETY: `recv(2)` reported writing `n` bytes at the start of the unfilled
                // part, so they are initialised.
                unsafe { buf.assume_init(n) };
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
        }
    )+};
}

/// tokio's `AsyncWrite` for stream types and their write halves.
macro_rules! async_write {
    ($($ty:ty),+ $(,)?) => {$(
        #[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
        impl tokio::io::AsyncWrite for $ty {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                poll_write(StreamIo::async_fd(&*self), cx, buf)
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                poll_write_vectored(StreamIo::async_fd(&*self), cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }

            /// Shuts down the write direction.
            fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                poll_shutdown(self.get_mut())
            }
        }
    )+};
}

async_read!(
    tcp::TcpStream,
    tcp::ReadHalf<'_>,
    tcp::OwnedReadHalf,
    unix::UnixStream,
    unix::ReadHalf<'_>,
    unix::OwnedReadHalf,
);
async_write!(
    tcp::TcpStream,
    tcp::WriteHalf<'_>,
    tcp::OwnedWriteHalf,
    unix::UnixStream,
    unix::WriteHalf<'_>,
    unix::OwnedWriteHalf,
);

/// `try_read_buf` of a stream type (`$ty`) and of its read halves, which forward to it.
macro_rules! try_read_buf {
    ($ty:ident, $($half:ty),+) => {
        #[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
        impl $ty {
            #[doc = concat!(
                "Reads into the spare capacity of `buf` without waiting, if the `", stringify!($ty),
                "` is known to be readable, and advances `buf` by the bytes read (a `Vec<u8>` or ",
                "`BytesMut` grows as needed). `Ok(0)` means end of stream, or a `buf` without ",
                "spare capacity. Feature `tokio-io`.\n",
                "\n# Errors\nAs [`try_read`](Self::try_read): `WouldBlock` when no data is known ",
                "to be available (readiness is then cleared), or the OS error of `recv(2)`."
            )]
            pub fn try_read_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
                let sock = SockRef::from(self.io.get_ref());
                self.io
                    .registration()
                    .try_io(Interest::READABLE, || {
                        super::recv_buf_mut(buf, |spare| {
                            let n = read_ahead_or_uninit(&self.io, spare, true, |b| {
                                sock.recv(b)
                            })?;
                            Ok((n, ()))
                        })
                    })
                    .map(|(n, ())| n)
            }
        }
        $(
            #[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
            impl $half {
                #[doc = concat!(
                    "Reads into the spare capacity of `buf` without waiting; see [`",
                    stringify!($ty), "::try_read_buf`]. Feature `tokio-io`.\n",
                    "\n# Errors\nAs [`", stringify!($ty), "::try_read`]."
                )]
                pub fn try_read_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
                    <Self as AsRef<$ty>>::as_ref(self).try_read_buf(buf)
                }
            }
        )+
    };
}

use tcp::TcpStream;
use unix::UnixStream;

try_read_buf!(TcpStream, tcp::ReadHalf<'_>, tcp::OwnedReadHalf);
try_read_buf!(UnixStream, unix::ReadHalf<'_>, unix::OwnedReadHalf);

#[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
impl TcpStream {
    /// tokio's `poll_peek`: polls to peek at incoming data into the unfilled part of `buf`,
    /// filling it and returning how many bytes were copied. Only the last task to poll is
    /// woken. Feature `tokio-io`; [`poll_peek`](Self::poll_peek) takes a slice.
    ///
    /// # Errors
    /// As [`peek`](Self::peek).
    pub fn poll_peek_read_buf(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<usize>> {
        let sock = SockRef::from(self.io.get_ref());
        self.io.registration().poll_io(cx, Direction::Read, || {
            super::recv_read_buf(buf, |spare| {
                let n = read_ahead_or_uninit(&self.io, spare, false, |b| sock.peek(b))?;
                Ok((n, n))
            })
        })
    }
}

/// `poll_peek_read_buf` of TCP's read halves, which forward to the stream.
macro_rules! poll_peek_read_buf {
    ($($half:ty),+) => {$(
        #[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
        impl $half {
            /// tokio's `poll_peek` into a `ReadBuf`; see [`TcpStream::poll_peek_read_buf`].
            /// Feature `tokio-io`.
            ///
            /// # Errors
            /// As [`TcpStream::peek`].
            pub fn poll_peek_read_buf(
                &mut self,
                cx: &mut Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> Poll<io::Result<usize>> {
                <Self as AsRef<TcpStream>>::as_ref(self).poll_peek_read_buf(cx, buf)
            }
        }
    )+};
}

poll_peek_read_buf!(tcp::ReadHalf<'_>, tcp::OwnedReadHalf);
