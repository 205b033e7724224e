//! Runtime metrics: what the workers record (`recorder/`), read through [`RuntimeMetrics`]; an
//! interval sampler over them (`sampler.rs`); the task dump (`dump.rs`); the monitor thread
//! that reports stalls and dumps on a signal (`monitor.rs`, with the stalled thread's
//! backtrace in `backtrace.rs`).
//!
//! Every counter is always on: no cfg flag, no feature. What each costs a worker is in the
//! docs' production page (`docs/production.md`).

mod backtrace;
pub(crate) mod dump;
pub(crate) mod monitor;
mod sampler;

use std::fmt;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Duration;

use weir_reactor::ReactorStats;

use crate::recorder::{DurationHistogram, HistogramConfig, QUEUES, WAITED_BUCKETS};
use crate::shared::Shared;

pub use dump::{TaskDump, TaskInfo, TaskState};
pub use sampler::{RuntimeInterval, RuntimeIntervals};

/// A handle to a runtime's metrics; every call reads the live counters.
///
/// Per worker ([`worker`](Self::worker)): polls, busy and parked time, parks, a poll-time and
/// a scheduling-delay histogram, the longest poll, stalls, steals, overflows, the local queue,
/// cross-worker wake-ups and the worker's reactor (I/O events per wait, min_wait windows,
/// timers). Per runtime: tasks spawned and alive, the inject queue, the blocking pool, forced
/// yields. [`intervals`](Self::intervals) turns them into deltas per interval with a busy
/// ratio per worker. tokio's runtime metrics are here under tokio's names as well
/// ([`worker_total_busy_duration`](Self::worker_total_busy_duration),
/// [`worker_park_count`](Self::worker_park_count), …).
#[derive(Clone)]
pub struct RuntimeMetrics {
    pub(crate) shared: Arc<Shared>,
}

/// A snapshot of one worker's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Task polls (the polls of a current-thread runtime's `block_on` future included).
    pub polls: u64,
    /// Time the worker was busy: running its loop and not blocked in its reactor for want
    /// of work (tokio's `worker_total_busy_duration`).
    pub busy: Duration,
    /// Time the worker was blocked in its reactor for want of work.
    pub parked: Duration,
    /// Parks and unparks: odd while the worker is parked (tokio's
    /// `worker_park_unpark_count`).
    pub park_unparks: u64,
    /// The durations of the timed polls (see `Builder::time_polls`; empty when polls are
    /// not timed).
    pub poll_time: DurationHistogram,
    /// The time from a task's wake-up (or spawn) to the start of its poll, for the timed
    /// polls.
    pub schedule_delay: DurationHistogram,
    /// The longest timed poll.
    pub longest_poll: Duration,
    /// Polls that reached the stall threshold (`Builder::stall_threshold`), by duration.
    pub stalls: DurationHistogram,
    /// Successful steal operations (each took half of another worker's queue).
    pub steals: u64,
    /// Tasks taken by those steals.
    pub stolen_tasks: u64,
    /// Spin phases (busy_poll) that found work before the deadline.
    pub spins_found: u64,
    /// Spin phases that found nothing and fell through to parking.
    pub spins_gave_up: u64,
    /// Times the worker blocked in its reactor.
    pub parks: u64,
    /// Tasks queued while the local queue was full or its backlog held tasks: they went to the
    /// worker's backlog, which continues the local queue in order.
    pub overflows: u64,
    /// Polls taken from the LIFO slot.
    pub lifo_polls: u64,
    /// Times this worker, idle, collected I/O events from a busy peer's reactor and ran their
    /// tasks (I/O stealing).
    pub io_steals: u64,
    /// Wake-ups this worker made of tasks that another worker polled last: the woken task
    /// moves to this worker (or, if pinned, this worker hands it to its own). A request whose
    /// chain stays on one core makes none.
    pub cross_worker_wakes: u64,
    /// Tasks in the local queue and its backlog right now.
    pub local_queue_depth: u64,
    /// How long tasks waited in this worker's queues, counted in the worker's polls, by the
    /// queue they were taken from.
    pub polls_waited: PollsWaited,
    /// The worker's reactor: waits, events per wait, min_wait windows, timers, wake-ups.
    pub reactor: ReactorStats,
}

