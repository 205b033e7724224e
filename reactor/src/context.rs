//! Which reactor is current on a thread: the thread-local, entering a reactor
//! ([`Driver::enter`], [`ReactorHandle::enter`]), looking it up ([`ReactorHandle::current`] and
//! its variants), and the choice of the [fallback reactor](crate::fallback) when there is none.

use std::cell::RefCell;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::driver::clock::Clock;
use crate::driver::{Driver, ReactorHandle};
use crate::fallback;

struct Current {
    handle: ReactorHandle,
    owner: bool,
}

/// The reactor crate's thread-local context. Every access uses `try_with`: a runtime kept in a
/// thread-local may shut down (and enter its reactors) while the thread exits, after this one
/// has been destroyed. Two others live apart: the cooperative budget (`coop.rs` says why) and
/// the steal buffers of `driver/steal.rs` (the driver is below this module, which imports it).
struct Context {
    /// The reactor that takes the timers armed on this thread, when it is not `current`: the
    /// thread's own driver that it waits in while its I/O belongs to other reactors (the
    /// caller of a multi-thread runtime's `block_on`). This thread owns it.
    timer_home: RefCell<Option<ReactorHandle>>,
    /// The reactor entered on this thread.
    current: RefCell<Option<Current>>,
}

thread_local! {
    static CONTEXT: Context = const {
        Context {
            timer_home: RefCell::new(None),
            current: RefCell::new(None),
        }
    };
}

/// Restores the previously current reactor when dropped.
#[must_use = "the reactor stays current only while the guard lives"]
pub struct ReactorEnterGuard {
    prev: Option<Current>,
    /// `false` if the thread-local was already destroyed when entering: nothing to restore.
    entered: bool,
    _not_send: PhantomData<*const ()>,
}

/// A leaf operation returned `Pending` for want of budget: counted on the current reactor
/// (its worker's, on a worker). Off the hot path: only spent budgets get here.
#[cold]
#[inline(never)]
pub(crate) fn count_forced_yield() {
    let _ = CONTEXT.try_with(|c| {
        if let Some(cur) = c.current.borrow().as_ref() {
            cur.handle.inner.metrics.budget_forced_yields.add_shared(1);
        }
    });
}

/// Runs `f` with the clock of the current thread's reactor, if any.
pub(crate) fn with_current_clock<R>(f: impl FnOnce(Option<&Clock>) -> R) -> R {
    let mut f = Some(f);
    let r = CONTEXT.try_with(|c| {
        let current = c.current.borrow();
        let f = f.take().expect("called once");
        f(current.as_ref().map(|c| &c.handle.inner.clock))
    });
    match r {
        Ok(r) => r,
        // The thread-local is gone (thread exit): no reactor.
        Err(_) => (f.take().expect("not called yet"))(None),
    }
}

fn enter(handle: ReactorHandle, owner: bool) -> ReactorEnterGuard {
    match CONTEXT.try_with(|c| c.current.replace(Some(Current { handle, owner }))) {
        Ok(prev) => ReactorEnterGuard {
            prev,
            entered: true,
            _not_send: PhantomData,
        },
        Err(_) => ReactorEnterGuard {
            prev: None,
            entered: false,
            _not_send: PhantomData,
        },
    }
}

impl Drop for ReactorEnterGuard {
    fn drop(&mut self) {
        if !self.entered {
            return;
        }
        let prev = self.prev.take();
        // Replaced, then dropped outside the borrow (a last handle's destructor may look here).
        let entered = CONTEXT.try_with(|c| c.current.replace(prev));
        drop(entered);
    }
}

impl fmt::Debug for ReactorEnterGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReactorEnterGuard").finish_non_exhaustive()
    }
}

impl Driver {
    /// Makes this reactor the current one of this thread, as its owner (timers armed from
    /// this thread then never need to wake it).
    pub fn enter(&self) -> ReactorEnterGuard {
        enter(self.handle().clone(), true)
    }

