//! `block_in_place`: a task blocks its thread while its worker — run queue, reactor, timers —
//! goes on on another thread.

mod common;

use std::io::ErrorKind;
use std::sync::mpsc;
use std::time::Duration;

use common::{Flavor, build, build_with, panic_message, pipe, read_fd, try_build, write_fd};
use weir::io::unix::AsyncFd;
use weir::runtime::{Backend, Handle, Runtime};

/// Bound of every wait for another thread in these tests.
const LIMIT: Duration = Duration::from_secs(60);

/// Runs a body on the multi-thread flavours (1 and 4 workers, epoll, mio and io_uring — skipped
/// where unavailable — and the `epoll_wait` fallback): `block_in_place` needs a multi-thread
/// runtime.
macro_rules! mt_test {
    (fn $name:ident($rt:ident) $body:block) => {
        mod $name {
            use super::*;

            fn run($rt: Runtime) $body

            #[test]
            fn one_worker_epoll() { run(build(Flavor::Workers(1), Backend::Epoll)) }
            #[test]
            fn one_worker_mio() { run(build(Flavor::Workers(1), Backend::Mio)) }
            #[test]
            fn four_workers_epoll() { run(build(Flavor::Workers(4), Backend::Epoll)) }
            #[test]
            fn four_workers_mio() { run(build(Flavor::Workers(4), Backend::Mio)) }
            #[test]
            fn one_worker_uring() {
                let test = concat!(module_path!(), "::one_worker_uring");
                if let Some(rt) = try_build(test, Flavor::Workers(1), Backend::IoUring) {
                    run(rt)
                }
            }
            #[test]
            fn four_workers_uring() {
                let test = concat!(module_path!(), "::four_workers_uring");
                if let Some(rt) = try_build(test, Flavor::Workers(4), Backend::IoUring) {
                    run(rt)
                }
            }
            #[test]
            fn two_workers_epoll_wait_fallback() {
                run(build_with(Flavor::Workers(2), Backend::Epoll, false))
            }
        }
    };
}