impl WorkerStats {
    /// What happened between `earlier` (a snapshot of the same worker) and this snapshot:
    /// counters, times and histograms as differences; the local queue depth, the longest
    /// poll and the reactor's registrations and armed timers as they are now.
    pub fn since(&self, earlier: &WorkerStats) -> WorkerStats {
        let r = &self.reactor;
        let e = &earlier.reactor;
        let mut epw = r.events_per_wait;
        for (a, b) in epw.iter_mut().zip(e.events_per_wait) {
            *a = a.saturating_sub(b);
        }
        let mut reactor = r.clone();
        reactor.waits = r.waits.saturating_sub(e.waits);
        reactor.polls = r.polls.saturating_sub(e.polls);
        reactor.events = r.events.saturating_sub(e.events);
        reactor.events_per_wait = epw;
        reactor.windows_opened = r.windows_opened.saturating_sub(e.windows_opened);
        reactor.windows_full = r.windows_full.saturating_sub(e.windows_full);
        reactor.window_nanos = r.window_nanos.saturating_sub(e.window_nanos);
        reactor.window_events = r.window_events.saturating_sub(e.window_events);
        reactor.window_probes_kept = r.window_probes_kept.saturating_sub(e.window_probes_kept);
        reactor.window_probes_refused = r
            .window_probes_refused
            .saturating_sub(e.window_probes_refused);
        reactor.timers_fired = r.timers_fired.saturating_sub(e.timers_fired);
        reactor.timer_spin_nanos = r.timer_spin_nanos.saturating_sub(e.timer_spin_nanos);
        reactor.wakes_received = r.wakes_received.saturating_sub(e.wakes_received);
        reactor.wakes_sent = r.wakes_sent.saturating_sub(e.wakes_sent);
        reactor.unparks_running = r.unparks_running.saturating_sub(e.unparks_running);
        reactor.events_stolen = r.events_stolen.saturating_sub(e.events_stolen);
        reactor.budget_forced_yields = r
            .budget_forced_yields
            .saturating_sub(e.budget_forced_yields);
        WorkerStats {
            polls: self.polls.saturating_sub(earlier.polls),
            busy: self.busy.saturating_sub(earlier.busy),
            parked: self.parked.saturating_sub(earlier.parked),
            park_unparks: self.park_unparks.saturating_sub(earlier.park_unparks),
            poll_time: self.poll_time.since(&earlier.poll_time),
            schedule_delay: self.schedule_delay.since(&earlier.schedule_delay),
            longest_poll: self.longest_poll,
            stalls: self.stalls.since(&earlier.stalls),
            steals: self.steals.saturating_sub(earlier.steals),
            stolen_tasks: self.stolen_tasks.saturating_sub(earlier.stolen_tasks),
            spins_found: self.spins_found.saturating_sub(earlier.spins_found),
            spins_gave_up: self.spins_gave_up.saturating_sub(earlier.spins_gave_up),
            parks: self.parks.saturating_sub(earlier.parks),
            overflows: self.overflows.saturating_sub(earlier.overflows),
            lifo_polls: self.lifo_polls.saturating_sub(earlier.lifo_polls),
            io_steals: self.io_steals.saturating_sub(earlier.io_steals),
            cross_worker_wakes: self
                .cross_worker_wakes
                .saturating_sub(earlier.cross_worker_wakes),
            local_queue_depth: self.local_queue_depth,
            polls_waited: self.polls_waited.since(&earlier.polls_waited),
            reactor,
        }
    }
}

