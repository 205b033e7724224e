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

/// The readiness methods every socket type has, on its registered `io: AsyncFd<_>` field:
/// `ready`, `readable`, `writable`, the two poll methods, `try_io` and `async_io`. Expands to
/// associated functions, inside the `impl` block of `$ty`; `$what` ("the stream", "the
/// socket") is how the docs call it.
///
/// Stream types (`$ty, $what`) get `poll_read_ready`/`poll_write_ready`; datagram types name
/// theirs (`$ty, $what, poll_recv_ready, poll_send_ready`), and their docs speak of receiving
/// and sending datagrams.
macro_rules! readiness_methods {
    ($ty:ident, $what:literal) => {
        $crate::io::readiness_methods!(@impl $ty, $what,
            poll_read_ready, poll_write_ready,
            readable: [$what, " is readable (data, end of stream, or an error is pending)"],
            writable: [$what, " is writable (buffer space, a closed write direction, or an error)"],
            read: "read",
            write: "write",
        );
    };

    ($ty:ident, $what:literal, $poll_read:ident, $poll_write:ident) => {
        $crate::io::readiness_methods!(@impl $ty, $what,
            $poll_read, $poll_write,
            readable: ["a datagram (or a pending error) can be received"],
            writable: ["a datagram can be sent"],
            read: "receive",
            write: "send",
        );
    };

    (@impl $ty:ident, $what:literal, $poll_read:ident, $poll_write:ident,
        readable: [$($readable:literal),+],
        writable: [$($writable:literal),+],
        read: $read:literal,
        write: $write:literal $(,)?
    ) => {
        #[doc = concat!(
            "Waits until ", $what, " is ready for any of `interest`, and returns the readiness ",
            "seen. Any number of tasks may wait on one `", stringify!($ty), "` at once.\n",
            "\nA readiness check does not spend the task's cooperative budget (the operation ",
            "that follows it does), so a loop of `ready` and `try_*` calls never sees a ",
            "spurious `Pending`.\n",
            "\nThe readiness may be spurious: an operation attempted afterwards can still return ",
            "`WouldBlock`, which clears it so the next `ready` waits again.\n",
            "\n# Cancel safety\nCancel safe: dropping the future loses no readiness.\n",
            "\n# Errors\nWhen the reactor ", $what, " is registered with has shut down."
        )]
        pub async fn ready(
            &self,
            interest: ::weir_reactor::Interest,
        ) -> ::std::io::Result<::weir_reactor::Ready> {
            $crate::io::ready(&self.io, interest).await
        }

        #[doc = concat!(
            "Waits until ", $($readable,)+ ".\n",
            "\n# Cancel safety\nCancel safe.\n",
            "\n# Errors\nWhen the reactor has shut down."
        )]
        pub async fn readable(&self) -> ::std::io::Result<()> {
            self.ready(::weir_reactor::Interest::READABLE).await.map(drop)
        }

        #[doc = concat!(
            "Waits until ", $($writable,)+ ".\n",
            "\n# Cancel safety\nCancel safe.\n",
            "\n# Errors\nWhen the reactor has shut down."
        )]
        pub async fn writable(&self) -> ::std::io::Result<()> {
            self.ready(::weir_reactor::Interest::WRITABLE).await.map(drop)
        }

        #[doc = concat!(
            "Polls for ", $read, " readiness. Only the last task to poll for it is woken; use ",
            "[`readable`](Self::readable) for several waiters.\n",
            "\nSpends one unit of the task's cooperative budget when ready, as the operation ",
            "it stands for would.\n",
            "\n# Errors\nWhen the reactor has shut down."
        )]
        pub fn $poll_read(
            &self,
            cx: &mut ::std::task::Context<'_>,
        ) -> ::std::task::Poll<::std::io::Result<()>> {
            $crate::io::poll_ready(&self.io, cx, ::weir_reactor::Direction::Read)
        }

        #[doc = concat!(
            "Polls for ", $write, " readiness. Only the last task to poll for it is woken; use ",
            "[`writable`](Self::writable) for several waiters.\n",
            "\nSpends one unit of the task's cooperative budget when ready, as the operation ",
            "it stands for would.\n",
            "\n# Errors\nWhen the reactor has shut down."
        )]
        pub fn $poll_write(
            &self,
            cx: &mut ::std::task::Context<'_>,
        ) -> ::std::task::Poll<::std::io::Result<()>> {
            $crate::io::poll_ready(&self.io, cx, ::weir_reactor::Direction::Write)
        }

        #[doc = concat!(
            "Runs `f` if ", $what, " is known to be ready for `interest`; when `f` returns ",
            "`WouldBlock`, that readiness is cleared. `f` should perform a non-blocking I/O ",
            "operation on this `", stringify!($ty), "` (e.g. through `as_raw_fd`).\n",
            "\n# Errors\n`WouldBlock` when not ready, otherwise whatever `f` returns."
        )]
        pub fn try_io<R>(
            &self,
            interest: ::weir_reactor::Interest,
            f: impl FnOnce() -> ::std::io::Result<R>,
        ) -> ::std::io::Result<R> {
            self.io.registration().try_io(interest, f)
        }

        #[doc = concat!(
            "Waits for `interest` and runs the non-blocking operation `f` until it returns ",
            "something other than `WouldBlock`.\n",
            "\n# Cancel safety\nCancel safe as long as `f` is: no readiness is lost.\n",
            "\n# Errors\nWhatever `f` returns other than `WouldBlock`, or a shut-down reactor."
        )]
        pub async fn async_io<R>(
            &self,
            interest: ::weir_reactor::Interest,
            f: impl FnMut() -> ::std::io::Result<R>,
        ) -> ::std::io::Result<R> {
            self.io.registration().async_io(interest, f).await
        }
    };
}
pub(crate) use readiness_methods;

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

