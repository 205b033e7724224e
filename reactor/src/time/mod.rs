//! Timers: [`sleep`], [`sleep_until`], [`timeout`], [`interval`]; the clock they read
//! ([`Instant`]) and the paused test clock ([`pause`], [`resume`], [`advance`]).
//!
//! # Precision
//!
//! Each worker keeps its own timer queue with nanosecond resolution; the nearest deadline
//! becomes the timeout of the worker's next wait, which on the epoll backend is an
//! `epoll_pwait2` with a nanosecond `timespec`. Worker threads set their timer slack to 1 ns,
//! so a 100 µs sleep ends a few microseconds after its deadline rather than the ~1 ms of a
//! millisecond timer wheel. A sleep **never** completes before its deadline. On the mio backend
//! (or a kernel without `epoll_pwait2`) waits are rounded up to whole milliseconds.
//!
//! A timer is armed on the reactor of the thread that first polls it and stays there. If its
//! task moves to another worker, the timer still fires: the owning worker wakes it.
//!
//! On a multi-thread runtime, the thread in `block_on` (`#[weir::main]`'s body) waits in a
//! reactor of its own, so its sleeps end on its own wait as precisely as a worker's. If such a
//! sleep is moved into a task that outlives the `block_on`, it re-arms where it is polled next.
//!
//! Each wait that a timer ends finishes with a short spin to the deadline, at most
//! `Builder::timer_spin`, so that the OS's wake-up latency does not make the timer late.
//!
//! # Paused clock
//!
//! In tests, a current-thread runtime's clock can be paused ([`pause`],
//! `#[weir::test(start_paused = true)]`): time then moves only with [`advance`], or jumps to
//! the next timer when the runtime has nothing else to do, so timer logic is tested at once and
//! deterministically. [`Instant::now`] follows the paused clock; `std::time::Instant::now`
//! does not.

mod clock;
mod console;
mod instant;
mod interval;
mod sleep;
mod timeout;

pub use clock::{advance, pause, resume};
pub use instant::Instant;
pub use interval::{Interval, MissedTickBehavior, interval, interval_at};
pub use sleep::{Sleep, sleep, sleep_unlisted, sleep_until, sleep_until_unlisted};
pub use std::time::Duration;
pub use timeout::{Elapsed, Timeout, timeout, timeout_at};

/// The errors of the time module.
pub mod error {
    pub use super::timeout::Elapsed;
}
