use std::cell::Cell;
use std::fmt;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A task's id: unique among the tasks of the process while they live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(pub(crate) NonZeroU64);

impl Id {
    pub(crate) fn next() -> Id {
        // Not modelled by loom: uniqueness only.
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let v = NEXT.fetch_add(1, Relaxed);
        Id(NonZeroU64::new(v).expect("task id counter wrapped"))
    }

    /// The id as a number.
    pub fn as_u64(&self) -> u64 {
        self.0.get()
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

thread_local! {
    static CURRENT: Cell<Option<Id>> = const { Cell::new(None) };
}

/// Restores the previous current id when dropped (shutdown paths may run while the thread
/// exits: every access uses `try_with`).
pub(crate) struct ResetId(Option<Id>);

impl Drop for ResetId {
    fn drop(&mut self) {
        let prev = self.0;
        let _ = CURRENT.try_with(|c| c.set(prev));
    }
}

pub(crate) fn set_current(id: Id) -> ResetId {
    ResetId(CURRENT.try_with(|c| c.replace(Some(id))).unwrap_or(None))
}

/// No task is current until the guard drops (a worker loop run from a blocking-pool task).
pub(crate) fn set_none() -> ResetId {
    ResetId(CURRENT.try_with(|c| c.replace(None)).unwrap_or(None))
}

/// The id of the task being polled.
///
/// # Panics
/// Outside a task.
#[track_caller]
pub fn id() -> Id {
    try_id().expect("weir::task::id() called outside of a task")
}

/// The id of the task being polled, or `None` outside a task.
pub fn try_id() -> Option<Id> {
    CURRENT.try_with(|c| c.get()).unwrap_or(None)
}
