//! min_wait batching — the one home of the idea.
//!
//! # Semantics
//!
//! Taken from the 2022 `EPOLL_CTL_MIN_WAIT` patch (never merged): a blocking wait entered at
//! `t0` returns when
//! 1. `maxevents` events have been collected, or
//! 2. at least one event has been collected and `now ≥ t0 + min_wait`, or
//! 3. its timeout expires.
//!
//! A timer due before `t0 + min_wait` ends the window at that deadline (the driver passes the
//! nearest timer as the wait's timeout). At low load — the first event arrives after
//! `min_wait` — nothing is delayed; at medium load the events of one window are returned
//! together, trading up to `min_wait` of latency for fewer wake-ups, context switches and CPU.
//!
//! # Emulation on epoll and mio
//!
//! The kernel has no support, so the window is built from three syscalls, however many events
//! arrive inside it:
//!
//! ```text
//! t0 = now
//! n  = select(timeout)                 // 1: block until the first event (or timeout)
//! if n == 0 or n == maxevents: return  //    nothing to batch / batch already full
//! end = min(t0 + min_wait, t0 + timeout)
//! if now >= end: return                //    low load: the lone event returns at once
//! sleep until end                      // 2: nanosleep (timer slack 1 ns on workers)
//! select(zero timeout)                 // 3: collect whatever arrived meanwhile
//! ```
//!
//! Sleeping instead of blocking in `select` again is the point: a second blocking `select` would
//! wake (and context-switch) once per arriving event, which is the cost the window removes.
//! The price is that the emulation cannot end a window early when `maxevents` arrive inside it;
//! a collect that fills the buffer is counted as `windows_full`, and the rest is picked up by the
//! next turn, which does not block.
//!
//! One deviation from the patch: when the first wait returned because the reactor was *woken*
//! (another thread queued work for this worker, or a timer was added), no window is opened —
//! queued tasks would only wait without any syscall being saved.
//!
//! # Adaptive
//!
//! [`MinWait::Adaptive`] opens a window of `max` only while recent waits show medium load. Two
//! exponentially weighted averages (weight 1/8) are kept over blocking waits:
//!
//! * `gap` — how long a wait blocked before its first event (a wait that timed out counts its
//!   whole duration, capped at 16 × `max` so the average recovers quickly when load returns);
//! * `events` — how many events a wait returned.
//!
//! The window is open iff `gap ≤ max / 2` (events arrive often enough that a window of `max`
//! is expected to gather at least two more) **and** `events < maxevents / 4` (waits are not
//! already returning large batches on their own, as at high load). At low load `gap` grows past
//! `max / 2` and the window closes, so an idle server never delays its first request.

use std::io;
use std::time::{Duration, Instant};

use crate::sys::{self, Event, WAKE_TOKEN};

/// How long a blocking wait may gather events before returning. See the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MinWait {
    /// Return as soon as one event is ready (plain epoll behaviour).
    #[default]
    Off,
    /// Always gather for up to this long once the first event has arrived.
    Fixed(Duration),
    /// Gather for up to `max` only while recent waits show medium load.
    Adaptive {
        /// The window used while it is open.
        max: Duration,
    },
}

impl MinWait {
    /// The longest window this setting can open.
    pub fn max_window(&self) -> Duration {
        match *self {
            MinWait::Off => Duration::ZERO,
            MinWait::Fixed(d) => d,
            MinWait::Adaptive { max } => max,
        }
    }
}

impl From<Duration> for MinWait {
    /// `Duration::ZERO` is [`MinWait::Off`]; anything else is [`MinWait::Fixed`].
    fn from(d: Duration) -> MinWait {
        if d.is_zero() {
            MinWait::Off
        } else {
            MinWait::Fixed(d)
        }
    }
}

/// Why a wait with a window ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WindowEnd {
    /// `t0 + min_wait` was reached.
    Elapsed,
    /// The wait's timeout (the nearest timer) came first.
    Deadline,
}

/// What one blocking wait did.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WaitReport {
    /// Events returned in total.
    pub(crate) events: usize,
    /// How long the first `select` blocked.
    pub(crate) blocked: Duration,
    /// Set when a window was opened.
    pub(crate) window: Option<WindowReport>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct WindowReport {
    /// Time spent inside the window (from the first event to the end of the collect).
    pub(crate) spent: Duration,
    /// The collecting `select` filled the buffer.
    pub(crate) full: bool,
    pub(crate) end: WindowEnd,
    /// Events gathered by the collect.
    pub(crate) gathered: usize,
}

