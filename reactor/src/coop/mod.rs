//! Cooperative budget: one busy task cannot starve the I/O, timers and other tasks of its
//! worker.
//!
//! The executor runs each task poll inside `budget`. weir's leaf operations spend one unit
//! each time they complete: an I/O operation (a read, write, receive, send, accept, or a
//! `Registration::poll_io` closure — however many `WouldBlock`s it took), the poll-style
//! readiness methods that stand for one (`poll_read_ready`, `poll_write_ready`), a timer, a
//! join handle. When the budget is spent they return `Pending` after waking their task, so the
//! task goes to the back of its run queue and the worker can drive its reactor and run the
//! others. Outside a task poll (a future polled by a foreign executor) the budget is unlimited.
//!
//! The I/O operations look at the fd's readiness first: one that is not ready waits for its
//! event, budget or not, and touches no budget; one that is ready takes a unit
//! ([`poll_proceed`]) and gives it back if the fd had nothing after all. The others check for a
//! unit first ([`poll_budget`]) and spend it once they complete ([`spend`]).
//!
//! The readiness futures (`readable`, `writable`, `ready`, `Registration::readiness`) spend
//! nothing: `loop { s.writable().await; match s.try_write(..) { .. } }` must not see a
//! spurious `Pending` on a socket that is still ready, and the `try_*` operations, which never
//! wait, do not spend either. A task that loops on an fd that is always ready yields through
//! the operations that wait.
//!
//! # One budget with tokio's
//!
//! tokio's primitives that need no runtime — `tokio::sync`'s channels, `Notify` and
//! `Semaphore`, `tokio::select!`, `tokio::io`'s utilities — spend tokio's budget, a count in
//! tokio's thread-local that only tokio's schedulers fill. Programs ported from tokio loop on
//! them; if that count were never filled on weir's threads they would never yield, and every
//! other task of the worker, its timers and its I/O would wait for the loop to end.
//!
//! - **Where the count lives.** With the feature `tokio-budget` (on by default in `weir`), the
//!   one count is tokio's: weir's leaf operations spend it through
//!   `tokio::task::coop::poll_proceed`, and `budget` fills it for every task poll. It cannot
//!   be the other way round: tokio's primitives read only tokio's thread-local, and two counts
//!   would let a loop mixing a weir read and a tokio receive run 128 of each. A weir socket
//!   read and a tokio channel receive spend the same units, and [`unconstrained`] and
//!   [`has_budget_remaining`] are tokio's too (weir's `task::unconstrained` and tokio's
//!   `task::coop::unconstrained` are interchangeable).
//! - **The feature.** tokio may only be a dependency behind a feature, and the budget must work
//!   for a user who enabled none: `tokio-budget` is a default feature of `weir` (and implied by
//!   `tokio-compat`). It builds tokio with its `rt` feature only (tokio's one dependency with
//!   it is `pin-project-lite`, which weir has): tokio compiles in about 3 s of CPU time in a
//!   debug build and 5.5 s in a release one, and it adds about 50 KiB to a stripped release
//!   binary (a one-worker program: 829 000 bytes without, 881 000 with; tokio's budget, its
//!   thread-local context and the one `LocalSet` below). `default-features = false` drops it, and weir keeps a count of
//!   its own (`own.rs`) that tokio's primitives do not see.
//! - **The refill.** tokio offers no call that sets its budget, but its guard does: a
//!   `RestoreOnPending` dropped without progress puts back the budget it was taken from. Each
//!   thread keeps one guard taken from a full budget; a refill drops it (the budget is full)
//!   and takes the next one from the full budget, which spends one unit. A poll therefore
//!   starts with 127 of tokio's 128 units. That unit cannot be had back with tokio's public API:
//!   a full budget comes only from tokio's schedulers, and a guard is consumed by its drop, so
//!   refilling to exactly 128 would take a tokio scheduler poll per task poll (a `LocalSet`
//!   task: about 400 instructions, more than the rest of the refill's cost many times over) or
//!   duplicating tokio's guard with `unsafe`, which relies on what tokio does not promise. The
//!   first guard of a thread comes from a throwaway `LocalSet` (once per thread). A poll
//!   does not restore the budget it found: the loop that polls runs inside `scope`, a poll
//!   of tokio's `Unconstrained` (the one public way to restore a budget of any value), which
//!   puts the thread's budget back when the loop ends or unwinds. So a loop nested in a poll (a
//!   `block_on` inside `block_in_place`) leaves the outer poll its budget, as tokio's
//!   schedulers do, for one save and restore per loop instead of one per poll.
//! - **The wake-up.** A tokio primitive whose budget is spent wakes its task through tokio's
//!   `context::defer`, which outside a tokio scheduler is a plain `wake_by_ref`: the task,
//!   woken during its own poll, is queued at the back of its worker's queue once the poll
//!   returns (never in the LIFO slot), so its siblings run first. Inside a worker's tokio
//!   runtime (tokio compatibility) tokio defers that wake-up to its next turn, which the worker
//!   gives it every `event_interval` steps. weir's own leaf operations wake their task at once
//!   in every case.
//!
//! [`BUDGET`] stays 128 (tokio's figure); with `tokio-budget` a poll has `BUDGET - 1` of it.

