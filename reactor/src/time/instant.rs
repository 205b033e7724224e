//! [`Instant`]: a reading of the clock weir's timers use.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::Duration;

// About 30 years: how far away a deadline that does not fit an `Instant` is put.
use crate::driver::FAR_FUTURE as FAR;

/// A reading of the monotonic clock that weir's timers use.
///
/// It is a [`std::time::Instant`], read through the current runtime's clock: the same as the
/// OS clock, unless the clock is paused for a test ([`pause`](super::pause)), in which case
/// [`now`](Self::now) stands still and moves only with [`advance`](super::advance) or when the
/// idle runtime jumps to its next timer. Deadlines of [`sleep_until`](super::sleep_until),
/// [`timeout_at`](super::timeout_at) and [`interval_at`](super::interval_at) are `Instant`s.
///
/// Convert with [`from_std`](Self::from_std) / [`into_std`](Self::into_std) (or `From`); the
/// two agree unless a clock was paused.
///
/// # Panics
/// Adding or subtracting a `Duration` with `+` or `-` panics if the result does not fit (as
/// `std`'s does); [`checked_add`](Self::checked_add) and [`checked_sub`](Self::checked_sub)
/// do not.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant {
    std: std::time::Instant,
}

impl Instant {
    /// The current reading of the clock: of the current runtime's clock (which may be paused),
    /// or of the OS clock outside any runtime.
    pub fn now() -> Instant {
        Instant {
            std: super::clock::now(),
        }
    }

    /// Wraps a `std` instant.
    pub fn from_std(std: std::time::Instant) -> Instant {
        Instant { std }
    }

    /// The `std` instant inside.
    pub fn into_std(self) -> std::time::Instant {
        self.std
    }

    /// Time from `earlier` to `self`; zero if `earlier` is later.
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        self.std.saturating_duration_since(earlier.std)
    }

    /// Time from `earlier` to `self`, or `None` if `earlier` is later.
    pub fn checked_duration_since(&self, earlier: Instant) -> Option<Duration> {
        self.std.checked_duration_since(earlier.std)
    }

    /// Time from `earlier` to `self`; zero if `earlier` is later.
    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        self.std.saturating_duration_since(earlier.std)
    }

    /// Time since `self`, on the current runtime's clock; zero if `self` is in the future.
    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(*self)
    }

    /// `self + duration`, or `None` if it does not fit.
    pub fn checked_add(&self, duration: Duration) -> Option<Instant> {
        self.std.checked_add(duration).map(Instant::from_std)
    }

    /// `self - duration`, or `None` if it does not fit.
    pub fn checked_sub(&self, duration: Duration) -> Option<Instant> {
        self.std.checked_sub(duration).map(Instant::from_std)
    }

    /// `self + duration`, or about 30 years from now when that does not fit: the deadline of a
    /// timer that is meant never to fire.
    pub(crate) fn saturating_add(self, duration: Duration) -> Instant {
        self.checked_add(duration)
            .unwrap_or_else(Instant::far_future)
    }

    /// About 30 years from now.
    pub(crate) fn far_future() -> Instant {
        Instant::now() + FAR
    }
}

impl From<std::time::Instant> for Instant {
    fn from(std: std::time::Instant) -> Instant {
        Instant::from_std(std)
    }
}

impl From<Instant> for std::time::Instant {
    fn from(instant: Instant) -> std::time::Instant {
        instant.into_std()
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    fn add(self, rhs: Duration) -> Instant {
        self.checked_add(rhs)
            .expect("overflow when adding a duration to an instant")
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;

    fn sub(self, rhs: Duration) -> Instant {
        self.checked_sub(rhs)
            .expect("overflow when subtracting a duration from an instant")
    }
}

impl SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, rhs: Duration) {
        *self = *self - rhs;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;

    /// Saturates at zero, as [`duration_since`](Instant::duration_since).
    fn sub(self, rhs: Instant) -> Duration {
        self.duration_since(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.std.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_matches_std() {
        let std = std::time::Instant::now();
        let t = Instant::from_std(std);
        let d = Duration::from_millis(3);
        assert_eq!((t + d).into_std(), std + d);
        assert_eq!((t + d) - t, d);
        assert_eq!(t - (t + d), Duration::ZERO, "saturates");
        assert_eq!(t.checked_duration_since(t + d), None);
        assert_eq!(t.checked_add(Duration::MAX), None);
        assert!(t.saturating_add(Duration::MAX) > t + FAR - Duration::from_secs(1));
        let mut u = t;
        u += d;
        u -= d;
        assert_eq!(u, t);
        assert_eq!(std::time::Instant::from(Instant::from(std)), std);
    }
}