/// One blocking wait with an optional min_wait window, on any backend without kernel support.
pub(crate) fn wait(
    selector: &mut sys::Selector,
    registry: &sys::Registry,
    out: &mut Vec<Event>,
    max: usize,
    timeout: Option<Duration>,
    window: Option<Duration>,
) -> io::Result<WaitReport> {
    let t0 = Instant::now();
    let n = selector.select(registry, out, max, timeout)?;
    let first = Instant::now();
    let mut report = WaitReport {
        events: n,
        blocked: first - t0,
        window: None,
    };
    let Some(min_wait) = window else {
        return Ok(report);
    };
    if n == 0 || out.len() >= max || out.iter().any(|e| e.token == WAKE_TOKEN) {
        return Ok(report);
    }
    let (mut end, mut why) = (t0 + min_wait, WindowEnd::Elapsed);
    if let Some(t) = timeout
        && t0 + t < end
    {
        (end, why) = (t0 + t, WindowEnd::Deadline);
    }
    if first >= end {
        return Ok(report);
    }
    tracing::trace!(
        target: "weir::sched",
        first_events = n,
        window_ns = (end - first).as_nanos() as u64,
        "min_wait window opened"
    );
    std::thread::sleep(end - first);
    let gathered = selector.select(registry, out, max, Some(Duration::ZERO))?;
    report.events += gathered;
    report.window = Some(WindowReport {
        spent: first.elapsed(),
        full: out.len() >= max,
        end: why,
        gathered,
    });
    Ok(report)
}

/// Chooses the window of each blocking wait (fixed, or adaptive per the rule above).
#[derive(Debug)]
pub(crate) struct Policy {
    mode: MinWait,
    max_events: usize,
    /// EWMA of how long waits blocked before their first event, in ns.
    gap_ns: u64,
    /// EWMA of events per wait, fixed point ×16.
    events_x16: u64,
    open: bool,
}

impl Policy {
    pub(crate) fn new(mode: MinWait, max_events: usize) -> Policy {
        Policy {
            mode,
            max_events,
            // Start at the threshold, closed: the window opens after a few short gaps.
            gap_ns: u64::try_from(mode.max_window().as_nanos()).unwrap_or(u64::MAX / 16),
            events_x16: 16,
            open: false,
        }
    }

    /// The window for the next blocking wait.
    pub(crate) fn window(&self) -> Option<Duration> {
        match self.mode {
            MinWait::Off => None,
            MinWait::Fixed(d) if d.is_zero() => None,
            MinWait::Fixed(d) => Some(d),
            MinWait::Adaptive { max } => self.open.then_some(max),
        }
    }

    /// Feeds one blocking wait into the averages; returns `Some(open)` when the adaptive window
    /// changed state.
    pub(crate) fn record(&mut self, report: &WaitReport) -> Option<bool> {
        let MinWait::Adaptive { max } = self.mode else {
            return None;
        };
        // A long idle wait counts as 16 windows, so the average recovers within a few dozen
        // waits when load returns.
        let cap = u64::try_from(max.as_nanos().saturating_mul(16)).unwrap_or(u64::MAX / 16);
        let gap = u64::try_from(report.blocked.as_nanos())
            .unwrap_or(u64::MAX)
            .min(cap);
        self.gap_ns = self.gap_ns - self.gap_ns / 8 + gap / 8;
        let ev = (report.events as u64).saturating_mul(16);
        self.events_x16 = self.events_x16 - self.events_x16 / 8 + ev / 8;
        let half = u64::try_from(max.as_nanos() / 2).unwrap_or(u64::MAX);
        let open =
            self.gap_ns <= half && self.events_x16 < (self.max_events as u64).saturating_mul(4);
        let changed = open != self.open;
        self.open = open;
        changed.then_some(open)
    }

    /// EWMA of the blocking gap (for tracing).
    pub(crate) fn gap(&self) -> Duration {
        Duration::from_nanos(self.gap_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(blocked_us: u64, events: usize) -> WaitReport {
        WaitReport {
            events,
            blocked: Duration::from_micros(blocked_us),
            window: None,
        }
    }

    #[test]
    fn adaptive_opens_at_medium_load_and_closes_at_low_load() {
        let max = Duration::from_micros(200);
        let mut p = Policy::new(MinWait::Adaptive { max }, 256);
        assert_eq!(p.window(), None, "starts closed");
        // Medium load: waits block ~20 µs and return one event.
        for _ in 0..64 {
            p.record(&report(20, 1));
        }
        assert_eq!(p.window(), Some(max));
        // Low load: waits block for milliseconds.
        for _ in 0..64 {
            p.record(&report(5_000, 1));
        }
        assert_eq!(p.window(), None);
    }

    #[test]
    fn adaptive_stays_closed_when_batches_are_already_large() {
        let max = Duration::from_micros(200);
        let mut p = Policy::new(MinWait::Adaptive { max }, 256);
        for _ in 0..64 {
            p.record(&report(0, 200));
        }
        assert_eq!(p.window(), None);
    }

    #[test]
    fn fixed_and_off() {
        let d = Duration::from_micros(50);
        assert_eq!(Policy::new(MinWait::Fixed(d), 8).window(), Some(d));
        assert_eq!(Policy::new(MinWait::Off, 8).window(), None);
        assert_eq!(MinWait::from(Duration::ZERO), MinWait::Off);
    }
}
