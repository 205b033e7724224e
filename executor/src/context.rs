//! The executor's thread-local context: what this thread is doing for weir.
//!
//! * the runtime it is "in" (set on workers, inside `block_on`, on blocking-pool threads and by
//!   `Runtime::enter`), which `spawn` and `Handle::current` use;
//! * whether it is driving async code right now (a worker, or inside `block_on`), where
//!   blocking on a runtime would stall it;
//! * the worker it runs, if any ([`WorkerCx`]): where tasks it wakes or spawns are queued;
//! * the `block_on` blocked on this thread, if any (`block_on.rs`).
//!
//! The id of the task being polled lives below this module instead, in a thread-local of the
//! task machinery (`task_core/id.rs`), since this module imports that one (a field here would
//! make the layers import each other).
//!
//! Everything here may run while the thread exits, after this thread-local has been destroyed
//! (a runtime kept in a `thread_local!` shuts down from that thread-local's destructor): every
//! access goes through `try_with` and treats a destroyed context as "no runtime" and "no
//! worker".

use std::cell::{Cell, RefCell, RefMut};
use std::fmt;
use std::marker::PhantomData;
use std::ptr;
use std::sync::Arc;
use std::thread::ThreadId;

use weir_reactor::for_executor::ReactorEnterGuard;

use crate::shared::{Core, Queues, Shared};
use crate::tokio_runtimes::TokioEnterGuard;

struct Context {
    /// The runtime `spawn` and `Handle::current` use.
    handle: RefCell<Option<Arc<Shared>>>,
    /// How many [`EnterGuard`]s are live on this thread; each guard remembers its own depth,
    /// which catches guards dropped out of order.
    depth: Cell<usize>,
    /// `true` while this thread drives async code: a worker loop (and the tasks it polls), or a
    /// `block_on`. Blocking on a runtime here would stall the one being driven.
    in_runtime: Cell<bool>,
    /// `true` inside a current-thread runtime's `Runtime::block_on`, where tokio's
    /// `block_in_place` panics (its `Handle::block_on` allows it).
    refuse_block_in_place: Cell<bool>,
    /// The worker running on this thread: non-null only between [`SetWorker::new`] and its
    /// drop (or a hand-over's [`clear_worker`] and [`restore_worker`]), which bracket the
    /// lifetime of the [`WorkerCx`] on the worker loop's stack frame on this thread.
    worker: Cell<*const WorkerCx>,
    /// The address of the waker of the `block_on` running on this thread (0: none).
    blocking_on: Cell<usize>,
}

thread_local! {
    static CONTEXT: Context = const {
        Context {
            handle: RefCell::new(None),
            depth: Cell::new(0),
            in_runtime: Cell::new(false),
            refuse_block_in_place: Cell::new(false),
            worker: Cell::new(ptr::null()),
            blocking_on: Cell::new(0),
        }
    };
}

/// Keeps a runtime current on this thread (its handle for `spawn`, one of its reactors for
/// I/O and timers) until dropped.
///
/// Guards must be dropped in the reverse order of their creation; dropping one while a guard
/// created after it is still alive panics.
///
/// The guard does not borrow the runtime while it lives: the runtime may be shut down while a
/// guard is alive (`let _guard = rt.enter(); rt.shutdown_timeout(..)` compiles). Tasks spawned
/// on a runtime that has shut down are cancelled at once.
#[must_use = "the runtime stays current only while the guard lives"]
pub struct EnterGuard<'a> {
    // Dropped in this order: the handle first, then the reactor, then tokio's runtime (the
    // reverse of `enter`). No field borrows `'a` in its destructor, so the guard may outlive
    // the borrow of the runtime it came from.
    _current: SetCurrent,
    _reactor: Option<ReactorEnterGuard>,
    /// The runtime's tokio runtime, if it has one.
    _tokio: TokioEnterGuard<'a>,
    _not_send: PhantomData<*const ()>,
}

/// Restores the previous runtime handle of this thread when dropped.
struct SetCurrent {
    prev: Option<Arc<Shared>>,
    /// The depth this guard set; 0 when the context was already destroyed (nothing to undo).
    depth: usize,
}

