//! weir's executor: tasks, run queues, workers that each own a reactor, spin-then-park, the
//! blocking pool.
//!
//! # How it works
//!
//! A runtime has N workers. Each worker owns one reactor (a [`weir_reactor`] `Driver`; what the
//! executor uses of the reactor beyond its user API is listed in one module,
//! `weir_reactor::for_executor`) and drives it itself whenever it has nothing else to do, so
//! readiness delivered by worker A's epoll wakes tasks *on A*: the waker runs on A's thread and
//! queues the task in A's local queue.
//!
//! * **Tasks** (`task_core/`): one allocation each (`Arc` of header + future/output stage + join
//!   waker), an atomic state machine (`task_core/state.rs`), panics caught into [`JoinError`].
//!   What users call (`task/`: join sets, task-locals, yielding, `block_in_place`) sits above
//!   the schedulers.
//! * **Queues**: a bounded local ring per worker (`queue.rs`; the owner pushes and pops, idle
//!   workers steal half) continued by an unbounded backlog, a LIFO slot for the task a running
//!   task just woke, a pinned queue for `spawn_local` tasks, and a global inject queue (the
//!   backlog and the inject queue are `shared_fifo.rs`).
//! * **Runtime-wide state** (`shared/`): each worker's remote part and core, the inject queue,
//!   the sleep/wake protocol (`shared/idle.rs`), the live tasks, the blocking pool.
//! * **The thread's context** (`context.rs`): the runtime a thread is in, the worker it runs
//!   and the `block_on` blocked on it. The executor's other thread-local sits below it: the
//!   polled task's id (`task_core/id.rs`).
//! * **tokio runtimes** (`tokio_runtimes/`, feature `tokio-compat`): the tokio runtimes a weir
//!   runtime owns for libraries that call tokio's runtime APIs; the only module that names the
//!   feature (without it, a stub with the same API).
//! * **Scheduling** (`schedule.rs`): where a spawned or woken task is queued.
//! * **Placement** (`placement.rs`): which worker's reactor a thread, an accepted connection or
//!   a NIC receive queue goes to.
//! * **Workers** (`worker/`): the loop, fairness intervals, stealing tasks and I/O
//!   (`worker/steal.rs`), spin-then-park (`worker/park.rs`), moving to another thread
//!   (`worker/handoff.rs`).
//! * **Blocking pool** (`blocking.rs`): bounded, threads retire after an idle timeout.
//! * **`block_on`** (`block_on.rs`): how the thread blocked in `block_on` runs its future and
//!   waits — on the multi-thread runtime in a reactor of its own, with `block_on`'s parker
//!   (`parker.rs`).
//! * **Metrics**: written by the workers (`recorder/`: counters, duration histograms, the
//!   cycle-counter clock) and read (`metrics/`: `RuntimeMetrics`, the interval sampler, the task
//!   dump, the monitor thread and a stalled thread's backtrace).
//! * **[`Runtime`]** (`runtime.rs`, shutdown), its **[`Handle`]** (`handle.rs`: spawn, enter,
//!   `block_on`) and the **[`Builder`]** (`builder/`).
//!
//! The modules are layered, leaves first; each uses only modules before it in this order:
//! `loom`, `recorder`, `tokio_runtimes`, `config`, `queue`, `shared_fifo`, `line`, `parker`,
//! `task_core`, `blocking`, `shared`, `context`, `schedule`, `placement`, `worker`, `block_on`,
//! `metrics`, `handle`, `runtime`, `builder`, `task`. (The blocking pool reaches the runtime it
//! serves through the `blocking::Enter` trait, given with each spawn.)
//!
//! The concurrency primitives (run queue, task state + waker + join, idle/park protocol) are
//! model-checked with loom: `RUSTFLAGS="--cfg loom" cargo test -p weir-executor --lib --release`.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod block_on;
mod blocking;
mod builder;
mod config;
mod context;
mod handle;
mod line;
mod loom;
mod metrics;
mod parker;
pub mod placement;
mod queue;
mod recorder;
mod runtime;
mod schedule;
mod shared;
mod shared_fifo;
pub mod task;
mod task_core;
mod tokio_runtimes;
mod worker;

