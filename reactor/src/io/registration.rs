//! [`Registration`]: an fd registered with one reactor, and its readiness futures.

use std::fmt;
use std::future::Future;
use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use super::ReadyEvent;
use crate::ahead::Ahead;
use crate::driver::{ScheduledIo, gone};
use crate::{Direction, Interest, ReactorHandle, Ready, coop};

/// An fd registered (edge-triggered) with a reactor.
///
/// The registration does not own the fd. Its owner calls [`deregister`](Self::deregister)
/// before closing the fd; dropping the registration frees its readiness state. An event that
/// was already collected for it when it was dropped is recognised as stale and ignored.
///
/// Readiness is tracked per registration: the driver sets bits when events arrive, operations
/// clear them when they hit `WouldBlock` ([`clear_readiness`](Self::clear_readiness)).
pub struct Registration {
    handle: ReactorHandle,
    shared: Arc<ScheduledIo>,
    token: u64,
    /// The socket's input the reactor takes ahead of the program, if it does
    /// ([`with_ahead`](Self::with_ahead)).
    ahead: Option<Ahead>,
}

impl Registration {
    /// Registers `fd` with the reactor of the current thread — on a worker, the worker's own
    /// reactor, so its readiness wakes tasks on that worker. Outside any weir runtime it goes to
    /// the [fallback reactor](crate::fallback), so the I/O object works under any executor.
    ///
    /// # Errors
    /// When the reactor has shut down, the fallback reactor could not start, or the OS error of
    /// `epoll_ctl` (e.g. `EPERM` for a regular file, `EEXIST` if `fd` is already registered).
    pub fn new(fd: RawFd, interest: Interest) -> io::Result<Registration> {
        let handle = ReactorHandle::current_or_fallback()?;
        Registration::with_handle(fd, interest, &handle)
    }

