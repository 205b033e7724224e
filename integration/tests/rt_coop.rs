//! The cooperative budget: a task that never blocks cannot starve timers or other tasks.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use weir::io::unix::AsyncFd;

rt_test! {
    fn always_ready_loop_does_not_starve_a_timer(rt) {
        rt.block_on(async {
            let stop = Arc::new(AtomicBool::new(false));
            let s = stop.clone();
            // An eventfd that stays readable: `readable()` is ready on every call, so without a
            // budget this loop would never return to the scheduler.
            let efd = AsyncFd::new(common::eventfd()).unwrap();
            common::write_fd(efd.get_ref(), &1u64.to_ne_bytes()).unwrap();
            let spinner = weir::spawn(async move {
                let mut n = 0u64;
                while !s.load(Ordering::Relaxed) {
                    let _g = efd.readable().await.unwrap();
                    n += 1;
                }
                n
            });
            weir::time::sleep(Duration::from_millis(2)).await;
            stop.store(true, Ordering::Relaxed);
            assert!(spinner.await.unwrap() > 0);
        });
    }
}

/// Counts the polls of the future it wraps.
struct CountPolls<F> {
    inner: std::pin::Pin<Box<F>>,
    polls: usize,
}

impl<F: std::future::Future> std::future::Future for CountPolls<F> {
    type Output = (F::Output, usize);
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.polls += 1;
        let polls = self.polls;
        self.inner.as_mut().poll(cx).map(|v| (v, polls))
    }
}

fn count_polls<F: std::future::Future>(f: F) -> CountPolls<F> {
    CountPolls {
        inner: Box::pin(f),
        polls: 0,
    }
}

rt_test! {
    fn consume_budget_yields_once_the_budget_is_spent(rt) {
        rt.block_on(async {
            let (_, polls) = weir::spawn(count_polls(async {
                for _ in 0..1000 {
                    weir::task::consume_budget().await;
                }
            }))
            .await
            .unwrap();
            // 1000 units at 128 per poll: the task went back to its queue at least 7 times.
            assert!(polls >= 1000 / weir::task::coop::BUDGET as usize, "{polls} polls");
        });
    }
}

rt_test! {
    fn consume_budget_lets_a_sibling_task_run(rt) {
        rt.block_on(async {
            let stop = Arc::new(AtomicBool::new(false));
            let s = stop.clone();
            // Queued on the busy task's worker: on a current-thread runtime only the busy
            // task's yields let it run.
            let busy = weir::spawn(async move {
                let sibling = weir::spawn(async move { s.store(true, Ordering::Relaxed) });
                let mut spins = 0u64;
                while !stop.load(Ordering::Relaxed) && spins < 10_000_000 {
                    weir::task::consume_budget().await;
                    spins += 1;
                }
                sibling.await.unwrap();
                stop.load(Ordering::Relaxed)
            });
            assert!(busy.await.unwrap(), "the sibling never ran");
        });
    }
}

rt_test! {
    fn unconstrained_never_yields_for_the_budget(rt) {
        rt.block_on(async {
            let efd = AsyncFd::new(common::eventfd()).unwrap();
            common::write_fd(efd.get_ref(), &1u64.to_ne_bytes()).unwrap();
            // Readiness known before the task starts: every `readable()` below is ready at once.
            let _ready = efd.readable().await.unwrap();
            let (_, polls) = weir::spawn(count_polls(weir::task::unconstrained(async move {
                for _ in 0..1000 {
                    weir::task::consume_budget().await;
                    // Always ready: would yield once the budget ran out.
                    let _g = efd.readable().await.unwrap();
                }
                assert!(weir::task::coop::has_budget_remaining());
            })))
            .await
            .unwrap();
            assert_eq!(polls, 1, "polled once: it never yielded");
        });
    }
}
