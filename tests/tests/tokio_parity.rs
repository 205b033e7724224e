//! Behaviour a program ported from tokio relies on, found by running tokio's own integration
//! tests on weir: timers of a `block_on` future that wakes itself, shutdown while a worker
//! blocks in `block_in_place`, blocking work queued before shutdown, children waited for in
//! another runtime, the first tick of an interval, vectored file writes, `block_in_place` in a
//! current-thread `block_on`, `block_on` after shutdown, tokio's cooperative budget in weir
//! tasks (with and without the tokio compatibility runtime; every primitive in
//! `tokio_budget.rs`), and tokio's misuse messages and formats. Where weir differs on purpose
//! (see "Differences from tokio" in the crate docs), the test pins weir's behaviour.
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

/// The start of the panic of `block_in_place` on a current-thread runtime, tokio's words.
const TOKIO_BLOCKING_PANIC: &str =
    "can call blocking only when running on the multi-threaded runtime";

/// Runs `f`, which must panic with tokio's message for `block_in_place` on a current-thread
/// runtime followed by weir's advice.
#[track_caller]
fn assert_refuses_blocking<R>(f: impl FnOnce() -> R) {
    let payload = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(_) => panic!("block_in_place ran on a current-thread runtime"),
        Err(payload) => payload,
    };
    let msg = panic_message(payload);
    assert!(msg.starts_with(TOKIO_BLOCKING_PANIC), "{msg}");
    assert!(
        msg.contains("spawn_blocking"),
        "weir's advice follows: {msg}"
    );
}

/// tokio's `test_block_in_place1` (rt_threaded): `block_in_place` in the body of the test
/// macro's default flavour, current-thread, panics.
#[weir::test]
#[should_panic(expected = "can call blocking only when running on the multi-threaded runtime")]
async fn test_block_in_place1() {
    weir::task::block_in_place(|| {});
}

/// tokio's `test_block_in_place2`: the same on the multi-thread flavour runs the closure.
#[weir::test(flavor = "multi_thread")]
async fn test_block_in_place2() {
    weir::task::block_in_place(|| {});
}

/// tokio's `test_block_in_place3`: `#[main(flavor = "current_thread")]` panics.
#[should_panic(expected = "can call blocking only when running on the multi-threaded runtime")]
#[weir::main(flavor = "current_thread")]
#[test]
async fn test_block_in_place3() {
    weir::task::block_in_place(|| {});
}

/// tokio's `test_block_in_place4`: `#[main]` (multi-thread) runs the closure.
#[weir::main]
#[test]
async fn test_block_in_place4() {
    weir::task::block_in_place(|| {});
}

/// tokio's `no_block_in_current_thread_scheduler` (task_blocking).
#[weir::test(flavor = "current_thread")]
#[should_panic(expected = "can call blocking only when running on the multi-threaded runtime")]
async fn no_block_in_current_thread_scheduler() {
    weir::task::block_in_place(|| {});
}

/// tokio's `no_block_in_current_thread_block_on` (task_blocking), on every backend: an explicit
/// current-thread `Runtime::block_on` refuses too, and the runtime works afterwards.
#[test]
fn no_block_in_current_thread_block_on() {
    for backend in backends("no_block_in_current_thread_block_on") {
        let rt = build(Flavor::CurrentThread, backend);
        assert_refuses_blocking(|| rt.block_on(async { weir::task::block_in_place(|| {}) }));
        // In a task, too (tokio's `no_block_in_current_thread_scheduler` as a task).
        let in_task =
            rt.block_on(async { weir::spawn(async { weir::task::block_in_place(|| 9) }).await });
        let err = in_task.expect_err("a task of a current-thread runtime cannot block in place");
        assert_refuses_blocking(|| std::panic::resume_unwind(err.into_panic()));
        assert_eq!(
            rt.block_on(async { weir::spawn(async { 2 }).await.unwrap() }),
            2
        );
    }
}

/// tokio's `yes_block_in_threaded_block_on` (task_blocking): a multi-thread `Runtime::block_on`
/// runs the closure, on every backend.
#[test]
fn yes_block_in_threaded_block_on() {
    for backend in backends("yes_block_in_threaded_block_on") {
        let rt = build(Flavor::Workers(2), backend);
        assert_eq!(rt.block_on(async { weir::task::block_in_place(|| 7) }), 7);
    }
}

