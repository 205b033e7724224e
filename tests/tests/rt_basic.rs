//! Runtime basics on every flavour and backend.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

rt_test! {
    fn block_on_returns_output(rt) {
        assert_eq!(rt.block_on(async { 40 + 2 }), 42);
    }
}

rt_test! {
    fn spawned_tasks_from_tasks_all_complete(rt) {
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        rt.block_on(async move {
            let mut outer = Vec::new();
            for i in 0..16usize {
                let d = d.clone();
                outer.push(weir::spawn(async move {
                    let mut inner = Vec::new();
                    for j in 0..64usize {
                        let d = d.clone();
                        inner.push(weir::spawn(async move {
                            weir::task::yield_now().await;
                            d.fetch_add(1, Ordering::SeqCst);
                            i * 1000 + j
                        }));
                    }
                    let mut sum = 0;
                    for h in inner {
                        sum += h.await.unwrap();
                    }
                    sum
                }));
            }
            let mut total = 0;
            for h in outer {
                total += h.await.unwrap();
            }
            let expect: usize = (0..16).map(|i| (0..64).map(|j| i * 1000 + j).sum::<usize>()).sum();
            assert_eq!(total, expect);
        });
        assert_eq!(done.load(Ordering::SeqCst), 16 * 64);
    }
}

rt_test! {
    fn spawn_from_outside_block_on(rt) {
        let h = rt.spawn(async { 7 });
        assert_eq!(rt.block_on(h).unwrap(), 7);
    }
}

rt_test! {
    fn panic_is_returned_as_join_error_and_worker_survives(rt) {
        rt.block_on(async {
            let h = weir::spawn(async {
                if true {
                    panic!("boom");
                }
            });
            let err = h.await.unwrap_err();
            assert!(err.is_panic());
            assert!(err.to_string().contains("boom"), "{err}");
            // The workers still run tasks.
            assert_eq!(weir::spawn(async { 5 }).await.unwrap(), 5);
        });
    }
}

rt_test! {
    fn abort_cancels_a_pending_task(rt) {
        rt.block_on(async {
            let h = weir::spawn(async {
                weir::time::sleep(Duration::from_secs(3600)).await;
            });
            weir::task::yield_now().await;
            h.abort();
            let err = h.await.unwrap_err();
            assert!(err.is_cancelled());
        });
    }
}

rt_test! {
    fn sleep_never_returns_early(rt) {
        rt.block_on(async {
            for us in [0u64, 1, 10, 50, 100, 250, 1000, 3000] {
                let d = Duration::from_micros(us);
                let start = std::time::Instant::now();
                weir::time::sleep(d).await;
                assert!(start.elapsed() >= d, "slept {:?} < {:?}", start.elapsed(), d);
            }
        });
    }
}

rt_test! {
    fn spawn_blocking_runs_and_returns(rt) {
        let v = rt.block_on(async {
            weir::task::spawn_blocking(|| {
                std::thread::sleep(Duration::from_millis(5));
                99
            })
            .await
            .unwrap()
        });
        assert_eq!(v, 99);
    }
}

rt_test! {
    fn abort_after_completion_keeps_the_output(rt) {
        rt.block_on(async {
            let h = weir::spawn(async { 11 });
            while !h.is_finished() {
                weir::task::yield_now().await;
            }
            h.abort();
            assert_eq!(h.await.unwrap(), 11);
        });
    }
}

rt_test! {
    fn dropping_the_join_handle_detaches_the_task(rt) {
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        rt.block_on(async move {
            let (tx, rx) = std::sync::mpsc::channel();
            drop(weir::spawn(async move {
                weir::time::sleep(Duration::from_millis(2)).await;
                d.fetch_add(1, Ordering::SeqCst);
                tx.send(()).unwrap();
            }));
            // Wait without blocking the runtime's only thread (current-thread flavour).
            while rx.try_recv().is_err() {
                weir::time::sleep(Duration::from_millis(1)).await;
            }
        });
        assert_eq!(done.load(Ordering::SeqCst), 1);
    }
}

