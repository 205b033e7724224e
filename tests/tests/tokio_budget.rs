//! tokio's cooperative budget in weir's tasks, without tokio compatibility: a task looping on
//! an always-ready tokio primitive yields once the budget is spent, so a sleeping sibling
//! task on the same worker runs when its timer is due — on the current-thread runtime and on
//! a worker of a multi-thread runtime, on epoll and io_uring, and inside a worker's tokio
//! runtime (tokio compatibility) too.
//!
//! Counted, never timed: the busy loop counts its iterations, notes the iteration at which it
//! first saw the sibling's deadline pass, and the sibling notes the count when it runs. After
//! the deadline, the worker polls its reactor (which fires the timer) within
//! [`EVENT_INTERVAL`] task polls, each of at most one budget of iterations, and the sibling
//! runs within the next two polls: about `(EVENT_INTERVAL + 3) × 128` iterations, however
//! slow the machine; the test allows twice that, so that a change in the order in which a
//! worker picks its tasks does not fail it. Without the budget the loop never yields and the
//! sibling never runs: the loop gives up after a hundred times that bound and the test fails.

mod common;

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use common::{Flavor, builder, skip, uring_unavailable};
use weir::runtime::{Backend, Runtime};

/// Task polls between two polls of a busy worker's reactor (set on every runtime here).
const EVENT_INTERVAL: u32 = 61;

/// tokio's budget per task poll.
const BUDGET: u64 = 128;

/// Iterations of the loop after the deadline within which the sibling must have run.
const BOUND: u64 = 2 * (EVENT_INTERVAL as u64 + 3) * BUDGET;

/// Iterations after the deadline at which the loop gives up (the budget did not work).
const GIVE_UP: u64 = 100 * BOUND;

/// What the busy task loops on: each iteration one operation that tokio completes at once.
#[derive(Clone, Copy, Debug)]
enum Primitive {
    /// `recv` on a `tokio::sync::mpsc` channel that always holds a message.
    Mpsc,
    /// `recv` on a `tokio::sync::broadcast` channel that always holds a message.
    Broadcast,
    /// `changed` on a `tokio::sync::watch` receiver whose value always changed.
    Watch,
    /// `notified` on a `tokio::sync::Notify` that always holds a permit, in
    /// `tokio::task::coop::cooperative` (tokio's `Notified` spends no budget by itself, on
    /// tokio either).
    Notify,
    /// `acquire` on a `tokio::sync::Semaphore` with permits left.
    Semaphore,
    /// A read from `tokio::io::empty()`.
    Empty,
    /// A read from `tokio::io::repeat()`.
    Repeat,
    /// A `tokio::select!` over two always-ready `mpsc` receivers.
    Select,
}

/// A `Primitive` set up for looping.
enum Looping {
    Mpsc(
        tokio::sync::mpsc::UnboundedSender<u64>,
        tokio::sync::mpsc::UnboundedReceiver<u64>,
    ),
    Broadcast(
        tokio::sync::broadcast::Sender<u64>,
        tokio::sync::broadcast::Receiver<u64>,
    ),
    Watch(
        tokio::sync::watch::Sender<u64>,
        tokio::sync::watch::Receiver<u64>,
    ),
    Notify(tokio::sync::Notify),
    Semaphore(tokio::sync::Semaphore),
    Empty(tokio::io::Empty),
    Repeat(tokio::io::Repeat),
    Select(
        [tokio::sync::mpsc::UnboundedSender<u64>; 2],
        [tokio::sync::mpsc::UnboundedReceiver<u64>; 2],
    ),
}

impl Primitive {
    fn start(self) -> Looping {
        use tokio::sync::{broadcast, mpsc, watch};
        match self {
            Primitive::Mpsc => {
                let (tx, rx) = mpsc::unbounded_channel();
                Looping::Mpsc(tx, rx)
            }
            Primitive::Broadcast => {
                let (tx, rx) = broadcast::channel(4);
                Looping::Broadcast(tx, rx)
            }
            Primitive::Watch => {
                let (tx, rx) = watch::channel(0);
                Looping::Watch(tx, rx)
            }
            Primitive::Notify => Looping::Notify(tokio::sync::Notify::new()),
            Primitive::Semaphore => Looping::Semaphore(tokio::sync::Semaphore::new(1)),
            Primitive::Empty => Looping::Empty(tokio::io::empty()),
            Primitive::Repeat => Looping::Repeat(tokio::io::repeat(7)),
            Primitive::Select => {
                let (a, ra) = mpsc::unbounded_channel();
                let (b, rb) = mpsc::unbounded_channel();
                Looping::Select([a, b], [ra, rb])
            }
        }
    }
}

