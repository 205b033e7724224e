//! Timers: [`sleep`], [`sleep_until`], [`timeout`], [`interval`].
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
//! A timer is armed on the reactor of the thread that first polls it and stays there; if its
//! task moves to another worker, the timer still fires (the owning worker wakes it).

mod interval;
pub(crate) mod queue;
mod sleep;
mod timeout;

pub use interval::{Interval, MissedTickBehavior, interval, interval_at};
pub use sleep::{Sleep, sleep, sleep_until};
pub use std::time::Instant;
pub use timeout::{Elapsed, Timeout, timeout, timeout_at};
