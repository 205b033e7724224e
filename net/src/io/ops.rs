//! The readiness-driven reads, writes and shutdown of a stream socket (TCP or Unix), and
//! `stream_try_methods!`, the readiness-API reads and writes each stream type expands.

use std::io::{self, IoSlice, IoSliceMut, Read};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd};
use std::task::{Context, Poll};

use socket2::SockRef;
use weir_reactor::{AsyncFd, Direction, Interest};

/// `send(2)` with `MSG_NOSIGNAL`.
fn send<S: AsFd>(sock: &S, buf: &[u8]) -> io::Result<usize> {
    SockRef::from(sock).send_with_flags(buf, libc::MSG_NOSIGNAL)
}

/// `sendmsg(2)` with `MSG_NOSIGNAL`.
fn send_vectored<S: AsFd>(sock: &S, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    SockRef::from(sock).send_vectored_with_flags(bufs, libc::MSG_NOSIGNAL)
}

/// Reads into `dst` from the bytes the reactor took ahead for `io` (consuming them, or
/// peeking), or with `sys` when it takes none: every read of a stream goes through here, the
/// one place `net` meets the reactor's fast-path hook (`Registration::ahead`).
pub(crate) fn read_ahead_or<S: AsRawFd>(
    io: &AsyncFd<S>,
    dst: &mut [u8],
    consume: bool,
    sys: impl FnOnce(&mut [u8]) -> io::Result<usize>,
) -> io::Result<usize> {
    match io.registration().ahead() {
        Some(ahead) => ahead.read(dst, consume),
        None => sys(dst),
    }
}

/// [`read_ahead_or`] into several buffers, in order.
fn read_ahead_or_vectored<S: AsRawFd>(
    io: &AsyncFd<S>,
    bufs: &mut [IoSliceMut<'_>],
    sys: impl FnOnce(&mut [IoSliceMut<'_>]) -> io::Result<usize>,
) -> io::Result<usize> {
    let Some(ahead) = io.registration().ahead() else {
        return sys(bufs);
    };
    ahead.read_with(true, |mut a, mut b| {
        let mut n = 0;
        for buf in bufs.iter_mut() {
            // The queue's two slices, in order, across the buffers.
            let from_a = a.len().min(buf.len());
            buf[..from_a].copy_from_slice(&a[..from_a]);
            let from_b = b.len().min(buf.len() - from_a);
            buf[from_a..from_a + from_b].copy_from_slice(&b[..from_b]);
            n += from_a + from_b;
            a = &a[from_a..];
            b = &b[from_b..];
            if a.is_empty() && b.is_empty() {
                break;
            }
        }
        n
    })
}

/// Reads if `io` is known to be readable (`read(2)`).
pub(crate) fn try_read<S: AsRawFd>(io: &AsyncFd<S>, buf: &mut [u8]) -> io::Result<usize>
where
    for<'a> &'a S: Read,
{
    let mut sock = io.get_ref();
    io.registration().try_io(Interest::READABLE, || {
        read_ahead_or(io, buf, true, |b| sock.read(b))
    })
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
    io.registration().try_io(Interest::READABLE, || {
        read_ahead_or_vectored(io, bufs, |b| sock.read_vectored(b))
    })
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
        .poll_stream_io(cx, Direction::Read, len, || {
            read_ahead_or(io, buf, true, |b| sock.read(b))
        })
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
        .poll_stream_io(cx, Direction::Read, len, || {
            read_ahead_or_vectored(io, bufs, |b| sock.read_vectored(b))
        })
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
