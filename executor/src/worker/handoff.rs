//! `block_in_place`: a task blocks its thread, and its worker — run queue **and reactor** —
//! carries on on another thread meanwhile.
//!
//! # How
//!
//! While a task polls, its worker's core (driver, queues, counters) is lent to the thread's
//! worker context (`WorkerCx::lent`). `block_in_place` called from that poll:
//!
//! 1. takes the core back from the context, with the queues, and leaves the worker: this
//!    thread is no longer registered as it (the context's worker is unset: wakes and spawns
//!    from here go through the shared queues), and it enters the reactor as a guest, so a timer armed from
//!    here wakes the reactor's new owner;
//! 2. puts the core in a slot and starts a job on the blocking pool — an idle pool thread, or a
//!    new one even past `max_blocking_threads` — that takes the core out of the slot and runs
//!    the worker loop with it, epoll and timers included, until shutdown (or until one of its
//!    own tasks hands it on);
//! 3. runs the closure, with `block_on` allowed and no cooperative budget;
//! 4. afterwards, if the job has not taken the core yet, takes it back and becomes the worker
//!    again. Otherwise the task finishes its poll here as a guest, and this thread leaves the
//!    worker loop when the poll returns: a worker's own thread then exits; a blocking-pool
//!    thread goes back to the pool.
//!
//! A worker with live `spawn_local` tasks (which are `!Send` and must stay on this thread)
//! cannot move: the closure then runs in place after the worker's queue was moved to the
//! inject queue for the other workers. Its pinned tasks and timers wait until the closure
//! returns; its ready I/O can still be collected by idle peers (I/O stealing).
//!
//! A current-thread runtime has nowhere to hand its worker to: `block_in_place` panics in its
//! tasks and in the future of its `Runtime::block_on` (the body of a `#[weir::test]`), as
//! tokio's does, since the closure would hold the one thread that runs every task. In the future
//! of a `Handle::block_on`, which tokio allows, it runs the closure (the runtime's tasks wait
//! for it). Off a task elsewhere (the future of a multi-thread runtime's `block_on`, the
//! blocking pool, inside another `block_in_place`, no runtime) it just runs the closure.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use weir_reactor::coop;

use parking_lot::Mutex;
use weir_reactor::for_executor::{self, ReactorControl};

use crate::context::{self, WorkerCx};
use crate::placement;
use crate::shared::{AliveGuard, Core, Shared};

/// The core between its hand-over and the thread that runs it next.
type Slot = Arc<Mutex<Option<Box<Core>>>>;

/// Runs `f`, which may block, on this thread; see `weir::task::block_in_place`.
#[track_caller]
pub(crate) fn block_in_place<F: FnOnce() -> R, R>(f: F) -> R {
    let cx = context::worker_ptr();
    // SAFETY: the context's worker is non-null only while the `WorkerCx` it points to lives on
    // the stack of `run` on this thread (see `context::with_worker`); this call is nested inside
    // that frame (a task poll), so the reference stays valid until we return, also after the
    // worker is unset below.
    let Some(cx) = (unsafe { cx.as_ref() }) else {
        // Not a worker: a current-thread `Runtime::block_on` whose core another thread holds
        // refuses it all the same.
        if context::block_in_place_refused() {
            refuse();
        }
        return run_blocking(f);
    };
    let Some(core) = cx.lent.take() else {
        // Not inside a task poll of this worker (the root future of a current-thread
        // `block_on`, a waker): nothing to hand over.
        if cx.shared.is_current_thread() {
            if context::block_in_place_refused() {
                refuse();
            }
            // `Handle::block_on`, still driving the runtime: a `block_on` in `f` would wait for
            // this thread's own core, so it keeps being refused.
            return coop::unconstrained(f);
        }
        return run_blocking(f);
    };
    if cx.shared.is_current_thread() {
        cx.lent.set(Some(core));
        refuse();
    }
    // The worker is not stalled by this task from now on (it carries on elsewhere, or its
    // stay is documented): the stall monitor stops watching the poll.
    cx.shared.remotes[cx.index].metrics.current.leave();
    let _back = match hand_over(cx, core) {
        Ok(slot) => Back::Reclaim { cx, slot },
        Err(core) => stay(cx, core),
    };
    run_blocking(f)
}

/// `block_in_place` on a current-thread runtime: tokio's panic, then weir's advice.
#[track_caller]
#[cold]
fn refuse() -> ! {
    panic!(
        "can call blocking only when running on the multi-threaded runtime (weir: \
         `block_in_place` in a task of a current-thread runtime, or in the future of its \
         `Runtime::block_on` — the body of a `#[weir::test]` — would block the one thread that \
         runs every task. Use `weir::task::spawn_blocking`, or a multi-thread runtime: \
         `#[weir::test(flavor = \"multi_thread\")]`.)"
    );
}

/// The closure itself: blocking is allowed (`block_on` too), and no budget applies.
fn run_blocking<R>(f: impl FnOnce() -> R) -> R {
    let _free = context::set_in_runtime(false);
    let _allowed = context::refuse_block_in_place(false);
    coop::unconstrained(f)
}

