//! The worker's contract with its reactor: every item of this crate that `weir-executor` uses
//! and a user of weir never does, in one list. For `weir-executor` only: hidden from the docs,
//! not a stable API, and checked by the structure test (`tests/tests/structure.rs`): no crate
//! but the executor imports this module, and the executor reaches the reactor's non-user items
//! only through it. (This crate's own tests use it too: they test the contract.)
//!
//! The items stay where their idea lives; this module names them, and [`ReactorControl`]
//! carries the methods of [`ReactorHandle`] that only the runtime calls. Everything else the
//! executor uses of the reactor is user API: `ReactorHandle` and its counters, `Backend`,
//! `MinWait`, `os::linux`, `thread::{allowed_cpus, pin_to_cpu}`, and the leaf side of the
//! cooperative budget (`coop::{BUDGET, poll_budget, spend, unconstrained,
//! has_budget_remaining}`).
//!
//! | what the runtime does | items | their home |
//! |---|---|---|
//! | builds a reactor per worker (and per `block_on` thread), turns and parks it | [`Driver`], [`DriverConfig`], [`MAX_EVENTS_LIMIT`], [`DEFAULT_TIMER_SPIN`] | `driver/mod.rs`, `driver/wait.rs`, `config.rs` |
//! | waits for it from inside another event loop (tokio compatibility) | [`NestedPark`], [`NestTimer`] | `driver/nested.rs` |
//! | makes it current on a thread, or the home of the thread's timers | [`ReactorEnterGuard`], [`TimerHomeGuard`], [`ReactorControl::enter`], `Driver::enter`, `Driver::enter_timers` | `context.rs` |
//! | wakes its owner, shuts it down, collects a stuck peer's ready I/O (stealing its events, or the readiness rescue), holds a paused clock | [`ReactorControl`] | `driver/mod.rs`, `driver/steal.rs`, `driver/rescue.rs`, `driver/timers.rs` |
//! | polls a task with a fresh budget, inside a loop that restores the thread's budget | [`budget`], [`budget_scope`] | `coop/` |
//! | counts with one writer, as the reactor does | [`Counter`] | `metrics.rs` |
//! | sets its threads' timer slack | [`set_timer_slack`] | `thread.rs` |
//! | models its idle protocol against the park state (loom) | [`ParkState`], [`Prepare`], [`Unpark`], `ModelEventFd` | `park_state.rs` |

use std::io;
use std::time::Duration;

pub use crate::config::{DEFAULT_TIMER_SPIN, DriverConfig, MAX_EVENTS_LIMIT};
pub use crate::context::{ReactorEnterGuard, TimerHomeGuard};
pub use crate::driver::{Driver, NestTimer, NestedPark};
pub use crate::metrics::Counter;
#[cfg(loom)]
pub use crate::park_state::ModelEventFd;
pub use crate::park_state::{ParkState, Prepare, Unpark};
pub use crate::thread::set_timer_slack;

use crate::ReactorHandle;

/// Runs `f` (one task poll) with a fresh cooperative budget. Call it inside a
/// [`budget_scope`], which puts the thread's previous budget back when it ends.
#[inline]
pub fn budget<R>(f: impl FnOnce() -> R) -> R {
    crate::coop::budget(f)
}

/// Runs `f`, a loop that polls tasks with [`budget`] (a worker, a `block_on`), and puts the
/// budget the thread had before it back when `f` returns or unwinds — so that a loop nested in
/// a task poll (a `block_on` inside `block_in_place`) leaves that poll its budget, and a thread
/// that leaves a runtime leaves no budget behind.
#[inline]
pub fn budget_scope<R>(f: impl FnOnce() -> R) -> R {
    crate::coop::scope(f)
}

/// What the runtime does to a reactor through its handle, and a user never does: wake its
/// owner, shut it down, collect a stuck owner's ready I/O, enter it, hold its paused clock. Each
/// method is the handle's own (crate-private) method of the same name, where its docs are.
pub trait ReactorControl {
    /// Wakes the owner if it is parked (one eventfd write); costs no syscall if it is running.
    fn unpark(&self);