rt_test! {
    fn abort_of_a_running_task_takes_effect_when_its_poll_returns(rt) {
        rt.block_on(async {
            let h = weir::spawn(async {
                loop {
                    // Always runnable: the abort lands while it is queued or being polled.
                    weir::task::yield_now().await;
                }
            });
            let abort = h.abort_handle();
            weir::task::yield_now().await;
            abort.abort();
            assert!(h.await.unwrap_err().is_cancelled());
            assert!(abort.is_finished());
        });
    }
}

#[test]
fn current_thread_runtime_survives_a_panicking_block_on() {
    let rt = weir::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let pending = rt.spawn(async { 5 });
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async {
            weir::task::yield_now().await;
            panic!("root future panics");
        })
    }));
    assert!(r.is_err());
    // The runtime still runs: its worker state came back with the panic.
    assert_eq!(rt.block_on(pending).unwrap(), 5);
    assert_eq!(
        rt.block_on(async { weir::spawn(async { 6 }).await.unwrap() }),
        6
    );
}

/// Records `weir::task::try_id()` when dropped.
struct RecordIdOnDrop(Arc<std::sync::Mutex<Option<Option<weir::task::Id>>>>);

impl Drop for RecordIdOnDrop {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = Some(weir::task::try_id());
    }
}

rt_test! {
    fn task_id_is_set_while_an_aborted_task_is_dropped(rt) {
        let seen = Arc::new(std::sync::Mutex::new(None));
        let s = seen.clone();
        rt.block_on(async move {
            // Made outside the task: dropped with the future even if the abort lands first.
            let guard = RecordIdOnDrop(s);
            let h = weir::spawn(async move {
                let _guard = guard;
                std::future::pending::<()>().await;
            });
            weir::task::yield_now().await;
            h.abort();
            let id = h.id();
            assert!(h.await.unwrap_err().is_cancelled());
            assert_eq!(*seen.lock().unwrap(), Some(Some(id)), "the future's Drop saw the task's id");
        });
    }
}

rt_test! {
    fn task_id_is_set_while_the_output_is_dropped_with_its_join_handle(rt) {
        let seen = Arc::new(std::sync::Mutex::new(None));
        let s = seen.clone();
        rt.block_on(async move {
            let h = weir::spawn(async move { RecordIdOnDrop(s) });
            while !h.is_finished() {
                weir::task::yield_now().await;
            }
            let id = h.id();
            // The output is still in the task: dropping the handle drops it.
            drop(h);
            assert_eq!(*seen.lock().unwrap(), Some(Some(id)), "the output's Drop saw the task's id");
        });
    }
}

rt_test! {
    fn a_panicking_task_drops_its_future_during_the_unwind(rt) {
        struct SeesPanicking(Arc<std::sync::Mutex<Option<bool>>>);
        impl Drop for SeesPanicking {
            fn drop(&mut self) {
                *self.0.lock().unwrap() = Some(std::thread::panicking());
            }
        }
        /// A future whose poll panics; its fields are dropped only when the task drops it.
        struct PanicsInPoll(#[allow(dead_code)] SeesPanicking);
        impl std::future::Future for PanicsInPoll {
            type Output = ();
            fn poll(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<()> {
                panic!("the poll panics");
            }
        }
        let seen = Arc::new(std::sync::Mutex::new(None));
        let s = seen.clone();
        rt.block_on(async move {
            let h = weir::spawn(PanicsInPoll(SeesPanicking(s)));
            assert!(h.await.unwrap_err().is_panic());
            assert_eq!(*seen.lock().unwrap(), Some(true), "Drop ran during the unwind");
        });
    }
}

rt_test! {
    fn aborting_a_task_whose_drop_panics_gives_a_panic_join_error(rt) {
        struct PanicsOnDrop;
        impl Drop for PanicsOnDrop {
            fn drop(&mut self) {
                panic!("drop panics");
            }
        }
        rt.block_on(async {
            // Made outside the task: dropped with the future even if the abort lands first.
            let guard = PanicsOnDrop;
            let h = weir::spawn(async move {
                let _guard = guard;
                std::future::pending::<()>().await;
            });
            weir::task::yield_now().await;
            h.abort();
            let err = h.await.unwrap_err();
            assert!(err.is_panic(), "{err:?}");
            assert_eq!(common::panic_message(err.into_panic()), "drop panics");
        });
    }
}
