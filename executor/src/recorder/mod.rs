//! What a worker records as it runs: its counters, its time (busy, parked, each poll, each
//! scheduling delay), and the poll it is in right now, published for the stall monitor and
//! the task dump. Written by the worker alone with plain loads and stores; read by anyone
//! (`metrics/`).
//!
//! The clock of these recordings is `ticks.rs` (a cycle counter, no syscall); the histograms'
//! layout is `histogram.rs`. The worker loop calls the recording methods (`worker/`); reading,
//! sampling, exporting, the stall monitor and the task dump are `metrics/`.

mod histogram;
pub(crate) mod ticks;

use std::panic::Location;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::time::Duration;

use weir_reactor::for_executor::Counter;

pub(crate) use histogram::Histogram;
pub use histogram::{DurationHistogram, HistogramConfig, MAX_HISTOGRAM_BUCKETS};

/// How the runtime times its workers; fixed when it is built.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timing {
    /// Every poll is timed (its duration, its scheduling delay): the cycle counter is
    /// usable, or the user asked for it anyway.
    pub(crate) polls: bool,
    pub(crate) poll_time: HistogramConfig,
    pub(crate) schedule_delay: HistogramConfig,
    /// A poll at least this long is a stall; `None`: stalls are not detected.
    pub(crate) stall: Option<Duration>,
}

/// Buckets of the stall histogram: the threshold, then doubling (0.1 s … 6.4 s and above at
/// the default threshold).
const STALL_BUCKETS: usize = 8;

/// Queues of [`WorkerMetrics::polls_waited`]: local, LIFO slot, backlog, pinned.
pub(crate) const QUEUES: usize = 4;
/// Buckets of [`WorkerMetrics::polls_waited`]: 0 polls, 1, 2–3, 4–7, …, 2^14 and more.
pub(crate) const WAITED_BUCKETS: usize = 16;

/// The bucket of a wait of `polls` polls.
#[inline]
pub(crate) fn waited_bucket(polls: u32) -> usize {
    ((32 - polls.leading_zeros()) as usize).min(WAITED_BUCKETS - 1)
}

/// Executor counters and times of one worker.
pub(crate) struct WorkerMetrics {
    pub(crate) polls: Counter,
    pub(crate) steals: Counter,
    pub(crate) stolen_tasks: Counter,
    pub(crate) spins_found: Counter,
    pub(crate) spins_gave_up: Counter,
    pub(crate) overflows: Counter,
    pub(crate) lifo_polls: Counter,
    pub(crate) io_steals: Counter,
    pub(crate) cross_worker_wakes: Counter,
    /// Polls this worker made while a task waited in its queues, by the queue the task was
    /// queued in (`shared::QueuedAt`) and log2 bucket ([`waited_bucket`]).
    pub(crate) polls_waited: [[Counter; WAITED_BUCKETS]; QUEUES],
    /// Parks and unparks: odd while parked (tokio's `worker_park_unpark_count`).
    pub(crate) park_unparks: Counter,
    /// Time a thread ran the worker's loop, in ns, up to `running_since`.
    run_ns: AtomicU64,
    /// When the running stretch began (ticks); 0 while no thread runs the loop.
    running_since: AtomicU64,
    /// Time parked, in ns, up to `parked_since`.
    parked_ns: AtomicU64,
    /// When the park in progress began (ticks); 0 when not parked.
    parked_since: AtomicU64,
    /// The largest busy and parked times a reader was told (neither ever goes back).
    busy_reported: AtomicU64,
    parked_reported: AtomicU64,
    pub(crate) longest_poll_ns: AtomicU64,
    pub(crate) poll_time: Histogram,
    pub(crate) schedule_delay: Histogram,
    /// Polls that reached the stall threshold, by their duration.
    pub(crate) stalls: Histogram,
    /// The stall threshold in ns (`u64::MAX`: off).
    pub(crate) stall_ns: u64,
    /// The poll running now.
    pub(crate) current: CurrentPoll,
    /// The stall the monitor reported last and what it learnt of the task, for the report of
    /// its end (`metrics/monitor.rs`).
    pub(crate) stall_note: parking_lot::Mutex<Option<StallNote>>,
    /// The `pthread_t` of the thread running the worker (for a backtrace at a stall).
    pub(crate) pthread: AtomicU64,
}

