//! Metrics per interval, in the manner of tokio-metrics' `RuntimeMonitor`: each step of
//! [`RuntimeIntervals`] snapshots every worker and returns the differences from the previous
//! snapshot, with the interval's length, so that a ratio (busy time over the interval) answers
//! "is it saturated?" in one call.

use std::time::{Duration, Instant};

use super::{RuntimeMetrics, WorkerStats};

/// An endless iterator of [`RuntimeInterval`]s; see [`RuntimeMetrics::intervals`].
#[derive(Debug)]
pub struct RuntimeIntervals {
    metrics: RuntimeMetrics,
    last: Vec<WorkerStats>,
    last_spawned: u64,
    last_at: Instant,
}

/// What happened in a runtime over one interval.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RuntimeInterval {
    /// The interval's length.
    pub elapsed: Duration,
    /// Each worker's counters over the interval ([`WorkerStats::since`]).
    pub workers: Vec<WorkerStats>,
    /// Tasks spawned during the interval.
    pub spawned_tasks: u64,
    /// Tasks alive at its end.
    pub live_tasks: usize,
    /// Tasks in the inject queue at its end.
    pub global_queue_depth: usize,
    /// Blocking-pool threads at its end.
    pub blocking_threads: usize,
    /// Closures waiting for a blocking-pool thread at its end.
    pub blocking_queue_depth: usize,
}

impl RuntimeIntervals {
    pub(super) fn new(metrics: RuntimeMetrics) -> RuntimeIntervals {
        RuntimeIntervals {
            last: metrics.workers(),
            last_spawned: metrics.spawned_tasks_count(),
            last_at: Instant::now(),
            metrics,
        }
    }
}

impl Iterator for RuntimeIntervals {
    type Item = RuntimeInterval;

    /// The interval since the previous call (or since [`RuntimeMetrics::intervals`]). Never
    /// `None`.
    fn next(&mut self) -> Option<RuntimeInterval> {
        let now = Instant::now();
        let workers = self.metrics.workers();
        let spawned = self.metrics.spawned_tasks_count();
        let interval = RuntimeInterval {
            elapsed: now.duration_since(self.last_at),
            workers: workers
                .iter()
                .zip(&self.last)
                .map(|(w, e)| w.since(e))
                .collect(),
            spawned_tasks: spawned.saturating_sub(self.last_spawned),
            live_tasks: self.metrics.num_alive_tasks(),
            global_queue_depth: self.metrics.global_queue_depth(),
            blocking_threads: self.metrics.num_blocking_threads(),
            blocking_queue_depth: self.metrics.blocking_queue_depth(),
        };
        self.last = workers;
        self.last_spawned = spawned;
        self.last_at = now;
        Some(interval)
    }
}

impl RuntimeInterval {
    /// The share of the interval worker `worker` was busy, 0.0 to 1.0.
    ///
    /// # Panics
    /// If `worker` is not a worker of the runtime.
    pub fn busy_ratio(&self, worker: usize) -> f64 {
        let elapsed = self.elapsed.as_secs_f64();
        if elapsed == 0.0 {
            return 0.0;
        }
        (self.workers[worker].busy.as_secs_f64() / elapsed).clamp(0.0, 1.0)
    }

    /// The busiest worker's [`busy_ratio`](Self::busy_ratio): close to 1.0, that worker is
    /// saturated.
    pub fn max_busy_ratio(&self) -> f64 {
        (0..self.workers.len())
            .map(|w| self.busy_ratio(w))
            .fold(0.0, f64::max)
    }

    /// The mean of the workers' busy ratios: close to 1.0, the runtime is saturated.
    pub fn mean_busy_ratio(&self) -> f64 {
        if self.workers.is_empty() {
            return 0.0;
        }
        (0..self.workers.len())
            .map(|w| self.busy_ratio(w))
            .sum::<f64>()
            / self.workers.len() as f64
    }

    /// Polls by all workers during the interval.
    pub fn total_polls(&self) -> u64 {
        self.workers.iter().map(|w| w.polls).sum()
    }

    /// Stalls that ended during the interval, on all workers.
    pub fn total_stalls(&self) -> u64 {
        self.workers.iter().map(|w| w.stalls.count()).sum()
    }

    /// The mean duration of the interval's timed polls, over all workers.
    pub fn mean_poll_time(&self) -> Duration {
        let (sum, n) = self
            .workers
            .iter()
            .fold((Duration::ZERO, 0u64), |(s, n), w| {
                (s + w.poll_time.sum(), n + w.poll_time.count())
            });
        match n {
            0 => Duration::ZERO,
            n => sum / u32::try_from(n).unwrap_or(u32::MAX),
        }
    }
}
