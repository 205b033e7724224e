//! The budget counted in tokio's thread-local (feature `tokio-budget`): weir's leaf operations
//! spend the same units as tokio's primitives, and each task poll refills it. The design and
//! its cost are in the parent module's docs.

use std::cell::Cell;
use std::future::{Future, poll_fn};
use std::mem::ManuallyDrop;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use tokio::task::coop as tokio_coop;

// The guard whose drop refills tokio's budget. `ManuallyDrop` keeps the thread-local free of a
// destructor (no registration check on each access): the guard owns nothing, and dropping it
// at thread exit would only write a budget nobody reads.
thread_local! {
    /// A guard taken from a full tokio budget on this thread: dropping it makes the budget
    /// full again. `None` until the thread's first refill.
    static FULL: Cell<Option<ManuallyDrop<tokio_coop::RestoreOnPending>>> =
        const { Cell::new(None) };
}

/// Runs `f` (one task poll) with a full budget. The budget before it comes back when the
/// enclosing [`scope`] ends: restoring it after every poll would cost a save and a restore of
/// tokio's thread-local per poll, and between two polls of a loop nothing reads it.
#[inline]
pub(super) fn budget<R>(f: impl FnOnce() -> R) -> R {
    refill();
    f()
}

/// Runs `f`, a loop that polls tasks, and puts the budget the thread had before it back
/// afterwards (also when `f` unwinds).
pub(super) fn scope<R>(f: impl FnOnce() -> R) -> R {
    saved(f)
}

/// Runs `f` with no budget limit, and puts the previous budget back afterwards.
#[inline]
pub(super) fn unconstrained<R>(f: impl FnOnce() -> R) -> R {
    saved(f)
}

#[inline]
pub(super) fn has_budget_remaining() -> bool {
    tokio_coop::has_budget_remaining()
}

/// `Pending` (after waking the task, as [`poll_proceed`] does) once the budget is spent.
#[inline]
pub(super) fn poll_budget(cx: &mut Context<'_>) -> Poll<()> {
    if tokio_coop::has_budget_remaining() {
        return Poll::Ready(());
    }
    crate::context::count_forced_yield();
    cx.waker().wake_by_ref();
    Poll::Pending
}

/// Spends one unit (after [`poll_budget`] said there is one).
#[inline]
pub(super) fn spend() {
    if let Poll::Ready(guard) = tokio_coop::poll_proceed(&mut Context::from_waker(Waker::noop())) {
        // Forgotten, not dropped: the unit stays spent (as after `made_progress`), and no
        // call to tokio's drop.
        std::mem::forget(guard);
    }
}