impl WorkerMetrics {
    pub(crate) fn new(timing: &Timing) -> WorkerMetrics {
        let stall = timing.stall.unwrap_or(Duration::MAX);
        WorkerMetrics {
            polls: Counter::default(),
            steals: Counter::default(),
            stolen_tasks: Counter::default(),
            spins_found: Counter::default(),
            spins_gave_up: Counter::default(),
            overflows: Counter::default(),
            lifo_polls: Counter::default(),
            io_steals: Counter::default(),
            cross_worker_wakes: Counter::default(),
            polls_waited: Default::default(),
            park_unparks: Counter::default(),
            run_ns: AtomicU64::new(0),
            running_since: AtomicU64::new(0),
            parked_ns: AtomicU64::new(0),
            parked_since: AtomicU64::new(0),
            busy_reported: AtomicU64::new(0),
            parked_reported: AtomicU64::new(0),
            longest_poll_ns: AtomicU64::new(0),
            poll_time: Histogram::new(timing.poll_time),
            schedule_delay: Histogram::new(timing.schedule_delay),
            stalls: Histogram::new(HistogramConfig::doubling_from(
                timing.stall.unwrap_or(Duration::from_millis(100)),
                STALL_BUCKETS,
            )),
            stall_ns: u64::try_from(stall.as_nanos()).unwrap_or(u64::MAX),
            current: CurrentPoll::default(),
            stall_note: parking_lot::Mutex::new(None),
            pthread: AtomicU64::new(0),
        }
    }

    /// The worker starts running on this thread (its loop begins).
    pub(crate) fn loop_started(&self) {
        // SAFETY: `pthread_self` has no preconditions.
        let me = unsafe { libc::pthread_self() };
        self.pthread.store(me as u64, Relaxed);
        let now = ticks::now();
        // A worker handed to another thread (`block_in_place`) did not stop its loop on the
        // old one: its stretch ends here.
        self.end_run(now);
        self.running_since.store(now, Release);
    }

    /// The worker's loop ends on this thread.
    pub(crate) fn loop_stopped(&self) {
        self.end_run(ticks::now());
        self.pthread.store(0, Relaxed);
    }

    fn end_run(&self, now: u64) {
        let since = self.running_since.load(Relaxed);
        if since != 0 {
            let sum = self.run_ns.load(Relaxed) + ticks::ns_between(since, now);
            self.run_ns.store(sum, Release);
            self.running_since.store(0, Release);
        }
    }

    /// The worker is about to block for want of work. Busy time is running time less parked
    /// time: a park costs two counter reads and a few stores.
    #[inline]
    pub(crate) fn parking(&self) {
        self.park_unparks.add_owner(1);
        self.parked_since.store(ticks::now(), Release);
    }

    /// The block that [`parking`](Self::parking) announced ended.
    #[inline]
    pub(crate) fn unparked(&self) {
        let since = self.parked_since.load(Relaxed);
        let sum = self.parked_ns.load(Relaxed) + ticks::ns_between(since, ticks::now());
        // The sum first: a reader that sees the park closed sees it counted (`times`).
        self.parked_ns.store(sum, Release);
        self.parked_since.store(0, Release);
        self.park_unparks.add_owner(1);
    }

    /// Parks so far.
    pub(crate) fn parks(&self) -> u64 {
        self.park_unparks.get().div_ceil(2)
    }

    /// Busy and parked time so far, the stretches in progress included. Neither goes back
    /// between two calls: a stretch in progress is measured with the reader's clock, a closed
    /// one with the worker's, a hair apart, and a reader that catches the worker between its
    /// two stores of an unpark may count that park twice; the largest answer given so far
    /// stands until the truth passes it.
    pub(crate) fn times(&self) -> (Duration, Duration) {
        let now = ticks::now();
        let parked_since = self.parked_since.load(Acquire);
        let parked = self.parked_ns.load(Acquire);
        let running_since = self.running_since.load(Acquire);
        let run = self.run_ns.load(Acquire);
        let parked = parked
            + if parked_since == 0 {
                0
            } else {
                ticks::ns_between(parked_since, now)
            };
        let run = run
            + if running_since == 0 {
                0
            } else {
                ticks::ns_between(running_since, now)
            };
        let busy = run.saturating_sub(parked);
        let busy = busy.max(self.busy_reported.fetch_max(busy, Relaxed));
        let parked = parked.max(self.parked_reported.fetch_max(parked, Relaxed));
        (Duration::from_nanos(busy), Duration::from_nanos(parked))
    }