impl Looping {
    /// One iteration: makes the primitive ready, then awaits it.
    async fn step(&mut self, i: u64) {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 8];
        match self {
            Looping::Mpsc(tx, rx) => {
                tx.send(i).unwrap();
                assert_eq!(rx.recv().await, Some(i));
            }
            Looping::Broadcast(tx, rx) => {
                tx.send(i).unwrap();
                assert_eq!(rx.recv().await.unwrap(), i);
            }
            Looping::Watch(tx, rx) => {
                tx.send(i).unwrap();
                rx.changed().await.unwrap();
            }
            Looping::Notify(n) => {
                n.notify_one();
                tokio::task::coop::cooperative(n.notified()).await;
            }
            Looping::Semaphore(s) => drop(s.acquire().await.unwrap()),
            Looping::Empty(e) => assert_eq!(e.read(&mut buf).await.unwrap(), 0),
            Looping::Repeat(r) => assert_eq!(r.read(&mut buf).await.unwrap(), 8),
            Looping::Select(txs, [ra, rb]) => {
                for (tx, rx) in txs.iter().zip([&*ra, &*rb]) {
                    if rx.is_empty() {
                        tx.send(i).unwrap();
                    }
                }
                tokio::select! {
                    v = ra.recv() => assert!(v.is_some()),
                    v = rb.recv() => assert!(v.is_some()),
                }
            }
        }
    }
}

/// Where a run happens.
#[derive(Clone, Copy, Debug)]
struct Setup {
    flavor: Flavor,
    backend: Backend,
    /// With a tokio runtime inside each worker (`Builder::tokio_compat`).
    tokio_compat: bool,
}

/// The runtimes every primitive runs on: current-thread and two workers (both tasks pinned to
/// one of them with `spawn_local`), on epoll and io_uring (skipped, with the reason printed,
/// where the kernel refuses it), and on epoll inside tokio compatibility.
fn setups(test: &str) -> Vec<Setup> {
    let mut v = Vec::new();
    let mut backends = vec![Backend::Epoll];
    match uring_unavailable() {
        None => backends.push(Backend::IoUring),
        Some(why) => skip(&format!("{test} on io_uring"), why),
    }
    for backend in backends {
        for flavor in [Flavor::CurrentThread, Flavor::Workers(2)] {
            v.push(Setup {
                flavor,
                backend,
                tokio_compat: false,
            });
        }
    }
    for flavor in [Flavor::CurrentThread, Flavor::Workers(2)] {
        v.push(Setup {
            flavor,
            backend: Backend::Epoll,
            tokio_compat: true,
        });
    }
    v
}

fn runtime(s: Setup) -> Runtime {
    let mut b = builder(s.flavor);
    b.event_interval(EVENT_INTERVAL)
        .backend(s.backend)
        .backend_strict(true)
        .tokio_compat(s.tokio_compat);
    b.build().expect("runtime builds")
}

/// What the two tasks share.
#[derive(Default)]
struct Counts {
    /// Iterations of the busy loop so far.
    iterations: AtomicU64,
    /// The sibling has armed its timer: the loop may start.
    armed: AtomicBool,
    /// The iterations when the sibling ran (`u64::MAX`: not yet).
    sibling_ran_at: AtomicU64,
}

