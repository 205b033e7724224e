//! [`AsyncFd`]: readiness-based async I/O on any fd.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::task::{Context, Poll, ready};

use super::{ReadyEvent, Registration};
use crate::{Direction, Interest, ReactorHandle, Ready};

/// Associates an fd (anything [`AsRawFd`], set to non-blocking mode by the caller) with the
/// reactor of the current worker, and waits for its readiness.
///
/// Readiness is edge-triggered underneath: after an operation returns `WouldBlock`, clear the
/// guard's readiness ([`AsyncFdReadyGuard::clear_ready`], or use
/// [`AsyncFdReadyGuard::try_io`] which does it for you), or the next wait returns at once.
///
/// Dropping the `AsyncFd` deregisters the fd, then drops the inner value (which closes the fd if
/// it owns it).
///
/// # Example
/// ```
/// use std::os::fd::{FromRawFd, OwnedFd};
/// use weir_reactor::AsyncFd;
///
/// // SAFETY: eventfd takes no pointers; the result is checked before use.
/// let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
/// assert!(raw >= 0);
/// // SAFETY: `raw` is a new fd that nothing else owns.
/// let fd = unsafe { OwnedFd::from_raw_fd(raw) };
/// // Registered with this thread's reactor: its worker's in a weir runtime, the fallback
/// // reactor outside one (as here).
/// let afd = AsyncFd::new(fd)?;
/// // Inside a task, `afd.readable().await` now waits for a write to the eventfd.
/// # drop(afd);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct AsyncFd<T: AsRawFd> {
    reg: Registration,
    /// `None` only after `into_inner` took it.
    inner: Option<T>,
}

impl<T: AsRawFd> AsyncFd<T> {
    /// Registers `inner` for readable and writable readiness with the current reactor.
    ///
    /// # Errors
    /// When the fallback reactor (used outside a runtime) cannot start, or the OS error of
    /// `epoll_ctl` (a regular file gives `EPERM`).
    pub fn new(inner: T) -> io::Result<AsyncFd<T>> {
        AsyncFd::with_interest(inner, Interest::READABLE | Interest::WRITABLE)
    }

    /// Registers `inner` for the given interest with the current reactor.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_interest(inner: T, interest: Interest) -> io::Result<AsyncFd<T>> {
        let reg = Registration::new(inner.as_raw_fd(), interest)?;
        Ok(AsyncFd {
            reg,
            inner: Some(inner),
        })
    }

    /// Registers `inner` with a specific reactor.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_handle(
        inner: T,
        interest: Interest,
        handle: &ReactorHandle,
    ) -> io::Result<AsyncFd<T>> {
        let reg = Registration::with_handle(inner.as_raw_fd(), interest, handle)?;
        Ok(AsyncFd {
            reg,
            inner: Some(inner),
        })
    }

    /// Registers a socket whose reads (accepts) go through the
    /// [fast-path hook](crate::io::Ahead) first, with the current reactor or with `handle`'s,
    /// as [`Registration::with_ahead`] does: where the backend takes the socket's input ahead,
    /// [`Registration::ahead`] holds it.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_ahead(
        inner: T,
        interest: Interest,
        handle: Option<&ReactorHandle>,
    ) -> io::Result<AsyncFd<T>> {
        let reg = Registration::with_ahead(inner.as_raw_fd(), interest, handle)?;
        Ok(AsyncFd {
            reg,
            inner: Some(inner),
        })
    }

    /// Registers `inner`, a socket handed to the reactor of `handle` by another thread, as
    /// [`Registration::handed_over`] does (with [`with_ahead`](Self::with_ahead)'s fast-path
    /// hook).
    ///
    /// # Errors
    /// As [`Registration::handed_over`].
    pub fn handed_over(
        inner: T,
        interest: Interest,
        handle: &ReactorHandle,
    ) -> io::Result<AsyncFd<T>> {
        let reg = Registration::handed_over(inner.as_raw_fd(), interest, handle)?;
        Ok(AsyncFd {
            reg,
            inner: Some(inner),
        })
    }

    /// The inner value.
    pub fn get_ref(&self) -> &T {
        self.inner.as_ref().expect("inner taken only by into_inner")
    }

    /// The inner value, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        self.inner.as_mut().expect("inner taken only by into_inner")
    }

    /// The registration (for building other I/O types).
    pub fn registration(&self) -> &Registration {
        &self.reg
    }

    /// Deregisters the fd and returns the inner value.
    pub fn into_inner(mut self) -> T {
        let inner = self.inner.take().expect("inner taken only by into_inner");
        let _ = self.reg.deregister(inner.as_raw_fd());
        inner
    }

    /// Gives the fd back to its owner without losing a byte: deregisters it and returns the
    /// inner value with the bytes the reactor had taken ahead for it and nobody read (always
    /// empty except for a stream registered [`with_ahead`](Self::with_ahead) on io_uring's
    /// receive fast path, whose receive is stopped first). Every byte of the stream is then
    /// either in that vector or still in the socket. From a thread other than the reactor's
    /// owner this may wait for the owner's next turn.
    ///
    /// The third part is the deregistration's error, if any (`TimedOut` when the owner of an
    /// io_uring reactor did not turn for 10 s: bytes it receives afterwards are not in the
    /// vector).
    pub fn into_parts(mut self) -> (T, Vec<u8>, io::Result<()>) {
        let inner = self.inner.take().expect("inner taken only by into_inner");
        let (bytes, detached) = self.reg.detach(inner.as_raw_fd());
        (inner, bytes, detached)
    }

    fn guard(&self, event: ReadyEvent) -> AsyncFdReadyGuard<'_, T> {
        AsyncFdReadyGuard {
            fd: self,
            event: Some(event),
        }
    }

    /// Polls for read readiness (only the last task to poll is woken). Spends one unit of the
    /// task's cooperative budget when ready, as the read it stands for would.
    pub fn poll_read_ready<'a>(
        &'a self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyGuard<'a, T>>> {
        let ev = ready!(self.reg.poll_ready(cx, Direction::Read))?;
        Poll::Ready(Ok(self.guard(ev)))
    }

    /// Polls for write readiness (only the last task to poll is woken). Spends one unit of the
    /// task's cooperative budget when ready, as the write it stands for would.
    pub fn poll_write_ready<'a>(
        &'a self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyGuard<'a, T>>> {
        let ev = ready!(self.reg.poll_ready(cx, Direction::Write))?;
        Poll::Ready(Ok(self.guard(ev)))
    }

    /// Waits until the fd is ready for any of `interest`. Spends no cooperative budget (the
    /// operation that follows does, if it is weir's), so a loop of `ready` and `try_io` never
    /// sees a spurious `Pending`.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn ready(&self, interest: Interest) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        let ev = self.reg.readiness(interest).await?;
        Ok(self.guard(ev))
    }

    /// Waits until the fd is readable.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn readable(&self) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        self.ready(Interest::READABLE).await
    }

    /// Waits until the fd is writable.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Errors
    /// When the reactor has shut down.
    pub async fn writable(&self) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        self.ready(Interest::WRITABLE).await
    }

    /// Waits for `interest` and runs `f` until it does not return `WouldBlock`.
    ///
    /// # Cancel safety
    /// Cancel safe if `f` is.
    ///
    /// # Errors
    /// Whatever `f` returns other than `WouldBlock`, or a shut-down reactor.
    pub async fn async_io<R>(
        &self,
        interest: Interest,
        mut f: impl FnMut(&T) -> io::Result<R>,
    ) -> io::Result<R> {
        let inner = self.get_ref();
        self.reg.async_io(interest, || f(inner)).await
    }
}

