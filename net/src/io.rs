//! What the socket types share: the readiness-driven operations on a registered socket
//! (`AsyncFd`), the I/O trait implementations of the stream types ([`TcpStream`],
//! [`UnixStream`]) and their halves, and the ownership logic of owned write halves.
//!
//! Every operation goes through `Registration::poll_io`/`poll_stream_io`/`try_io`/`async_io`,
//! which clear the observed readiness when the socket returns `WouldBlock` — and, for stream
//! reads and writes, after a short transfer, which saves the `EAGAIN` syscall. Writes use
//! `send(2)` with `MSG_NOSIGNAL`, so a closed peer is reported as `EPIPE` and never raises
//! `SIGPIPE`.
//!
//! [`TcpStream`]: crate::TcpStream
//! [`UnixStream`]: crate::UnixStream

use std::fmt;
use std::io::{self, IoSlice, IoSliceMut, Read};
#[cfg(any(feature = "tokio-io", feature = "hyper"))]
use std::mem::MaybeUninit;
use std::net::Shutdown;
use std::ops::Deref;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::task::{Context, Poll};

use socket2::SockRef;
use weir_reactor::{AsyncFd, Direction, Interest, Ready};

// ---- readiness (every socket type) ----

/// Waits until `io` is ready for any of `interest`; returns the readiness seen.
pub(crate) async fn ready<S: AsRawFd>(io: &AsyncFd<S>, interest: Interest) -> io::Result<Ready> {
    let ev = io.registration().readiness(interest).await?;
    Ok(ev.ready())
}

/// Polls `io` for readiness in `dir` (only the last task to poll `dir` is woken).
pub(crate) fn poll_ready<S: AsRawFd>(
    io: &AsyncFd<S>,
    cx: &mut Context<'_>,
    dir: Direction,
) -> Poll<io::Result<()>> {
    io.registration().poll_ready(cx, dir).map_ok(drop)
}

// ---- stream sockets: read / write ----

/// `send(2)` with `MSG_NOSIGNAL`.
fn send<S: AsFd>(sock: &S, buf: &[u8]) -> io::Result<usize> {
    SockRef::from(sock).send_with_flags(buf, libc::MSG_NOSIGNAL)
}

/// `sendmsg(2)` with `MSG_NOSIGNAL`.
fn send_vectored<S: AsFd>(sock: &S, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    SockRef::from(sock).send_vectored_with_flags(bufs, libc::MSG_NOSIGNAL)
}

/// Reads if `io` is known to be readable (`read(2)`).
pub(crate) fn try_read<S: AsRawFd>(io: &AsyncFd<S>, buf: &mut [u8]) -> io::Result<usize>
where
    for<'a> &'a S: Read,
{
    let mut sock = io.get_ref();
    io.registration()
        .try_io(Interest::READABLE, || sock.read(buf))
}

