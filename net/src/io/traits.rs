//! The trait implementations of the socket types: the I/O traits of the stream types and
//! their halves (`StreamIo`, `stream_io_impls!`), the methods the halves forward to their
//! stream (`half_methods!`), and the fd traits of every socket type (`fd_traits!`).

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::task::Poll;

use weir_reactor::AsyncFd;

use super::ops::shutdown_write;

/// A stream socket (TCP or Unix) as reached through a stream type or one of its halves: what
/// the I/O trait implementations of `stream_io_impls!` need.
pub(crate) trait StreamIo {
    /// The standard library socket that is registered.
    type Socket: AsRawFd + AsFd;

    /// The registered socket.
    fn async_fd(&self) -> &AsyncFd<Self::Socket>;

    /// Called after `poll_close`/`poll_shutdown` shut down the write direction successfully.
    fn write_shut_down(&mut self) {}
}

/// `poll_close`/`poll_shutdown` of the write traits: shuts down the write direction (always
/// ready), then tells `this`.
pub(crate) fn poll_shutdown<T: StreamIo>(this: &mut T) -> Poll<io::Result<()>> {
    let r = shutdown_write(this.async_fd().get_ref());
    if r.is_ok() {
        this.write_shut_down();
    }
    Poll::Ready(r)
}