/// Spends one unit of tokio's budget. Once it is spent, wakes the task itself: tokio's own
/// wake-up would be deferred to tokio's scheduler when the worker runs inside one (tokio
/// compatibility), while a weir task that yields goes straight to the back of its queue.
#[inline]
pub(super) fn poll_proceed(cx: &mut Context<'_>) -> Poll<Restore> {
    match tokio_coop::poll_proceed(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(guard) => Poll::Ready(Restore {
            guard: ManuallyDrop::new(guard),
            progress: Cell::new(false),
        }),
        Poll::Pending => {
            crate::context::count_forced_yield();
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// tokio's guard, dropped (which refunds the unit) only if the operation made no progress. A
/// guard that made progress is forgotten, which is all tokio's own drop would then amount to,
/// and which saves a call (tokio's drop is not inlined) per completed operation.
#[derive(Debug)]
pub(super) struct Restore {
    guard: ManuallyDrop<tokio_coop::RestoreOnPending>,
    progress: Cell<bool>,
}

impl Restore {
    #[inline]
    pub(super) fn made_progress(&self) {
        self.progress.set(true);
    }
}

impl Drop for Restore {
    #[inline]
    fn drop(&mut self) {
        if !self.progress.get() {
            // SAFETY: dropped once, here, and not used afterwards.
            unsafe { ManuallyDrop::drop(&mut self.guard) };
        }
    }
}

/// Runs `f` inside a poll of tokio's `Unconstrained`, which saves tokio's budget, lifts it, and
/// puts the saved one back when `f` returns or unwinds — the one public way to restore a budget
/// of any value.
#[inline(always)]
fn saved<R>(f: impl FnOnce() -> R) -> R {
    let mut f = Some(f);
    let mut out = None;
    let once = poll_fn(|_| {
        out = f.take().map(|f| f());
        Poll::Ready(())
    });
    let _ = pin!(tokio_coop::unconstrained(once)).poll(&mut Context::from_waker(Waker::noop()));
    out.expect("`poll_fn` runs `f` at its first poll")
}

/// Makes tokio's budget full, less the unit taken to keep a guard for the next refill.
///
/// tokio has no call that sets its budget; its guard does: dropped without progress, a
/// `RestoreOnPending` puts back the budget it was taken from. Dropping the guard taken from a
/// full budget makes the budget full, and taking the next one from it spends one unit.
#[inline]
fn refill() {
    FULL.with(|full| {
        match full.take() {
            Some(guard) => drop(ManuallyDrop::into_inner(guard)),
            None => {
                if !first_fill(full) {
                    return;
                }
            }
        }
        // Ready: the budget is full (or unconstrained while tokio's thread-local is gone).
        if let Poll::Ready(guard) =
            tokio_coop::poll_proceed(&mut Context::from_waker(Waker::noop()))
        {
            full.set(Some(ManuallyDrop::new(guard)));
        }
    });
}

/// Makes tokio's budget full for the first time on this thread: only tokio's schedulers fill
/// it, so a throwaway `LocalSet` polls a task, which takes a guard from its full budget; the
/// guard, dropped outside, puts that full budget in place. `false` while the thread exits
/// after tokio's thread-locals are gone (the budget is unconstrained then).
#[cold]
#[inline(never)]
fn first_fill(full: &Cell<Option<ManuallyDrop<tokio_coop::RestoreOnPending>>>) -> bool {
    if tokio::runtime::Handle::try_current().is_err_and(|e| e.is_thread_local_destroyed()) {
        return false;
    }
    let local = tokio::task::LocalSet::new();
    local.spawn_local(poll_fn(|cx| {
        if let Poll::Ready(guard) = tokio_coop::poll_proceed(cx) {
            FULL.set(Some(ManuallyDrop::new(guard)));
        }
        Poll::Ready(())
    }));
    {
        // One poll: the (pending) future, then the `LocalSet`'s tick, which runs the task.
        let mut run = pin!(local.run_until(std::future::pending::<()>()));
        let _ = run.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    }
    drop(local);
    match full.take() {
        Some(guard) => {
            drop(ManuallyDrop::into_inner(guard));
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spend_all(cx: &mut Context<'_>) -> usize {
        let mut n = 0;
        while let Poll::Ready(g) = poll_proceed(cx) {
            g.made_progress();
            n += 1;
            assert!(n <= 128, "tokio's budget is 128 at most");
        }
        n
    }

    #[test]
    fn each_poll_gets_tokio_budget_less_the_refill_unit() {
        let mut cx = Context::from_waker(Waker::noop());
        scope(|| {
            for _ in 0..3 {
                assert_eq!(budget(|| spend_all(&mut cx)), 127);
            }
        });
        // What a tokio primitive sees: the same count.
        scope(|| {
            budget(|| {
                let mut n = 0;
                while let Poll::Ready(g) = tokio_coop::poll_proceed(&mut cx) {
                    g.made_progress();
                    n += 1;
                }
                assert_eq!(n, 127);
                assert!(!has_budget_remaining());
            })
        });
    }

    #[test]
    fn a_scope_puts_the_previous_budget_back() {
        let mut cx = Context::from_waker(Waker::noop());
        assert!(has_budget_remaining(), "unconstrained outside a poll");
        scope(|| {
            budget(|| {
                for _ in 0..100 {
                    if let Poll::Ready(g) = poll_proceed(&mut cx) {
                        g.made_progress();
                    }
                }
                // A nested loop (a `block_on` inside `block_in_place`) runs in a scope of its
                // own: the outer poll keeps its budget.
                scope(|| assert_eq!(budget(|| spend_all(&mut cx)), 127));
                assert_eq!(spend_all(&mut cx), 27);
                unconstrained(|| assert!(has_budget_remaining()));
                assert!(!has_budget_remaining(), "restored after `unconstrained`");
            });
        });
        assert!(
            has_budget_remaining(),
            "unconstrained again after the scope"
        );
        // Also after a scope that unwound.
        let r = std::panic::catch_unwind(|| scope(|| budget(|| panic!("in a poll"))));
        assert!(r.is_err());
        for _ in 0..1000 {
            assert!(poll_proceed(&mut cx).is_ready());
        }
    }

    #[test]
    fn a_unit_not_marked_as_progress_is_refunded() {
        let mut cx = Context::from_waker(Waker::noop());
        scope(|| {
            budget(|| {
                drop(poll_proceed(&mut cx));
                assert_eq!(spend_all(&mut cx), 127);
            })
        });
    }
}
