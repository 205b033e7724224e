//! Readiness through the worker reactors: AsyncFd, and tasks staying on the worker whose
//! epoll woke them.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{eventfd, pipe, read_fd, write_fd};
use weir::io::unix::AsyncFd;
use weir::runtime::{Backend, Builder};

rt_test! {
    fn readable_after_write_then_pending_after_clear(rt) {
        rt.block_on(async {
            let (r, w) = pipe();
            let afd = AsyncFd::new(r).unwrap();
            let writer = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                write_fd(&w, b"hello").unwrap();
                w
            });
            let mut buf = [0u8; 16];
            let n = loop {
                let mut guard = afd.readable().await.unwrap();
                match guard.try_io(|fd| read_fd(fd.get_ref(), &mut buf)) {
                    Ok(r) => break r.unwrap(),
                    Err(_would_block) => continue,
                }
            };
            assert_eq!(&buf[..n], b"hello");
            // Drained: the next read would block, so readiness gets cleared and a wait pends.
            let mut guard = afd.readable().await.unwrap();
            assert!(guard.try_io(|fd| read_fd(fd.get_ref(), &mut buf)).is_err());
            let pending = weir::time::timeout(Duration::from_millis(20), afd.readable()).await;
            assert!(pending.is_err(), "no data, so not readable");
            drop(writer.join().unwrap());
        });
    }
}

rt_test! {
    fn many_tasks_wait_on_one_fd(rt) {
        rt.block_on(async {
            let efd = Arc::new(AsyncFd::new(eventfd()).unwrap());
            let woke = Arc::new(AtomicUsize::new(0));
            let mut hs = Vec::new();
            for _ in 0..8 {
                let (efd, woke) = (efd.clone(), woke.clone());
                hs.push(weir::spawn(async move {
                    let _g = efd.readable().await.unwrap();
                    woke.fetch_add(1, Ordering::SeqCst);
                }));
            }
            weir::time::sleep(Duration::from_millis(5)).await;
            write_fd(efd.get_ref(), &1u64.to_ne_bytes()).unwrap();
            for h in hs {
                h.await.unwrap();
            }
            assert_eq!(woke.load(Ordering::SeqCst), 8);
        });
    }
}

/// The design's core promise: readiness delivered by worker A's epoll brings the task to A.
fn woken_task_runs_on_registering_worker(backend: Backend) {
    let rt = Builder::new_multi_thread()
        .workers(4)
        .backend(backend)
        .backend_strict(true)
        .build()
        .unwrap();
    rt.block_on(async {
        for round in 0..20 {
            let (r, w) = pipe();
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let task = weir::spawn(async move {
                let a = weir::runtime::worker_index().expect("tasks run on workers");
                let afd = AsyncFd::new(r).unwrap();
                assert_eq!(
                    afd.registration().handle().index(),
                    a,
                    "registered on own reactor"
                );
                tx.send(()).unwrap();
                let _ready = afd.readable().await.unwrap();
                let b = weir::runtime::worker_index().unwrap();
                (a, b)
            });
            // Write from a plain thread once the task waits, so the only path to the task is
            // worker A's epoll.
            let writer = std::thread::spawn(move || {
                rx.recv().unwrap();
                std::thread::sleep(Duration::from_millis(10));
                write_fd(&w, b"x").unwrap();
                w
            });
            let (a, b) = task.await.unwrap();
            assert_eq!(
                a, b,
                "round {round}: registered on worker {a}, resumed on worker {b}"
            );
            drop(writer.join().unwrap());
        }
    });
}

#[test]
fn woken_task_runs_on_registering_worker_epoll() {
    woken_task_runs_on_registering_worker(Backend::Epoll);
}

#[test]
fn woken_task_runs_on_registering_worker_mio() {
    woken_task_runs_on_registering_worker(Backend::Mio);
}

#[test]
fn woken_task_runs_on_registering_worker_uring() {
    if let Some(why) = common::uring_unavailable() {
        return common::skip("woken_task_runs_on_registering_worker_uring", why);
    }
    woken_task_runs_on_registering_worker(Backend::IoUring);
}