/// Implements the read traits (`read for T, …`) or the write traits (`write for T, …`) for
/// [`StreamIo`] types: `futures_io`'s always, hyper's with feature `hyper` (tokio's, with
/// feature `tokio-io`, are `crate::tokio_io`'s). Flushing is a no-op; closing shuts down the
/// write direction.
macro_rules! stream_io_impls {
    (read for $($ty:ty),+ $(,)?) => {$(
        impl futures_io::AsyncRead for $ty {
            fn poll_read(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &mut [u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                $crate::io::poll_read($crate::io::StreamIo::async_fd(&*self), cx, buf)
            }

            fn poll_read_vectored(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                bufs: &mut [::std::io::IoSliceMut<'_>],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                $crate::io::poll_read_vectored($crate::io::StreamIo::async_fd(&*self), cx, bufs)
            }
        }

        #[cfg(feature = "hyper")]
        #[cfg_attr(docsrs, doc(cfg(feature = "hyper")))]
        impl hyper::rt::Read for $ty {
            fn poll_read(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                mut buf: hyper::rt::ReadBufCursor<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                let io = $crate::io::StreamIo::async_fd(&*self);
                // SAFETY: `as_mut` requires that no initialised byte is de-initialised: the
                // slice is only handed to `recv(2)` (`poll_read_uninit`), which never
                // de-initialises memory.
                let unfilled = unsafe { buf.as_mut() };
                let n = ::std::task::ready!($crate::io::uninit::poll_read_uninit(io, cx, unfilled))?;
                // SAFETY: `advance` requires `n` more initialised bytes: `recv(2)` wrote `n`
                // bytes at the start of the unfilled part.
                unsafe { buf.advance(n) };
                ::std::task::Poll::Ready(Ok(()))
            }
        }
    )+};

    (write for $($ty:ty),+ $(,)?) => {$(
        $crate::io::stream_io_impls!(@write [] futures_io::AsyncWrite, poll_close, $ty, {});
        $crate::io::stream_io_impls!(
            @write [#[cfg(feature = "hyper")] #[cfg_attr(docsrs, doc(cfg(feature = "hyper")))]] hyper::rt::Write, poll_shutdown, $ty,
            { fn is_write_vectored(&self) -> bool { true } }
        );
    )+};

    // The write traits differ only in the name of the close method and in whether they have
    // `is_write_vectored` (`$extra`).
    (@write [$(#[$attr:meta])*] $trait:path, $close:ident, $ty:ty, { $($extra:item)* }) => {
        $(#[$attr])*
        impl $trait for $ty {
            fn poll_write(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &[u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                $crate::io::poll_write($crate::io::StreamIo::async_fd(&*self), cx, buf)
            }

            fn poll_write_vectored(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                bufs: &[::std::io::IoSlice<'_>],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                $crate::io::poll_write_vectored($crate::io::StreamIo::async_fd(&*self), cx, bufs)
            }

            $($extra)*

            fn poll_flush(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::task::Poll::Ready(Ok(()))
            }

            /// Shuts down the write direction.
            fn $close(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                $crate::io::poll_shutdown(self.get_mut())
            }
        }
    };
}
pub(crate) use stream_io_impls;

/// The methods a stream's read halves (`read` arm) or write halves (`write` arm) forward to
/// `$stream`, which each half implements `AsRef` of; `$addr` is the stream's address type.
/// Expands to associated functions, inside an `impl` block of the half.
macro_rules! half_methods {
    (read, $stream:ident, $addr:ty) => {
        $crate::io::half_methods!(@common $stream, $addr);

        #[doc = concat!(
            "Waits until the stream is readable; see [`", stringify!($stream), "::readable`].\n",
            "\n# Cancel safety\nCancel safe.\n\n# Errors\nWhen the reactor has shut down."
        )]
        pub async fn readable(&self) -> ::std::io::Result<()> {
            <Self as AsRef<$stream>>::as_ref(self).readable().await
        }

        #[doc = concat!(
            "Reads without waiting; see [`", stringify!($stream), "::try_read`].\n",
            "\n# Errors\nAs [`", stringify!($stream), "::try_read`]."
        )]
        pub fn try_read(&self, buf: &mut [u8]) -> ::std::io::Result<usize> {
            <Self as AsRef<$stream>>::as_ref(self).try_read(buf)
        }

        #[doc = concat!(
            "Vectored read without waiting; see [`", stringify!($stream), "::try_read_vectored`].\n",
            "\n# Errors\nAs [`", stringify!($stream), "::try_read`]."
        )]
        pub fn try_read_vectored(
            &self,
            bufs: &mut [::std::io::IoSliceMut<'_>],
        ) -> ::std::io::Result<usize> {
            <Self as AsRef<$stream>>::as_ref(self).try_read_vectored(bufs)
        }
    };

    (write, $stream:ident, $addr:ty) => {
        $crate::io::half_methods!(@common $stream, $addr);

        #[doc = concat!(
            "Waits until the stream is writable; see [`", stringify!($stream), "::writable`].\n",
            "\n# Cancel safety\nCancel safe.\n\n# Errors\nWhen the reactor has shut down."
        )]
        pub async fn writable(&self) -> ::std::io::Result<()> {
            <Self as AsRef<$stream>>::as_ref(self).writable().await
        }

        #[doc = concat!(
            "Writes without waiting; see [`", stringify!($stream), "::try_write`].\n",
            "\n# Errors\nAs [`", stringify!($stream), "::try_write`]."
        )]
        pub fn try_write(&self, buf: &[u8]) -> ::std::io::Result<usize> {
            <Self as AsRef<$stream>>::as_ref(self).try_write(buf)
        }

        #[doc = concat!(
            "Vectored write without waiting; see [`", stringify!($stream), "::try_write_vectored`].\n",
            "\n# Errors\nAs [`", stringify!($stream), "::try_write`]."
        )]
        pub fn try_write_vectored(&self, bufs: &[::std::io::IoSlice<'_>]) -> ::std::io::Result<usize> {
            <Self as AsRef<$stream>>::as_ref(self).try_write_vectored(bufs)
        }
    };

    (@common $stream:ident, $addr:ty) => {
        #[doc = concat!(
            "Waits until the stream is ready for any of `interest`; see [`", stringify!($stream), "::ready`].\n",
            "\n# Cancel safety\nCancel safe.\n\n# Errors\nWhen the reactor has shut down."
        )]
        pub async fn ready(
            &self,
            interest: ::weir_reactor::Interest,
        ) -> ::std::io::Result<::weir_reactor::Ready> {
            <Self as AsRef<$stream>>::as_ref(self).ready(interest).await
        }

        #[doc = concat!(
            "The peer's address.\n\n# Errors\nAs [`", stringify!($stream), "::peer_addr`]."
        )]
        pub fn peer_addr(&self) -> ::std::io::Result<$addr> {
            <Self as AsRef<$stream>>::as_ref(self).peer_addr()
        }

        #[doc = concat!(
            "The local address.\n\n# Errors\nAs [`", stringify!($stream), "::local_addr`]."
        )]
        pub fn local_addr(&self) -> ::std::io::Result<$addr> {
            <Self as AsRef<$stream>>::as_ref(self).local_addr()
        }
    };
}
pub(crate) use half_methods;

/// `AsRawFd`, `AsFd` and `TryFrom<std type>` (as `from_std`) for a socket type whose
/// registered socket is its `io: AsyncFd<std type>` field.
macro_rules! fd_traits {
    ($ty:ident, $std:ty) => {
        impl ::std::os::fd::AsRawFd for $ty {
            fn as_raw_fd(&self) -> ::std::os::fd::RawFd {
                ::std::os::fd::AsRawFd::as_raw_fd(self.io.get_ref())
            }
        }

        impl ::std::os::fd::AsFd for $ty {
            fn as_fd(&self) -> ::std::os::fd::BorrowedFd<'_> {
                ::std::os::fd::AsFd::as_fd(self.io.get_ref())
            }
        }

        impl ::std::convert::TryFrom<$std> for $ty {
            type Error = ::std::io::Error;

            #[doc = concat!("As [`", stringify!($ty), "::from_std`].")]
            fn try_from(sock: $std) -> ::std::io::Result<$ty> {
                $ty::from_std(sock)
            }
        }
    };
}
pub(crate) use fd_traits;
