//! `JoinSet` on every flavour and backend.

mod common;

use std::collections::BTreeSet;
use std::future::{Future, poll_fn};
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use weir::task::JoinSet;

/// A bound on waits that should end at once, so a bug fails the test instead of hanging it.
const HANG: Duration = Duration::from_secs(30);

/// Counts its drops.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Sends on drop: lets a test wait for a future to be dropped without polling a counter.
struct DropSignal(mpsc::UnboundedSender<()>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

/// A future that never completes.
fn forever() -> impl Future<Output = ()> + Send {
    weir::time::sleep(Duration::from_secs(3600))
}

#[test]
fn join_set_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<JoinSet<u32>>();
    assert_send_sync::<JoinSet<String>>();
}

rt_test! {
    fn empty_set_joins_none(rt) {
        rt.block_on(async {
            let mut set = JoinSet::<u32>::new();
            assert!(set.is_empty());
            assert_eq!(set.len(), 0);
            assert!(set.join_next().await.is_none());
            assert!(set.join_next_with_id().await.is_none());
            assert!(set.try_join_next().is_none());
            let set = JoinSet::<u32>::default();
            assert_eq!(format!("{set:?}"), "JoinSet { len: 0 }");
        });
    }
}

rt_test! {
    fn tasks_come_out_in_completion_order(rt) {
        rt.block_on(async {
            let mut set = JoinSet::new();
            let mut release = Vec::new();
            for i in 0..4usize {
                let (tx, rx) = oneshot::channel::<()>();
                release.push(Some(tx));
                set.spawn(async move {
                    rx.await.unwrap();
                    i
                });
            }
            assert_eq!(set.len(), 4);
            for i in [2usize, 0, 3, 1] {
                release[i].take().unwrap().send(()).unwrap();
                assert_eq!(set.join_next().await.unwrap().unwrap(), i);
            }
            assert!(set.is_empty());
            assert!(set.join_next().await.is_none());
        });
    }
}

rt_test! {
    fn len_counts_tasks_until_they_are_joined(rt) {
        rt.block_on(async {
            let mut set = JoinSet::new();
            for i in 0..5u32 {
                set.spawn(async move { i });
                assert_eq!(set.len(), i as usize + 1);
            }
            // Completed tasks stay in the set until joined.
            weir::time::sleep(Duration::from_millis(5)).await;
            assert_eq!(set.len(), 5);
            let mut left = 5;
            while let Some(r) = set.join_next().await {
                r.unwrap();
                left -= 1;
                assert_eq!(set.len(), left);
                assert_eq!(set.is_empty(), left == 0);
            }
            assert_eq!(left, 0);
        });
    }
}

rt_test! {
    fn panics_and_cancellations_are_join_errors(rt) {
        rt.block_on(async {
            let mut set = JoinSet::new();
            let panicking = set.spawn(async {
                if true {
                    panic!("boom in a set");
                }
                1u32
            });
            let aborted = set.spawn(async {
                forever().await;
                2u32
            });
            let fine = set.spawn(async { 3u32 });
            aborted.abort();
            let mut seen = 0;
            while let Some(r) = set.join_next_with_id().await {
                seen += 1;
                match r {
                    Ok((id, v)) => {
                        assert_eq!(id, fine.id());
                        assert_eq!(v, 3);
                    }
                    Err(e) if e.is_panic() => {
                        assert_eq!(e.id(), panicking.id());
                        assert!(e.to_string().contains("boom in a set"), "{e}");
                    }
                    Err(e) => {
                        assert!(e.is_cancelled(), "{e}");
                        assert_eq!(e.id(), aborted.id());
                    }
                }
            }
            assert_eq!(seen, 3);
            // The runtime still runs tasks.
            assert_eq!(weir::spawn(async { 4 }).await.unwrap(), 4);
        });
    }
}

rt_test! {
    fn abort_all_cancels_every_task(rt) {
        rt.block_on(async {
            let dropped = Arc::new(AtomicUsize::new(0));
            let mut set = JoinSet::new();
            for _ in 0..10 {
                let guard = DropCount(dropped.clone());
                set.spawn(async move {
                    let _guard = guard;
                    forever().await;
                });
            }
            set.abort_all();
            assert_eq!(set.len(), 10, "aborted tasks stay in the set until joined");
            let mut cancelled = 0;
            while let Some(r) = set.join_next().await {
                assert!(r.unwrap_err().is_cancelled());
                cancelled += 1;
            }
            assert_eq!(cancelled, 10);
            // A task is joined only once its future has been dropped.
            assert_eq!(dropped.load(Ordering::SeqCst), 10);
        });
    }
}