/// How many polls a worker made between queuing a task and polling it: a histogram per queue
/// the task was taken from.
///
/// Bucket 0 counts tasks that ran next (0 polls in between); bucket `i` (1 ≤ `i` < 15) those
/// that waited 2^(i−1) to 2^i − 1 polls; bucket 15 those that waited 2^14 polls or more
/// ([`bucket_range`](Self::bucket_range)). Only tasks queued by the same worker that polls them
/// are counted: a task stolen by another worker, or woken from another thread (through the
/// inject queue), has no wait this worker saw.
/// A worker that serves every ready task in order, as an event loop does, keeps every wait
/// under the number of tasks ready at once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PollsWaited {
    /// Taken from the LIFO slot (woken by the task polled just before).
    pub lifo: [u64; WAITED_BUCKETS],
    /// Taken from the local queue, where they were queued.
    pub local: [u64; WAITED_BUCKETS],
    /// Queued in the worker's backlog (the local queue was full): taken from the backlog, or
    /// from the local queue it was moved into.
    pub overflow: [u64; WAITED_BUCKETS],
    /// `spawn_local` tasks, taken from the pinned queue.
    pub pinned: [u64; WAITED_BUCKETS],
}

impl PollsWaited {
    /// Number of buckets of each histogram.
    pub const BUCKETS: usize = WAITED_BUCKETS;

    /// The waits bucket `i` counts, in polls: `(low, Some(high))` inclusive, or `(low, None)`
    /// for the last, open bucket.
    ///
    /// # Panics
    /// If `i >= BUCKETS`.
    pub fn bucket_range(i: usize) -> (u64, Option<u64>) {
        assert!(i < WAITED_BUCKETS, "bucket {i} out of range");
        match i {
            0 => (0, Some(0)),
            i if i == WAITED_BUCKETS - 1 => (1 << (i - 1), None),
            i => (1 << (i - 1), Some((1 << i) - 1)),
        }
    }

    /// The four histograms summed.
    pub fn total(&self) -> [u64; WAITED_BUCKETS] {
        let mut all = [0; WAITED_BUCKETS];
        for h in [&self.lifo, &self.local, &self.overflow, &self.pinned] {
            for (a, v) in all.iter_mut().zip(h) {
                *a += v;
            }
        }
        all
    }

    /// The counts since `earlier` (a snapshot of the same worker).
    pub fn since(&self, earlier: &PollsWaited) -> PollsWaited {
        let d = |a: &[u64; WAITED_BUCKETS], b: &[u64; WAITED_BUCKETS]| {
            std::array::from_fn(|i| a[i].saturating_sub(b[i]))
        };
        PollsWaited {
            lifo: d(&self.lifo, &earlier.lifo),
            local: d(&self.local, &earlier.local),
            overflow: d(&self.overflow, &earlier.overflow),
            pinned: d(&self.pinned, &earlier.pinned),
        }
    }
}

impl Default for DurationHistogram {
    fn default() -> DurationHistogram {
        crate::recorder::Histogram::new(HistogramConfig::DEFAULT).snapshot()
    }
}

impl RuntimeMetrics {
    /// Number of workers.
    pub fn num_workers(&self) -> usize {
        self.shared.remotes.len()
    }

    /// Counters of worker `index`.
    ///
    /// # Panics
    /// If `index >= num_workers()`.
    pub fn worker(&self, index: usize) -> WorkerStats {
        let r = &self.shared.remotes[index];
        let m = &r.metrics;
        let (busy, parked) = m.times();
        WorkerStats {
            polls: m.polls.get(),
            busy,
            parked,
            park_unparks: m.park_unparks.get(),
            poll_time: m.poll_time.snapshot(),
            schedule_delay: m.schedule_delay.snapshot(),
            longest_poll: Duration::from_nanos(
                m.longest_poll_ns.load(std::sync::atomic::Ordering::Relaxed),
            ),
            stalls: m.stalls.snapshot(),
            steals: m.steals.get(),
            stolen_tasks: m.stolen_tasks.get(),
            spins_found: m.spins_found.get(),
            spins_gave_up: m.spins_gave_up.get(),
            parks: m.parks(),
            overflows: m.overflows.get(),
            lifo_polls: m.lifo_polls.get(),
            io_steals: m.io_steals.get(),
            cross_worker_wakes: m.cross_worker_wakes.get(),
            local_queue_depth: (r.steal.len() + r.backlog.len()) as u64,
            polls_waited: {
                // Indexed by the queue bits of `QueuedAt`.
                let h = |q: usize| std::array::from_fn(|i| m.polls_waited[q][i].get());
                const _: () = assert!(QUEUES == 4);
                PollsWaited {
                    local: h(0),
                    lifo: h(1),
                    overflow: h(2),
                    pinned: h(3),
                }
            },
            reactor: r.reactor.stats(),
        }
    }

