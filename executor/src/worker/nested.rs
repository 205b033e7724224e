//! A worker inside its own tokio runtime (tokio compatibility, per worker).
//!
//! The worker's loop runs as a task of the worker's tokio current-thread runtime, driven by
//! that runtime's `block_on` on the worker's thread. tokio's tasks spawned from here, its
//! timers and its sockets are then driven by this thread, between weir's tasks:
//!
//! - the loop runs weir's tasks as without tokio, and yields to tokio every
//!   `event_interval` steps, so that tokio's tasks and its I/O driver get their turn;
//! - when weir has nothing to run (after the busy-poll spin), the worker parks *inside
//!   tokio*: it registers as sleeping, commits the reactor to parked
//!   ([`Driver::begin_nested_park`]), and returns `Pending`. tokio then runs its own tasks, and
//!   when it has none, blocks in its epoll, which watches weir's reactor fd (readable on weir's
//!   I/O and on wake-ups from other threads) and a timerfd set to weir's nearest timer;
//! - a task queued on this worker from this thread (a tokio task waking a weir task) wakes the
//!   loop's tokio task: tokio queues it on the same thread, with no syscall;
//! - on resumption [`Driver::end_nested_park`] delivers weir's events as a wait would (min_wait
//!   window, timer spin, wait accounting).
//!
//! The loop's task borrows the worker loop's stack frame. That is sound because the frame
//! outlives the task: `block_on` does not return before the task completed, tokio polls a
//! current-thread runtime's tasks only on the thread inside its `block_on`, and no other thread
//! can enter it meanwhile (this thread holds its lock). See [`Scoped`].
//!
//! A worker handed to another thread by `block_in_place` finds the runtime held by its old
//! thread (which still polls the blocking task inside it): the new thread runs the loop
//! without nesting, with the runtime's handle entered (tokio's tasks wait), until the old
//! thread lets go and unparks it.

use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use weir_reactor::NestedPark;

use super::{Exit, Root, Step, Worker};
use crate::compat::WorkerTokio;

/// Runs the worker inside its tokio runtime, or without nesting while another thread holds it.
pub(super) fn run_modes<F: Future>(
    worker: &mut Worker<'_>,
    root: &mut Option<Root<'_, F>>,
    tokio: &WorkerTokio,
) -> Exit<F::Output> {
    let index = worker.cx.index;
    loop {
        if let Some(guard) = tokio.rt.try_lock() {
            let Some(rt) = guard.as_ref() else {
                // Shut down already: no tokio here any more.
                drop(guard);
                return worker.plain_loop(root, || false);
            };
            let out = match NestFds::new(worker, rt) {
                Ok(fds) => run_nested(worker, root, rt, fds),
                Err(e) => {
                    tracing::error!(target: "weir::worker", worker = index, error = %e, "cannot wait for the reactor inside tokio; tokio's tasks on this worker are not run");
                    drop(guard);
                    return worker.plain_loop(root, || false);
                }
            };
            drop(guard);
            if worker.core.is_none() {
                // Handed over: the worker's new thread may wait for this runtime.
                worker.remote.reactor.unpark();
            }
            return out;
        }
        let _tokio = worker.shared.config.compat.enter_worker(index);
        tracing::debug!(target: "weir::worker", worker = index, "tokio runtime held by the worker's previous thread; running without it meanwhile");
        match worker.plain_loop(root, || !tokio.rt.is_locked()) {
            Exit::Nest => continue,
            other => return other,
        }
    }
}

/// The fds tokio watches for a parked worker: weir's reactor and a timer for its deadlines.
struct NestFds {
    reactor: AsyncFd<Fd>,
    timer: AsyncFd<OwnedFd>,
    /// When the timer is set to fire (`None`: disarmed or fired).
    armed: Option<Instant>,
}