rt_test! {
    fn shutdown_waits_until_every_future_is_dropped(rt) {
        rt.block_on(async {
            let dropped = Arc::new(AtomicUsize::new(0));
            let mut set = JoinSet::new();
            for i in 0..8u64 {
                let guard = DropCount(dropped.clone());
                set.spawn(async move {
                    let _guard = guard;
                    if i % 2 == 0 {
                        forever().await;
                    }
                    i
                });
            }
            // Some finished, some are pending; shutdown discards both.
            weir::task::yield_now().await;
            set.shutdown().await;
            assert!(set.is_empty());
            assert_eq!(dropped.load(Ordering::SeqCst), 8);
            // The set is usable after shutdown.
            set.spawn(async { 9 });
            assert_eq!(set.join_next().await.unwrap().unwrap(), 9);
        });
    }
}

rt_test! {
    fn dropping_the_set_aborts_its_tasks(rt) {
        rt.block_on(async {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let mut set = JoinSet::new();
            for _ in 0..6 {
                let guard = DropSignal(tx.clone());
                set.spawn(async move {
                    let _guard = guard;
                    forever().await;
                });
            }
            drop(tx);
            // Let the tasks start (their guards now live in running futures).
            weir::time::sleep(Duration::from_millis(2)).await;
            drop(set);
            let all_dropped = async {
                for _ in 0..6 {
                    rx.recv().await.expect("a guard was dropped");
                }
            };
            weir::time::timeout(HANG, all_dropped)
                .await
                .expect("dropping the JoinSet aborts its tasks");
        });
    }
}

rt_test! {
    fn try_join_next_returns_only_completed_tasks(rt) {
        rt.block_on(async {
            let mut set = JoinSet::new();
            let (tx, rx) = oneshot::channel::<()>();
            set.spawn(async move {
                rx.await.unwrap();
                7u32
            });
            assert!(set.try_join_next().is_none());
            assert_eq!(set.len(), 1);
            tx.send(()).unwrap();
            let got = weir::time::timeout(HANG, async {
                loop {
                    if let Some(r) = set.try_join_next() {
                        break r;
                    }
                    weir::time::sleep(Duration::from_micros(100)).await;
                }
            })
            .await
            .expect("the task completes");
            assert_eq!(got.unwrap(), 7);
            assert!(set.is_empty());
            assert!(set.try_join_next().is_none());

            // With the id.
            let done = set.spawn(async { 8u32 });
            let (id, v) = weir::time::timeout(HANG, async {
                loop {
                    if let Some(r) = set.try_join_next_with_id() {
                        break r.unwrap();
                    }
                    weir::task::yield_now().await;
                }
            })
            .await
            .unwrap();
            assert_eq!((id, v), (done.id(), 8));
        });
    }
}

rt_test! {
    fn detach_all_lets_the_tasks_run_on(rt) {
        rt.block_on(async {
            let (done_tx, mut done_rx) = mpsc::unbounded_channel();
            let mut release = Vec::new();
            let mut set = JoinSet::new();
            for i in 0..5u32 {
                let (tx, rx) = oneshot::channel::<()>();
                release.push(tx);
                let done_tx = done_tx.clone();
                set.spawn(async move {
                    rx.await.unwrap();
                    done_tx.send(i).unwrap();
                    i
                });
            }
            drop(done_tx);
            set.detach_all();
            assert!(set.is_empty());
            assert!(set.join_next().await.is_none());
            drop(set);
            for tx in release {
                tx.send(()).unwrap();
            }
            let mut seen = BTreeSet::new();
            weir::time::timeout(HANG, async {
                while let Some(i) = done_rx.recv().await {
                    seen.insert(i);
                }
            })
            .await
            .expect("detached tasks complete");
            assert_eq!(seen, (0..5).collect());
        });
    }
}

rt_test! {
    fn ten_thousand_tasks_all_come_out_once(rt) {
        const N: u64 = 10_000;
        rt.block_on(async {
            let mut set = JoinSet::new();
            for i in 0..N {
                set.spawn(async move {
                    if i % 3 == 0 {
                        weir::task::yield_now().await;
                    }
                    i
                });
            }
            assert_eq!(set.len(), N as usize);
            let mut seen = vec![false; N as usize];
            let mut count = 0;
            while let Some(r) = set.join_next().await {
                let i = r.unwrap() as usize;
                assert!(!seen[i], "task {i} joined twice");
                seen[i] = true;
                count += 1;
            }
            assert_eq!(count, N);
        });
    }
}

rt_test! {
    fn join_next_is_cancel_safe(rt) {
        const N: u64 = 200;
        rt.block_on(async {
            let mut set = JoinSet::new();
            for i in 0..N {
                set.spawn(async move {
                    weir::time::sleep(Duration::from_micros(20 * (i % 50))).await;
                    i
                });
            }
            let mut got = BTreeSet::new();
            let mut attempts = 0u64;
            while !set.is_empty() {
                attempts += 1;
                assert!(attempts < 10_000_000, "JoinSet lost a task");
                // Poll a `join_next` once and drop it: whatever it did not return stays.
                let r = {
                    let mut next = pin!(set.join_next());
                    poll_fn(|cx| Poll::Ready(next.as_mut().poll(cx))).await
                };
                match r {
                    Poll::Ready(Some(r)) => assert!(got.insert(r.unwrap()), "joined twice"),
                    Poll::Ready(None) => unreachable!("the set is not empty"),
                    Poll::Pending => {
                        // And through a timeout that drops the future when it fires.
                        if let Ok(Some(r)) =
                            weir::time::timeout(Duration::from_micros(30), set.join_next()).await
                        {
                            assert!(got.insert(r.unwrap()), "joined twice");
                        }
                    }
                }
            }
            assert_eq!(got, (0..N).collect());
        });
    }
}