    /// The thread running worker `index` right now: for the multi-thread flavour, the worker's
    /// thread while the runtime runs; for the current-thread flavour, the thread inside
    /// `block_on`, if any. `None` when no thread runs it (it may move to another thread; see
    /// `weir::task::block_in_place`).
    ///
    /// # Panics
    /// If `index >= num_workers()`.
    pub fn worker_thread_id(&self, index: usize) -> Option<ThreadId> {
        *self.shared.remotes[index].thread.lock()
    }

    /// Counters of every worker.
    pub fn workers(&self) -> Vec<WorkerStats> {
        (0..self.num_workers()).map(|i| self.worker(i)).collect()
    }

    /// Tasks spawned and not yet completed.
    pub fn num_alive_tasks(&self) -> usize {
        self.shared.owned.len()
    }

    /// Tasks spawned since the runtime was built, blocking closures included (tokio's
    /// `spawned_tasks_count`).
    pub fn spawned_tasks_count(&self) -> u64 {
        self.shared.spawned.get()
    }

    /// Tasks in the global inject queue.
    pub fn injection_queue_depth(&self) -> usize {
        self.shared.inject.len()
    }

    /// Tasks in the global inject queue (tokio's name for
    /// [`injection_queue_depth`](Self::injection_queue_depth)).
    pub fn global_queue_depth(&self) -> usize {
        self.injection_queue_depth()
    }

    /// Workers currently searching for work to steal.
    pub fn num_searching_workers(&self) -> usize {
        self.shared.idle.num_searching()
    }

    /// Workers currently sleeping in their reactor.
    pub fn num_sleeping_workers(&self) -> usize {
        self.shared.idle.num_sleeping()
    }

    /// Threads of the blocking pool.
    pub fn num_blocking_threads(&self) -> usize {
        self.shared.blocking.num_threads()
    }

    /// Idle threads of the blocking pool.
    pub fn num_idle_blocking_threads(&self) -> usize {
        self.shared.blocking.num_idle()
    }

    /// Closures waiting for a blocking-pool thread.
    pub fn blocking_queue_depth(&self) -> usize {
        self.shared.blocking.queue_depth()
    }

    /// Times an I/O operation, a timer or a join handle returned `Pending` because its task
    /// had spent its cooperative budget, on all workers (tokio's
    /// `budget_forced_yield_count`).
    pub fn budget_forced_yield_count(&self) -> u64 {
        self.shared
            .remotes
            .iter()
            .map(|r| r.reactor.stats().budget_forced_yields)
            .sum()
    }

    /// Stalls so far, on all workers (polls that reached the stall threshold).
    pub fn stall_count(&self) -> u64 {
        self.shared
            .remotes
            .iter()
            .map(|r| r.metrics.stalls.snapshot().count())
            .sum()
    }

    /// `true` if every poll is timed here (the poll-time and scheduling-delay histograms
    /// fill); see `Builder::time_polls`.
    pub fn polls_timed(&self) -> bool {
        self.shared.config.timing.polls
    }

