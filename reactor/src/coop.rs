//! Cooperative budget: one busy task cannot starve the I/O and timers of its worker.
//!
//! The executor gives each task poll a budget of [`BUDGET`] units ([`budget`]). weir's leaf
//! operations spend one unit each time they complete ([`poll_proceed`]): an I/O operation
//! (a read, write, receive, send, accept, or a `Registration::poll_io`/`async_io` closure —
//! however many `WouldBlock`s it took), the poll-style readiness methods that stand for one
//! (`poll_read_ready`, `poll_write_ready`), a timer, a join handle. When the budget is spent,
//! they return `Pending` after waking their task, so the task goes back to its run queue and
//! the worker can drive its reactor. Outside a task poll (e.g. a future polled by a foreign
//! executor) the budget is unlimited.
//!
//! The readiness futures (`readable`, `writable`, `ready`, `Registration::readiness`) spend
//! nothing: `loop { s.writable().await; match s.try_write(..) { .. } }` must not see a
//! spurious `Pending` on a socket that is still ready, and the `try_*` operations, which never
//! wait, do not spend either. A task that loops on an fd that is always ready yields through
//! the operations that wait.

use std::cell::Cell;
use std::task::{Context, Poll};

/// Units of work a task may do in one poll.
pub const BUDGET: u8 = 128;

// A thread-local of its own, not a field of the crate's context (`context.rs`): it is read on
// every I/O poll, and as a `Cell` of a `Copy` value it has no destructor, so it is never torn
// down — a task dropped while its thread exits still finds it — and costs no check of a
// destructor's registration on the hot path.
thread_local! {
    /// `None`: unconstrained; `Some(n)`: `n` units left.
    static CURRENT: Cell<Option<u8>> = const { Cell::new(None) };
}

struct Reset(Option<u8>);
impl Drop for Reset {
    fn drop(&mut self) {
        let prev = self.0;
        let _ = CURRENT.try_with(|c| c.set(prev));
    }
}

/// Runs `f` (one task poll) with a fresh budget, restoring the previous one afterwards.
pub fn budget<R>(f: impl FnOnce() -> R) -> R {
    with(Some(BUDGET), f)
}

/// Runs `f` with no budget limit.
pub fn unconstrained<R>(f: impl FnOnce() -> R) -> R {
    with(None, f)
}

fn with<R>(b: Option<u8>, f: impl FnOnce() -> R) -> R {
    let prev = CURRENT.with(|c| c.replace(b));
    let _reset = Reset(prev);
    f()
}

/// `true` if the current poll still has budget (or is unconstrained).
pub fn has_budget_remaining() -> bool {
    CURRENT.with(|c| c.get() != Some(0))
}

/// Spends one unit, or wakes the task and returns `Pending` if the budget is exhausted.
///
/// Call [`RestoreOnPending::made_progress`] on the returned guard once the operation actually
/// completed; if the leaf future returns `Pending` instead, dropping the guard refunds the unit.
#[inline]
pub fn poll_proceed(cx: &mut Context<'_>) -> Poll<RestoreOnPending> {
    CURRENT.with(|c| match c.get() {
        Some(0) => {
            crate::context::count_forced_yield();
            cx.waker().wake_by_ref();
            Poll::Pending
        }
        Some(n) => {
            c.set(Some(n - 1));
            Poll::Ready(RestoreOnPending(Cell::new(Some(n))))
        }
        None => Poll::Ready(RestoreOnPending(Cell::new(None))),
    })
}

/// Refunds a budget unit when dropped, unless [`made_progress`](Self::made_progress) was called.
#[derive(Debug)]
pub struct RestoreOnPending(Cell<Option<u8>>);

impl RestoreOnPending {
    /// The operation completed: keep the unit spent.
    #[inline]
    pub fn made_progress(&self) {
        self.0.set(None);
    }
}

impl Drop for RestoreOnPending {
    #[inline]
    fn drop(&mut self) {
        if let Some(n) = self.0.get() {
            let _ = CURRENT.try_with(|c| {
                if c.get().is_some() {
                    c.set(Some(n));
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    #[test]
    fn budget_runs_out_and_refunds_on_pending() {
        let mut cx = Context::from_waker(Waker::noop());
        budget(|| {
            for _ in 0..BUDGET {
                let Poll::Ready(g) = poll_proceed(&mut cx) else {
                    panic!("budget left")
                };
                g.made_progress();
            }
            assert!(poll_proceed(&mut cx).is_pending());
            assert!(!has_budget_remaining());
        });
        budget(|| {
            // A unit not marked as progress is refunded.
            drop(poll_proceed(&mut cx));
            for _ in 0..BUDGET {
                let Poll::Ready(g) = poll_proceed(&mut cx) else {
                    panic!("refunded")
                };
                g.made_progress();
            }
        });
        assert!(has_budget_remaining(), "unconstrained outside a task");
    }
}
