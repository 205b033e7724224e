//! The pipes to a child's standard streams: [`ChildStdin`], [`ChildStdout`], [`ChildStderr`].
//!
//! Each wraps our end of a pipe, switched to non-blocking mode and registered with the reactor
//! of the thread that spawned the child (an `AsyncFd`), like a socket.

use std::fmt;
use std::fs::File;
use std::io::{self, IoSlice, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::process::Stdio;
use std::task::{Context, Poll};

use weir_reactor::{AsyncFd, Direction, Interest};

use super::sys;

#[cfg(feature = "tokio-io")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
mod tokio_io;

/// Our end of a pipe, registered with a reactor. `File` gives `read(2)`/`write(2)` on a shared
/// reference.
struct Pipe {
    io: AsyncFd<File>,
}

impl Pipe {
    fn new(fd: OwnedFd, interest: Interest) -> io::Result<Pipe> {
        sys::set_nonblocking(fd.as_fd(), true)?;
        Ok(Pipe {
            io: AsyncFd::with_interest(File::from(fd), interest)?,
        })
    }

    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let mut file = self.io.get_ref();
        self.io
            .registration()
            .poll_stream_io(cx, Direction::Read, buf.len(), || file.read(buf))
    }

    fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let mut file = self.io.get_ref();
        self.io
            .registration()
            .poll_stream_io(cx, Direction::Write, buf.len(), || file.write(buf))
    }

    fn poll_write_vectored(
        &self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut file = self.io.get_ref();
        let len = bufs.iter().map(|b| b.len()).sum();
        self.io
            .registration()
            .poll_stream_io(cx, Direction::Write, len, || file.write_vectored(bufs))
    }

    /// Deregisters the pipe and returns the fd, back in blocking mode (for a child that
    /// inherits it).
    fn into_blocking_fd(self) -> io::Result<OwnedFd> {
        let fd = OwnedFd::from(self.io.into_inner());
        sys::set_nonblocking(fd.as_fd(), false)?;
        Ok(fd)
    }
}

/// The write end of a pipe to a child's standard input, from `Command::stdin(Stdio::piped())`.
///
/// Implements `futures_io::AsyncWrite` (and tokio's `AsyncWrite` with feature `tokio-io`).
/// Writes go straight to the pipe, so flushing does nothing. **Drop it to close the pipe**:
/// the child reads end of file only then (closing through the write traits, as in tokio, does
/// not close the pipe). [`Child::wait`](super::Child::wait) drops it first.
///
/// A write after the child closed its end fails with `BrokenPipe` (Rust programs ignore
/// `SIGPIPE`; a program that does not must ignore it itself).
pub struct ChildStdin {
    pipe: Pipe,
}

/// The read end of a pipe from a child's standard output, from
/// `Command::stdout(Stdio::piped())`.
///
/// Implements `futures_io::AsyncRead` (and tokio's `AsyncRead` with feature `tokio-io`).
/// Reads return end of file once the child (and every process that inherited the pipe) has
/// closed it, normally at its exit.
pub struct ChildStdout {
    pipe: Pipe,
}

/// The read end of a pipe from a child's standard error, from
/// `Command::stderr(Stdio::piped())`; as [`ChildStdout`].
pub struct ChildStderr {
    pipe: Pipe,
}

macro_rules! pipe_common {
    ($ty:ident, $std:ty, $interest:expr, $what:literal) => {
        impl $ty {
            #[doc = concat!(
                "Wraps the standard library's ", $what, " pipe: switches it to non-blocking ",
                "mode and registers it with the current reactor.\n",
                "\n# Errors\nThe error of `fcntl(2)` or of the registration."
            )]
            pub fn from_std(std: $std) -> io::Result<$ty> {
                Ok($ty {
                    pipe: Pipe::new(OwnedFd::from(std), $interest)?,
                })
            }

            /// Deregisters the pipe and returns its fd, switched back to blocking mode (e.g.
            /// to hand it to another child as one of its standard streams).
            ///
            /// # Errors
            /// The error of `fcntl(2)`.
            pub fn into_owned_fd(self) -> io::Result<OwnedFd> {
                self.pipe.into_blocking_fd()
            }
        }

        impl TryFrom<$ty> for Stdio {
            type Error = io::Error;

            /// Hands the pipe to another child (`Command::stdin(Stdio::try_from(stdout)?)`
            /// connects two children), in blocking mode.
            fn try_from(pipe: $ty) -> io::Result<Stdio> {
                pipe.into_owned_fd().map(Stdio::from)
            }
        }

        impl AsRawFd for $ty {
            fn as_raw_fd(&self) -> RawFd {
                self.pipe.io.get_ref().as_raw_fd()
            }
        }

        impl AsFd for $ty {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.pipe.io.get_ref().as_fd()
            }
        }

        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("fd", &self.as_raw_fd())
                    .finish()
            }
        }
    };
}

pipe_common!(
    ChildStdin,
    std::process::ChildStdin,
    Interest::WRITABLE,
    "stdin"
);
pipe_common!(
    ChildStdout,
    std::process::ChildStdout,
    Interest::READABLE,
    "stdout"
);
pipe_common!(
    ChildStderr,
    std::process::ChildStderr,
    Interest::READABLE,
    "stderr"
);

macro_rules! read_impls {
    ($ty:ident) => {
        impl futures_io::AsyncRead for $ty {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut [u8],
            ) -> Poll<io::Result<usize>> {
                self.pipe.poll_read(cx, buf)
            }
        }
    };
}

read_impls!(ChildStdout);
read_impls!(ChildStderr);

impl futures_io::AsyncWrite for ChildStdin {
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

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Does nothing: drop the `ChildStdin` to close the pipe.
    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Reads `pipe` to its end into `buf`; `Ready` once the end is reached (the pipe is then
/// dropped) or at once for `None`.
pub(super) fn poll_read_to_end<P>(
    pipe: &mut Option<P>,
    cx: &mut Context<'_>,
    buf: &mut Vec<u8>,
) -> Poll<io::Result<()>>
where
    P: futures_io::AsyncRead + Unpin,
{
    const CHUNK: usize = 8 * 1024;
    while let Some(p) = pipe {
        let start = buf.len();
        buf.resize(start + CHUNK, 0);
        let r = Pin::new(p).poll_read(cx, &mut buf[start..]);
        let n = match &r {
            Poll::Ready(Ok(n)) => *n,
            _ => 0,
        };
        buf.truncate(start + n);
        match r {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Ready(Ok(0)) => *pipe = None,
            Poll::Ready(Ok(_)) => {}
        }
    }
    Poll::Ready(Ok(()))
}
