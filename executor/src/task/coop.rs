//! The user's side of the cooperative budget (kept in `weir_reactor::coop`): opting a future
//! out of it, and spending it from code that does work without touching weir's leaf futures.
//!
//! Each task poll starts with a budget of [`BUDGET`] units (one less with the default feature
//! `tokio-budget`, where the budget is tokio's: tokio's primitives spend it too). weir's leaf
//! futures (I/O operations, timers, join handles) spend one unit per poll that makes progress;
//! once the budget is spent they return `Pending` after waking the task, so a task that always
//! finds its sockets ready still lets its worker turn the reactor and run other tasks.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use weir_reactor::coop;

/// Units of budget a task gets per poll.
pub use weir_reactor::coop::BUDGET;

pin_project_lite::pin_project! {
    /// A future that runs without a cooperative budget; see [`unconstrained`].
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    #[derive(Debug)]
    pub struct Unconstrained<F> {
        #[pin]
        inner: F,
    }
}

impl<F: Future> Future for Unconstrained<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let inner = self.project().inner;
        coop::unconstrained(|| inner.poll(cx))
    }
}

/// Runs `inner` without a cooperative budget: weir's leaf futures inside it never return
/// `Pending` just because the task has done much work in this poll.
///
/// The task may then hold its worker for as long as `inner` keeps finding work ready, delaying
/// the other tasks of that worker and its I/O and timers. Use it for a future that must not be
/// interrupted, and keep what it does bounded.
///
/// ```
/// # weir_executor::Builder::new_current_thread().build().unwrap().block_on(async {
/// use weir_executor::task::{consume_budget, unconstrained};
///
/// // Never yields to the scheduler, however many units it spends.
/// unconstrained(async {
///     for _ in 0..1000 {
///         consume_budget().await;
///     }
/// })
/// .await;
/// # });
/// ```
pub fn unconstrained<F: Future>(inner: F) -> Unconstrained<F> {
    Unconstrained { inner }
}

/// Spends one unit of the task's cooperative budget; once the budget is spent, yields to the
/// scheduler first (the task is woken and requeued, so other tasks, I/O and timers get a
/// turn).
///
/// For loops that do work without awaiting weir's I/O, timers or join handles (CPU work
/// between channel operations of another library, say), so they share their worker like any
/// other task. Outside a task poll (a future polled by a foreign executor) there is no budget
/// and it never yields.
///
/// ```
/// # weir_executor::Builder::new_current_thread().build().unwrap().block_on(async {
/// let mut sum = 0u64;
/// for i in 0..10_000u64 {
///     sum += i;
///     // Every 128 iterations the task goes back to its run queue once.
///     weir_executor::task::consume_budget().await;
/// }
/// # assert_eq!(sum, 49_995_000);
/// # });
/// ```
///
/// # Cancel safety
/// Cancel safe: a yield that is dropped spent nothing.
pub async fn consume_budget() {
    poll_fn(|cx| {
        ready!(coop::poll_budget(cx));
        coop::spend();
        Poll::Ready(())
    })
    .await
}

/// `true` if the running task has budget left in this poll (always `true` outside a task poll
/// and inside [`unconstrained`]).
pub fn has_budget_remaining() -> bool {
    coop::has_budget_remaining()
}
