//! `block_on` and `enter`: how they wait, and the misuses they refuse.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc;
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use common::{Flavor, build, panic_message};
use weir::runtime::{Backend, Builder};

/// Wakes itself, then uses the thread's park token (`unpark` + `park`) before returning
/// `Pending` once; ready on the second poll. A `block_on` that slept on the thread's park token
/// would lose the wake-up and hang.
struct ConsumesParkToken(bool);

impl Future for ConsumesParkToken {
    type Output = u32;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        if self.0 {
            return Poll::Ready(7);
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        // What a nested executor or a parker-based lock may do on this thread.
        thread::current().unpark();
        thread::park();
        Poll::Pending
    }
}

/// Runs `block_on(ConsumesParkToken)` on a thread of its own and waits for it at most a minute.
fn block_on_in_thread(flavor: Flavor) {
    let rt = build(flavor, Backend::Epoll);
    let (tx, rx) = mpsc::channel();
    let t = thread::spawn(move || {
        let v = rt.handle().block_on(ConsumesParkToken(false));
        let _ = tx.send(v);
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(v) => assert_eq!(v, 7),
        Err(_) => {
            // Let the stuck thread finish before failing.
            t.thread().unpark();
            panic!("{flavor:?}: block_on lost a wake-up to a future that used the park token");
        }
    }
    t.join().unwrap();
}

#[test]
fn block_on_does_not_lose_a_wake_up_to_the_threads_park_token() {
    block_on_in_thread(Flavor::Workers(2));
    block_on_in_thread(Flavor::CurrentThread);
}

/// A current-thread `block_on` that waits for the core held by another thread's `block_on`
/// sleeps too: it must not sleep on the park token either.
#[test]
fn block_on_waiting_for_the_current_thread_core_does_not_lose_a_wake_up() {
    let rt = std::sync::Arc::new(Builder::new_current_thread().build().unwrap());
    let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
    let (held_tx, held_rx) = std::sync::mpsc::channel::<()>();
    let holder = {
        let rt = rt.clone();
        thread::spawn(move || {
            rt.block_on(async move {
                held_tx.send(()).unwrap();
                // Holds the core until told to let go (polled by the holder's worker loop).
                while hold_rx.try_recv().is_err() {
                    weir::time::sleep(Duration::from_millis(1)).await;
                }
            });
        })
    };
    held_rx.recv_timeout(Duration::from_secs(60)).unwrap();
    let (tx, rx) = mpsc::channel();
    let waiter = {
        let rt = rt.clone();
        thread::spawn(move || {
            let _ = tx.send(rt.block_on(ConsumesParkToken(false)));
        })
    };
    let got = rx.recv_timeout(Duration::from_secs(60));
    hold_tx.send(()).unwrap();
    if got.is_err() {
        waiter.thread().unpark();
    }
    holder.join().unwrap();
    waiter.join().unwrap();
    assert_eq!(
        got.expect("block_on lost a wake-up while waiting for the core"),
        7
    );
}

/// The panic message of `f`, which must panic.
#[track_caller]
fn panic_of(f: impl FnOnce()) -> String {
    let payload =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("this must panic");
    panic_message(payload)
}

#[test]
fn nested_block_on_panics_on_every_flavour() {
    for outer in [Flavor::CurrentThread, Flavor::Workers(2)] {
        for inner in [Flavor::CurrentThread, Flavor::Workers(2)] {
            let rt = build(outer, Backend::Epoll);
            let other = build(inner, Backend::Epoll);
            let msg = panic_of(|| {
                rt.block_on(async {
                    other.block_on(async {});
                })
            });
            assert!(
                msg.contains("Cannot start a runtime from within a runtime."),
                "{outer:?} in {inner:?}: {msg}"
            );
            // The same runtime, through its handle.
            let msg = panic_of(|| {
                rt.block_on(async {
                    weir::runtime::Handle::current().block_on(async {});
                })
            });
            assert!(
                msg.contains("Cannot start a runtime from within a runtime."),
                "{outer:?}: {msg}"
            );
        }
    }
}

#[test]
fn block_on_inside_a_task_panics() {
    for flavor in [Flavor::CurrentThread, Flavor::Workers(2)] {
        let rt = build(flavor, Backend::Epoll);
        let err = rt.block_on(async {
            weir::spawn(async {
                weir::runtime::Handle::current().block_on(async {});
            })
            .await
            .unwrap_err()
        });
        let msg = panic_message(err.into_panic());
        assert!(
            msg.contains("Cannot start a runtime from within a runtime."),
            "{flavor:?}: {msg}"
        );
    }
}

#[test]
fn block_on_in_spawn_blocking_is_allowed() {
    for flavor in [Flavor::CurrentThread, Flavor::Workers(2)] {
        let rt = build(flavor, Backend::Epoll);
        let v = rt.block_on(async {
            weir::task::spawn_blocking(|| {
                weir::runtime::Handle::current()
                    .block_on(async { weir::spawn(async { 3 }).await.unwrap() })
            })
            .await
            .unwrap()
        });
        assert_eq!(v, 3, "{flavor:?}");
    }
}

#[test]
fn dropping_a_runtime_inside_block_on_panics() {
    for outer in [Flavor::CurrentThread, Flavor::Workers(2)] {
        for inner in [Flavor::CurrentThread, Flavor::Workers(2)] {
            let rt = build(outer, Backend::Epoll);
            let other = build(inner, Backend::Epoll);
            let msg = panic_of(|| rt.block_on(async move { drop(other) }));
            assert!(
                msg.contains("Cannot drop a runtime in a context where blocking is not allowed."),
                "{inner:?} in {outer:?}: {msg}"
            );
        }
    }
}

#[test]
fn dropping_a_runtime_inside_a_task_panics() {
    for outer in [Flavor::CurrentThread, Flavor::Workers(2)] {
        let rt = build(outer, Backend::Epoll);
        let other = build(Flavor::Workers(1), Backend::Epoll);
        let err =
            rt.block_on(async move { weir::spawn(async move { drop(other) }).await.unwrap_err() });
        let msg = panic_message(err.into_panic());
        assert!(
            msg.contains("Cannot drop a runtime in a context where blocking is not allowed."),
            "{outer:?}: {msg}"
        );
    }
}

#[test]
fn shutdown_background_inside_async_code_is_allowed() {
    for outer in [Flavor::CurrentThread, Flavor::Workers(2)] {
        let rt = build(outer, Backend::Epoll);
        let other = build(Flavor::Workers(2), Backend::Epoll);
        let other2 = build(Flavor::CurrentThread, Backend::Epoll);
        rt.block_on(async move {
            other.shutdown_background();
            weir::spawn(async move { other2.shutdown_timeout(Duration::ZERO) })
                .await
                .unwrap();
        });
    }
}

#[test]
fn enter_guards_dropped_out_of_order_panic() {
    let a = build(Flavor::Workers(1), Backend::Epoll);
    let b = build(Flavor::CurrentThread, Backend::Epoll);
    let ga = a.enter();
    let gb = b.enter();
    let msg = panic_of(move || drop(ga));
    assert!(msg.contains("dropped out of order"), "{msg}");
    drop(gb);
}

#[test]
fn enter_guards_dropped_in_order_restore_the_previous_runtime() {
    let a = build(Flavor::Workers(2), Backend::Epoll);
    let b = build(Flavor::Workers(3), Backend::Epoll);
    assert!(weir::runtime::Handle::try_current().is_err());
    let ga = a.enter();
    {
        let _gb = b.enter();
        assert_eq!(weir::runtime::Handle::current().num_workers(), 3);
    }
    assert_eq!(weir::runtime::Handle::current().num_workers(), 2);
    drop(ga);
    assert!(weir::runtime::Handle::try_current().is_err());
}

/// Sleeps in `block_on`'s own future, on every flavour and backend: each ends, never before
/// its deadline, and wake-ups from tasks on the workers still reach the caller.
#[test]
fn sleeps_in_block_on_end_and_are_never_early() {
    for backend in [Backend::Epoll, Backend::Mio] {
        for flavor in [
            Flavor::CurrentThread,
            Flavor::Workers(1),
            Flavor::Workers(2),
        ] {
            let rt = build(flavor, backend);
            rt.block_on(async {
                for i in 0..50u64 {
                    let d = Duration::from_micros(50 + i * 10);
                    let start = std::time::Instant::now();
                    weir::time::sleep(d).await;
                    assert!(start.elapsed() >= d, "{flavor:?}/{backend:?}: early sleep");
                    // A wake-up from a worker, between sleeps.
                    let v = weir::spawn(async move { i * 2 }).await.unwrap();
                    assert_eq!(v, i * 2);
                }
            });
        }
    }
}

/// A sleep first polled in `block_on` (so armed where the caller waits) and then moved into a
/// task that outlives the call still fires, once `block_on` has returned.
#[test]
fn a_sleep_armed_in_block_on_fires_after_it_returns() {
    for flavor in [
        Flavor::Workers(1),
        Flavor::Workers(2),
        Flavor::CurrentThread,
    ] {
        let rt = build(flavor, Backend::Epoll);
        let (tx, rx) = mpsc::channel();
        let deadline = rt.block_on(async {
            let mut sleep = Box::pin(weir::time::sleep(Duration::from_millis(30)));
            // Polled once: armed.
            assert!(futures::poll!(sleep.as_mut()).is_pending());
            let deadline = sleep.deadline().into_std();
            weir::spawn(async move {
                sleep.await;
                let _ = tx.send(std::time::Instant::now());
            });
            deadline
        });
        if matches!(flavor, Flavor::CurrentThread) {
            // Its one worker runs only inside `block_on`: drive it until the task reports.
            let fired = rt.block_on(async {
                loop {
                    if let Ok(t) = rx.try_recv() {
                        break t;
                    }
                    weir::time::sleep(Duration::from_millis(5)).await;
                }
            });
            assert!(fired >= deadline, "{flavor:?}: fired early");
            continue;
        }
        let fired = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{flavor:?}: the sleep moved out of block_on never fired"));
        assert!(fired >= deadline, "{flavor:?}: fired early");
    }
}

/// Several threads block on the same multi-thread runtime at once, each sleeping: each wakes
/// (each waits in a reactor of its own), and the runtime's reactors are reused afterwards.
#[test]
fn concurrent_block_on_callers_each_wake() {
    let rt = std::sync::Arc::new(build(Flavor::Workers(2), Backend::Epoll));
    for _round in 0..3 {
        let threads: Vec<_> = (0..4)
            .map(|k| {
                let rt = rt.clone();
                thread::spawn(move || {
                    rt.block_on(async move {
                        for _ in 0..20 {
                            let d = Duration::from_micros(100 + k * 37);
                            let start = std::time::Instant::now();
                            weir::time::sleep(d).await;
                            assert!(start.elapsed() >= d);
                        }
                    })
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