/// A `Handle::block_on`, which tokio lets block in place on either flavour, runs the closure on
/// a current-thread runtime too; so do a `Runtime::block_on` inside a multi-thread runtime's
/// `block_in_place` and a blocking-pool thread of a current-thread runtime.
#[test]
fn block_in_place_in_a_current_thread_handle_block_on_runs_the_closure() {
    let rt = build(Flavor::CurrentThread, Backend::Epoll);
    let handle = rt.handle().clone();
    let v = handle.block_on(async {
        weir::time::sleep(Duration::from_millis(1)).await;
        weir::task::block_in_place(|| 8)
    });
    assert_eq!(v, 8);
    let v = rt.block_on(async {
        weir::task::spawn_blocking(|| weir::task::block_in_place(|| 3))
            .await
            .unwrap()
    });
    assert_eq!(v, 3);
    let outer = build(Flavor::Workers(2), Backend::Epoll);
    let v = outer.block_on(async {
        weir::task::block_in_place(|| {
            let inner = build(Flavor::CurrentThread, Backend::Epoll);
            // Inside it, the current-thread `Runtime::block_on` refuses as ever.
            assert_refuses_blocking(|| inner.block_on(async { weir::task::block_in_place(|| {}) }));
            inner.block_on(async { 4 })
        })
    });
    assert_eq!(v, 4);
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

// --- tokio's cooperative budget without tokio compatibility -----------------------------------

/// Units of tokio's budget a weir task poll gets: tokio's 128 less the unit its refill takes
/// (see "Differences from tokio" in the crate docs).
const TOKIO_UNITS_PER_POLL: usize = 127;

/// The flavours the budget tests run on, on epoll (the budget does not depend on the backend;
/// `tokio_budget.rs` runs every primitive on io_uring too).
const FLAVORS: [Flavor; 3] = [
    Flavor::CurrentThread,
    Flavor::Workers(1),
    Flavor::Workers(4),
];

/// tokio's `coop` (rt_common): a `block_on` future looping on an always-ready `mpsc` receiver
/// sees `Pending` within 1 000 receives.
#[test]
fn coop_mpsc_receives_yield_in_block_on() {
    for flavor in FLAVORS {
        let rt = build(flavor, Backend::Epoll);
        rt.block_on(async {
            let (send, mut recv) = tokio::sync::mpsc::unbounded_channel();
            for _ in 0..1_000 {
                send.send(()).unwrap();
            }
            poll_fn(|cx| {
                for _ in 0..1_000 {
                    if recv.poll_recv(cx).is_pending() {
                        return Poll::Ready(());
                    }
                }
                panic!("{flavor:?}: did not yield");
            })
            .await;
        });
    }
}

/// tokio's `coop_and_block_in_place` (rt_threaded): after `block_in_place`, a task's receives
/// still spend the budget and yield before the channel is drained.
#[test]
fn coop_after_block_in_place() {
    let mut b = Builder::new_multi_thread();
    b.max_blocking_threads(1);
    let rt = b.build().unwrap();
    rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
        for _ in 0..1024 {
            tx.send(()).await.unwrap();
        }
        drop(tx);
        weir::spawn(async move {
            weir::task::block_in_place(|| {});
            poll_fn(|cx| {
                while let Poll::Ready(v) = pin!(rx.recv()).poll(cx) {
                    assert!(v.is_some(), "did not yield");
                }
                Poll::Ready(())
            })
            .await
        })
        .await
        .unwrap();
    });
}

/// tokio's `select_is_budget_aware` (macros_select), with weir's count: a `select!` whose
/// first branch spends a unit is ready for the budget of a poll, then `Pending`.
#[test]
fn select_is_budget_aware() {
    for flavor in FLAVORS {
        let rt = build(flavor, Backend::Epoll);
        rt.block_on(async {
            let task = || {
                Box::pin(async move {
                    tokio::select! {
                        biased;
                        () = tokio::task::coop::consume_budget() => {},
                        () = std::future::ready(()) => {}
                    }
                })
            };
            // A fresh poll of this future: `yield_now` returns after one.
            weir::task::yield_now().await;
            poll_fn(|cx| {
                for i in 0..TOKIO_UNITS_PER_POLL {
                    assert!(task().as_mut().poll(cx).is_ready(), "{flavor:?}: poll {i}");
                }
                assert!(
                    task().as_mut().poll(cx).is_pending(),
                    "{flavor:?}: budget spent"
                );
                Poll::Ready(())
            })
            .await;
        });
    }
}