impl<T: AsRawFd> AsRawFd for AsyncFd<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.get_ref().as_raw_fd()
    }
}

impl<T: AsRawFd> Drop for AsyncFd<T> {
    fn drop(&mut self) {
        if let Some(inner) = &self.inner {
            // Errors are ignored: drop never panics (the fd may already be closed elsewhere).
            let _ = self.reg.deregister(inner.as_raw_fd());
        }
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFd<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFd")
            .field("inner", &self.inner)
            .field("registration", &self.reg)
            .finish()
    }
}

/// Readiness observed on an [`AsyncFd`]. Dropping the guard keeps the readiness; call
/// [`clear_ready`](Self::clear_ready) once an operation returned `WouldBlock`.
pub struct AsyncFdReadyGuard<'a, T: AsRawFd> {
    fd: &'a AsyncFd<T>,
    event: Option<ReadyEvent>,
}

/// The operation passed to [`AsyncFdReadyGuard::try_io`] returned `WouldBlock`; readiness has
/// been cleared, so wait again.
#[derive(Debug)]
pub struct TryIoError(());

impl fmt::Display for TryIoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("operation would block; readiness cleared")
    }
}

impl std::error::Error for TryIoError {}

impl<'a, T: AsRawFd> AsyncFdReadyGuard<'a, T> {
    /// The readiness observed.
    pub fn ready(&self) -> Ready {
        self.event.map_or(Ready::EMPTY, |e| e.ready())
    }

    /// Clears the observed readiness (no-op if an event arrived since).
    pub fn clear_ready(&mut self) {
        if let Some(ev) = self.event.take() {
            self.fd.reg.clear_readiness(ev);
        }
    }

    /// Keeps the readiness for the next wait.
    pub fn retain_ready(&mut self) {}

    /// Runs `f`; on `WouldBlock` clears readiness and returns `Err(TryIoError)`.
    ///
    /// # Errors
    /// `Err(TryIoError)` when `f` would block.
    pub fn try_io<R>(
        &mut self,
        f: impl FnOnce(&'a AsyncFd<T>) -> io::Result<R>,
    ) -> Result<io::Result<R>, TryIoError> {
        match f(self.fd) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.clear_ready();
                Err(TryIoError(()))
            }
            r => Ok(r),
        }
    }

    /// The `AsyncFd` this guard came from.
    pub fn get_ref(&self) -> &'a AsyncFd<T> {
        self.fd
    }

    /// The inner value of the `AsyncFd`.
    pub fn get_inner(&self) -> &'a T {
        self.fd.get_ref()
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFdReadyGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFdReadyGuard")
            .field("ready", &self.ready())
            .finish_non_exhaustive()
    }
}
