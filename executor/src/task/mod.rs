//! Tasks as users see them: join handles and sets, ids, task-locals, yielding, the cooperative
//! budget, and `block_in_place`. What a task is inside (the allocation, its state machine, the
//! join side) lives in `task_core/`, below the schedulers; this module sits above them.
//!
//! A [`JoinSet`] (`task/join_set.rs`) holds many join handles and polls only those whose task
//! completed.

mod builder;
pub mod coop;
mod join_set;
mod task_local;
mod yield_now;

pub use crate::task_core::{AbortHandle, Id, JoinError, JoinHandle, id, try_id};
pub use builder::Builder;
pub use coop::{consume_budget, unconstrained};
pub use join_set::JoinSet;
pub use task_local::{AccessError, LocalKey};
pub use yield_now::yield_now;

/// Runs the blocking closure `f` on the current thread, and lets the runtime go on without
/// it meanwhile.
///
/// Called from a task on a multi-thread runtime, it hands the worker running the task — its
/// run queue **and its reactor**, whose sockets and timers belong to that worker — to another
/// thread (an idle blocking-pool thread, or a new one) before `f` runs, so the worker's other
/// tasks, I/O and timers keep going while `f` blocks. When `f` returns, the task continues on
/// this thread: if no other thread has picked the worker up yet, this thread takes it back;
/// otherwise this thread finishes the task's current poll and then leaves the runtime (a
/// worker's own thread exits; a blocking-pool thread returns to the pool), and the task's next
/// poll happens on a worker.
///
/// Inside `f`, [`Handle::block_on`](crate::Handle::block_on) is allowed, and no cooperative
/// budget applies. Outside a task — in the future of a multi-thread runtime's `block_on` or of
/// any [`Handle::block_on`](crate::Handle::block_on), on the blocking pool, inside another
/// `block_in_place`, or outside any runtime — `f` simply runs, as with tokio (in a
/// current-thread runtime's `Handle::block_on`, its tasks wait until `f` returns).
///
/// Prefer [`spawn_blocking`](crate::spawn_blocking) for work that can move to another thread:
/// it costs no hand-over. `block_in_place` is for blocking code that must run where the task
/// is (it borrows the task's state, or is not `Send`).
///
/// A worker that holds live [`spawn_local`](crate::spawn_local) tasks cannot move to another
/// thread (they are `!Send`): there, `f` runs in place after the worker's queued tasks are
/// given to the other workers; its pinned tasks and timers wait until `f` returns, and its
/// ready I/O is left to idle workers that collect a stalled worker's events.
///
/// ```
/// # let rt = weir_executor::Builder::new_multi_thread().workers(2).build().unwrap();
/// # rt.block_on(async {
/// let answer = weir_executor::spawn(async {
///     weir_executor::task::block_in_place(|| {
///         // Blocking code, or a synchronous API that calls `block_on` itself.
///         std::thread::sleep(std::time::Duration::from_millis(1));
///         weir_executor::Handle::current().block_on(async { 40 + 2 })
///     })
/// })
/// .await
/// .unwrap();
/// assert_eq!(answer, 42);
/// # });
/// ```
///
/// # Panics
/// On a current-thread runtime, as tokio's does, with tokio's message ("can call blocking only
/// when running on the multi-threaded runtime") followed by weir's advice: in its tasks, and in
/// the future of its [`Runtime::block_on`](crate::Runtime::block_on) — the body of a
/// `#[weir::test]` (whose default flavour is current-thread) or of a
/// `#[weir::main(flavor = "current_thread")]` function. There is no other thread to hand the
/// worker to, and `f` would hold the one thread that runs every task. Use
/// [`spawn_blocking`](crate::spawn_blocking) there, or a multi-thread runtime
/// (`#[weir::test(flavor = "multi_thread")]`).
#[track_caller]
pub fn block_in_place<F, R>(f: F) -> R
where
    F: FnOnce() -> R,
{
    crate::worker::block_in_place(f)
}

/// Futures returned by the functions of this module.
pub mod futures {
    pub use super::task_local::TaskLocalFuture;
}