/// Reads (`readv(2)`) if `io` is known to be readable.
pub(crate) fn try_read_vectored<S: AsRawFd>(
    io: &AsyncFd<S>,
    bufs: &mut [IoSliceMut<'_>],
) -> io::Result<usize>
where
    for<'a> &'a S: Read,
{
    let mut sock = io.get_ref();
    io.registration()
        .try_io(Interest::READABLE, || sock.read_vectored(bufs))
}

/// Writes (`send(2)`, `MSG_NOSIGNAL`) if `io` is known to be writable.
pub(crate) fn try_write<S: AsRawFd + AsFd>(io: &AsyncFd<S>, buf: &[u8]) -> io::Result<usize> {
    io.registration()
        .try_io(Interest::WRITABLE, || send(io.get_ref(), buf))
}

/// Writes (`sendmsg(2)`, `MSG_NOSIGNAL`) if `io` is known to be writable.
pub(crate) fn try_write_vectored<S: AsRawFd + AsFd>(
    io: &AsyncFd<S>,
    bufs: &[IoSlice<'_>],
) -> io::Result<usize> {
    io.registration()
        .try_io(Interest::WRITABLE, || send_vectored(io.get_ref(), bufs))
}

/// `read(2)` once `io` is readable.
pub(crate) fn poll_read<S: AsRawFd>(
    io: &AsyncFd<S>,
    cx: &mut Context<'_>,
    buf: &mut [u8],
) -> Poll<io::Result<usize>>
where
    for<'a> &'a S: Read,
{
    let mut sock = io.get_ref();
    let len = buf.len();
    io.registration()
        .poll_stream_io(cx, Direction::Read, len, || sock.read(buf))
}

/// `readv(2)` once `io` is readable.
pub(crate) fn poll_read_vectored<S: AsRawFd>(
    io: &AsyncFd<S>,
    cx: &mut Context<'_>,
    bufs: &mut [IoSliceMut<'_>],
) -> Poll<io::Result<usize>>
where
    for<'a> &'a S: Read,
{
    let mut sock = io.get_ref();
    let len = bufs.iter().map(|b| b.len()).sum();
    io.registration()
        .poll_stream_io(cx, Direction::Read, len, || sock.read_vectored(bufs))
}

/// `recv(2)` into possibly uninitialised memory once `io` is readable; the kernel initialises
/// the bytes it reports, and `recv(2)` never de-initialises any.
#[cfg(any(feature = "tokio-io", feature = "hyper"))]
pub(crate) fn poll_read_uninit<S: AsRawFd + AsFd>(
    io: &AsyncFd<S>,
    cx: &mut Context<'_>,
    buf: &mut [MaybeUninit<u8>],
) -> Poll<io::Result<usize>> {
    let sock = SockRef::from(io.get_ref());
    let len = buf.len();
    io.registration()
        .poll_stream_io(cx, Direction::Read, len, || sock.recv(buf))
}

/// `send(2)` (`MSG_NOSIGNAL`) once `io` is writable.
pub(crate) fn poll_write<S: AsRawFd + AsFd>(
    io: &AsyncFd<S>,
    cx: &mut Context<'_>,
    buf: &[u8],
) -> Poll<io::Result<usize>> {
    io.registration()
        .poll_stream_io(cx, Direction::Write, buf.len(), || send(io.get_ref(), buf))
}

/// `sendmsg(2)` (`MSG_NOSIGNAL`) once `io` is writable.
pub(crate) fn poll_write_vectored<S: AsRawFd + AsFd>(
    io: &AsyncFd<S>,
    cx: &mut Context<'_>,
    bufs: &[IoSlice<'_>],
) -> Poll<io::Result<usize>> {
    let len = bufs.iter().map(|b| b.len()).sum();
    io.registration()
        .poll_stream_io(cx, Direction::Write, len, || {
            send_vectored(io.get_ref(), bufs)
        })
}

/// `shutdown(2)` of the write direction. `ENOTCONN` — the peer already reset the connection,
/// so there is nothing left to shut down — counts as success, as in tokio: closing a stream
/// whose peer is gone is not an error worth reporting.
pub(crate) fn shutdown_write<S: AsFd>(sock: &S) -> io::Result<()> {
    match SockRef::from(sock).shutdown(Shutdown::Write) {
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
        r => r,
    }
}

// ---- stream sockets: the I/O traits ----

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
/// [`StreamIo`] types: `futures_io`'s always, tokio's with feature `tokio-io`, hyper's with
/// feature `hyper`. Flushing is a no-op; closing shuts down the write direction.
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

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncRead for $ty {
            fn poll_read(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                let io = $crate::io::StreamIo::async_fd(&*self);
                // SAFETY: `unfilled_mut` requires that no initialised byte is de-initialised:
                // the slice is only handed to `recv(2)` (`poll_read_uninit`), which writes
                // bytes and never de-initialises any.
                let unfilled = unsafe { buf.unfilled_mut() };
                let n = ::std::task::ready!($crate::io::poll_read_uninit(io, cx, unfilled))?;
                // SAFETY: `recv(2)` reported writing `n` bytes at the start of the unfilled
                // part, so they are initialised.
                unsafe { buf.assume_init(n) };
                buf.advance(n);
                ::std::task::Poll::Ready(Ok(()))
            }
        }

        #[cfg(feature = "hyper")]
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
                let n = ::std::task::ready!($crate::io::poll_read_uninit(io, cx, unfilled))?;
                // SAFETY: `advance` requires `n` more initialised bytes: `recv(2)` wrote `n`
                // bytes at the start of the unfilled part.
                unsafe { buf.advance(n) };
                ::std::task::Poll::Ready(Ok(()))
            }
        }
    )+};

    (write for $($ty:ty),+ $(,)?) => {$(
        impl futures_io::AsyncWrite for $ty {
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

            fn poll_flush(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::task::Poll::Ready(Ok(()))
            }

            /// Shuts down the write direction.
            fn poll_close(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                $crate::io::poll_shutdown(self.get_mut())
            }
        }

        $crate::io::stream_io_impls!(@shutdown_write #[cfg(feature = "tokio-io")] tokio::io::AsyncWrite, $ty);
        $crate::io::stream_io_impls!(@shutdown_write #[cfg(feature = "hyper")] hyper::rt::Write, $ty);
    )+};

    // tokio's and hyper's write traits have the same methods.
    (@shutdown_write #[$cfg:meta] $trait:path, $ty:ty) => {
        #[$cfg]
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

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::task::Poll::Ready(Ok(()))
            }

            /// Shuts down the write direction.
            fn poll_shutdown(
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

// ---- owned write halves ----

/// An owned write half's share of its stream (the other share is the read half's `Arc`).
/// Dropping it shuts down the stream's write direction, unless [`keep_open`](Self::keep_open)
/// was called.
pub(crate) struct OwnedWrite<S: StreamIo> {
    stream: Arc<S>,
    shutdown_on_drop: bool,
}

impl<S: StreamIo> OwnedWrite<S> {
    /// Splits `stream` into the read half's `Arc` and the write half's share.
    pub(crate) fn split(stream: S) -> (Arc<S>, OwnedWrite<S>) {
        let stream = Arc::new(stream);
        let write = OwnedWrite {
            stream: stream.clone(),
            shutdown_on_drop: true,
        };
        (stream, write)
    }

    /// Dropping will not shut down the write direction (after the write half's `forget`, or
    /// once the write traits have shut it down).
    pub(crate) fn keep_open(&mut self) {
        self.shutdown_on_drop = false;
    }

    /// Whether `read` is the read half's share of the same stream.
    pub(crate) fn pairs_with(&self, read: &Arc<S>) -> bool {
        Arc::ptr_eq(&self.stream, read)
    }

    /// Puts the stream back together from the two shares; [`pairs_with`](Self::pairs_with)
    /// must have said yes.
    pub(crate) fn reunite(mut self, read: Arc<S>) -> S {
        debug_assert!(self.pairs_with(&read));
        self.keep_open();
        drop(self);
        // The two halves held the only two references, and the write half is gone.
        Arc::try_unwrap(read)
            .unwrap_or_else(|_| unreachable!("a stream's owned halves are its only owners"))
    }

    /// The `Debug` output of the write half `name`: the stream and `shutdown_on_drop`.
    pub(crate) fn fmt_half(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result
    where
        S: fmt::Debug,
    {
        f.debug_struct(name)
            .field("inner", &self.stream)
            .field("shutdown_on_drop", &self.shutdown_on_drop)
            .finish()
    }
}

impl<S: StreamIo> Deref for OwnedWrite<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.stream
    }
}

impl<S: StreamIo> Drop for OwnedWrite<S> {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            // Errors (e.g. the connection was reset, the peer is gone) are of no use in drop.
            let _ = shutdown_write(self.stream.async_fd().get_ref());
        }
    }
}
