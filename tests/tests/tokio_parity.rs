//! Behaviour a program ported from tokio relies on, found by running tokio's own integration
//! tests on weir: timers of a `block_on` future that wakes itself, shutdown while a worker
//! blocks in `block_in_place`, blocking work queued before shutdown, children waited for in
//! another runtime, the first tick of an interval, vectored file writes, `block_in_place` in a
//! current-thread `block_on`, `block_on` after shutdown, and tokio's cooperative budget in weir
//! tasks (with the tokio compatibility runtime).
//!
//! Tests that hang when the behaviour breaks run in a child process with a time limit, so that
//! they fail instead.

mod common;

use std::future::{Future, poll_fn};
use std::io::IoSlice;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::Duration;

use common::{Flavor, backends, build, builder, in_child, panic_message, run_in_child};
use weir::runtime::{Backend, Builder};

/// How long a child test may run before it counts as hung.
const HANG: Duration = Duration::from_secs(60);

/// Runs `body` in a child process (see [`run_in_child`]) unless this is that child.
fn in_child_process(name: &str, body: impl FnOnce()) {
    if in_child(name) {
        body();
    } else {
        run_in_child(name, HANG);
    }
}

// --- a `block_on` future that wakes itself ---------------------------------------------------

/// A root future that wakes itself on every poll while its sleep is pending still sees the
/// sleep fire: the caller's reactor is polled between the polls of the future.
#[test]
fn block_on_future_that_wakes_itself_sees_its_timer() {
    in_child_process("block_on_future_that_wakes_itself_sees_its_timer", || {
        for backend in backends("block_on_future_that_wakes_itself_sees_its_timer") {
            for flavor in [
                Flavor::CurrentThread,
                Flavor::Workers(1),
                Flavor::Workers(2),
            ] {
                let rt = build(flavor, backend);
                let polls = rt.block_on(async {
                    let mut sleep = pin!(weir::time::sleep(Duration::from_millis(10)));
                    let mut polls = 0u64;
                    poll_fn(|cx| {
                        polls += 1;
                        if sleep.as_mut().poll(cx).is_ready() {
                            return Poll::Ready(());
                        }
                        cx.waker().wake_by_ref();
                        Poll::Pending
                    })
                    .await;
                    polls
                });
                assert!(
                    polls > 1,
                    "{flavor:?} {backend:?}: the sleep cannot fire at once"
                );
            }
        }
    });
}

// --- shutdown while a worker blocks in `block_in_place` --------------------------------------

/// A task blocked in `block_in_place` waits for a channel that closes only when another task
/// is dropped: shutting the runtime down drops that task, so the blocked worker returns and
/// the shutdown completes.
#[test]
fn shutdown_drops_tasks_a_block_in_place_waits_for() {
    in_child_process("shutdown_drops_tasks_a_block_in_place_waits_for", || {
        for backend in backends("shutdown_drops_tasks_a_block_in_place_waits_for") {
            for workers in [1, 2] {
                for timeout in [None, Some(Duration::from_secs(30))] {
                    let rt = build(Flavor::Workers(workers), backend);
                    let (tx, rx) = std::sync::mpsc::channel::<()>();
                    let (started_tx, started_rx) = std::sync::mpsc::channel();
                    let closed = Arc::new(AtomicBool::new(false));
                    rt.spawn(async move {
                        let _tx = tx;
                        std::future::pending::<()>().await;
                    });
                    let closed2 = closed.clone();
                    rt.spawn(async move {
                        weir::task::block_in_place(|| {
                            started_tx.send(()).unwrap();
                            // Err: every sender is gone.
                            assert!(rx.recv().is_err());
                            closed2.store(true, Ordering::SeqCst);
                        });
                    });
                    started_rx.recv().unwrap();
                    match timeout {
                        None => drop(rt),
                        Some(t) => rt.shutdown_timeout(t),
                    }
                    assert!(
                        closed.load(Ordering::SeqCst),
                        "{backend:?}, {workers} workers, {timeout:?}: the blocked closure returned"
                    );
                }
            }
        }
    });
}

