//! Duration histograms a worker fills as it runs (poll times, scheduling delays, stalls), and
//! how their buckets are laid out ([`HistogramConfig`]).
//!
//! A bucket is one counter written by its worker alone (a plain load and store), and the
//! bucket of a duration is found with a shift and a leading-zero count on the log scale (a
//! division on the linear one): a few instructions per recorded duration, no search.

use std::fmt;
use std::ops::Range;
use std::time::Duration;

use weir_reactor::for_executor::Counter;

/// The most buckets a histogram may have.
pub const MAX_HISTOGRAM_BUCKETS: usize = 64;

/// How a duration histogram divides time into buckets: on a log scale (each bucket twice as
/// wide as the one before, the default) or a linear one, as tokio's histogram configurations
/// do. The last bucket is open-ended: it holds everything above the second-to-last bound.
///
/// ```
/// use std::time::Duration;
/// use weir_executor::HistogramConfig;
///
/// // Buckets [0, 1.024 µs), [1.024, 2.048 µs), …, doubling; the last one open.
/// let log = HistogramConfig::log(Duration::from_nanos(1024), 20);
/// assert_eq!(log.bucket_range(2), Duration::from_nanos(2048)..Duration::from_nanos(4096));
/// assert_eq!(log.bucket_range(19).end, Duration::MAX);
///
/// let linear = HistogramConfig::linear(Duration::from_micros(100), 10);
/// assert_eq!(linear.bucket_range(1), Duration::from_micros(100)..Duration::from_micros(200));
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct HistogramConfig {
    scale: Scale,
    buckets: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scale {
    /// Bucket 0 is `[0, first)`, bucket `i` is `[first·2^(i-1), first·2^i)`.
    Log { first_ns: u64 },
    /// Bucket `i` is `[i·width, (i+1)·width)`.
    Linear { width_ns: u64 },
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl HistogramConfig {
    /// A log-scale histogram: bucket 0 holds durations below `resolution`, each following
    /// bucket is twice as wide as the one before it, and the last one is open-ended.
    /// `resolution` is rounded down to a power of two nanoseconds (at least 1 ns) so that a
    /// worker finds a bucket with a shift. `buckets` must be 2..=[`MAX_HISTOGRAM_BUCKETS`]
    /// (checked by [`Builder::build`](crate::Builder::build)).
    pub fn log(resolution: Duration, buckets: usize) -> HistogramConfig {
        let r = nanos(resolution).max(1);
        let first_ns = 1u64 << (u64::BITS - 1 - r.leading_zeros());
        HistogramConfig {
            scale: Scale::Log { first_ns },
            buckets,
        }
    }

    /// A linear histogram of `buckets` buckets `width` wide, the last one open-ended.
    /// `width` must be at least 1 ns and `buckets` 2..=[`MAX_HISTOGRAM_BUCKETS`] (checked by
    /// [`Builder::build`](crate::Builder::build)).
    pub fn linear(width: Duration, buckets: usize) -> HistogramConfig {
        HistogramConfig {
            scale: Scale::Linear {
                width_ns: nanos(width),
            },
            buckets,
        }
    }

    /// A log-scale histogram whose first bound is `first`, exactly (not rounded): stalls,
    /// whose first bound is the stall threshold.
    pub(crate) fn doubling_from(first: Duration, buckets: usize) -> HistogramConfig {
        HistogramConfig {
            scale: Scale::Log {
                first_ns: nanos(first).max(1),
            },
            buckets,
        }
    }

    /// The default of the poll-time and scheduling-delay histograms: log scale from 1.024 µs,
    /// 20 buckets (the last finite bound is 268 ms).
    pub(crate) const DEFAULT: HistogramConfig = HistogramConfig {
        scale: Scale::Log { first_ns: 1 << 10 },
        buckets: 20,
    };

    /// The number of buckets.
    pub fn num_buckets(&self) -> usize {
        self.buckets
    }

    /// The durations bucket `bucket` holds; the last bucket ends at `Duration::MAX`.
    ///
    /// # Panics
    /// If `bucket >= num_buckets()`.
    pub fn bucket_range(&self, bucket: usize) -> Range<Duration> {
        assert!(
            bucket < self.buckets,
            "bucket {bucket} does not exist (the histogram has {})",
            self.buckets
        );
        let bound = |i: usize| -> u64 {
            match self.scale {
                Scale::Log { .. } if i == 0 => 0,
                Scale::Log { first_ns } => first_ns.saturating_mul(1u64 << (i - 1).min(63)),
                Scale::Linear { width_ns } => width_ns.saturating_mul(i as u64),
            }
        };
        let start = Duration::from_nanos(bound(bucket));
        let end = if bucket + 1 == self.buckets {
            Duration::MAX
        } else {
            Duration::from_nanos(bound(bucket + 1))
        };
        start..end
    }

    /// The checks of `Builder::build`: what is wrong with this configuration, if anything.
    pub(crate) fn problem(&self) -> Option<String> {
        if !(2..=MAX_HISTOGRAM_BUCKETS).contains(&self.buckets) {
            return Some(format!(
                "{} buckets: a histogram has 2 to {MAX_HISTOGRAM_BUCKETS}",
                self.buckets
            ));
        }
        if let Scale::Linear { width_ns: 0 } = self.scale {
            return Some("a linear histogram's bucket width must be at least 1 ns".into());
        }
        None
    }
}

impl Default for HistogramConfig {
    fn default() -> HistogramConfig {
        HistogramConfig::DEFAULT
    }
}

impl fmt::Debug for HistogramConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.scale {
            Scale::Log { first_ns } => f
                .debug_struct("HistogramConfig::log")
                .field("resolution", &Duration::from_nanos(first_ns))
                .field("buckets", &self.buckets)
                .finish(),
            Scale::Linear { width_ns } => f
                .debug_struct("HistogramConfig::linear")
                .field("width", &Duration::from_nanos(width_ns))
                .field("buckets", &self.buckets)
                .finish(),
        }
    }
}

