//! Unix-domain sockets: [`UnixListener`], [`UnixStream`] (with its split halves) and
//! [`UnixDatagram`].
//!
//! The types follow `tokio::net`'s Unix types in names and semantics. Every socket is
//! non-blocking and close-on-exec, and registers with the reactor of the thread that creates
//! it (a worker's own reactor, or weir's fallback reactor outside any runtime). Writes on
//! streams and datagram sockets pass `MSG_NOSIGNAL`, so a closed peer is reported as an
//! `EPIPE` error ([`std::io::ErrorKind::BrokenPipe`]) and never raises `SIGPIPE`.

/// Implements `futures_io::AsyncRead` (and tokio's / hyper's read traits under their features)
/// for a type that reaches a `&UnixStream` through `$this => $stream`.
macro_rules! impl_stream_read {
    ($ty:ty, $this:ident => $stream:expr) => {
        impl futures_io::AsyncRead for $ty {
            fn poll_read(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &mut [u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                let $this = &*self;
                $stream.poll_read_priv(cx, buf)
            }

            fn poll_read_vectored(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                bufs: &mut [::std::io::IoSliceMut<'_>],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                let $this = &*self;
                $stream.poll_read_vectored_priv(cx, bufs)
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncRead for $ty {
            fn poll_read(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                let $this = &*self;
                $stream.poll_read_tokio(cx, buf)
            }
        }

        #[cfg(feature = "hyper")]
        impl hyper::rt::Read for $ty {
            fn poll_read(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: hyper::rt::ReadBufCursor<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                let $this = &*self;
                $stream.poll_read_hyper(cx, buf)
            }
        }
    };
}

/// Implements `futures_io::AsyncWrite` (and tokio's / hyper's write traits under their
/// features) for a type that reaches a `&UnixStream` through `$this => $stream` and has a
/// `shutdown_write_priv(&mut self)` method (close / shutdown = shut down the write direction).
macro_rules! impl_stream_write {
    ($ty:ty, $this:ident => $stream:expr) => {
        impl futures_io::AsyncWrite for $ty {
            fn poll_write(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &[u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                let $this = &*self;
                $stream.poll_write_priv(cx, buf)
            }

            fn poll_write_vectored(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                bufs: &[::std::io::IoSlice<'_>],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                let $this = &*self;
                $stream.poll_write_vectored_priv(cx, bufs)
            }

            fn poll_flush(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::task::Poll::Ready(Ok(()))
            }

            fn poll_close(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::task::Poll::Ready(self.get_mut().shutdown_write_priv())
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncWrite for $ty {
            fn poll_write(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &[u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                let $this = &*self;
                $stream.poll_write_priv(cx, buf)
            }

            fn poll_write_vectored(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                bufs: &[::std::io::IoSlice<'_>],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                let $this = &*self;
                $stream.poll_write_vectored_priv(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::task::Poll::Ready(Ok(()))
            }

            fn poll_shutdown(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::task::Poll::Ready(self.get_mut().shutdown_write_priv())
            }
        }

        #[cfg(feature = "hyper")]
        impl hyper::rt::Write for $ty {
            fn poll_write(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &[u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                let $this = &*self;
                $stream.poll_write_priv(cx, buf)
            }

            fn poll_write_vectored(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                bufs: &[::std::io::IoSlice<'_>],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                let $this = &*self;
                $stream.poll_write_vectored_priv(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::task::Poll::Ready(Ok(()))
            }

            fn poll_shutdown(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::task::Poll::Ready(self.get_mut().shutdown_write_priv())
            }
        }
    };
}

mod datagram;
mod listener;
mod split;
mod split_owned;
mod stream;
mod ucred;

pub use datagram::UnixDatagram;
pub use listener::{Incoming, UnixListener};
pub use split::{ReadHalf, WriteHalf};
pub use split_owned::{OwnedReadHalf, OwnedWriteHalf, ReuniteError};
pub use stream::UnixStream;
pub use ucred::UCred;

/// The address of a Unix-domain socket: a path, an abstract name, or unnamed.
///
/// This is the standard library's type; `as_pathname`, `is_unnamed` and (through
/// `std::os::linux::net::SocketAddrExt`) `as_abstract_name` inspect it.
pub use std::os::unix::net::SocketAddr;