    /// Registers `fd` with a given reactor.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_handle(
        fd: RawFd,
        interest: Interest,
        handle: &ReactorHandle,
    ) -> io::Result<Registration> {
        Registration::build(fd, interest, handle, false)
    }

    /// Registers a socket whose reads (or accepts) its owner makes through
    /// [`ahead`](Self::ahead) first — the [fast-path hook](crate::io::Ahead) — with `handle`'s
    /// reactor or (`None`) the current thread's, as [`new`](Self::new) does. A backend that
    /// takes the socket's input ahead of the program (io_uring with its receive fast path for a
    /// stream, its accept fast path for a listener registered for reading: weir's
    /// `Builder::io_uring_recv_multishot` and `io_uring_accept_multishot`) then gives the
    /// registration its queue; elsewhere this
    /// is a plain registration and `ahead` is `None`.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_ahead(
        fd: RawFd,
        interest: Interest,
        handle: Option<&ReactorHandle>,
    ) -> io::Result<Registration> {
        match handle {
            Some(h) => Registration::build(fd, interest, h, true),
            None => Registration::build(fd, interest, &ReactorHandle::current_or_fallback()?, true),
        }
    }

    /// [`with_ahead`](Self::with_ahead) for a socket handed to another worker's reactor (a
    /// connection accepted here and placed there): from any thread but that reactor's owner,
    /// on the epoll backend, the `epoll_ctl` is left to the owner, which makes it at its next
    /// turn, so the caller never waits for another worker's epoll (whose mutex a reader of its
    /// `/proc/PID/fdinfo` may hold for milliseconds). Readiness the socket already has is
    /// reported once the owner has registered it.
    ///
    /// # Errors
    /// When the reactor has shut down; on the owner's thread and other backends, as
    /// [`new`](Self::new). A registration the owner then fails to make (out of memory, the
    /// `max_user_watches` limit) is logged and shut down: its operations fail.
    pub fn handed_over(
        fd: RawFd,
        interest: Interest,
        handle: &ReactorHandle,
    ) -> io::Result<Registration> {
        let (shared, token, ahead) = handle.add_source_handed(fd, interest, true)?;
        Ok(Registration {
            handle: handle.clone(),
            shared,
            token,
            ahead,
        })
    }

    fn build(
        fd: RawFd,
        interest: Interest,
        handle: &ReactorHandle,
        ahead: bool,
    ) -> io::Result<Registration> {
        let (shared, token, ahead) = handle.add_source(fd, interest, ahead)?;
        Ok(Registration {
            handle: handle.clone(),
            shared,
            token,
            ahead,
        })
    }

    /// The socket's input that the reactor takes ahead of the program (see
    /// [`with_ahead`](Self::with_ahead)): `Some` only for a registration made that way on a
    /// backend that does. Its reads (accepts) must take from here before the socket.
    pub fn ahead(&self) -> Option<&Ahead> {
        self.ahead.as_ref()
    }

    /// The reactor this registration belongs to.
    pub fn handle(&self) -> &ReactorHandle {
        &self.handle
    }

    /// Polls for readiness in one direction. Only the last task to poll a direction is woken
    /// (use [`readiness`](Self::readiness) for several concurrent waiters).
    ///
    /// Spends one unit of the task's cooperative budget when ready, as the I/O operation it
    /// precedes would (see [`coop`]): a task that polls this in a loop still yields. Readiness
    /// checks that should not be charged use [`readiness`](Self::readiness).
    pub fn poll_ready(&self, cx: &mut Context<'_>, dir: Direction) -> Poll<io::Result<ReadyEvent>> {
        let ev = ready!(self.poll_ready_uncharged(cx, dir))?;
        ready!(coop::poll_proceed(cx)).made_progress();
        Poll::Ready(Ok(ev))
    }

    /// [`poll_ready`](Self::poll_ready) without the budget: the operations charge once per
    /// completed operation instead of once per readiness check.
    #[inline]
    fn poll_ready_uncharged(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
    ) -> Poll<io::Result<ReadyEvent>> {
        let ev = ready!(self.shared.poll_ready(cx, dir));
        if ev.is_shutdown {
            return Poll::Ready(Err(gone()));
        }
        Poll::Ready(Ok(ev))
    }

    /// [`poll_ready`](Self::poll_ready) for reading.
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<ReadyEvent>> {
        self.poll_ready(cx, Direction::Read)
    }

    /// [`poll_ready`](Self::poll_ready) for writing.
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<ReadyEvent>> {
        self.poll_ready(cx, Direction::Write)
    }

    /// Waits until the fd is ready for any of `interest`. Any number of tasks may wait at once.
    ///
    /// A readiness check does not spend the cooperative budget: the operation that follows it
    /// does (see [`coop`]). So `loop { readiness().await; try_io(..) }` on an fd that stays
    /// ready never sees a spurious `Pending`.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future loses no readiness.
    pub fn readiness(&self, interest: Interest) -> Readiness<'_> {
        Readiness {
            reg: self,
            mask: Ready::from_interest(interest),
            key: None,
        }
    }

    /// Clears readiness observed in `event` after an operation returned `WouldBlock`. If an event
    /// arrived since `event` was observed, nothing is cleared.
    #[inline]
    pub fn clear_readiness(&self, event: ReadyEvent) {
        self.shared.clear_readiness(event);
    }

    /// The readiness recorded right now for `interest` (no waker is stored).
    #[inline]
    pub fn ready_now(&self, interest: Interest) -> ReadyEvent {
        self.shared.ready_now(Ready::from_interest(interest))
    }

    /// Runs `f` if the fd is known to be ready for `interest`; clears readiness when `f` returns
    /// `WouldBlock`.
    ///
    /// # Errors
    /// `WouldBlock` when not ready, otherwise whatever `f` returns.
    pub fn try_io<R>(
        &self,
        interest: Interest,
        f: impl FnOnce() -> io::Result<R>,
    ) -> io::Result<R> {
        let ev = self.ready_now(interest);
        if ev.is_shutdown {
            return Err(gone());
        }
        if ev.ready.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        match f() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.clear_readiness(ev);
                Err(e)
            }
            r => r,
        }
    }

    /// Polls `f` until it does not return `WouldBlock`, waiting for readiness in `dir` between
    /// attempts. The building block of `AsyncRead`/`AsyncWrite` implementations.
    pub fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        f: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.poll_io_until(cx, dir, f, |_| false)
    }

    /// The loop of [`poll_io`](Self::poll_io): also clears readiness after a success for which
    /// `drained` says the fd has nothing more to give (or take).
    ///
    /// Spends one unit of the cooperative budget per completed operation, however many
    /// readiness checks and `WouldBlock`s it took. Readiness is looked at first: an fd that is
    /// not ready waits for its event whatever the budget (the task is woken by that event), so
    /// the budget is touched only by an operation that will run.
    fn poll_io_until<R>(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        mut f: impl FnMut() -> io::Result<R>,
        drained: impl Fn(&R) -> bool,
    ) -> Poll<io::Result<R>> {
        loop {
            let ev = ready!(self.poll_ready_uncharged(cx, dir))?;
            // Dropped without progress (a `WouldBlock`), the unit goes back.
            let unit = ready!(coop::poll_proceed(cx));
            let r = match f() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.clear_readiness(ev);
                    continue;
                }
                Ok(r) if drained(&r) => {
                    self.clear_readiness(ev);
                    Ok(r)
                }
                r => r,
            };
            unit.made_progress();
            return Poll::Ready(r);
        }
    }

    /// [`poll_io`](Self::poll_io) for a transfer on a **stream** socket that asked for
    /// `requested` bytes: when `f` moves fewer (but some), the socket's queue was drained (a
    /// short read) or filled (a short write), so the observed readiness is cleared at once and
    /// the next call waits for the next event instead of spending a syscall on `EAGAIN`. Safe
    /// with edge-triggered epoll: bytes that arrive later raise a new event, and a clear never
    /// erases an event newer than the one observed.
    ///
    /// Not for datagram sockets: a short datagram says nothing about what else is queued.
    pub fn poll_stream_io(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        requested: usize,
        f: impl FnMut() -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        self.poll_io_until(cx, dir, f, |&n| n > 0 && n < requested)
    }

    /// Waits for `interest` and runs `f` until it does not return `WouldBlock`.
    ///
    /// Spends one unit of the cooperative budget per completed operation: when the budget is
    /// spent, it yields before running `f`, even if the fd is ready.
    ///
    /// # Cancel safety
    /// Cancel safe as long as `f` is: readiness is never lost, but an `f` that did partial work
    /// before returning `WouldBlock` is the caller's concern.
    pub async fn async_io<R>(
        &self,
        interest: Interest,
        mut f: impl FnMut() -> io::Result<R>,
    ) -> io::Result<R> {
        loop {
            let ev = self.readiness(interest).await?;
            std::future::poll_fn(coop::poll_budget).await;
            match f() {
                // Nothing was done: nothing spent.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.clear_readiness(ev),
                r => {
                    coop::spend();
                    return r;
                }
            }
        }
    }

    /// Changes the interest of the registered fd.
    ///
    /// # Errors
    /// The OS error of `epoll_ctl(EPOLL_CTL_MOD)`.
    pub fn reregister(&self, fd: RawFd, interest: Interest) -> io::Result<()> {
        self.handle.reregister_source(fd, self.token, interest)
    }

    /// Removes `fd` from the reactor (call before closing it).
    ///
    /// # Errors
    /// The OS error of `epoll_ctl(EPOLL_CTL_DEL)`, e.g. `ENOENT` if it was not registered.
    pub fn deregister(&self, fd: RawFd) -> io::Result<()> {
        self.handle.deregister_source(fd)
    }

    /// Removes `fd` from the reactor because its owner takes it back: like
    /// [`deregister`](Self::deregister), and for a socket whose input is taken ahead the
    /// taking is stopped first, losslessly. Returns the bytes that were queued and nobody read
    /// (always empty except on a stream read ahead), and the deregistration's result. Every
    /// byte of the stream is then either in that vector or still in the socket.
    ///
    /// On the reactor owner's thread this is immediate; from another thread it may wait for
    /// the owner's next turn (waking it if it is parked).
    pub fn detach(&self, fd: RawFd) -> (Vec<u8>, io::Result<()>) {
        match &self.ahead {
            Some(ahead) => ahead.detach(),
            None => (Vec::new(), self.deregister(fd)),
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.handle.remove_source(self.token);
    }
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("worker", &self.handle.index())
            .field("token", &self.token)
            .finish()
    }
}

/// Future of [`Registration::readiness`].
#[must_use = "futures do nothing unless polled"]
pub struct Readiness<'a> {
    reg: &'a Registration,
    mask: Ready,
    key: Option<usize>,
}

impl Future for Readiness<'_> {
    type Output = io::Result<ReadyEvent>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        // No budget here: the operation that follows the check spends it.
        let ev = ready!(this.reg.shared.poll_waiter(cx, &mut this.key, this.mask));
        if ev.is_shutdown {
            return Poll::Ready(Err(gone()));
        }
        Poll::Ready(Ok(ev))
    }
}

impl Drop for Readiness<'_> {
    fn drop(&mut self) {
        if let Some(k) = self.key.take() {
            self.reg.shared.remove_waiter(k);
        }
    }
}

impl fmt::Debug for Readiness<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Readiness")
            .field("mask", &self.mask)
            .finish_non_exhaustive()
    }
}