/// Enters the runtime of `shared` (and its tokio runtime, if any); `reactor` is the
/// reactor guard to hold alongside (none on workers, which enter their own reactor as its
/// owner).
pub(crate) fn enter(shared: &Arc<Shared>, reactor: Option<ReactorEnterGuard>) -> EnterGuard<'_> {
    let tokio = shared.config.tokio.enter();
    let current = CONTEXT
        .try_with(|c| {
            let prev = c.handle.replace(Some(shared.clone()));
            let depth = c.depth.get() + 1;
            c.depth.set(depth);
            SetCurrent { prev, depth }
        })
        .unwrap_or(SetCurrent {
            prev: None,
            depth: 0,
        });
    EnterGuard {
        _current: current,
        _reactor: reactor,
        _tokio: tokio,
        _not_send: PhantomData,
    }
}

impl Drop for SetCurrent {
    fn drop(&mut self) {
        if self.depth == 0 {
            return;
        }
        let prev = self.prev.take();
        let in_order = CONTEXT
            .try_with(|c| {
                if c.depth.get() != self.depth {
                    return false;
                }
                c.depth.set(self.depth - 1);
                // Replaced, then dropped once the cell is no longer borrowed: dropping the last
                // handle of a runtime runs its destructors, which may look at the context.
                let entered = c.handle.replace(prev);
                drop(entered);
                true
            })
            // Destroyed while the thread exits: nothing left to restore.
            .unwrap_or(true);
        if !in_order && !std::thread::panicking() {
            panic!(
                "weir `EnterGuard`s dropped out of order: the guards returned by \
                 `Runtime::enter` and `Handle::enter` must be dropped in the reverse order of \
                 their creation (the most recent one first)"
            );
        }
    }
}

impl fmt::Debug for EnterGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnterGuard").finish_non_exhaustive()
    }
}

/// Runs `f` with the current runtime (`None` outside a runtime, and while the thread exits).
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&Arc<Shared>>) -> R) -> R {
    let mut f = Some(f);
    let r = CONTEXT.try_with(|c| (f.take().expect("called once"))(c.handle.borrow().as_ref()));
    match r {
        Ok(r) => r,
        Err(_) => (f.take().expect("not called"))(None),
    }
}

/// `true` while this thread drives async code (a worker, or inside `block_on`).
pub(crate) fn is_in_runtime() -> bool {
    CONTEXT.try_with(|c| c.in_runtime.get()).unwrap_or(false)
}

/// Marks this thread as driving async code (or, with `false`, as free to block) until the
/// returned guard drops, which restores the previous mark.
pub(crate) fn set_in_runtime(on: bool) -> InRuntime {
    InRuntime(CONTEXT.try_with(|c| c.in_runtime.replace(on)).ok())
}

/// Restores the previous "driving async code" mark of this thread.
pub(crate) struct InRuntime(Option<bool>);

impl Drop for InRuntime {
    fn drop(&mut self) {
        if let Some(prev) = self.0 {
            let _ = CONTEXT.try_with(|c| c.in_runtime.set(prev));
        }
    }
}

/// `true` while this thread is inside a `block_on` that refuses `block_in_place` (a
/// current-thread runtime's `Runtime::block_on`).
pub(crate) fn block_in_place_refused() -> bool {
    CONTEXT
        .try_with(|c| c.refuse_block_in_place.get())
        .unwrap_or(false)
}

/// Marks this thread as inside a `block_on` that refuses `block_in_place` (or, with `false`,
/// one that allows it) until the returned guard drops, which restores the previous mark.
pub(crate) fn refuse_block_in_place(on: bool) -> RefuseBlockInPlace {
    RefuseBlockInPlace(
        CONTEXT
            .try_with(|c| c.refuse_block_in_place.replace(on))
            .ok(),
    )
}

/// Restores the previous [`refuse_block_in_place`] mark of this thread.
pub(crate) struct RefuseBlockInPlace(Option<bool>);

impl Drop for RefuseBlockInPlace {
    fn drop(&mut self) {
        if let Some(prev) = self.0 {
            let _ = CONTEXT.try_with(|c| c.refuse_block_in_place.set(prev));
        }
    }
}