/// A histogram filled by one worker.
pub(crate) struct Histogram {
    config: HistogramConfig,
    /// How a duration becomes a bucket index.
    index: Index,
    /// The last bucket's index (`< MAX_HISTOGRAM_BUCKETS`).
    last: usize,
    /// Fixed size, so that an index capped at `last` needs no bounds check.
    buckets: [Counter; MAX_HISTOGRAM_BUCKETS],
    sum_ns: Counter,
}

#[derive(Clone, Copy)]
enum Index {
    /// Log scale, first bound `1 << shift`: the bit length of `ns >> shift`.
    Shift(u32),
    /// Log scale, first bound not a power of two (stalls): the bit length of `ns / first`.
    Divide(u64),
    /// Linear scale: `ns / width`.
    Linear(u64),
}

impl Histogram {
    pub(crate) fn new(config: HistogramConfig) -> Histogram {
        let n = config.buckets.clamp(1, MAX_HISTOGRAM_BUCKETS);
        let index = match config.scale {
            Scale::Log { first_ns } if first_ns.is_power_of_two() => {
                Index::Shift(first_ns.trailing_zeros())
            }
            Scale::Log { first_ns } => Index::Divide(first_ns.max(1)),
            Scale::Linear { width_ns } => Index::Linear(width_ns.max(1)),
        };
        Histogram {
            config,
            index,
            last: n - 1,
            buckets: [const { Counter::new() }; MAX_HISTOGRAM_BUCKETS],
            sum_ns: Counter::default(),
        }
    }

    /// Counts a duration of `ns` nanoseconds. Only the owning worker may call this (or, for a
    /// histogram no worker writes, its one writer).
    #[inline]
    pub(crate) fn record(&self, ns: u64) {
        let i = match self.index {
            Index::Shift(shift) => (u64::BITS - (ns >> shift).leading_zeros()) as usize,
            Index::Divide(first) => (u64::BITS - (ns / first).leading_zeros()) as usize,
            Index::Linear(width) => usize::try_from(ns / width).unwrap_or(usize::MAX),
        };
        // `last < MAX_HISTOGRAM_BUCKETS`, a power of two: the mask only spares a bounds check.
        self.buckets[i.min(self.last) & (MAX_HISTOGRAM_BUCKETS - 1)].add_owner(1);
        self.sum_ns.add_owner(ns);
    }