// --- blocking work queued before shutdown ----------------------------------------------------

/// A `spawn_blocking` closure still queued when the runtime shuts down runs, and its handle
/// yields its value, as with tokio (bounded by the shutdown's timeout).
#[test]
fn spawn_blocking_queued_before_shutdown_runs() {
    in_child_process("spawn_blocking_queued_before_shutdown_runs", || {
        for flavor in [Flavor::CurrentThread, Flavor::Workers(1)] {
            for timeout in [None, Some(Duration::from_secs(30))] {
                let mut b = builder(flavor);
                b.max_blocking_threads(1);
                let rt = b.build().unwrap();
                let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
                let (started_tx, started_rx) = std::sync::mpsc::channel();
                // Dropped, with the gate's sender, when shutdown drops the tasks.
                rt.spawn(async move {
                    let _gate = gate_tx;
                    std::future::pending::<()>().await;
                });
                let first = rt.spawn_blocking(move || {
                    started_tx.send(()).unwrap();
                    let _ = gate_rx.recv();
                    1
                });
                started_rx.recv().unwrap();
                // The pool's one thread is busy: this one waits in the queue.
                let queued = rt.spawn_blocking(|| 2);
                match timeout {
                    None => drop(rt),
                    Some(t) => rt.shutdown_timeout(t),
                }
                let first = futures::executor::block_on(first);
                let queued = futures::executor::block_on(queued);
                assert_eq!(first.unwrap(), 1, "{flavor:?} {timeout:?}");
                assert_eq!(
                    queued.expect("the queued closure ran"),
                    2,
                    "{flavor:?} {timeout:?}"
                );
            }
        }
    });
}

/// Work queued behind a closure that outlives the shutdown's timeout is cancelled once the
/// timeout passes: shutdown does not wait longer than asked.
#[test]
fn spawn_blocking_queued_behind_a_stuck_closure_is_cancelled_at_the_timeout() {
    let mut b = Builder::new_multi_thread();
    b.workers(1).max_blocking_threads(1);
    let rt = b.build().unwrap();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let stuck = rt.spawn_blocking(move || {
        started_tx.send(()).unwrap();
        let _ = release_rx.recv();
    });
    started_rx.recv().unwrap();
    let queued = rt.spawn_blocking(|| 2);
    rt.shutdown_timeout(Duration::from_millis(50));
    let err = futures::executor::block_on(queued).expect_err("cancelled at the timeout");
    assert!(err.is_cancelled(), "{err}");
    release_tx.send(()).unwrap();
    futures::executor::block_on(stuck).unwrap();
}

// --- a child waited for in another runtime ---------------------------------------------------

/// A child spawned in a runtime that has been dropped can be waited for in another runtime,
/// or outside any: its exit is watched where it is waited for.
#[test]
fn child_is_waited_for_in_another_runtime() {
    use std::process::Stdio;
    use weir::process::Command;

    for backend in backends("child_is_waited_for_in_another_runtime") {
        for (first, second) in [
            (Flavor::Workers(1), Flavor::CurrentThread),
            (Flavor::CurrentThread, Flavor::Workers(2)),
        ] {
            let rt = build(first, backend);
            let (exited, mut running) = rt.block_on(async {
                let exited = Command::new("true").spawn().unwrap();
                let running = Command::new("cat")
                    .stdin(Stdio::piped())
                    .stdout(Stdio::null())
                    .spawn()
                    .unwrap();
                (exited, running)
            });
            drop(rt);
            let rt = build(second, backend);
            let status = rt.block_on(async move {
                let mut exited = exited;
                assert!(exited.wait().await.unwrap().success());
                // Still running: its end of file closes its input.
                drop(running.stdin.take());
                running.wait().await.unwrap()
            });
            assert!(status.success(), "{first:?} then {second:?} on {backend:?}");
        }
    }
    // Outside any runtime.
    let rt = build(Flavor::Workers(1), Backend::Epoll);
    let mut child = rt.block_on(async { Command::new("true").spawn().unwrap() });
    drop(rt);
    let status = futures::executor::block_on(child.wait()).unwrap();
    assert!(status.success());
}