/// A task loops on `p` while a sibling on the same worker sleeps until a deadline; returns the
/// iterations between the deadline and the sibling's run.
fn iterations_past_deadline(rt: &Runtime, p: Primitive) -> u64 {
    rt.block_on(async move {
        // From a task, so that `spawn_local` pins both to the worker running it.
        weir::spawn(async move {
            let counts = Arc::new(Counts {
                sibling_ran_at: AtomicU64::new(u64::MAX),
                ..Counts::default()
            });
            let deadline = weir::time::Instant::now() + Duration::from_millis(2);
            let c = counts.clone();
            let sibling = weir::task::spawn_local(async move {
                let mut sleep = pin!(weir::time::sleep_until(deadline));
                // The first poll arms the timer on this worker's reactor.
                let done = poll_fn(|cx| Poll::Ready(sleep.as_mut().poll(cx).is_ready())).await;
                c.armed.store(true, Ordering::SeqCst);
                if !done {
                    sleep.await;
                }
                c.sibling_ran_at
                    .store(c.iterations.load(Ordering::SeqCst), Ordering::SeqCst);
                weir::runtime::worker_index()
            });
            let c = counts.clone();
            let busy = weir::task::spawn_local(async move {
                while !c.armed.load(Ordering::SeqCst) {
                    weir::task::yield_now().await;
                }
                let mut looping = p.start();
                let mut due = None;
                let mut i = 0u64;
                while c.sibling_ran_at.load(Ordering::SeqCst) == u64::MAX {
                    looping.step(i).await;
                    i += 1;
                    c.iterations.store(i, Ordering::SeqCst);
                    if due.is_none() && weir::time::Instant::now() >= deadline {
                        due = Some(i);
                    }
                    if due.is_some_and(|d| i - d > GIVE_UP) {
                        break;
                    }
                }
                (due, weir::runtime::worker_index())
            });
            let (due, busy_worker) = busy.await.unwrap();
            let sibling_worker = sibling.await.unwrap();
            assert_eq!(
                busy_worker, sibling_worker,
                "{p:?}: both tasks on one worker"
            );
            let ran = counts.sibling_ran_at.load(Ordering::SeqCst);
            // Ran before the loop saw the deadline: nothing counted past it.
            ran.saturating_sub(due.unwrap_or(ran))
        })
        .await
        .unwrap()
    })
}

fn sibling_runs_within_the_budget(test: &str, p: Primitive) {
    for s in setups(test) {
        let rt = runtime(s);
        let past = iterations_past_deadline(&rt, p);
        assert!(
            past <= BOUND,
            "{p:?} on {s:?}: the sleeping sibling ran {past} iterations after its deadline \
             (at most {BOUND}: the loop did not yield for tokio's budget)"
        );
    }
}

#[test]
fn mpsc_loop_lets_a_sleeping_sibling_run() {
    sibling_runs_within_the_budget("mpsc_loop_lets_a_sleeping_sibling_run", Primitive::Mpsc);
}

#[test]
fn broadcast_loop_lets_a_sleeping_sibling_run() {
    sibling_runs_within_the_budget(
        "broadcast_loop_lets_a_sleeping_sibling_run",
        Primitive::Broadcast,
    );
}

#[test]
fn watch_loop_lets_a_sleeping_sibling_run() {
    sibling_runs_within_the_budget("watch_loop_lets_a_sleeping_sibling_run", Primitive::Watch);
}

#[test]
fn notify_loop_lets_a_sleeping_sibling_run() {
    sibling_runs_within_the_budget("notify_loop_lets_a_sleeping_sibling_run", Primitive::Notify);
}

#[test]
fn semaphore_loop_lets_a_sleeping_sibling_run() {
    sibling_runs_within_the_budget(
        "semaphore_loop_lets_a_sleeping_sibling_run",
        Primitive::Semaphore,
    );
}

#[test]
fn io_empty_loop_lets_a_sleeping_sibling_run() {
    sibling_runs_within_the_budget(
        "io_empty_loop_lets_a_sleeping_sibling_run",
        Primitive::Empty,
    );
}

#[test]
fn io_repeat_loop_lets_a_sleeping_sibling_run() {
    sibling_runs_within_the_budget(
        "io_repeat_loop_lets_a_sleeping_sibling_run",
        Primitive::Repeat,
    );
}

#[test]
fn select_loop_lets_a_sleeping_sibling_run() {
    sibling_runs_within_the_budget("select_loop_lets_a_sleeping_sibling_run", Primitive::Select);
}