    pub(crate) fn snapshot(&self) -> DurationHistogram {
        DurationHistogram {
            config: self.config,
            counts: self.buckets[..=self.last]
                .iter()
                .map(Counter::get)
                .collect(),
            sum: Duration::from_nanos(self.sum_ns.get()),
        }
    }
}

/// A snapshot of a duration histogram: how many durations fell in each bucket, and their sum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurationHistogram {
    config: HistogramConfig,
    counts: Vec<u64>,
    sum: Duration,
}

impl DurationHistogram {
    /// The layout of the buckets.
    pub fn config(&self) -> HistogramConfig {
        self.config
    }

    /// The count of each bucket, in order.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// The durations bucket `bucket` holds; see [`HistogramConfig::bucket_range`].
    pub fn bucket_range(&self, bucket: usize) -> Range<Duration> {
        self.config.bucket_range(bucket)
    }

    /// How many durations were recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The sum of the recorded durations.
    pub fn sum(&self) -> Duration {
        self.sum
    }

    /// The mean of the recorded durations (zero when none was).
    pub fn mean(&self) -> Duration {
        match self.count() {
            0 => Duration::ZERO,
            n => self.sum / u32::try_from(n).unwrap_or(u32::MAX),
        }
    }

    /// What was recorded since `earlier` (a snapshot of the same histogram).
    pub fn since(&self, earlier: &DurationHistogram) -> DurationHistogram {
        DurationHistogram {
            config: self.config,
            counts: self
                .counts
                .iter()
                .zip(earlier.counts.iter().chain(std::iter::repeat(&0)))
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
            sum: self.sum.saturating_sub(earlier.sum),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket_of(h: &Histogram, ns: u64) -> usize {
        let before = h.snapshot();
        h.record(ns);
        let after = h.snapshot();
        let (before, after) = (before.counts(), after.counts());
        before
            .iter()
            .zip(after)
            .position(|(a, b)| a != b)
            .expect("one bucket moved")
    }

    /// Every duration lands in the bucket whose range holds it, on each scale.
    #[test]
    fn durations_land_in_their_range() {
        let configs = [
            HistogramConfig::DEFAULT,
            HistogramConfig::log(Duration::from_nanos(1000), 8),
            HistogramConfig::linear(Duration::from_micros(100), 10),
            HistogramConfig::doubling_from(Duration::from_millis(100), 8),
        ];
        for config in configs {
            let h = Histogram::new(config);
            for ns in [
                0,
                1,
                999,
                1000,
                1023,
                1024,
                1025,
                4095,
                100_000,
                99_999_999,
                1 << 40,
            ] {
                let i = bucket_of(&h, ns);
                let r = config.bucket_range(i);
                let d = Duration::from_nanos(ns);
                assert!(
                    r.contains(&d),
                    "{config:?}: {ns} ns went to bucket {i} = {r:?}"
                );
            }
        }
    }

    #[test]
    fn resolution_rounds_down_to_a_power_of_two() {
        let c = HistogramConfig::log(Duration::from_nanos(1000), 4);
        assert_eq!(c.bucket_range(1).start, Duration::from_nanos(512));
        assert!(HistogramConfig::log(Duration::ZERO, 4).problem().is_none());
        assert!(
            HistogramConfig::log(Duration::from_micros(1), 1)
                .problem()
                .is_some()
        );
        assert!(
            HistogramConfig::linear(Duration::ZERO, 4)
                .problem()
                .is_some()
        );
    }

    #[test]
    fn sum_mean_and_deltas() {
        let h = Histogram::new(HistogramConfig::DEFAULT);
        h.record(1_000);
        let first = h.snapshot();
        h.record(3_000);
        let second = h.snapshot();
        assert_eq!(second.count(), 2);
        assert_eq!(second.mean(), Duration::from_nanos(2_000));
        let delta = second.since(&first);
        assert_eq!(delta.count(), 1);
        assert_eq!(delta.sum(), Duration::from_nanos(3_000));
    }
}