use std::task::{Context, Poll};

#[cfg(any(test, not(feature = "tokio-budget")))]
#[cfg_attr(feature = "tokio-budget", allow(dead_code))]
mod own;
#[cfg(feature = "tokio-budget")]
mod tokio_cell;

#[cfg(not(feature = "tokio-budget"))]
use own as count;
#[cfg(feature = "tokio-budget")]
use tokio_cell as count;

/// Units of work a task may do in one poll: tokio's figure. With the feature `tokio-budget` a
/// poll gets one less (see the module docs).
pub const BUDGET: u8 = 128;

/// Runs `f` (one task poll) with a fresh budget. Call it inside a [`scope`], which puts the
/// thread's previous budget back when it ends.
#[inline]
pub(crate) fn budget<R>(f: impl FnOnce() -> R) -> R {
    count::budget(f)
}

/// Runs `f`, a loop that polls tasks with [`budget`] (a worker, a `block_on`), and puts the
/// budget the thread had before it back when `f` returns or unwinds — so that a loop nested in
/// a task poll (a `block_on` inside `block_in_place`) leaves that poll its budget, and a thread
/// that leaves a runtime leaves no budget behind.
pub(crate) fn scope<R>(f: impl FnOnce() -> R) -> R {
    count::scope(f)
}

/// Runs `f` with no budget limit, restoring the previous budget afterwards.
#[inline]
pub fn unconstrained<R>(f: impl FnOnce() -> R) -> R {
    count::unconstrained(f)
}

/// `true` if the current poll still has budget (or is unconstrained).
#[inline]
pub fn has_budget_remaining() -> bool {
    count::has_budget_remaining()
}

/// `Pending`, after waking the task, if the budget is spent; `Ready` if a unit is left. Spends
/// nothing: a leaf operation checks first, and calls [`spend`] once it completed — the cheapest
/// form, since an operation that finds nothing to do (most reads end so) then costs a check.
#[inline]
pub fn poll_budget(cx: &mut Context<'_>) -> Poll<()> {
    count::poll_budget(cx)
}

/// Spends one unit: the operation that [`poll_budget`] let through completed.
#[inline]
pub fn spend() {
    count::spend();
}

/// Spends one unit, or wakes the task and returns `Pending` if the budget is exhausted.
///
/// Call [`RestoreOnPending::made_progress`] on the returned guard once the operation actually
/// completed; if the leaf future returns `Pending` instead, dropping the guard refunds the unit.
#[inline]
pub fn poll_proceed(cx: &mut Context<'_>) -> Poll<RestoreOnPending> {
    count::poll_proceed(cx).map(RestoreOnPending)
}

/// Refunds a budget unit when dropped, unless [`made_progress`](Self::made_progress) was called.
#[derive(Debug)]
pub struct RestoreOnPending(count::Restore);

impl RestoreOnPending {
    /// The operation completed: keep the unit spent.
    #[inline]
    pub fn made_progress(&self) {
        self.0.made_progress();
    }
}