    /// The clock the workers time polls and parks with: `"tsc"` (x86_64's invariant
    /// time-stamp counter), `"cntvct"` (aarch64's virtual counter) or `"os-clock"` (the OS's
    /// monotonic clock, where neither is usable).
    pub fn clock_source(&self) -> &'static str {
        crate::recorder::ticks::source().name()
    }

    /// The stall threshold, `None` when stall detection is off.
    pub fn stall_threshold(&self) -> Option<Duration> {
        self.shared.config.timing.stall
    }

    /// How long worker `worker` has been busy (tokio's name; see [`WorkerStats::busy`]).
    ///
    /// # Panics
    /// If `worker >= num_workers()`.
    pub fn worker_total_busy_duration(&self, worker: usize) -> Duration {
        self.shared.remotes[worker].metrics.busy()
    }

    /// How many times worker `worker` parked (tokio's name; see [`WorkerStats::parks`]).
    ///
    /// # Panics
    /// If `worker >= num_workers()`.
    pub fn worker_park_count(&self, worker: usize) -> u64 {
        self.shared.remotes[worker].metrics.parks()
    }

    /// Parks and unparks of worker `worker`: odd while it is parked (tokio's name; see
    /// [`WorkerStats::park_unparks`]).
    ///
    /// # Panics
    /// If `worker >= num_workers()`.
    pub fn worker_park_unpark_count(&self, worker: usize) -> u64 {
        self.shared.remotes[worker].metrics.park_unparks.get()
    }

    /// Polls by worker `worker` (tokio's name).
    ///
    /// # Panics
    /// If `worker >= num_workers()`.
    pub fn worker_poll_count(&self, worker: usize) -> u64 {
        self.shared.remotes[worker].metrics.polls.get()
    }

    /// Tasks worker `worker` stole (tokio's name).
    ///
    /// # Panics
    /// If `worker >= num_workers()`.
    pub fn worker_steal_count(&self, worker: usize) -> u64 {
        self.shared.remotes[worker].metrics.stolen_tasks.get()
    }

    /// Steal operations of worker `worker` (tokio's name).
    ///
    /// # Panics
    /// If `worker >= num_workers()`.
    pub fn worker_steal_operations(&self, worker: usize) -> u64 {
        self.shared.remotes[worker].metrics.steals.get()
    }

    /// Times worker `worker`'s local queue overflowed (tokio's name).
    ///
    /// # Panics
    /// If `worker >= num_workers()`.
    pub fn worker_overflow_count(&self, worker: usize) -> u64 {
        self.shared.remotes[worker].metrics.overflows.get()
    }

    /// Tasks in worker `worker`'s local queue and its backlog (tokio's name).
    ///
    /// # Panics
    /// If `worker >= num_workers()`.
    pub fn worker_local_queue_depth(&self, worker: usize) -> usize {
        let r = &self.shared.remotes[worker];
        r.steal.len() + r.backlog.len()
    }

    /// The mean duration of worker `worker`'s timed polls (tokio's name; tokio's is a moving
    /// average, this one is over the runtime's life — use [`intervals`](Self::intervals) for
    /// recent ones).
    ///
    /// # Panics
    /// If `worker >= num_workers()`.
    pub fn worker_mean_poll_time(&self, worker: usize) -> Duration {
        self.shared.remotes[worker]
            .metrics
            .poll_time
            .snapshot()
            .mean()
    }

    /// I/O events delivered by every worker's reactor (tokio's `io_driver_ready_count`).
    pub fn io_driver_ready_count(&self) -> u64 {
        self.shared
            .remotes
            .iter()
            .map(|r| r.reactor.stats().events)
            .sum()
    }

    /// The layout of the poll-time histograms (tokio's `poll_time_histogram_*` bounds).
    pub fn poll_time_histogram_config(&self) -> HistogramConfig {
        self.shared.config.timing.poll_time
    }

    /// The layout of the scheduling-delay histograms.
    pub fn schedule_delay_histogram_config(&self) -> HistogramConfig {
        self.shared.config.timing.schedule_delay
    }

    /// Deltas of every metric per interval, in the manner of tokio-metrics'
    /// `RuntimeMonitor`: each call of `next()` on the iterator returns what happened since
    /// the previous one (the first, since this call). "Is the runtime saturated?" is
    /// `intervals.next().unwrap().max_busy_ratio()` close to 1.
    ///
    /// ```
    /// let rt = weir_executor::Builder::new_multi_thread().workers(2).build()?;
    /// let mut intervals = rt.metrics().intervals();
    /// rt.block_on(async { weir_executor::spawn(async {}).await.unwrap() });
    /// let interval = intervals.next().unwrap();
    /// assert_eq!(interval.workers.len(), 2);
    /// assert!((0.0..=1.0).contains(&interval.max_busy_ratio()));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn intervals(&self) -> RuntimeIntervals {
        RuntimeIntervals::new(self.clone())
    }
}

impl fmt::Debug for RuntimeMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeMetrics")
            .field("workers", &self.workers())
            .field("alive_tasks", &self.num_alive_tasks())
            .finish()
    }
}
