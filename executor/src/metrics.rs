//! Runtime metrics: per-worker executor counters (kept in `shared/`, written by each worker)
//! plus each worker's reactor counters.

use std::fmt;
use std::sync::Arc;
use std::thread::ThreadId;

use weir_reactor::ReactorStats;

use crate::shared::{QUEUES, Shared, WAITED_BUCKETS};

/// A handle to a runtime's metrics; every call reads the live counters.
#[derive(Clone)]
pub struct RuntimeMetrics {
    pub(crate) shared: Arc<Shared>,
}

/// A snapshot of one worker's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Task polls.
    pub polls: u64,
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
        WorkerStats {
            polls: m.polls.get(),
            steals: m.steals.get(),
            stolen_tasks: m.stolen_tasks.get(),
            spins_found: m.spins_found.get(),
            spins_gave_up: m.spins_gave_up.get(),
            parks: m.parks.get(),
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

    /// Tasks in the global inject queue.
    pub fn injection_queue_depth(&self) -> usize {
        self.shared.inject.len()
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
}

impl fmt::Debug for RuntimeMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeMetrics")
            .field("workers", &self.workers())
            .field("alive_tasks", &self.num_alive_tasks())
            .finish()
    }
}
