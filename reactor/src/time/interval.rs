use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use super::sleep::sleep_from;
use super::{Instant, Sleep};

/// What an [`Interval`] does when ticks were missed (the task was late by more than a period).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MissedTickBehavior {
    /// Fire the missed ticks back to back until caught up, keeping the original schedule.
    #[default]
    Burst,
    /// Restart the schedule one period after the late tick.
    Delay,
    /// Skip the missed ticks; the next tick is the next multiple of the period on the original
    /// schedule.
    Skip,
}

/// Ticks every `period`, the first tick completing at once.
///
/// A period too long for an `Instant` (e.g. `Duration::MAX`) puts the next tick about 30 years
/// away.
///
/// # Panics
/// If `period` is zero.
#[track_caller]
pub fn interval(period: Duration) -> Interval {
    interval_at(Instant::now(), period)
}

/// Ticks every `period`, the first tick at `start`.
///
/// # Panics
/// If `period` is zero.
#[track_caller]
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    assert!(
        !period.is_zero(),
        "weir::time::interval: `period` must be non-zero"
    );
    Interval {
        delay: sleep_from(start, "interval"),
        period,
        missed: MissedTickBehavior::default(),
    }
}

/// A stream of ticks; see [`interval`].
#[derive(Debug)]
pub struct Interval {
    delay: Sleep,
    period: Duration,
    missed: MissedTickBehavior,
}

impl Interval {
    /// Completes at the next tick, returning its scheduled instant.
    ///
    /// # Cancel safety
    /// Cancel safe: a tick is consumed only when this returns.
    pub async fn tick(&mut self) -> Instant {
        poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick.
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        ready!(Pin::new(&mut self.delay).poll(cx));
        let scheduled = self.delay.deadline();
        let now = Instant::now();
        let on_schedule = scheduled.saturating_add(self.period);
        let next = if now > on_schedule {
            match self.missed {
                MissedTickBehavior::Burst => on_schedule,
                MissedTickBehavior::Delay => now.saturating_add(self.period),
                MissedTickBehavior::Skip => {
                    // The first tick of the original schedule after `now`.
                    let late = (now - scheduled).as_nanos();
                    let period = self.period.as_nanos();
                    let ahead = (late / period + 1) * period;
                    match u64::try_from(ahead) {
                        Ok(ns) => scheduled.saturating_add(Duration::from_nanos(ns)),
                        Err(_) => Instant::far_future(),
                    }
                }
            }
        } else {
            on_schedule
        };
        Pin::new(&mut self.delay).reset(next);
        Poll::Ready(scheduled)
    }

    /// Restarts the schedule: the next tick is one period from now.
    pub fn reset(&mut self) {
        self.reset_after(self.period);
    }

    /// Restarts the schedule: the next tick completes at once, the following ones a period
    /// apart from it.
    pub fn reset_immediately(&mut self) {
        self.reset_at(Instant::now());
    }

    /// Restarts the schedule: the next tick is `after` from now, the following ones a period
    /// apart from it. A delay too long for an `Instant` puts it about 30 years away.
    pub fn reset_after(&mut self, after: Duration) {
        self.reset_at(Instant::now().saturating_add(after));
    }

    /// Restarts the schedule: the next tick is at `deadline`, the following ones a period apart
    /// from it.
    pub fn reset_at(&mut self, deadline: Instant) {
        Pin::new(&mut self.delay).reset(deadline);
    }

    /// The missed-tick behaviour.
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.missed
    }

    /// Sets the missed-tick behaviour.
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.missed = behavior;
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }
}