/// Hands `core` to a job on the blocking pool. `Err(core)` if it must stay here.
fn hand_over(cx: &WorkerCx, mut core: Box<Core>) -> Result<Slot, Box<Core>> {
    let shared = &cx.shared;
    let remote = &shared.remotes[cx.index];
    if remote.local_tasks.load(Ordering::Relaxed) > 0 {
        return Err(core);
    }
    // Inside a task poll: the worker loop holds no borrow of the queues.
    core.queues = cx.queues.borrow_mut().take();
    // No live `spawn_local` task is bound to this thread any more.
    core.local_thread = None;
    // Before the job starts: it records its own thread here.
    *remote.thread.lock() = None;
    let slot: Slot = Arc::new(Mutex::new(Some(core)));
    let job = {
        let (shared, slot) = (shared.clone(), slot.clone());
        // Counted as a worker thread from now on; dropping the job unrun counts it out.
        let alive = AliveGuard::start(&shared);
        move || {
            let _alive = alive;
            run_handed_over(&shared, &slot);
        }
    };
    // Leave before the job can start: from then on nothing here may act as the worker. Stay a
    // guest of the worker's reactor: its new owner turns it.
    leave(cx, &remote.reactor);
    if let Err(e) = shared.blocking.spawn_mandatory(shared, job) {
        tracing::warn!(
            target: "weir::worker",
            worker = cx.index,
            error = %e,
            "block_in_place: no thread to hand the worker to; it waits for the closure"
        );
        let mut core = slot.lock().take().expect("the job never ran");
        *cx.queues.borrow_mut() = core.queues.take();
        *remote.thread.lock() = Some(std::thread::current().id());
        rejoin(cx);
        return Err(core);
    }
    tracing::debug!(target: "weir::worker", worker = cx.index, "worker handed over for block_in_place");
    Ok(slot)
}

/// This thread stops being the worker: no more worker context, and a guest of `reactor`.
fn leave(cx: &WorkerCx, reactor: &weir_reactor::ReactorHandle) {
    context::clear_worker();
    *cx.guest_reactor.borrow_mut() = Some(reactor.enter());
}

/// This thread is the worker again.
fn rejoin(cx: &WorkerCx) {
    // Back to the owner's entry it sits on.
    drop(cx.guest_reactor.borrow_mut().take());
    context::restore_worker(cx);
}

/// The worker cannot move: give its queued tasks to the others, then leave it for the
/// closure's duration.
fn stay<'a>(cx: &'a WorkerCx, core: Box<Core>) -> Back<'a> {
    let shared = &cx.shared;
    {
        let mut q = cx.queues();
        let lifo = q.lifo.take();
        let mut moved = 0usize;
        let backlog = shared.remotes[cx.index].backlog.drain();
        for t in lifo
            .into_iter()
            .chain(std::iter::from_fn(|| q.local.pop()))
            .chain(backlog)
        {
            shared.inject.push(t);
            moved += 1;
        }
        drop(q);
        if moved > 0 {
            shared.notify_parked();
        }
    }
    cx.lent.set(Some(core));
    // Nobody turns this worker's reactor meanwhile: timers and I/O set up during the closure
    // (a `block_on` inside it, say) go to another worker's reactor.
    shared.remotes[cx.index]
        .stalled
        .store(true, Ordering::Relaxed);
    leave(cx, placement::reactor_for_thread(shared));
    // Shutdown need not wait for this core to drop the runtime's other tasks (which `f` may
    // be waiting for).
    shared.alive.core_idle();
    Back::Stayed { cx }
}

/// Undoes the hand-over (or the stay) when the closure returns or unwinds.
enum Back<'a> {
    /// The core went to the slot: take it back if no thread took it yet.
    Reclaim { cx: &'a WorkerCx, slot: Slot },
    /// The core stayed lent here.
    Stayed { cx: &'a WorkerCx },
}

impl Drop for Back<'_> {
    fn drop(&mut self) {
        match self {
            Back::Stayed { cx } => {
                cx.shared.alive.core_resumed();
                cx.shared.remotes[cx.index]
                    .stalled
                    .store(false, Ordering::Relaxed);
                rejoin(cx);
            }
            Back::Reclaim { cx, slot } => {
                let Some(mut core) = slot.lock().take() else {
                    // Another thread runs the worker now: this one finishes the task's poll as
                    // a guest, and its worker loop ends when the poll returns.
                    return;
                };
                *cx.queues.borrow_mut() = core.queues.take();
                cx.local_thread.set(core.local_thread);
                *cx.shared.remotes[cx.index].thread.lock() = Some(std::thread::current().id());
                cx.lent.set(Some(core));
                rejoin(cx);
                tracing::debug!(target: "weir::worker", worker = cx.index, "worker taken back after block_in_place");
            }
        }
    }
}

/// The blocking-pool job: runs the handed-over worker until shutdown or its next hand-over.
fn run_handed_over(shared: &Arc<Shared>, slot: &Slot) {
    // Taken back by the caller already: nothing to do.
    let Some(core) = slot.lock().take() else {
        return;
    };
    let slack = for_executor::set_timer_slack(1).ok();
    let (core, _) = super::run::<std::future::Pending<()>>(shared, core, None);
    if let Some(core) = core {
        super::stop(shared, core);
    }
    if let Some(prev) = slack {
        let _ = for_executor::set_timer_slack(prev);
    }
}
