//! [`Ahead`]: the one hook by which a backend may take a socket's input ahead of the program.
//! Kept apart from `io` and `sys`, which both use it, so neither imports the other.

use std::fmt;
use std::io;
use std::os::fd::OwnedFd;

/// The fast-path hook: a socket's input that the reactor takes ahead of the program — the
/// bytes of a stream, the connections of a listener — and that its reads must look at first.
///
/// A socket opts in when it is registered ([`Registration::with_ahead`], or
/// [`AsyncFd::with_ahead`](crate::AsyncFd::with_ahead)); whether its input is then taken ahead
/// is the backend's business (today: io_uring with its receive or accept fast path on, which
/// weir's `Builder::io_uring_recv_multishot` and `io_uring_accept_multishot` turn on). If it is,
/// [`Registration::ahead`] returns this queue, and the socket's owner reads (accepts) from it
/// before any syscall; read readiness is reported when something is queued. Everything else —
/// the readiness futures, `try_io`, writes — is unchanged. Giving the fd back without losing a
/// byte is [`AsyncFd::into_parts`](crate::AsyncFd::into_parts) (or
/// [`Registration::detach`]).
///
/// [`Registration::with_ahead`]: crate::Registration::with_ahead
/// [`Registration::ahead`]: crate::Registration::ahead
/// [`Registration::detach`]: crate::Registration::detach
pub struct Ahead {
    inner: Inner,
}

/// The backends that take input ahead (a new one is a variant here, and its queue's methods).
enum Inner {
    #[cfg(target_os = "linux")]
    IoUring(weir_io_uring_compat::Ahead),
}

impl Ahead {
    /// The io_uring backend's queue for a socket.
    #[cfg(target_os = "linux")]
    pub(crate) fn io_uring(ahead: weir_io_uring_compat::Ahead) -> Ahead {
        Ahead {
            inner: Inner::IoUring(ahead),
        }
    }

    /// Reads a stream's queued bytes: `copy` gets them (two slices, in order) and returns how
    /// many it took; with `consume` they leave the queue (otherwise this is a peek). `Ok(0)`
    /// is the end of the stream; a receive error is returned once, after the bytes queued
    /// before it.
    ///
    /// # Errors
    /// `WouldBlock` when nothing is queued yet: wait for read readiness, as for the socket
    /// itself. The receive's error. `InvalidInput` for a listener.
    pub fn read_with(
        &self,
        consume: bool,
        copy: impl FnOnce(&[u8], &[u8]) -> usize,
    ) -> io::Result<usize> {
        match self.inner {
            #[cfg(target_os = "linux")]
            Inner::IoUring(ref a) => a.read_with(consume, copy),
        }
    }

    /// [`read_with`](Self::read_with) into `dst`.
    ///
    /// # Errors
    /// As [`read_with`](Self::read_with).
    pub fn read(&self, dst: &mut [u8], consume: bool) -> io::Result<usize> {
        match self.inner {
            #[cfg(target_os = "linux")]
            Inner::IoUring(ref a) => a.read(dst, consume),
        }
    }

    /// Takes a listener's oldest queued connection (non-blocking, close-on-exec).
    ///
    /// # Errors
    /// `WouldBlock` when none is queued: wait for read readiness. The error that stopped the
    /// accepting (`EMFILE` and its kin: back off as after `accept4(2)`). `InvalidInput` for a
    /// stream.
    pub fn accept(&self) -> io::Result<OwnedFd> {
        match self.inner {
            #[cfg(target_os = "linux")]
            Inner::IoUring(ref a) => a.accept(),
        }
    }

    /// How many bytes (a stream) or connections (a listener) are queued.
    pub fn buffered(&self) -> usize {
        match self.inner {
            #[cfg(target_os = "linux")]
            Inner::IoUring(ref a) => a.buffered(),
        }
    }

    /// Stops taking input ahead and deregisters the socket, losslessly; then takes what was
    /// queued (see `Registration::detach`).
    pub(crate) fn detach(&self) -> (Vec<u8>, io::Result<()>) {
        match self.inner {
            #[cfg(target_os = "linux")]
            Inner::IoUring(ref a) => {
                let detached = a.detach();
                (a.take_all(), detached)
            }
        }
    }
}

impl fmt::Debug for Ahead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.inner {
            #[cfg(target_os = "linux")]
            Inner::IoUring(ref a) => a.fmt(f),
        }
    }
}