/// tokio's `test_has_budget_remaining` (coop_budget), with weir's count: a poll's budget is
/// gone after its units are consumed, and weir's and tokio's `consume_budget` spend the same.
#[test]
fn consume_budget_spends_tokio_budget() {
    for flavor in FLAVORS {
        let rt = build(flavor, Backend::Epoll);
        rt.block_on(async {
            weir::task::yield_now().await;
            assert!(tokio::task::coop::has_budget_remaining());
            for i in 0..TOKIO_UNITS_PER_POLL {
                // Half of them weir's, half tokio's: one budget.
                if i % 2 == 0 {
                    weir::task::consume_budget().await;
                } else {
                    tokio::task::coop::consume_budget().await;
                }
            }
            assert!(!tokio::task::coop::has_budget_remaining(), "{flavor:?}");
            assert!(!weir::task::coop::has_budget_remaining(), "{flavor:?}");
        });
    }
}

/// tokio's `timeout_is_not_exhausted_by_future` (time_timeout), without tokio compatibility:
/// a weir `timeout` around a loop on `tokio::io::empty()` fires, in `block_on` and in a task.
#[test]
fn timeout_is_not_exhausted_by_future() {
    in_child_process("timeout_is_not_exhausted_by_future", || {
        for flavor in FLAVORS {
            let rt = build(flavor, Backend::Epoll);
            let looping = || {
                weir::time::timeout(Duration::from_millis(1), async {
                    use tokio::io::AsyncReadExt;
                    let mut buffer = [0u8; 1];
                    loop {
                        let _ = tokio::io::empty().read(&mut buffer).await;
                    }
                })
            };
            assert!(rt.block_on(looping()).is_err(), "{flavor:?}");
            let in_task = rt.block_on(async move { weir::spawn(looping()).await.unwrap() });
            assert!(in_task.is_err(), "{flavor:?}");
        }
    });
}

/// tokio's `join_set_coop` (task_join_set): joining many finished tasks with `now_or_never`
/// finds the budget spent at least once, and every task is joined.
#[test]
fn join_set_coop() {
    use futures::FutureExt;
    const TASK_NUM: u32 = 1000;
    let rt = build(Flavor::CurrentThread, Backend::Epoll);
    rt.block_on(async {
        let sem = Arc::new(tokio::sync::Semaphore::new(0));
        let mut set = weir::task::JoinSet::new();
        for _ in 0..TASK_NUM {
            let sem = sem.clone();
            set.spawn(async move { sem.add_permits(1) });
        }
        drop(sem.acquire_many(TASK_NUM).await.unwrap());
        let mut count = 0;
        let mut coop_count = 0;
        loop {
            match set.join_next().now_or_never() {
                Some(Some(Ok(()))) => {}
                Some(Some(Err(err))) => panic!("failed: {err}"),
                None => {
                    coop_count += 1;
                    weir::task::yield_now().await;
                    continue;
                }
                Some(None) => break,
            }
            count += 1;
        }
        assert!(coop_count >= 1);
        assert_eq!(count, TASK_NUM);
    });
}

// --- `Handle::block_on` and `block_in_place` (tokio's `yield_in_block_in_place`) -------------

/// A `Handle::block_on` nested in `block_in_place` inside a `Handle::block_on` runs on a
/// multi-thread runtime, and on any runtime after its shutdown; on a running current-thread
/// runtime, whose outer `block_on` drives the runtime on this thread, it is refused with
/// tokio's panic for a nested runtime (where tokio's, which does not drive the runtime, runs).
#[test]
fn yield_in_block_in_place() {
    let nested = || {
        weir::runtime::Handle::current().block_on(async {
            weir::task::block_in_place(|| {
                weir::runtime::Handle::current().block_on(weir::task::yield_now());
            });
        });
    };
    for flavor in [
        Flavor::CurrentThread,
        Flavor::Workers(1),
        Flavor::Workers(4),
    ] {
        let rt = build(flavor, Backend::Epoll);
        let enter = rt.enter();
        let running = std::panic::catch_unwind(nested);
        match flavor {
            Flavor::CurrentThread => {
                let msg = panic_message(running.expect_err("refused on a running current-thread"));
                assert!(
                    msg.contains("Cannot start a runtime from within a runtime."),
                    "{msg}"
                );
            }
            Flavor::Workers(_) => running.unwrap(),
        }
        drop(enter);
        let handle = rt.handle().clone();
        rt.shutdown_timeout(Duration::from_secs(30));
        let _enter = handle.enter();
        nested();
    }
}