#[test]
fn reactor_wakes_are_counted_on_the_owning_worker() {
    let rt = Builder::new_multi_thread().workers(2).build().unwrap();
    let idx = rt.block_on(async {
        weir::spawn(async {
            let (r, w) = pipe();
            let afd = AsyncFd::new(r).unwrap();
            let writer = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(10));
                write_fd(&w, b"x").unwrap();
                w
            });
            let _ = afd.readable().await.unwrap();
            drop(writer.join().unwrap());
            weir::runtime::worker_index().unwrap()
        })
        .await
        .unwrap()
    });
    let stats = rt.metrics().worker(idx);
    assert!(stats.reactor.events >= 1, "{stats:?}");
}

/// min_wait configured on the builder reaches the worker's reactor: two pipe writes made from
/// another thread while the runtime waits arrive in one wait.
#[test]
fn runtime_min_wait_gathers_events_into_one_wait() {
    // The longest window there is, and the two writes back to back from another thread: both
    // land in the window of the first wait unless that thread is held off the CPU for the
    // whole window (the window, not the writer's pace, is what is under test).
    let rt = Builder::new_current_thread()
        .min_wait(weir::runtime::MAX_MIN_WAIT)
        .build()
        .unwrap();
    rt.block_on(async {
        let (r1, w1) = pipe();
        let (r2, w2) = pipe();
        let a1 = AsyncFd::new(r1).unwrap();
        let a2 = AsyncFd::new(r2).unwrap();
        let writer = std::thread::spawn(move || {
            write_fd(&w1, b"1").unwrap();
            write_fd(&w2, b"2").unwrap();
            (w1, w2)
        });
        let _ = a1.readable().await.unwrap();
        let _ = a2.readable().await.unwrap();
        drop(writer.join().unwrap());
    });
    let s = rt.metrics().worker(0).reactor;
    let multi: u64 = s.events_per_wait[2..].iter().sum();
    assert!(s.windows_opened >= 1, "{s:?}");
    assert!(multi >= 1, "a wait returned both events: {s:?}");
}

#[test]
fn worker_threads_run_with_1ns_timer_slack() {
    let rt = Builder::new_multi_thread().workers(2).build().unwrap();
    let slack = rt.block_on(async { weir::spawn(async { weir_timer_slack() }).await.unwrap() });
    assert_eq!(slack, 1);
}

fn weir_timer_slack() -> u64 {
    // SAFETY: PR_GET_TIMERSLACK takes no pointer arguments.
    let v = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    v as u64
}

