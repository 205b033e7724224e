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
pub(crate) use id::set_current as set_current_id;
pub use id::{Id, id, try_id};
pub use join::{AbortHandle, JoinError, JoinHandle};
pub use join_set::JoinSet;
pub(crate) use owned::OwnedTasks;
pub use task_local::{AccessError, LocalKey};
pub use yield_now::yield_now;

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
    /// `Some(worker)` for `spawn_local` tasks: they run only on that worker.
    pub(crate) owner: Option<usize>,
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
