//! Tasks: one allocation each, an atomic state machine, join handles.
//!
//! A task is an `Arc<Cell<F, S>>` (`task/cell.rs`): header (state, id, pinned worker, spawn location),
//! scheduler, the future-then-output stage, and the join waker — one allocation. It is seen
//! through two trait objects: `Task` (`Arc<dyn Runnable>`, what run queues hold) and
//! `Arc<dyn Join<T>>` (what a [`JoinHandle`] holds). The task's `Waker` is the same `Arc`.
//!
//! A [`JoinSet`] (`task/join_set.rs`) holds many join handles and polls only those whose task
//! completed.

mod cell;
pub mod coop;
mod id;
mod join;
mod join_set;
mod owned;
mod state;
mod task_local;
mod yield_now;

use std::panic::Location;
use std::sync::Arc;

pub(crate) use cell::new_task;
pub use coop::{consume_budget, unconstrained};
pub use id::{Id, id, try_id};
pub(crate) use id::{set_current as set_current_id, set_none as set_no_current_id};
pub use join::{AbortHandle, JoinError, JoinHandle};
pub use join_set::JoinSet;
pub(crate) use owned::OwnedTasks;
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
/// budget applies. Outside a task — in a multi-thread runtime's `block_on`, on the blocking
/// pool, or outside any runtime — `f` simply runs.
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
/// In a task of a current-thread runtime (there is no other thread to hand the worker to): use
/// [`spawn_blocking`](crate::spawn_blocking) there.
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

/// What a run queue holds.
pub(crate) type Task = Arc<dyn Runnable>;

/// Shared, immutable-after-spawn facts about a task plus its state word.
pub(crate) struct Header {
    pub(crate) state: state::State,
    pub(crate) id: Id,
    /// `Some(worker)` for `spawn_local` and `spawn_on` tasks: they run only on that worker.
    pub(crate) owner: Option<usize>,
    /// A `spawn_local` task (`!Send`): it also stays on the thread that runs its worker.
    pub(crate) local: bool,
    /// Slot in the owned-task list, `usize::MAX` when not in it. Accessed only under that list's
    /// shard lock.
    pub(crate) owned_key: std::sync::atomic::AtomicUsize,
    pub(crate) location: &'static Location<'static>,
}

/// A task as its scheduler sees it.
pub(crate) trait Runnable: Send + Sync + 'static {
    fn header(&self) -> &Header;
    /// Consumes one queue entry: polls the future (or cancels it).
    fn run(self: Arc<Self>);
    /// Runtime shutdown: cancels the task now if it is not running elsewhere.
    fn shutdown(self: Arc<Self>);
    /// Requests cancellation (from an `AbortHandle`).
    fn abort(self: Arc<Self>);
}

/// Where a task goes when it is woken, and who tracks it.
pub(crate) trait Schedule: Send + Sync + Sized + 'static {
    /// Queues a notified task. `yielded`: it was woken during its own poll (by itself or by
    /// running out of budget) and goes to the back of a queue, not to the LIFO slot.
    fn schedule(&self, task: Task, yielded: bool);
    /// The task completed: drop it from the owned-task list.
    fn release(&self, header: &Header);
}