// --- files after shutdown, `try_exists`, `Debug` ----------------------------------------------

/// tokio's `fs_shutdown_before_started` (rt_handle_block_on): a file operation after the
/// runtime shut down fails with `Other` and tokio's message, "background task failed".
#[test]
fn fs_after_shutdown_fails_with_tokios_error() {
    for flavor in FLAVORS {
        let rt = build(flavor, Backend::Epoll);
        let handle = rt.handle().clone();
        rt.shutdown_timeout(Duration::from_secs(30));
        let err = handle
            .block_on(weir::fs::read_to_string("Cargo.toml"))
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::Other, "{flavor:?}");
        let inner = err.get_ref().expect("an inner error");
        assert_eq!(inner.to_string(), "background task failed", "{flavor:?}");
    }
}

/// `fs::try_exists` answers what `Path::try_exists` answers, as tokio's does, for a file in a
/// directory the process may not search (an unprivileged process gets `PermissionDenied`; root,
/// whom permission bits do not stop, gets `true` — tokio's test expects the former).
#[test]
fn try_exists_is_path_try_exists() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("weir-parity-exists-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("baz")).unwrap();
    let file = dir.join("baz").join("baz.txt");
    std::fs::write(&file, b"Hello File!").unwrap();
    std::fs::set_permissions(dir.join("baz"), std::fs::Permissions::from_mode(0o244)).unwrap();
    let rt = build(Flavor::CurrentThread, Backend::Epoll);
    let weir_says = rt.block_on(weir::fs::try_exists(file.clone()));
    let std_says = file.try_exists();
    std::fs::set_permissions(dir.join("baz"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    match (weir_says, std_says) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(a), Err(b)) => assert_eq!(a.kind(), b.kind()),
        (a, b) => panic!("weir: {a:?}, std: {b:?}"),
    }
}

/// tokio's `file_debug_fmt` (fs_file) with weir's type name, and tokio's `JoinError` format
/// (`test_join_error_debug`, task_abort).
#[test]
fn debug_formats_are_tokios() {
    let rt = build(Flavor::CurrentThread, Backend::Epoll);
    rt.block_on(async {
        let file = weir::fs::File::open("Cargo.toml").await.unwrap();
        let s = format!("{file:?}");
        assert!(s.starts_with("weir::fs::File { std: File { fd:"), "{s}");

        let err = weir::spawn(async move {
            let value = 1234;
            panic!("Format-args payload: {value}")
        })
        .await
        .unwrap_err();
        let s = format!("{err:?}");
        assert!(
            s.starts_with("JoinError::Panic(Id(")
                && s.ends_with("), \"Format-args payload: 1234\", ...)"),
            "{s}"
        );
        let err = weir::spawn(async move { panic!("Const payload") })
            .await
            .unwrap_err();
        let s = format!("{err:?}");
        assert!(
            s.starts_with("JoinError::Panic(Id(") && s.ends_with("), \"Const payload\", ...)"),
            "{s}"
        );
        let err = weir::spawn(async move { std::panic::panic_any(1234i32) })
            .await
            .unwrap_err();
        let s = format!("{err:?}");
        assert!(
            s.starts_with("JoinError::Panic(Id(") && s.ends_with("), ...)"),
            "{s}"
        );
        let h = weir::spawn(std::future::pending::<()>());
        h.abort();
        let s = format!("{:?}", h.await.unwrap_err());
        assert!(
            s.starts_with("JoinError::Cancelled(Id(") && s.ends_with("))"),
            "{s}"
        );
    });
}

// --- `UnixStream::connect` to a listener that closes (tokio's `epollhup`) ---------------------

/// weir's connect completes once `connect(2)` did, without waiting for a readiness event: a
/// listener closed before accepting makes the first read fail with `ConnectionReset` (tokio's
/// connect, which waits to be writable first, fails itself).
#[test]
fn unix_connect_then_listener_closes() {
    let rt = build(Flavor::CurrentThread, Backend::Epoll);
    rt.block_on(async {
        use futures::io::AsyncReadExt;
        let dir = std::env::temp_dir().join(format!("weir-parity-hup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("connect.sock");
        let _ = std::fs::remove_file(&path);
        let listener = weir::net::UnixListener::bind(&path).unwrap();
        let mut stream = weir::net::UnixStream::connect(&path).await.unwrap();
        drop(listener);
        let mut buf = [0u8; 4];
        let err = stream.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
        let _ = std::fs::remove_dir_all(&dir);
    });
}

// --- misuse: tokio's messages -----------------------------------------------------------------

/// tokio's `nesting` (rt_handle_block_on): `block_on` inside `block_on`.
#[test]
#[should_panic(
    expected = "Cannot start a runtime from within a runtime. This happens because a function (like `block_on`) attempted to block the current thread while the thread is being used to drive asynchronous tasks."
)]
fn nested_block_on_panics_with_tokios_message() {
    let rt = build(Flavor::CurrentThread, Backend::Epoll);
    rt.block_on(async { weir::runtime::Handle::current().block_on(async {}) });
}