// --- the first tick of an interval -----------------------------------------------------------

rt_test! {
    /// A new interval's first tick, and a sleep whose deadline is now, are ready at the first
    /// poll, whatever the period.
    fn deadline_at_now_is_ready_at_the_first_poll(rt) {
        rt.block_on(async {
            for period in [Duration::from_millis(1), Duration::from_secs(3600)] {
                let mut iv = weir::time::interval(period);
                let first = poll_fn(|cx| Poll::Ready(iv.poll_tick(cx).is_ready())).await;
                assert!(first, "period {period:?}: the first tick is immediate");
            }
            let mut now = pin!(weir::time::sleep_until(weir::time::Instant::now()));
            assert!(poll_fn(|cx| Poll::Ready(now.as_mut().poll(cx).is_ready())).await);
            let mut zero = pin!(weir::time::sleep(Duration::ZERO));
            assert!(poll_fn(|cx| Poll::Ready(zero.as_mut().poll(cx).is_ready())).await);
        });
    }
}

// --- vectored writes to a file ---------------------------------------------------------------

rt_test! {
    /// `poll_write_vectored` on a `File` takes every slice, through both trait families.
    fn file_write_vectored_writes_every_slice(rt) {
        rt.block_on(async {
            let path = std::env::temp_dir().join(format!(
                "weir-parity-vectored-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let parts: [&[u8]; 3] = [b"hello ", b"vectored ", b"world"];
            let all = parts.concat();
            {
                use futures::io::AsyncWriteExt;
                let mut f = weir::fs::File::create(&path).await.unwrap();
                let slices = parts.map(IoSlice::new);
                let n = f.write_vectored(&slices).await.unwrap();
                assert_eq!(n, all.len(), "futures-io: every slice taken");
                f.flush().await.unwrap();
            }
            assert_eq!(std::fs::read(&path).unwrap(), all);
            {
                use tokio::io::AsyncWriteExt;
                let mut f = weir::fs::File::create(&path).await.unwrap();
                assert!(tokio::io::AsyncWrite::is_write_vectored(&f));
                let slices = parts.map(IoSlice::new);
                let n = f.write_vectored(&slices).await.unwrap();
                assert_eq!(n, all.len(), "tokio-io: every slice taken");
                f.flush().await.unwrap();
            }
            assert_eq!(std::fs::read(&path).unwrap(), all);
            let _ = std::fs::remove_file(&path);
        });
    }
}

// --- `block_in_place` in a current-thread `block_on` -----------------------------------------

/// `block_in_place` in the future of a current-thread runtime's `block_on` (through the
/// runtime or a handle) runs the closure; in a task of that runtime it still panics.
#[test]
fn block_in_place_in_current_thread_block_on_runs_the_closure() {
    let rt = build(Flavor::CurrentThread, Backend::Epoll);
    assert_eq!(rt.block_on(async { weir::task::block_in_place(|| 7) }), 7);
    let handle = rt.handle().clone();
    let v = handle.block_on(async {
        weir::time::sleep(Duration::from_millis(1)).await;
        weir::task::block_in_place(|| 8)
    });
    assert_eq!(v, 8);
    let in_task =
        rt.block_on(async { weir::spawn(async { weir::task::block_in_place(|| 9) }).await });
    let err = in_task.expect_err("a task of a current-thread runtime cannot block in place");
    assert!(
        panic_message(err.into_panic()).contains("current-thread"),
        "the panic names the reason"
    );
}

// --- `block_on` after shutdown ---------------------------------------------------------------

/// After `shutdown_timeout`, a handle's `block_on` still runs a future that needs no timer,
/// but a timer armed there panics with a message that says the runtime shut down (as tokio
/// does), instead of completing on a runtime that no longer runs.
#[test]
fn block_on_after_shutdown_refuses_timers() {
    for flavor in [Flavor::CurrentThread, Flavor::Workers(2)] {
        let rt = build(flavor, Backend::Epoll);
        let handle = rt.handle().clone();
        rt.shutdown_timeout(Duration::from_secs(5));
        assert_eq!(handle.block_on(async { 5 }), 5, "{flavor:?}");
        // A deadline far enough away that the first poll must arm the timer: a short one can
        // pass before that poll on a loaded machine, and an elapsed sleep arms nothing.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            handle.block_on(weir::time::sleep(Duration::from_secs(3600)));
        }));
        let msg = panic_message(r.expect_err("a timer after shutdown panics"));
        assert!(msg.contains("shut down"), "{flavor:?}: {msg}");
    }
}

