//! Timers without the feature `console`: the same API as `enabled.rs`, and nothing in it. A
//! `TimerTrace` is zero bytes and every call compiles to what it wraps.

use std::panic::Location;
use std::task::Poll;

use crate::time::Instant;

/// Nothing: the console is compiled out.
pub(crate) struct TimerTrace;

impl TimerTrace {
    #[inline(always)]
    pub(crate) fn new(
        _source: &'static str,
        _deadline: Instant,
        _location: &'static Location<'static>,
    ) -> TimerTrace {
        TimerTrace
    }

    #[inline(always)]
    pub(crate) fn unlisted() -> TimerTrace {
        TimerTrace
    }

    #[inline(always)]
    pub(crate) fn poll<T>(&self, poll: impl FnOnce() -> Poll<T>) -> Poll<T> {
        poll()
    }

    #[inline(always)]
    pub(crate) fn reset(&self, _deadline: Instant) {}
}