/// tokio's `useful_panic_message_when_dropping_rt_in_rt` (task_blocking): the payload is a
/// `&'static str` with tokio's sentence.
#[test]
fn dropping_a_runtime_in_a_runtime_panics_with_tokios_message() {
    let outer = build(Flavor::Workers(1), Backend::Epoll);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        outer.block_on(async {
            let _ = Builder::new_current_thread().build().unwrap();
        });
    }));
    let err = result.unwrap_err();
    let err: &'static str = err.downcast_ref::<&'static str>().unwrap();
    assert!(
        err.contains("Cannot drop a runtime"),
        "Wrong panic message: {err:?}"
    );
}

/// tokio's `test_spawn_local_in_multi_thread_runtime` (rt_local), where weir panics too: in a
/// multi-thread runtime's `block_on` future, which runs on no worker.
#[test]
#[should_panic = "`spawn_local` called from outside of a `task::LocalSet` or `runtime::LocalRuntime`"]
fn spawn_local_off_the_workers_panics_with_tokios_message() {
    let rt = build(Flavor::Workers(1), Backend::Epoll);
    rt.block_on(async move {
        drop(weir::task::spawn_local(async {}));
    })
}

/// tokio's `assert_usage` (uds_socket): the wrong kind of `UnixSocket` for the conversion.
#[test]
fn unix_socket_misuse_errors_are_tokios() {
    let rt = build(Flavor::CurrentThread, Backend::Epoll);
    rt.block_on(async {
        use weir::net::UnixSocket;
        let result = UnixSocket::new_datagram()
            .unwrap()
            .connect(std::path::PathBuf::new().join("invalid.sock"))
            .await;
        assert_eq!(
            result.unwrap_err().to_string(),
            "connect cannot be called on a datagram socket"
        );
        let result = UnixSocket::new_datagram().unwrap().listen(1024);
        assert_eq!(
            result.unwrap_err().to_string(),
            "listen cannot be called on a datagram socket"
        );
        let result = UnixSocket::new_stream().unwrap().datagram();
        assert_eq!(
            result.unwrap_err().to_string(),
            "datagram cannot be called on a stream socket"
        );
    });
}

// --- `yield_now` and the reactor --------------------------------------------------------------

/// weir's `yield_now` puts the task at the back of its worker's queue without turning the
/// reactor first (tokio's waits for a driver turn): a task looping on `yield_now` still lets
/// ready I/O through within the worker's `event_interval` polls.
#[test]
fn yield_now_loop_lets_io_through_within_event_interval() {
    const EVENT_INTERVAL: u32 = 61;
    for flavor in [Flavor::CurrentThread, Flavor::Workers(1)] {
        let mut b = builder(flavor);
        b.event_interval(EVENT_INTERVAL);
        let rt = b.build().unwrap();
        let yields_before_read = rt.block_on(async {
            weir::spawn(async {
                let (mut a, b) = weir::net::UnixStream::pair().unwrap();
                let yields = Arc::new(std::sync::atomic::AtomicU64::new(0));
                let y = yields.clone();
                let reader = weir::task::spawn_local(async move {
                    use futures::io::AsyncReadExt;
                    let mut buf = [0u8; 1];
                    a.read_exact(&mut buf).await.unwrap();
                    y.load(Ordering::SeqCst)
                });
                // The reader waits for readability first.
                weir::task::yield_now().await;
                b.writable().await.unwrap();
                b.try_write(b"x").unwrap();
                let written_at = yields.load(Ordering::SeqCst);
                while !reader.is_finished() {
                    weir::task::yield_now().await;
                    yields.fetch_add(1, Ordering::SeqCst);
                }
                reader.await.unwrap() - written_at
            })
            .await
            .unwrap()
        });
        assert!(
            yields_before_read <= u64::from(EVENT_INTERVAL) + 2,
            "{flavor:?}: the read waited {yields_before_read} yields"
        );
    }
}