// --- tokio's cooperative budget in weir tasks ------------------------------------------------

/// How a looping task spends tokio's budget.
#[derive(Clone, Copy, Debug)]
enum Spend {
    /// `recv` on a `tokio::sync::mpsc` channel that always holds a message.
    Mpsc,
    /// The same `recv` as a branch of `tokio::select!`, beside a branch that never completes.
    Select,
    /// Reads from `tokio::io::empty()`, which is always ready.
    IoEmpty,
}

/// A task that loops on an always-ready tokio primitive, until a timer task of the same
/// worker has run. It ends only if tokio's budget makes it yield, as on tokio.
fn tokio_budget_loop(rt: &weir::runtime::Runtime, spend: Spend) {
    rt.block_on(async move {
        let fired = Arc::new(AtomicBool::new(false));
        let fired2 = fired.clone();
        let looping = weir::spawn(async move {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u8>();
            let mut empty = tokio::io::empty();
            let mut buf = [0u8; 8];
            let mut rounds = 0u64;
            while !fired2.load(Ordering::SeqCst) {
                match spend {
                    Spend::Mpsc => {
                        tx.send(1).unwrap();
                        rx.recv().await.unwrap();
                    }
                    Spend::Select => {
                        tx.send(1).unwrap();
                        tokio::select! {
                            v = rx.recv() => { v.unwrap(); }
                            () = std::future::pending::<()>() => {}
                        }
                    }
                    Spend::IoEmpty => {
                        use tokio::io::AsyncReadExt;
                        assert_eq!(empty.read(&mut buf).await.unwrap(), 0);
                    }
                }
                rounds += 1;
            }
            rounds
        });
        let timer = weir::spawn(async move {
            weir::time::sleep(Duration::from_millis(1)).await;
            fired.store(true, Ordering::SeqCst);
        });
        timer.await.unwrap();
        assert!(looping.await.unwrap() > 0, "{spend:?}");
    });
}

const SPENDS: [Spend; 3] = [Spend::Mpsc, Spend::Select, Spend::IoEmpty];

/// With a tokio runtime in every worker (`tokio_compat`), on one worker and on a current-thread
/// runtime, on epoll and mio.
#[test]
fn tokio_budget_makes_a_weir_task_yield_with_tokio_compat() {
    in_child_process(
        "tokio_budget_makes_a_weir_task_yield_with_tokio_compat",
        || {
            let mut runs = vec![
                (Flavor::CurrentThread, Backend::Epoll),
                (Flavor::Workers(1), Backend::Epoll),
                (Flavor::Workers(1), Backend::Mio),
            ];
            // io_uring runs tokio beside the workers (its ring cannot be waited on inside tokio).
            if common::uring_unavailable().is_none() {
                runs.push((Flavor::Workers(1), Backend::IoUring));
            }
            for (flavor, backend) in runs {
                let mut b = builder(flavor);
                b.tokio_compat(true).backend(backend);
                let rt = b.build().unwrap();
                for spend in SPENDS {
                    tokio_budget_loop(&rt, spend);
                }
            }
        },
    );
}

/// With the tokio runtime beside the workers (`tokio_compat_threads`), whose workers do not
/// run inside tokio.
#[test]
fn tokio_budget_makes_a_weir_task_yield_with_tokio_compat_threads() {
    in_child_process(
        "tokio_budget_makes_a_weir_task_yield_with_tokio_compat_threads",
        || {
            let mut b = Builder::new_multi_thread();
            b.workers(1).tokio_compat_threads(1);
            let rt = b.build().unwrap();
            for spend in SPENDS {
                tokio_budget_loop(&rt, spend);
            }
        },
    );
}

