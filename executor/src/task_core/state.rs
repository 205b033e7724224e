//! The task state machine: one atomic word per task.
//!
//! # Bits
//!
//! | bit             | set by                         | cleared by                 | meaning |
//! |-----------------|--------------------------------|----------------------------|---------|
//! | `RUNNING`       | the thread that dequeues it, or shutdown | that thread, when the poll ends | a thread is polling or cancelling the future and owns the stage exclusively |
//! | `COMPLETE`      | the running thread             | **never**                  | the future is gone; the stage holds the output (or it was consumed) |
//! | `NOTIFIED`      | a wake, abort, or spawn        | the thread that dequeues it | exactly one run-queue entry exists (or is about to) for this task |
//! | `CANCELLED`     | abort, runtime shutdown        | **never**                  | the next run (or the end of the current poll) drops the future |
//! | `JOIN_INTEREST` | spawn                          | the `JoinHandle` when dropped; **never set again** | a `JoinHandle` exists and owns the output once `COMPLETE` |
//!
//! # Who owns what
//!
//! * The stage (future, then output) belongs to the holder of `RUNNING` until `COMPLETE`.
//! * After `COMPLETE`, the output belongs to the `JoinHandle` if `JOIN_INTEREST` was set when
//!   `COMPLETE` was set, otherwise to the task, which drops it at once. Both sides decide with a
//!   single CAS, so exactly one drops it.
//! * `NOTIFIED` guarantees at most one queue entry: a wake that finds the task idle sets it and
//!   submits; a wake that finds it running sets it and leaves the resubmission to the runner; a
//!   wake that finds it already notified or complete does nothing.
//!
//! Every transition returns a `#[must_use]` enum naming the caller's next step.

use std::sync::atomic::Ordering::{AcqRel, Acquire};

use crate::loom::AtomicUsize;

const RUNNING: usize = 1;
const COMPLETE: usize = 1 << 1;
const NOTIFIED: usize = 1 << 2;
const CANCELLED: usize = 1 << 3;
const JOIN_INTEREST: usize = 1 << 4;

pub(crate) struct State(AtomicUsize);

/// Result of a wake.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WakeAction {
    /// The task was idle: put it in a run queue.
    Submit,
    /// Nothing to do (already queued, running — the runner resubmits — or complete).
    None,
}

/// Result of dequeuing a task.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RunAction {
    /// `RUNNING` acquired: poll the future.
    Poll,
    /// `RUNNING` acquired but the task was cancelled: drop the future and complete.
    Cancel,
    /// The task completed or is being cancelled elsewhere: drop the queue entry.
    Skip,
}

/// Result of a poll that returned `Pending`.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum IdleAction {
    /// Idle: a future wake will submit it.
    Idle,
    /// Woken during the poll: the runner must resubmit it (it keeps `NOTIFIED`).
    Resubmit,
    /// Cancelled during the poll: the runner (still `RUNNING`) drops the future.
    Cancel,
}

/// Result of an abort.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AbortAction {
    /// The task was idle: submit it so its worker cancels it.
    Submit,
    /// It is queued, running or complete: the cancellation is picked up there (or moot).
    None,
}

/// Result of a runtime-shutdown cancellation.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ShutdownAction {
    /// `RUNNING` acquired: drop the future now.
    Cancel,
    /// Running elsewhere (it will see `CANCELLED`) or already complete.
    None,
}

/// Snapshot returned by `transition_to_complete`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Completed {
    /// A `JoinHandle` owns the output.
    pub(crate) join_interest: bool,
}

impl State {
    /// A new task: queued once (`NOTIFIED`) and joined (`JOIN_INTEREST`).
    pub(crate) fn new() -> State {
        State(AtomicUsize::new(NOTIFIED | JOIN_INTEREST))
    }

    fn update<R>(&self, mut f: impl FnMut(usize) -> (Option<usize>, R)) -> R {
        let mut cur = self.0.load(Acquire);
        loop {
            let (next, r) = f(cur);
            let Some(next) = next else { return r };
            match self.0.compare_exchange_weak(cur, next, AcqRel, Acquire) {
                Ok(_) => return r,
                Err(actual) => cur = actual,
            }
        }
    }

    pub(crate) fn transition_to_notified_by_wake(&self) -> WakeAction {
        self.update(|s| {
            if s & (COMPLETE | NOTIFIED) != 0 {
                (None, WakeAction::None)
            } else if s & RUNNING != 0 {
                (Some(s | NOTIFIED), WakeAction::None)
            } else {
                (Some(s | NOTIFIED), WakeAction::Submit)
            }
        })
    }

    pub(crate) fn transition_to_running(&self) -> RunAction {
        self.update(|s| {
            if s & (RUNNING | COMPLETE) != 0 {
                // Cancelled by shutdown while queued (it holds RUNNING), or complete.
                return (None, RunAction::Skip);
            }
            debug_assert!(s & NOTIFIED != 0, "dequeued a task that was not notified");
            let next = (s & !NOTIFIED) | RUNNING;
            if s & CANCELLED != 0 {
                (Some(next), RunAction::Cancel)
            } else {
                (Some(next), RunAction::Poll)
            }
        })
    }