    /// `true` if the owner is blocked in its driver right now (racy; for tests and metrics).
    fn is_parked(&self) -> bool;

    /// Shuts the reactor down: every registration's waiters are woken and see an error, every
    /// timer waker is dropped. Idempotent.
    fn shutdown(&self);

    /// I/O stealing: when the owner has not turned its reactor for at least `min_stall` and is
    /// neither parked nor in a turn, collects its ready events and wakes their tasks on the
    /// calling thread (`driver/steal.rs`). Returns how many wakers were woken.
    ///
    /// # Errors
    /// Unexpected OS errors of `epoll_wait`.
    fn steal_events(&self, min_stall: Duration) -> io::Result<usize>;

    /// `true` if the owner is neither parked nor in a turn and has not turned its reactor for
    /// at least `min_stall` (`driver/steal.rs`).
    fn is_stuck(&self, min_stall: Duration) -> bool;

    /// Collects a stuck owner's ready I/O by whatever means the backend allows — its events
    /// ([`steal_events`](Self::steal_events)) or the readiness of the fds tasks wait on
    /// ([`poll_stuck_waiters`](Self::poll_stuck_waiters)) — and wakes the tasks on the calling
    /// thread (`driver/rescue.rs`). Returns how many wakers were woken.
    ///
    /// # Errors
    /// Unexpected OS errors of `epoll_wait` or `poll(2)`.
    fn rescue_stuck(&self, min_stall: Duration) -> io::Result<usize>;

    /// Readiness rescue, on any backend: for a stuck owner, one `poll(2)` over the fds tasks
    /// wait on, whose readiness is delivered as the owner's events would be, waking the tasks
    /// on the calling thread (`driver/rescue.rs`). Returns how many wakers were woken.
    ///
    /// # Errors
    /// Unexpected OS errors of `poll(2)`.
    fn poll_stuck_waiters(&self, min_stall: Duration) -> io::Result<usize>;

    /// Keeps an idle reactor from advancing its paused clock until the matching
    /// [`allow_auto_advance`](Self::allow_auto_advance) (`driver/timers.rs`).
    fn inhibit_auto_advance(&self);

    /// Ends one [`inhibit_auto_advance`](Self::inhibit_auto_advance) (`driver/timers.rs`).
    fn allow_auto_advance(&self);

    /// Makes this reactor the current one of this thread, not as its owner, until the guard is
    /// dropped (`context.rs`).
    fn enter(&self) -> ReactorEnterGuard;
}

impl ReactorControl for ReactorHandle {
    #[inline]
    fn unpark(&self) {
        ReactorHandle::unpark(self);
    }

    #[inline]
    fn is_parked(&self) -> bool {
        ReactorHandle::is_parked(self)
    }

    #[inline]
    fn shutdown(&self) {
        ReactorHandle::shutdown(self);
    }

    #[inline]
    fn steal_events(&self, min_stall: Duration) -> io::Result<usize> {
        ReactorHandle::steal_events(self, min_stall)
    }

    #[inline]
    fn is_stuck(&self, min_stall: Duration) -> bool {
        ReactorHandle::is_stuck(self, min_stall)
    }

    #[inline]
    fn rescue_stuck(&self, min_stall: Duration) -> io::Result<usize> {
        ReactorHandle::rescue_stuck(self, min_stall)
    }

    #[inline]
    fn poll_stuck_waiters(&self, min_stall: Duration) -> io::Result<usize> {
        ReactorHandle::poll_stuck_waiters(self, min_stall)
    }

    #[inline]
    fn inhibit_auto_advance(&self) {
        ReactorHandle::inhibit_auto_advance(self);
    }

    #[inline]
    fn allow_auto_advance(&self) {
        ReactorHandle::allow_auto_advance(self);
    }

    #[inline]
    fn enter(&self) -> ReactorEnterGuard {
        ReactorHandle::enter(self)
    }
}