mt_test! {
    fn io_and_timers_of_the_blocked_worker_keep_running(rt) {
        let (r, w) = pipe();
        let seen = rt.block_on(async move {
            let (tx, rx) = mpsc::channel::<&'static str>();
            let handle = Handle::current();
            // Both on worker 0. The pipe is registered with worker 0's epoll and the sleep arms
            // worker 0's timer queue; a pinned task is only ever polled by worker 0: all of it
            // stalls unless worker 0 runs elsewhere while the other task blocks.
            let io = handle.spawn_on(0, async move {
                let afd = AsyncFd::new(r).unwrap();
                tx.send("registered").unwrap();
                weir::time::sleep(Duration::from_millis(1)).await;
                tx.send("timer fired").unwrap();
                let mut buf = [0u8; 8];
                loop {
                    let mut guard = afd.readable().await.unwrap();
                    match read_fd(afd.get_ref(), &mut buf) {
                        Ok(n) => {
                            assert_eq!(&buf[..n], b"ping");
                            break;
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => guard.clear_ready(),
                        Err(e) => panic!("read: {e}"),
                    }
                }
                tx.send("read").unwrap();
            });
            let blocker = handle.spawn_on(0, async move {
                weir::task::block_in_place(move || {
                    let mut seen = vec![rx.recv_timeout(LIMIT).unwrap_or("nothing")];
                    write_fd(&w, b"ping").unwrap();
                    for _ in 0..2 {
                        seen.push(rx.recv_timeout(LIMIT).unwrap_or("nothing"));
                    }
                    seen
                })
            });
            io.await.unwrap();
            blocker.await.unwrap()
        });
        assert_eq!(seen, ["registered", "timer fired", "read"]);
    }
}

mt_test! {
    fn block_on_inside_block_in_place(rt) {
        let v = rt.block_on(async {
            weir::spawn(async {
                weir::task::block_in_place(|| {
                    Handle::current().block_on(async {
                        weir::time::sleep(Duration::from_micros(100)).await;
                        weir::spawn(async { 5 }).await.unwrap()
                    })
                })
            })
            .await
            .unwrap()
        });
        assert_eq!(v, 5);
    }
}

mt_test! {
    fn many_tasks_block_in_place_and_the_runtime_goes_on(rt) {
        let n = rt.block_on(async {
            let tasks: Vec<_> = (0..32u64)
                .map(|i| {
                    weir::spawn(async move {
                        weir::task::yield_now().await;
                        let v = weir::task::block_in_place(|| {
                            std::thread::sleep(Duration::from_micros(200));
                            i
                        });
                        // The task goes on after the hand-over, on whichever worker.
                        weir::time::sleep(Duration::from_micros(100)).await;
                        let again = weir::task::block_in_place(|| v * 2);
                        weir::spawn(async move { again }).await.unwrap()
                    })
                })
                .collect();
            let mut sum = 0;
            for t in tasks {
                sum += t.await.unwrap();
            }
            sum
        });
        assert_eq!(n, (0..32u64).map(|i| i * 2).sum::<u64>());
        // Every worker still runs somewhere.
        let m = rt.metrics();
        rt.block_on(async {
            for i in 0..m.num_workers() {
                let on = Handle::current()
                    .spawn_on(i, async { std::thread::current().id() })
                    .await
                    .unwrap();
                assert_eq!(m.worker_thread_id(i), Some(on), "worker {i}");
            }
        });
    }
}

mt_test! {
    fn a_worker_with_local_tasks_stays_on_its_thread(rt) {
        let ok = rt.block_on(async {
            weir::spawn(async {
                let thread = std::thread::current().id();
                let local = weir::task::spawn_local(async move {
                    weir::task::yield_now().await;
                    std::thread::current().id()
                });
                // A task queued on this worker: given to the others while the worker waits.
                let queued = weir::spawn(async { 3 });
                let (tx, rx) = mpsc::channel();
                let workers = Handle::current().num_workers();
                let got = weir::task::block_in_place(move || {
                    let t = std::thread::spawn(move || tx.send(1).unwrap());
                    t.join().unwrap();
                    let mut got = rx.recv_timeout(LIMIT).unwrap();
                    if workers > 1 {
                        // Its timers go to a reactor that some worker turns.
                        got += Handle::current().block_on(async {
                            weir::time::sleep(Duration::from_micros(100)).await;
                            weir::spawn(async { 10 }).await.unwrap()
                        });
                    } else {
                        got += 10;
                    }
                    got
                });
                assert_eq!(got, 11);
                assert_eq!(std::thread::current().id(), thread);
                assert_eq!(local.await.unwrap(), thread, "the local task stayed here");
                queued.await.unwrap() == 3
            })
            .await
            .unwrap()
        });
        assert!(ok);
    }
}

#[test]
fn block_in_place_panics_in_a_task_of_a_current_thread_runtime() {
    let rt = build(Flavor::CurrentThread, Backend::Epoll);
    let err = rt.block_on(async {
        weir::spawn(async { weir::task::block_in_place(|| 1) })
            .await
            .unwrap_err()
    });
    let msg = panic_message(err.into_panic());
    assert!(msg.contains("current-thread runtime"), "{msg}");
    // The `Runtime::block_on` future refuses it too, as tokio's does (see `tokio_parity.rs`);
    // the runtime still works afterwards.
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async { weir::task::block_in_place(|| 1) })
    }));
    let msg = panic_message(refused.expect_err("refused in a current-thread block_on"));
    assert!(msg.contains("current-thread runtime"), "{msg}");
    assert_eq!(
        rt.block_on(async { weir::spawn(async { 2 }).await.unwrap() }),
        2
    );
}

#[test]
fn off_the_workers_the_closure_just_runs() {
    assert_eq!(weir::task::block_in_place(|| 1), 1);
    for flavor in [Flavor::CurrentThread, Flavor::Workers(2)] {
        let rt = build(flavor, Backend::Epoll);
        let v = rt.block_on(async {
            weir::task::spawn_blocking(|| weir::task::block_in_place(|| 2))
                .await
                .unwrap()
        });
        assert_eq!(v, 2, "{flavor:?}");
    }
    // A multi-thread runtime's `block_on` future is not on a worker; `block_on` is allowed
    // inside.
    let rt = build(Flavor::Workers(2), Backend::Epoll);
    let v = rt
        .block_on(async { weir::task::block_in_place(|| Handle::current().block_on(async { 3 })) });
    assert_eq!(v, 3);
}
