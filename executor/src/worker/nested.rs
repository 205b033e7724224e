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
//! can enter it meanwhile (this thread holds its lock); `tokio_runtimes` runs it so
//! ([`HeldTokio::run`]). What touches tokio is there, and the timer tokio watches is the
//! reactor's ([`NestTimer`]): this file compiles without tokio (where no worker has a tokio
//! runtime, so none of it runs).
//!
//! A worker handed to another thread by `block_in_place` finds the runtime held by its old
//! thread (which still polls the blocking task inside it): the new thread runs the loop
//! without nesting, with the runtime's handle entered (tokio's tasks wait), until the old
//! thread lets go and unparks it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use weir_reactor::for_executor::{NestTimer, NestedPark, ReactorControl};

use super::{Exit, Root, Step, Worker};
use crate::tokio_runtimes::{HeldTokio, NestWatch, WorkerTokio};

/// Runs the worker inside its tokio runtime, or without nesting while another thread holds it.
pub(super) fn run_modes<F: Future>(
    worker: &mut Worker<'_>,
    root: &mut Option<Root<'_, F>>,
    tokio: &WorkerTokio,
) -> Exit<F::Output> {
    let index = worker.cx.index;
    loop {
        if let Some(held) = tokio.hold() {
            if held.is_shut_down() {
                // Shut down already: no tokio here any more.
                drop(held);
                return worker.plain_loop(root, || false);
            }
            let out = match run_nested(worker, root, &held) {
                Ok(out) => out,
                Err(e) => {
                    tracing::error!(target: "weir::worker", worker = index, error = %e, "cannot wait for the reactor inside tokio; tokio's tasks on this worker are not run");
                    drop(held);
                    return worker.plain_loop(root, || false);
                }
            };
            drop(held);
            if worker.core.is_none() {
                // Handed over: the worker's new thread may wait for this runtime.
                worker.remote.reactor.unpark();
            }
            return out;
        }
        let _tokio = worker.shared.config.tokio.enter_worker(index);
        tracing::debug!(target: "weir::worker", worker = index, "tokio runtime held by the worker's previous thread; running without it meanwhile");
        match worker.plain_loop(root, || !tokio.is_held()) {
            Exit::Nest => continue,
            other => return other,
        }
    }
}

/// The worker loop as a tokio task: borrows the loop's frame (see the module docs).
struct Nested<'w, 'a, 'r, F: Future> {
    worker: &'w mut Worker<'a>,
    root: &'w mut Option<Root<'r, F>>,
    /// Dropped before `timer`, whose fd it watches.
    watch: NestWatch,
    timer: NestTimer,
    parked: Option<NestedPark>,
    out: &'w mut Option<Exit<F::Output>>,
}

/// Runs the loop as a task of `held` until it exits. `Err`: the fds tokio would watch for a
/// parked worker could not be set up (nothing ran).
fn run_nested<F: Future>(
    worker: &mut Worker<'_>,
    root: &mut Option<Root<'_, F>>,
    held: &HeldTokio<'_>,
) -> std::io::Result<Exit<F::Output>> {
    let reactor_fd = worker.core().driver.nest_fd().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "this backend cannot be nested",
        )
    })?;
    let timer = NestTimer::new()?;
    // SAFETY: the reactor's fd stays open and unreplaced while the watch lives: the driver that
    // owns it is dropped only after the worker stopped, and the watch does not outlive this
    // function. The timer's fd is owned by `timer`, which `Nested` drops after the watch.
    let watch = unsafe { held.watch(reactor_fd, timer.fd())? };
    let mut out = None;
    held.run(Box::pin(Nested {
        worker,
        root,
        watch,
        timer,
        parked: None,
        out: &mut out,
    }));
    Ok(out.unwrap_or(Exit::Stopped))
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
            self.timer.arm(at, Instant::now());
        }
        w.cx.nested_waker.set(Some(cx.waker().clone()));
        // Readiness tokio saw before now (a stale edge) ends the park at once.
        let ready = self.watch.poll_any(cx);
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
        let fired = self.watch.take_timer(cx);
        if fired {
            self.timer.fired();
        }
        let io = self.watch.poll_reactor(cx);
        let io_ready = io.is_some();
        w.cx.in_dispatch.set(true);
        let r = w.core().driver.end_nested_park(park, io_ready);
        w.cx.in_dispatch.set(false);
        match r {
            Ok((_, more)) => {
                // Collected all there was: the next event is a new edge for tokio.
                if !more && let Some(io) = io {
                    io.clear();
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