rt_test! {
    fn spawn_blocking_entries(rt) {
        rt.block_on(async {
            let mut set = JoinSet::new();
            for i in 0..4u32 {
                set.spawn_blocking(move || {
                    std::thread::sleep(Duration::from_millis(u64::from(i)));
                    i
                });
            }
            set.spawn_blocking(|| -> u32 {
                if true {
                    panic!("blocking boom");
                }
                0
            });
            set.spawn(async { 100 });
            let mut ok = BTreeSet::new();
            let mut panics = 0;
            while let Some(r) = set.join_next().await {
                match r {
                    Ok(v) => assert!(ok.insert(v)),
                    Err(e) => {
                        assert!(e.is_panic());
                        assert!(e.to_string().contains("blocking boom"), "{e}");
                        panics += 1;
                    }
                }
            }
            assert_eq!(ok, [0, 1, 2, 3, 100].into_iter().collect());
            assert_eq!(panics, 1);
        });
    }
}

rt_test! {
    fn spawn_local_entries(rt) {
        // `spawn_local` needs a worker thread: run the set inside a task.
        let sum = rt.block_on(async {
            weir::spawn(async {
                let mut set = JoinSet::new();
                for i in 0..8usize {
                    set.spawn_local(async move {
                        let not_send = Rc::new(i);
                        weir::task::yield_now().await;
                        *not_send
                    });
                }
                let mut sum = 0;
                while let Some(r) = set.join_next().await {
                    sum += r.unwrap();
                }
                sum
            })
            .await
            .unwrap()
        });
        assert_eq!(sum, 28);
    }
}

rt_test! {
    fn spawn_on_a_handle_from_outside_the_runtime(rt) {
        let mut set = JoinSet::new();
        for i in 0..3u32 {
            set.spawn_on(async move { i + 1 }, rt.handle());
        }
        set.spawn_blocking_on(|| 10u32, rt.handle());
        let total = rt.block_on(async move {
            let mut total = 0;
            while let Some(r) = set.join_next().await {
                total += r.unwrap();
            }
            total
        });
        assert_eq!(total, 16);
    }
}

rt_test! {
    fn join_all_returns_every_output(rt) {
        rt.block_on(async {
            let set: JoinSet<u32> = (0..20u32).map(|i| async move { i }).collect();
            assert_eq!(set.len(), 20);
            let mut out = set.join_all().await;
            out.sort_unstable();
            assert_eq!(out, (0..20).collect::<Vec<_>>());

            let mut set = JoinSet::new();
            set.extend((0..3u32).map(|i| async move { i * 10 }));
            assert_eq!(set.len(), 3);
            let mut out = set.join_all().await;
            out.sort_unstable();
            assert_eq!(out, vec![0, 10, 20]);
        });
    }
}

rt_test! {
    fn join_all_resumes_a_panic_and_aborts_the_rest(rt) {
        rt.block_on(async {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let joiner = weir::spawn(async move {
                let mut set = JoinSet::new();
                for _ in 0..3 {
                    let guard = DropSignal(tx.clone());
                    set.spawn(async move {
                        let _guard = guard;
                        forever().await;
                    });
                }
                set.spawn(async {
                    if true {
                        panic!("join_all boom");
                    }
                });
                set.join_all().await
            });
            let err = joiner.await.unwrap_err();
            assert!(err.is_panic());
            assert!(err.to_string().contains("join_all boom"), "{err}");
            weir::time::timeout(HANG, async {
                for _ in 0..3 {
                    rx.recv().await.expect("a guard was dropped");
                }
            })
            .await
            .expect("the other tasks were aborted");
        });
    }
}

rt_test! {
    fn abort_handle_cancels_one_task(rt) {
        rt.block_on(async {
            let mut set = JoinSet::new();
            let a = set.spawn(async {
                forever().await;
                1u32
            });
            let (tx, rx) = oneshot::channel::<()>();
            set.spawn(async move {
                rx.await.unwrap();
                2u32
            });
            a.abort();
            let e = set.join_next().await.unwrap().unwrap_err();
            assert!(e.is_cancelled());
            assert_eq!(e.id(), a.id());
            assert!(a.is_finished());
            assert_eq!(set.len(), 1);
            tx.send(()).unwrap();
            assert_eq!(set.join_next().await.unwrap().unwrap(), 2);
        });
    }
}
