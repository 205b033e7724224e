use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Yields to the scheduler: the task goes to the back of its worker's run queue, so every task
/// queued before it runs first (and the worker checks its reactor at its usual interval).
///
/// # Cancel safety
/// Cancel safe.
pub async fn yield_now() {
    struct YieldNow(bool);
    impl Future for YieldNow {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                return Poll::Ready(());
            }
            self.0 = true;
            // Woken during its own poll: the runner resubmits it to the back of the queue.
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
    YieldNow(false).await
}