    pub(crate) fn transition_to_idle(&self) -> IdleAction {
        self.update(|s| {
            debug_assert!(s & RUNNING != 0);
            if s & CANCELLED != 0 {
                (None, IdleAction::Cancel)
            } else if s & NOTIFIED != 0 {
                (Some(s & !RUNNING), IdleAction::Resubmit)
            } else {
                (Some(s & !RUNNING), IdleAction::Idle)
            }
        })
    }

    /// Sets `COMPLETE`, clears `RUNNING`. The caller has stored the output.
    pub(crate) fn transition_to_complete(&self) -> Completed {
        let prev = self.0.fetch_xor(RUNNING | COMPLETE, AcqRel);
        debug_assert!(prev & RUNNING != 0 && prev & COMPLETE == 0);
        Completed {
            join_interest: prev & JOIN_INTEREST != 0,
        }
    }

    pub(crate) fn transition_to_cancelled_by_abort(&self) -> AbortAction {
        self.update(|s| {
            if s & (COMPLETE | CANCELLED) != 0 {
                (None, AbortAction::None)
            } else if s & (RUNNING | NOTIFIED) != 0 {
                (Some(s | CANCELLED), AbortAction::None)
            } else {
                (Some(s | CANCELLED | NOTIFIED), AbortAction::Submit)
            }
        })
    }

    pub(crate) fn transition_to_shutdown(&self) -> ShutdownAction {
        self.update(|s| {
            if s & (RUNNING | COMPLETE) != 0 {
                (Some(s | CANCELLED), ShutdownAction::None)
            } else {
                (Some(s | CANCELLED | RUNNING), ShutdownAction::Cancel)
            }
        })
    }

    /// The `JoinHandle` is dropped. `Err(())` if the task is already complete: the handle owns
    /// the output and must drop it.
    pub(crate) fn drop_join_interest(&self) -> Result<(), ()> {
        self.update(|s| {
            debug_assert!(s & JOIN_INTEREST != 0);
            if s & COMPLETE != 0 {
                (None, Err(()))
            } else {
                (Some(s & !JOIN_INTEREST), Ok(()))
            }
        })
    }

    pub(crate) fn is_complete(&self) -> bool {
        self.0.load(Acquire) & COMPLETE != 0
    }

    /// The bits an observer reports (the task dump); stale the moment it is read.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let s = self.0.load(Acquire);
        Snapshot {
            running: s & RUNNING != 0,
            notified: s & NOTIFIED != 0,
            complete: s & COMPLETE != 0,
        }
    }
}

/// What [`State::snapshot`] read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// A thread is polling (or cancelling) the task.
    pub(crate) running: bool,
    /// A run-queue entry exists for it.
    pub(crate) notified: bool,
    pub(crate) complete: bool,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.0.load(Acquire);
        f.debug_struct("State")
            .field("running", &(s & RUNNING != 0))
            .field("complete", &(s & COMPLETE != 0))
            .field("notified", &(s & NOTIFIED != 0))
            .field("cancelled", &(s & CANCELLED != 0))
            .field("join_interest", &(s & JOIN_INTEREST != 0))
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn wake_while_running_resubmits_once() {
        let s = State::new();
        assert_eq!(s.transition_to_running(), RunAction::Poll);
        assert_eq!(s.transition_to_notified_by_wake(), WakeAction::None);
        assert_eq!(s.transition_to_notified_by_wake(), WakeAction::None);
        assert_eq!(s.transition_to_idle(), IdleAction::Resubmit);
        assert_eq!(s.transition_to_running(), RunAction::Poll);
        assert_eq!(s.transition_to_idle(), IdleAction::Idle);
        assert_eq!(s.transition_to_notified_by_wake(), WakeAction::Submit);
        assert_eq!(s.transition_to_notified_by_wake(), WakeAction::None);
    }

    #[test]
    fn abort_idle_submits_and_run_cancels() {
        let s = State::new();
        assert_eq!(s.transition_to_running(), RunAction::Poll);
        assert_eq!(s.transition_to_idle(), IdleAction::Idle);
        assert_eq!(s.transition_to_cancelled_by_abort(), AbortAction::Submit);
        assert_eq!(s.transition_to_cancelled_by_abort(), AbortAction::None);
        assert_eq!(s.transition_to_running(), RunAction::Cancel);
        assert!(s.transition_to_complete().join_interest);
        assert_eq!(s.transition_to_notified_by_wake(), WakeAction::None);
        assert_eq!(s.drop_join_interest(), Err(()));
    }

    #[test]
    fn shutdown_of_queued_task_makes_the_queue_entry_skip() {
        let s = State::new();
        assert_eq!(s.transition_to_shutdown(), ShutdownAction::Cancel);
        assert_eq!(s.transition_to_running(), RunAction::Skip);
        assert!(s.transition_to_complete().join_interest);
    }

    #[test]
    fn join_interest_dropped_before_completion_leaves_output_to_task() {
        let s = State::new();
        assert_eq!(s.transition_to_running(), RunAction::Poll);
        assert_eq!(s.drop_join_interest(), Ok(()));
        assert!(!s.transition_to_complete().join_interest);
    }
}