/// Each poll of a weir task starts with a full tokio budget of its own, as a tokio task's
/// does: a task that spent all of it does not leave the next task of its worker without one.
#[test]
fn each_weir_task_poll_gets_a_full_tokio_budget() {
    for flavor in [Flavor::CurrentThread, Flavor::Workers(1)] {
        let mut b = builder(flavor);
        b.tokio_compat(true);
        let rt = b.build().unwrap();
        rt.block_on(async {
            weir::spawn(async move {
                for round in 0..20 {
                    // Spends tokio's budget on an always-ready channel until it runs out.
                    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u8>();
                    let mut spent = 0usize;
                    let next = poll_fn(|cx| {
                        loop {
                            tx.send(1).unwrap();
                            match rx.poll_recv(cx) {
                                Poll::Ready(_) => spent += 1,
                                Poll::Pending => break,
                            }
                            assert!(spent <= 128, "round {round}: tokio's budget is 128 at most");
                        }
                        // Runs next on this worker, while this task waits for tokio's wake.
                        Poll::Ready(weir::spawn(async {
                            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u8>();
                            tx.send(1).unwrap();
                            poll_fn(|cx| Poll::Ready(rx.poll_recv(cx).is_ready())).await
                        }))
                    })
                    .await;
                    assert!(spent > 0, "round {round}");
                    assert!(
                        next.await.unwrap(),
                        "{flavor:?}, round {round}: the next task's first tokio operation is ready"
                    );
                }
            })
            .await
            .unwrap();
        });
    }
}

/// The future of `block_on` gets tokio's budget too: looping on an always-ready tokio channel
/// in a `tokio::select!` beside a weir sleep, it yields, and the sleep fires.
#[test]
fn block_on_future_looping_on_a_tokio_channel_sees_its_timer() {
    in_child_process(
        "block_on_future_looping_on_a_tokio_channel_sees_its_timer",
        || {
            for flavor in [Flavor::CurrentThread, Flavor::Workers(1)] {
                let mut b = builder(flavor);
                b.tokio_compat(true);
                let rt = b.build().unwrap();
                let rounds = rt.block_on(async {
                    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u8>();
                    // One round before the timer exists: on a loaded machine the 1 ms could
                    // pass before the select's first poll, and the count would stay at zero.
                    // (The sleep must stay the first branch: `select!` returns Pending without
                    // polling any branch once the budget is spent, so a channel branch first
                    // would never let the sleep be polled.) What is asserted is that the loop
                    // ends.
                    tx.send(1).unwrap();
                    rx.recv().await.unwrap();
                    let mut rounds = 1u64;
                    let mut sleep = pin!(weir::time::sleep(Duration::from_millis(1)));
                    loop {
                        tx.send(1).unwrap();
                        tokio::select! {
                            biased;
                            () = &mut sleep => break rounds,
                            v = rx.recv() => { v.unwrap(); }
                        }
                        rounds += 1;
                    }
                });
                assert!(rounds > 0, "{flavor:?}");
            }
        },
    );
}

/// A weir `timeout` around a future that loops on `tokio::io::empty()` fires (the future
/// yields through tokio's budget, and the timeout's own timer is checked after it).
#[test]
fn timeout_is_not_exhausted_by_a_tokio_io_loop() {
    in_child_process("timeout_is_not_exhausted_by_a_tokio_io_loop", || {
        for flavor in [Flavor::CurrentThread, Flavor::Workers(1)] {
            let mut b = builder(flavor);
            b.tokio_compat(true);
            let rt = b.build().unwrap();
            let r = rt.block_on(async {
                weir::spawn(weir::time::timeout(Duration::from_millis(1), async {
                    use tokio::io::AsyncReadExt;
                    let mut empty = tokio::io::empty();
                    let mut buf = [0u8; 1];
                    loop {
                        let _ = empty.read(&mut buf).await;
                    }
                }))
                .await
                .unwrap()
            });
            assert!(r.is_err(), "{flavor:?}: the timeout fired");
        }
    });
}
