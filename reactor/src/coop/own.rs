//! weir's own count of the budget: a thread-local `Cell`, used without the feature
//! `tokio-budget` (compiled, and tested, either way).

use std::cell::Cell;
use std::task::{Context, Poll};

use super::BUDGET;

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

pub(super) fn budget<R>(f: impl FnOnce() -> R) -> R {
    with(Some(BUDGET), f)
}

/// Each [`budget`] puts the previous count back itself (a `Cell` costs next to nothing to
/// save and restore), so a scope has nothing left to do.
pub(super) fn scope<R>(f: impl FnOnce() -> R) -> R {
    f()
}

pub(super) fn unconstrained<R>(f: impl FnOnce() -> R) -> R {
    with(None, f)
}

fn with<R>(b: Option<u8>, f: impl FnOnce() -> R) -> R {
    let prev = CURRENT.with(|c| c.replace(b));
    let _reset = Reset(prev);
    f()
}

pub(super) fn has_budget_remaining() -> bool {
    CURRENT.with(|c| c.get() != Some(0))
}

#[inline]
pub(super) fn poll_budget(cx: &mut Context<'_>) -> Poll<()> {
    if CURRENT.with(|c| c.get() == Some(0)) {
        crate::context::count_forced_yield();
        cx.waker().wake_by_ref();
        return Poll::Pending;
    }
    Poll::Ready(())
}

#[inline]
pub(super) fn spend() {
    CURRENT.with(|c| {
        if let Some(n) = c.get() {
            c.set(Some(n.saturating_sub(1)));
        }
    });
}

#[inline]
pub(super) fn poll_proceed(cx: &mut Context<'_>) -> Poll<Restore> {
    CURRENT.with(|c| match c.get() {
        Some(0) => {
            crate::context::count_forced_yield();
            cx.waker().wake_by_ref();
            Poll::Pending
        }
        Some(n) => {
            c.set(Some(n - 1));
            Poll::Ready(Restore(Cell::new(Some(n))))
        }
        None => Poll::Ready(Restore(Cell::new(None))),
    })
}

/// Puts back the budget it was taken from when dropped, unless the operation made progress.
#[derive(Debug)]
pub(super) struct Restore(Cell<Option<u8>>);

impl Restore {
    #[inline]
    pub(super) fn made_progress(&self) {
        self.0.set(None);
    }
}

impl Drop for Restore {
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