/// The readiness-API reads and writes of a stream type (`try_read`, `try_read_vectored`,
/// `try_write`, `try_write_vectored`) on its registered `io: AsyncFd<_>` field. Expands to
/// associated functions, inside the `impl` block of `$ty`; the split halves forward to these
/// (`half_methods!`).
macro_rules! stream_try_methods {
    ($ty:ident) => {
        #[doc = concat!(
            "Reads into `buf` without waiting, if the `", stringify!($ty), "` is known to be ",
            "readable. `Ok(0)` means end of stream (or an empty `buf`).\n",
            "\n# Errors\n`WouldBlock` if no data is known to be available (readiness is then ",
            "cleared, so [`readable`](Self::readable) waits for the next event), or the OS error ",
            "of `read(2)`."
        )]
        pub fn try_read(&self, buf: &mut [u8]) -> ::std::io::Result<usize> {
            $crate::io::try_read(&self.io, buf)
        }

        #[doc = concat!(
            "Vectored [`try_read`](Self::try_read) (`readv(2)`).\n",
            "\n# Errors\nAs [`try_read`](Self::try_read)."
        )]
        pub fn try_read_vectored(
            &self,
            bufs: &mut [::std::io::IoSliceMut<'_>],
        ) -> ::std::io::Result<usize> {
            $crate::io::try_read_vectored(&self.io, bufs)
        }

        #[doc = concat!(
            "Writes from `buf` without waiting, if the `", stringify!($ty), "` is known to be ",
            "writable; returns how many bytes were written.\n",
            "\n# Errors\n`WouldBlock` if the socket is not known to be writable (readiness is then ",
            "cleared), `BrokenPipe` (or `ConnectionReset`) once the peer has gone, otherwise the ",
            "OS error of `send(2)`."
        )]
        pub fn try_write(&self, buf: &[u8]) -> ::std::io::Result<usize> {
            $crate::io::try_write(&self.io, buf)
        }

        #[doc = concat!(
            "Vectored [`try_write`](Self::try_write) (`sendmsg(2)`).\n",
            "\n# Errors\nAs [`try_write`](Self::try_write)."
        )]
        pub fn try_write_vectored(
            &self,
            bufs: &[::std::io::IoSlice<'_>],
        ) -> ::std::io::Result<usize> {
            $crate::io::try_write_vectored(&self.io, bufs)
        }
    };
}
pub(crate) use stream_try_methods;

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
        $crate::io::stream_io_impls!(@write [] futures_io::AsyncWrite, poll_close, $ty, {});
        $crate::io::stream_io_impls!(
            @write [#[cfg(feature = "tokio-io")]] tokio::io::AsyncWrite, poll_shutdown, $ty,
            { fn is_write_vectored(&self) -> bool { true } }
        );
        $crate::io::stream_io_impls!(
            @write [#[cfg(feature = "hyper")]] hyper::rt::Write, poll_shutdown, $ty,
            { fn is_write_vectored(&self) -> bool { true } }
        );
    )+};

    // The three write traits differ only in the name of the close method and in whether they
    // have `is_write_vectored` (`$extra`).
    (@write [$(#[$cfg:meta])?] $trait:path, $close:ident, $ty:ty, { $($extra:item)* }) => {
        $(#[$cfg])?
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
