//! The runtime a thread is "in" (set on workers, inside `block_on`, on blocking-pool threads
//! and by `Runtime::enter`), and whether the thread is driving async code right now (a worker,
//! or inside `block_on`), where blocking on a runtime would stall it.
//!
//! Everything here may run while the thread exits, after this thread-local has been destroyed
//! (a runtime kept in a `thread_local!` shuts down from that thread-local's destructor): every
//! access goes through `try_with` and treats a destroyed context as "no runtime".

use std::cell::{Cell, RefCell};
use std::fmt;
use std::marker::PhantomData;

use crate::compat::CompatGuard;
use crate::runtime::Handle;

struct Context {
    /// The runtime `spawn` and `Handle::current` use.
    handle: RefCell<Option<Handle>>,
    /// How many [`EnterGuard`]s are live on this thread; each guard remembers its own depth,
    /// which catches guards dropped out of order.
    depth: Cell<usize>,
    /// `true` while this thread drives async code: a worker loop (and the tasks it polls), or a
    /// `block_on`. Blocking on a runtime here would stall the one being driven.
    in_runtime: Cell<bool>,
}

thread_local! {
    static CONTEXT: Context = const {
        Context {
            handle: RefCell::new(None),
            depth: Cell::new(0),
            in_runtime: Cell::new(false),
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
    _reactor: Option<weir_reactor::ReactorEnterGuard>,
    /// The runtime's tokio compat runtime, if it has one.
    _compat: CompatGuard<'a>,
    _not_send: PhantomData<*const ()>,
}

/// Restores the previous runtime handle of this thread when dropped.
struct SetCurrent {
    prev: Option<Handle>,
    /// The depth this guard set; 0 when the context was already destroyed (nothing to undo).
    depth: usize,
}

/// Enters `handle` (and its tokio compat runtime, if any); `reactor` is the reactor guard to
/// hold alongside (none on workers, which enter their own reactor as its owner).
pub(crate) fn enter(
    handle: &Handle,
    reactor: Option<weir_reactor::ReactorEnterGuard>,
) -> EnterGuard<'_> {
    let compat = handle.shared.config.compat.enter();
    let current = CONTEXT
        .try_with(|c| {
            let prev = c.handle.replace(Some(handle.clone()));
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
        _compat: compat,
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

/// Runs `f` with the current runtime's handle (`None` outside a runtime, and while the thread
/// exits).
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&Handle>) -> R) -> R {
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