/// The thread's view of the worker it runs. Lives on the worker loop's stack (`worker::run`).
pub(crate) struct WorkerCx {
    pub(crate) shared: Arc<Shared>,
    pub(crate) index: usize,
    /// The worker's queues, out of its core while it runs; `None` once the core was handed to
    /// another thread (`block_in_place`), after which this thread is no longer the worker.
    pub(crate) queues: RefCell<Option<Queues>>,
    /// `true` while the reactor dispatches: woken tasks go to the back, notifies are deferred.
    pub(crate) in_dispatch: Cell<bool>,
    pub(crate) notify_pending: Cell<bool>,
    pub(crate) local_thread: Cell<Option<ThreadId>>,
    /// The core while a task polls (lent by the worker loop), where `block_in_place` can take
    /// it; `None` otherwise.
    pub(crate) lent: Cell<Option<Box<Core>>>,
    /// After a hand-off: this thread's entry of the worker's reactor as a guest (not its
    /// owner any more), dropped before the owner's entry it sits on.
    pub(crate) guest_reactor: RefCell<Option<ReactorEnterGuard>>,
    /// Set while the worker is parked inside its tokio runtime (tokio compatibility): the
    /// waker of the worker loop's tokio task, which a task queued here wakes (same thread,
    /// no syscall).
    pub(crate) nested_waker: Cell<Option<std::task::Waker>>,
}

impl WorkerCx {
    /// A task was queued on this worker: if it is parked inside its tokio runtime, resume it.
    pub(crate) fn resume_nested(&self) {
        if let Some(w) = self.nested_waker.take() {
            w.wake();
        }
    }

    /// The queues of the worker running on this thread.
    pub(crate) fn queues(&self) -> RefMut<'_, Queues> {
        RefMut::map(self.queues.borrow_mut(), |q| {
            q.as_mut().expect("a running worker has its queues")
        })
    }
}

/// The worker running on this thread, as a pointer: null off the workers (and while the thread
/// exits). Valid while the worker loop that set it runs on this thread (see `Context::worker`).
pub(crate) fn worker_ptr() -> *const WorkerCx {
    CONTEXT.try_with(|c| c.worker.get()).unwrap_or(ptr::null())
}

/// Runs `f` with the worker running on this thread, if any.
pub(crate) fn with_worker<R>(f: impl FnOnce(Option<&WorkerCx>) -> R) -> R {
    let p = worker_ptr();
    // SAFETY: the pointer is non-null only between `SetWorker::new` and its drop (or between a
    // hand-over's `clear_worker` and `restore_worker`), which bracket the lifetime of the
    // `WorkerCx` on the worker loop's stack frame on this same thread.
    f(unsafe { p.as_ref() })
}

/// The index of the worker running on this thread, if any.
pub(crate) fn current_worker_index() -> Option<usize> {
    with_worker(|cx| cx.map(|cx| cx.index))
}

/// Makes `cx` the worker of this thread until dropped, which restores the previous one.
pub(crate) struct SetWorker(*const WorkerCx);

impl SetWorker {
    pub(crate) fn new(cx: &WorkerCx) -> SetWorker {
        SetWorker(
            CONTEXT
                .try_with(|c| c.worker.replace(cx))
                .unwrap_or(ptr::null()),
        )
    }
}

impl Drop for SetWorker {
    fn drop(&mut self) {
        let prev = self.0;
        let _ = CONTEXT.try_with(|c| c.worker.set(prev));
    }
}

/// This thread stops being a worker (a hand-over in `block_in_place`); the worker loop's
/// [`SetWorker`] still restores the previous one when it ends.
pub(crate) fn clear_worker() {
    let _ = CONTEXT.try_with(|c| c.worker.set(ptr::null()));
}

/// This thread is the worker `cx` again, after [`clear_worker`].
pub(crate) fn restore_worker(cx: &WorkerCx) {
    let _ = CONTEXT.try_with(|c| c.worker.set(cx));
}

/// Records the `block_on` waker (by address, 0: none) this thread blocks on; returns the
/// previous one.
pub(crate) fn replace_blocking_on(addr: usize) -> usize {
    CONTEXT
        .try_with(|c| c.blocking_on.replace(addr))
        .unwrap_or(0)
}

/// The address of the `block_on` waker this thread blocks on (0: none).
pub(crate) fn blocking_on() -> usize {
    CONTEXT.try_with(|c| c.blocking_on.get()).unwrap_or(0)
}