    /// Makes this reactor the home of the timers armed on this thread, as their owner, until
    /// the guard drops; I/O keeps going to the current reactor. For a thread that waits in this
    /// driver while its sockets belong to other reactors — the caller of a multi-thread
    /// runtime's `block_on` — so that its sleeps end on its own wait, not through another
    /// thread.
    ///
    /// A timer armed here and still pending when the driver is dropped (its future moved to a
    /// task that outlives the wait) is not lost: dropping the driver shuts it down, which wakes
    /// the timer's task, and the timer re-arms on the reactor of the thread that polls it.
    pub fn enter_timers(&self) -> TimerHomeGuard {
        match CONTEXT.try_with(|c| c.timer_home.replace(Some(self.handle().clone()))) {
            Ok(prev) => TimerHomeGuard {
                prev,
                entered: true,
                _not_send: PhantomData,
            },
            Err(_) => TimerHomeGuard {
                prev: None,
                entered: false,
                _not_send: PhantomData,
            },
        }
    }
}

/// Restores the previous timer home of the thread when dropped; see [`Driver::enter_timers`].
#[must_use = "timers go to the driver only while the guard lives"]
pub struct TimerHomeGuard {
    prev: Option<ReactorHandle>,
    entered: bool,
    _not_send: PhantomData<*const ()>,
}

impl Drop for TimerHomeGuard {
    fn drop(&mut self) {
        if !self.entered {
            return;
        }
        let prev = self.prev.take();
        let replaced = CONTEXT.try_with(|c| c.timer_home.replace(prev));
        drop(replaced);
    }
}

impl fmt::Debug for TimerHomeGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerHomeGuard").finish_non_exhaustive()
    }
}

impl ReactorHandle {
    /// The reactor of the current thread.
    ///
    /// # Panics
    /// Outside a weir runtime (no reactor entered on this thread), with a message that says so.
    #[track_caller]
    pub fn current() -> ReactorHandle {
        match ReactorHandle::try_current() {
            Some(h) => h,
            None => panic!(
                "there is no weir reactor on this thread: this must be called from inside a weir \
                 runtime (in `Runtime::block_on`, a spawned task, or after `Runtime::enter`)"
            ),
        }
    }

    /// The reactor of the current thread and whether this thread owns it, in one lookup.
    /// Outside a runtime, the [fallback reactor](crate::fallback) (never the owner).
    pub(crate) fn current_for_timer() -> (ReactorHandle, bool) {
        if let Some(home) = CONTEXT
            .try_with(|c| c.timer_home.borrow().clone())
            .ok()
            .flatten()
        {
            return (home, true);
        }
        let found = CONTEXT
            .try_with(|c| {
                c.current
                    .borrow()
                    .as_ref()
                    .map(|c| (c.handle.clone(), c.owner))
            })
            .ok()
            .flatten();
        match found {
            Some(f) => f,
            None => match fallback::handle() {
                Ok(h) => (h, false),
                Err(e) => panic!("no weir runtime on this thread and {e}"),
            },
        }
    }

    /// The reactor of the current thread or, outside any weir runtime, the lazily started
    /// [fallback reactor](crate::fallback).
    ///
    /// # Errors
    /// Only when the fallback reactor is needed and could not start.
    pub fn current_or_fallback() -> io::Result<ReactorHandle> {
        match ReactorHandle::try_current() {
            Some(h) => Ok(h),
            None => fallback::handle(),
        }
    }

    /// The reactor of the current thread, if any.
    pub fn try_current() -> Option<ReactorHandle> {
        CONTEXT
            .try_with(|c| c.current.borrow().as_ref().map(|c| c.handle.clone()))
            .ok()
            .flatten()
    }

    /// Makes this reactor the current one of this thread until the guard is dropped.
    pub(crate) fn enter(&self) -> ReactorEnterGuard {
        enter(self.clone(), false)
    }

    /// `true` if the current thread owns this reactor (entered through [`Driver::enter`]).
    pub(crate) fn is_owned_by_current_thread(&self) -> bool {
        CONTEXT
            .try_with(|c| {
                c.current
                    .borrow()
                    .as_ref()
                    .is_some_and(|c| c.owner && Arc::ptr_eq(&c.handle.inner, &self.inner))
            })
            .unwrap_or(false)
    }
}