/// I/O stealing: while the worker whose epoll holds a registration is blocked, an idle worker
/// collects the event and runs the task (it steals when it goes idle, so worker 1 is kept
/// waking up by a timer).
#[test]
fn idle_worker_runs_events_of_a_blocked_worker() {
    use std::sync::mpsc::channel;
    // I/O stealing is epoll's (a ring is reaped by its owner only), whatever `WEIR_BACKEND`
    // says.
    let rt = Builder::new_multi_thread()
        .backend(Backend::Epoll)
        .workers(2)
        .build()
        .unwrap();
    let h = rt.handle().clone();
    let (r, w) = pipe();
    let reactor0 = h.worker_reactor(0).unwrap();
    let (ready_tx, ready_rx) = channel::<()>();
    let (done_tx, done_rx) = channel::<usize>();
    let reader = rt.spawn(async move {
        let afd = AsyncFd::with_handle(r, weir::io::Interest::READABLE, &reactor0).unwrap();
        ready_tx.send(()).unwrap();
        let _ready = afd.readable().await.unwrap();
        done_tx
            .send(weir::runtime::worker_index().unwrap())
            .unwrap();
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let ticker = h.spawn_on(1, async {
        loop {
            weir::time::sleep(Duration::from_millis(1)).await;
        }
    });
    let (blocking_tx, blocking_rx) = channel::<()>();
    let blocker = h.spawn_on(0, async move {
        blocking_tx.send(()).unwrap();
        // Blocks worker 0's thread until the reader has run elsewhere (or 10 s pass).
        done_rx.recv_timeout(Duration::from_secs(10))
    });
    blocking_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    write_fd(&w, b"x").unwrap();
    let ran_on = rt.block_on(blocker).unwrap();
    assert_eq!(
        ran_on,
        Ok(1),
        "the reader ran on worker 1 while worker 0 was blocked"
    );
    rt.block_on(reader).unwrap();
    ticker.abort();
    let stats = rt.metrics().workers();
    assert!(stats[1].io_steals >= 1, "counted as an I/O steal");
    assert!(stats[0].reactor.events_stolen >= 1, "counted on the victim");
}

/// The monitor's rescue of a stuck worker: while worker 0 is stuck in one poll and worker 1
/// sleeps in its own reactor, a task waiting on an fd registered with worker 0's reactor runs
/// on worker 1 once the fd is ready — on every backend: epoll (the monitor collects worker 0's
/// events), mio and io_uring (it asks `poll(2)` about the fds tasks wait on, since only a
/// ring's own thread may reap it). The fd is registered before worker 0 gets stuck (armed in
/// its poller, most likely), and while it is stuck (on io_uring: still in the ring's inbox).
#[test]
fn a_stuck_workers_waiting_task_runs_on_a_sleeping_worker() {
    for backend in common::backends("a_stuck_workers_waiting_task_runs_on_a_sleeping_worker") {
        for register_while_stuck in [false, true] {
            stuck_worker_case(backend, register_while_stuck);
        }
    }
}

fn stuck_worker_case(backend: Backend, register_while_stuck: bool) {
    use std::sync::mpsc::channel;
    const LIMIT: Duration = Duration::from_secs(60);
    let what = format!("{backend:?}, registered while stuck: {register_while_stuck}");
    let rt = Builder::new_multi_thread()
        .backend(backend)
        .backend_strict(true)
        .workers(2)
        .build()
        .unwrap();
    let h = rt.handle().clone();
    let (r, w) = pipe();
    let reactor0 = h.worker_reactor(0).unwrap();
    let (registered_tx, registered_rx) = channel::<()>();
    let (done_tx, done_rx) = channel::<usize>();
    let reader = async move {
        let afd = AsyncFd::with_handle(r, weir::io::Interest::READABLE, &reactor0).unwrap();
        registered_tx.send(()).unwrap();
        let _ready = afd.readable().await.unwrap();
        // The blocker may have given up waiting (the assertion below then says so).
        let _ = done_tx.send(weir::runtime::worker_index().unwrap());
    };
    let mut reader = Some(reader);
    let mut spawned = None;
    if !register_while_stuck {
        spawned = Some(h.spawn_on(1, reader.take().unwrap()));
        registered_rx.recv_timeout(LIMIT).unwrap();
    }
    let (blocking_tx, blocking_rx) = channel::<()>();
    let blocker = h.spawn_on(0, async move {
        blocking_tx.send(()).unwrap();
        // Blocks worker 0's thread until the reader has run elsewhere (or LIMIT passes).
        done_rx.recv_timeout(LIMIT)
    });
    blocking_rx.recv_timeout(LIMIT).unwrap();
    if let Some(reader) = reader {
        spawned = Some(h.spawn_on(1, reader));
        registered_rx.recv_timeout(LIMIT).unwrap();
    }
    write_fd(&w, b"x").unwrap();
    let ran_on = rt.block_on(blocker).unwrap();
    assert_eq!(
        ran_on,
        Ok(1),
        "the reader ran on worker 1 while worker 0 was stuck ({what})"
    );
    rt.block_on(spawned.unwrap()).unwrap();
    let stats = rt.metrics().workers();
    assert!(
        stats[0].reactor.events_stolen >= 1,
        "counted on the stuck worker's reactor ({what}): {:?}",
        stats[0].reactor
    );
}
