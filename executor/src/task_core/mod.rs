//! What a task is: one allocation each, an atomic state machine, join handles, the list of
//! live tasks. Below every scheduler: the workers, the blocking pool and the tests' models all
//! run tasks through the [`Schedule`] trait, and nothing here knows a runtime. The public face
//! (`weir_executor::task`) is `task/`.
//!
//! A task is an `Arc<Cell<F, S>>` (`task_core/cell.rs`): header (state, id, pinned worker, spawn
//! location), scheduler, the future-then-output stage, and the join waker — one allocation. It
//! is seen through two trait objects: `Task` (`Arc<dyn Runnable>`, what run queues hold) and
//! `Arc<dyn Join<T>>` (what a [`JoinHandle`] holds). The task's `Waker` is the same `Arc`.
//!
//! The id of the task being polled is this module's own thread-local (`id.rs`), not part of the
//! runtime's context (`context.rs`): it is set here, while a task polls or drops its future, and
//! the task machinery sits below the runtime, which it does not know.

mod cell;
pub(crate) mod console;
mod id;
mod join;
mod name;
mod owned;
mod state;

use std::panic::Location;
use std::sync::Arc;

pub(crate) use cell::new_task;
pub use id::{Id, id, try_id};
pub(crate) use id::{set_current as set_current_id, set_none as set_no_current_id};
pub use join::{AbortHandle, JoinError, JoinHandle};
pub(crate) use name::name_next;
pub(crate) use owned::OwnedTasks;

/// What a run queue holds.
pub(crate) type Task = Arc<dyn Runnable>;

/// Shared, immutable-after-spawn facts about a task plus its state word.
pub(crate) struct Header {
    pub(crate) state: state::State,
    pub(crate) id: Id,
    /// Where the task may run.
    pub(crate) placement: Placement,
    /// Slot in the owned-task list, `usize::MAX` when not in it. Accessed only under that list's
    /// shard lock.
    pub(crate) owned_key: std::sync::atomic::AtomicUsize,
    /// The worker that polled the task last (`u32::MAX` before its first poll): a wake-up from
    /// another worker is a cross-worker wake-up (`WorkerStats::cross_worker_wakes`). Written
    /// by the polling worker, read by wakers; a stale read only miscounts.
    pub(crate) last_worker: std::sync::atomic::AtomicU32,
    /// Where and when the task was last queued on a worker, for the polls it waits there
    /// (`WorkerStats::polls_waited`): see `shared::QueuedAt`. Written by the thread that queues
    /// the task, read by the worker that polls it; a stale read only misfiles one sample.
    pub(crate) queued_on: std::sync::atomic::AtomicU64,
    pub(crate) location: &'static Location<'static>,
    /// The name given with `task::Builder::name`.
    pub(crate) name: Option<Arc<str>>,
    /// When the task was spawned, in the metrics clock's ticks (`recorder/ticks.rs`).
    pub(crate) spawned_at: u64,
    /// When the task was last queued to run, in ticks (0: timing is off): written by whoever
    /// queues it (`schedule.rs`), read by the worker that polls it next for its scheduling
    /// delay. (Which worker and queue it waits in, counted in polls, is `queued_on`.)
    pub(crate) queued_at: std::sync::atomic::AtomicU64,
    /// When a worker last began to poll the task, in ticks (0: never, or timing is off).
    pub(crate) last_polled_at: std::sync::atomic::AtomicU64,
    /// Polls so far; written by the thread holding `RUNNING` (load and store).
    pub(crate) polls: std::sync::atomic::AtomicU64,
    /// The id of the task's console span, for its waker's events (`console/`; nothing without
    /// the feature `console`).
    pub(crate) span_id: console::SpanId,
}

/// What kind of spawn made a task (the console's `kind` field; nothing without the feature).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `spawn`, `spawn_on`, `spawn_local`, a `JoinSet` entry.
    Task,
    /// A closure of the blocking pool.
    Blocking,
}

/// Where a task may run, fixed at spawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// On any worker (`spawn`): queued where it is woken, and stealable.
    Any,
    /// Only on this worker (`spawn_on`): a `Send` task that is never stolen.
    Worker(usize),
    /// Only on this worker's thread (`spawn_local`): a `!Send` task, which also stays when the
    /// worker moves to another thread.
    Local(usize),
}

impl Placement {
    /// The worker the task is pinned to, if any.
    pub(crate) fn worker(self) -> Option<usize> {
        match self {
            Placement::Any => None,
            Placement::Worker(w) | Placement::Local(w) => Some(w),
        }
    }
}

/// Where a woken task is queued on the worker that takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queue {
    /// Woken by another task or by I/O: it may go to the LIFO slot, to run next.
    Next,
    /// Just spawned, or woken during its own poll (by itself, or out of budget): the back of a
    /// queue, so that it does not starve the others.
    Back,
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
    /// Queues a notified task, at the place `at` says.
    fn schedule(&self, task: Task, at: Queue);
    /// The task is about to be queued (called just before [`schedule`](Self::schedule) with
    /// the task's concrete header, so no virtual call is needed): the start of its
    /// scheduling delay.
    #[inline]
    fn queued(&self, _header: &Header) {}
    /// The task completed: drop it from the owned-task list.
    fn release(&self, header: &Header);
}