    /// Busy time so far; see [`times`](Self::times).
    pub(crate) fn busy(&self) -> Duration {
        self.times().0
    }

    /// A poll ended that took `ns`: the longest poll so far, if it is.
    #[inline]
    pub(crate) fn longest_poll(&self, ns: u64) {
        if ns > self.longest_poll_ns.load(Relaxed) {
            self.longest_poll_ns.store(ns, Relaxed);
        }
    }
}

/// The poll a worker is running now, as the stall monitor and the task dump read it: a
/// marker (the poll's start in ticks when polls are timed, else the worker's poll count, never
/// 0) and the task's id. Only copies: a reader never follows a pointer into a task, which may
/// be freed the moment its poll ends; it looks the task up by id in the task list, under that
/// list's lock.
#[derive(Default)]
pub(crate) struct CurrentPoll {
    /// 0 when the worker is not polling.
    marker: AtomicU64,
    /// The task's id; 0 for the future of a `block_on` (current-thread runtime).
    task: AtomicU64,
    /// The marker of the last poll whose task left the worker (`block_in_place`).
    left: AtomicU64,
}

/// A [`CurrentPoll`] read consistently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PollInProgress {
    pub(crate) marker: u64,
    /// `None` for a `block_on` future.
    pub(crate) task: Option<u64>,
}

impl CurrentPoll {
    /// A poll of task `task` (0: a `block_on` future) begins. `marker` is not 0.
    #[inline]
    pub(crate) fn begin(&self, marker: u64, task: u64) {
        // Release stores (plain moves on x86_64): a reader that sees one of them sees every
        // store made before it, so `read`'s second look at the marker catches a change.
        self.task.store(task, Release);
        self.marker.store(marker, Release);
    }

    /// The poll ended.
    #[inline]
    pub(crate) fn end(&self) {
        self.marker.store(0, Release);
    }

    /// The polled task leaves the worker (`block_in_place`): the worker is not stalled by it,
    /// however long its poll lasts.
    pub(crate) fn leave(&self) {
        let marker = self.marker.load(Relaxed);
        self.left.store(marker, Relaxed);
        self.end();
    }

    /// `true` if the poll with `marker` left the worker ([`leave`](Self::leave)).
    pub(crate) fn left_with(&self, marker: u64) -> bool {
        self.left.load(Relaxed) == marker
    }

    /// The task of the poll that began last, ended or not (`None`: a `block_on` future).
    /// Only for the worker's own thread, the one writer.
    pub(crate) fn last_task(&self) -> Option<u64> {
        let task = self.task.load(Relaxed);
        (task != 0).then_some(task)
    }

    /// The poll in progress, if any. A seqlock read: the marker before and after the fields
    /// must agree, else the worker moved on and the caller looks again later.
    pub(crate) fn read(&self) -> Option<PollInProgress> {
        let marker = self.marker.load(Acquire);
        if marker == 0 {
            return None;
        }
        let task = self.task.load(Acquire);
        if self.marker.load(Acquire) != marker {
            return None;
        }
        Some(PollInProgress {
            marker,
            task: (task != 0).then_some(task),
        })
    }
}

/// What the stall monitor reported of a stall in progress, for the report of its end.
#[derive(Clone, Debug)]
pub(crate) struct StallNote {
    /// The poll's marker.
    pub(crate) marker: u64,
    pub(crate) task: Option<TaskLabel>,
}

/// A task's name and spawn location, copied out of the task list.
#[derive(Clone, Debug)]
pub(crate) struct TaskLabel {
    pub(crate) name: Option<std::sync::Arc<str>>,
    pub(crate) location: &'static Location<'static>,
}