use std::future::Future;
use std::panic::Location;

pub use builder::ACCEPT_MULTISHOT_ENV;
pub use builder::DEFAULT_STALL_THRESHOLD;
pub use builder::{
    BACKEND_ENV, Builder, MAX_BUSY_POLL, MAX_MIN_WAIT, MAX_TIMER_SPIN, MAX_WORKERS, MIN_STACK_SIZE,
    MIN_WAIT_ENV, RECV_MULTISHOT_ENV,
};
pub use context::EnterGuard;
pub use handle::{Handle, TryCurrentError};
pub use metrics::{
    PollsWaited, RuntimeInterval, RuntimeIntervals, RuntimeMetrics, TaskDump, TaskInfo, TaskState,
    WorkerStats,
};
pub use recorder::{DurationHistogram, HistogramConfig, MAX_HISTOGRAM_BUCKETS};
pub use runtime::Runtime;
pub use shared::Id as RuntimeId;
pub use task::JoinSet;
pub use task_core::{AbortHandle, JoinError, JoinHandle};

/// Spawns a task onto the current runtime.
///
/// From a worker thread the task goes to that worker's local queue (idle workers may steal
/// it); from elsewhere it goes to the inject queue and wakes a sleeping worker.
///
/// # Panics
/// Outside a weir runtime.
#[track_caller]
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let location = Location::caller();
    // The panic stays out of the closure, where `#[track_caller]` would not reach it.
    match context::with_current(|s| {
        s.map(|s| s.spawn(future, crate::task_core::Placement::Any, location))
    }) {
        Some(join) => join,
        None => panic!(
            "weir::spawn called outside a weir runtime: call it from a task, inside \
             `Runtime::block_on`, or after `Runtime::enter`"
        ),
    }
}

/// Spawns a `!Send` task pinned to the current worker: it is only ever polled (and dropped) on
/// this thread.
///
/// # Panics
/// When the current thread is not a weir worker: call it from a task, or inside a
/// current-thread runtime's `block_on`.
#[track_caller]
pub fn spawn_local<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    spawn_local_at(future, Location::caller())
}

#[track_caller]
pub(crate) fn spawn_local_at<F>(
    future: F,
    location: &'static Location<'static>,
) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    match schedule::spawn_local(future, location) {
        Some(join) => join,
        None => panic!(
            "`spawn_local` called from outside of a `task::LocalSet` or `runtime::LocalRuntime` \
             (weir: call it on a weir worker thread — from inside a task, or inside a \
             current-thread runtime's `block_on`; a multi-thread runtime's `block_on` future \
             does not run on a worker)"
        ),
    }
}

/// Runs a blocking closure on the current runtime's blocking pool.
///
/// The pool starts threads on demand (up to
/// [`max_blocking_threads`](Builder::max_blocking_threads)) and retires them after
/// [`thread_keep_alive`](Builder::thread_keep_alive) of idleness. Aborting the handle cancels
/// the closure only if it has not started.
///
/// # Panics
/// Outside a weir runtime.
#[track_caller]
pub fn spawn_blocking<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let location = Location::caller();
    match context::with_current(|s| s.map(|s| s.spawn_blocking(f, location))) {
        Some(join) => join,
        None => panic!(
            "weir::spawn_blocking called outside a weir runtime: call it from a task, inside \
             `Runtime::block_on`, or after `Runtime::enter`"
        ),
    }
}

/// The index of the worker running the current task, or `None` off the workers (e.g. in a
/// multi-thread runtime's `block_on` future or on the blocking pool).
pub fn current_worker_index() -> Option<usize> {
    context::current_worker_index()
}