/// A borrowed fd (the reactor's; it outlives the registration, which is dropped first).
struct Fd(RawFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

impl NestFds {
    fn new(worker: &mut Worker<'_>, rt: &tokio::runtime::Runtime) -> io::Result<NestFds> {
        let fd = worker.core().driver.nest_fd().ok_or_else(|| {
            io::Error::new(io::ErrorKind::Unsupported, "this backend cannot be nested")
        })?;
        // SAFETY: plain syscall; the flags are valid for timerfd_create.
        let tfd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if tfd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `tfd` was just returned by timerfd_create and is owned by nobody else.
        let tfd = unsafe { OwnedFd::from_raw_fd(tfd) };
        let _enter = rt.enter();
        // SAFETY: the reactor's fd stays open and unreplaced while this registration lives: the
        // driver that owns it is dropped only after the worker stopped, and `NestFds` does not
        // outlive `run_modes`. The timerfd is owned by its `AsyncFd`.
        let (reactor, timer) = unsafe {
            (
                AsyncFd::register_with_interest(Fd(fd), Interest::READABLE)?,
                AsyncFd::register_with_interest(tfd, Interest::READABLE)?,
            )
        };
        Ok(NestFds {
            reactor,
            timer,
            armed: None,
        })
    }

    /// Makes the timer fire at `at` at the latest. A timer set earlier is left (waking early
    /// costs one turn; re-setting it costs a syscall per park).
    fn arm(&mut self, at: Instant, now: Instant) {
        if self.armed.is_some_and(|a| a <= at && a > now) {
            return;
        }
        let d = at
            .saturating_duration_since(now)
            .max(std::time::Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: the fd is a live timerfd owned by `self.timer`; `spec` outlives the call and
        // the old value is not asked for (null).
        let r = unsafe {
            libc::timerfd_settime(
                self.timer.get_ref().as_raw_fd(),
                0,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            tracing::error!(target: "weir::worker", error = %io::Error::last_os_error(), "timerfd_settime failed; weir's timers may be late");
            return;
        }
        self.armed = Some(at);
    }
}

/// The worker loop as a tokio task: borrows the loop's frame (see the module docs).
struct Nested<'w, 'a, 'r, F: Future> {
    worker: &'w mut Worker<'a>,
    root: &'w mut Option<Root<'r, F>>,
    fds: NestFds,
    parked: Option<NestedPark>,
    out: &'w mut Option<Exit<F::Output>>,
}

/// Runs the loop as a task of `rt` until it exits.
fn run_nested<F: Future>(
    worker: &mut Worker<'_>,
    root: &mut Option<Root<'_, F>>,
    rt: &tokio::runtime::Runtime,
    fds: NestFds,
) -> Exit<F::Output> {
    let mut out = None;
    {
        let nested = Nested {
            worker,
            root,
            fds,
            parked: None,
            out: &mut out,
        };
        let task: Pin<Box<dyn Future<Output = ()> + '_>> = Box::pin(nested);
        // SAFETY: see `Scoped`: the task is polled only on this thread, and completes (or is
        // dropped, by `Scoped`'s guard) before this block ends, while everything it borrows
        // is alive.
        let task = unsafe { Scoped::new(task) };
        let joined = rt.block_on(async move {
            let handle = tokio::spawn(task);
            let mut guard = Joined(Some(handle.abort_handle()));
            let r = handle.await;
            // Completed: disarm (and release the task's last reference).
            guard.0 = None;
            r
        });
        if let Err(e) = joined {
            if e.is_panic() {
                std::panic::resume_unwind(e.into_panic());
            }
            tracing::error!(target: "weir::worker", error = %e, "the worker's tokio task was cancelled");
        }
    }
    out.unwrap_or(Exit::Stopped)
}

/// The loop's future with its lifetime and `!Send` erased, so that `tokio::spawn` takes it.
///
/// # Safety contract (upheld by `run_nested`)
/// - it is polled and dropped only on the thread that created it: a current-thread runtime
///   polls its tasks only inside `block_on`, which only this thread may call while it holds
///   the runtime's lock, and the task completes before `block_on` returns;
/// - it does not outlive what it borrows: `block_on` returns only once the task has
///   completed (the `JoinHandle` resolved); if `block_on` unwinds before that, [`Joined`]
///   aborts the process rather than leave a task that points into a dead frame.
struct Scoped(Pin<Box<dyn Future<Output = ()> + 'static>>);

impl Scoped {
    /// # Safety
    /// The caller upholds the contract above.
    unsafe fn new(f: Pin<Box<dyn Future<Output = ()> + '_>>) -> Scoped {
        // SAFETY: only the lifetime changes (same layout); the caller guarantees the future is
        // gone before the borrow ends.
        Scoped(unsafe {
            std::mem::transmute::<
                Pin<Box<dyn Future<Output = ()> + '_>>,
                Pin<Box<dyn Future<Output = ()> + 'static>>,
            >(f)
        })
    }
}

// SAFETY: a `Scoped` never leaves the thread that created it (the contract above); tokio
// requires `Send` only because a multi-thread runtime could move it.
unsafe impl Send for Scoped {}

impl Future for Scoped {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

/// Armed while `block_on` waits for the loop's task: dropped only by an unwind out of
/// `block_on` with the task unfinished, which would leave it pointing into a dead frame.
struct Joined(Option<tokio::task::AbortHandle>);

impl Drop for Joined {
    fn drop(&mut self) {
        if self.0.as_ref().is_some_and(|h| !h.is_finished()) {
            eprintln!(
                "weir: the tokio runtime of a worker unwound while it ran the worker; aborting"
            );
            std::process::abort();
        }
    }
}

impl<F: Future> Future for Nested<'_, '_, '_, F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: no field is structurally pinned: the root future is pinned by its own
        // `Pin<&mut F>`, and everything else is moved freely.
        let this = unsafe { self.get_unchecked_mut() };
        if let Some(park) = this.parked.take() {
            this.resume(park, cx);
        }
        let steps = this.worker.shared.config.event_interval;
        for _ in 0..steps {
            match this.worker.step(this.root) {
                Step::Ran => {}
                Step::Done(v) => {
                    *this.out = Some(Exit::Done(v));
                    return Poll::Ready(());
                }
                Step::Exit => {
                    *this.out = Some(Exit::Stopped);
                    return Poll::Ready(());
                }
                Step::Idle => {
                    if this.park(cx) {
                        return Poll::Pending;
                    }
                }
            }
        }
        // Busy: let tokio's tasks and driver have their turn.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl<F: Future> Nested<'_, '_, '_, F> {
    /// Parks inside tokio: `true` when the loop must return `Pending` (tokio wakes it), `false`
    /// when there is work after all.
    fn park(&mut self, cx: &mut Context<'_>) -> bool {
        let w = &mut *self.worker;
        let hooks = &w.shared.config.hooks;
        hooks.before_park();
        let idle = &w.shared.idle;
        let index = w.cx.index;
        let last_searcher = idle.transition_to_sleeping(index, w.core().searching);
        w.core().searching = false;
        let root_woken = self.root.as_ref().map(|r| &r.woken.woken);
        if w.has_work(last_searcher, root_woken) {
            w.core().searching = idle.remove_sleeper(index);
            hooks.after_unpark();
            return false;
        }
        w.cx.in_dispatch.set(true);
        let park = w.core().driver.begin_nested_park();
        w.cx.in_dispatch.set(false);
        let Some(park) = park else {
            w.core().searching = idle.remove_sleeper(index);
            w.notify_after_dispatch();
            hooks.after_unpark();
            return false;
        };
        w.remote.metrics.parking();
        tracing::trace!(target: "weir::sched", worker = index, "park in tokio");
        if let Some(at) = park.wake_at() {
            self.fds.arm(at, Instant::now());
        }
        w.cx.nested_waker.set(Some(cx.waker().clone()));
        // Readiness tokio saw before now (a stale edge) ends the park at once.
        let ready = self.fds.reactor.poll_read_ready(cx).is_ready()
            || self.fds.timer.poll_read_ready(cx).is_ready();
        self.parked = Some(park);
        if ready {
            let park = self.parked.take().expect("just parked");
            self.resume(park, cx);
            return false;
        }
        true
    }

    /// Ends a park: delivers what arrived, clears the readiness it consumed.
    fn resume(&mut self, park: NestedPark, cx: &mut Context<'_>) {
        let w = &mut *self.worker;
        w.remote.metrics.unparked();
        drop(w.cx.nested_waker.take());
        let index = w.cx.index;
        let fired = match self.fds.timer.poll_read_ready(cx) {
            Poll::Ready(Ok(mut g)) => {
                g.clear_ready();
                self.fds.armed = None;
                true
            }
            _ => false,
        };
        let io = self.fds.reactor.poll_read_ready(cx);
        let io_ready = matches!(io, Poll::Ready(Ok(_)));
        w.cx.in_dispatch.set(true);
        let r = w.core().driver.end_nested_park(park, io_ready);
        w.cx.in_dispatch.set(false);
        match r {
            Ok((_, more)) => {
                // Collected all there was: the next event is a new edge for tokio.
                if !more && let Poll::Ready(Ok(mut g)) = io {
                    g.clear_ready();
                }
            }
            Err(e) => {
                tracing::error!(target: "weir::reactor", worker = index, error = %e, "reactor wait failed");
            }
        }
        w.core().searching = w.shared.idle.remove_sleeper(index);
        w.notify_after_dispatch();
        tracing::trace!(target: "weir::sched", worker = index, fired, io = io_ready, "unpark from tokio");
        w.shared.config.hooks.after_unpark();
    }
}
