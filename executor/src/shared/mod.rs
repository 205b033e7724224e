//! Runtime-wide state: what the workers, the runtime's handle and its metrics share — each
//! worker's remote part, the inject queue, the idle set, the live tasks, the settings, the
//! blocking pool, and the workers' cores while no thread runs them.
//!
//! Data, and the operations on it that need no thread's context (the shutdown flag, waking a
//! sleeping worker). Where a spawned or woken task goes is `schedule.rs`; which reactor a thread
//! uses is `placement.rs`; the loop that runs a core is `worker/`; the thread's view of all this
//! is `context.rs`.

mod alive;
mod idle;

use std::collections::VecDeque;
use std::fmt;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::Waker;
use std::thread::ThreadId;

use weir_reactor::for_executor::{Counter, Driver, ReactorControl};

pub(crate) use alive::{Alive, AliveGuard};
pub(crate) use idle::Idle;

use crate::blocking;
use crate::config::Config;
use crate::loom::Mutex;
use crate::queue::{self, Local, Steal};
use crate::recorder::WorkerMetrics;
use crate::shared_fifo::SharedFifo;
use crate::task_core::{OwnedTasks, Task};

/// Runtime-wide state.
pub(crate) struct Shared {
    pub(crate) remotes: Box<[Remote]>,
    pub(crate) inject: SharedFifo<Task>,
    pub(crate) idle: Idle,
    pub(crate) owned: OwnedTasks,
    pub(crate) config: Config,
    pub(crate) blocking: Arc<blocking::Pool>,
    pub(crate) id: Id,
    /// Tasks spawned so far, blocking closures included (any thread).
    pub(crate) spawned: Counter,
    /// Threads running a worker loop (shutdown waits for them).
    pub(crate) alive: Alive,
    shutdown: AtomicBool,
    current_thread: bool,
    /// Round-robin choice of a reactor for threads that are not workers (`placement.rs`).
    pub(crate) next_reactor: AtomicUsize,
    /// Cores not running on any thread (the current-thread flavour between `block_on` calls).
    /// Boxed, like every core: a worker lends its core for each task poll and may hand it to
    /// another thread, so a core moves a lot; boxed, each move is a pointer.
    #[expect(clippy::vec_box, reason = "cores move between threads; see above")]
    pub(crate) idle_cores: parking_lot::Mutex<Vec<Box<Core>>>,
    /// Cores of multi-thread workers that left their loop at shutdown (already shut down by
    /// their thread), for the runtime to drop last.
    #[expect(
        clippy::vec_box,
        reason = "cores move between threads; see `idle_cores`"
    )]
    pub(crate) stopped_cores: parking_lot::Mutex<Vec<Box<Core>>>,
    /// Threads waiting for a core to be released (current-thread `block_on` contention).
    pub(crate) core_waiters: parking_lot::Mutex<Vec<Waker>>,
    /// Reactors of `block_on` callers not in use, with the thread that created each
    /// (multi-thread flavour; see `block_on.rs`).
    pub(crate) block_on_drivers: parking_lot::Mutex<Vec<(ThreadId, Driver)>>,
}

/// The part of a worker other threads may touch.
pub(crate) struct Remote {
    pub(crate) steal: Steal<Task>,
    /// The continuation of the local queue: tasks queued while it was full, in order. The owner
    /// moves them into the local queue as it drains; idle workers take from it too.
    pub(crate) backlog: SharedFifo<Task>,
    pub(crate) reactor: weir_reactor::ReactorHandle,
    /// Pinned (`spawn_local`) tasks of this worker woken on other threads.
    pub(crate) inbox: Mutex<Vec<Task>>,
    pub(crate) inbox_len: AtomicUsize,
    pub(crate) metrics: WorkerMetrics,
    /// The thread running this worker right now, if any.
    pub(crate) thread: parking_lot::Mutex<Option<ThreadId>>,
    /// Live `spawn_local` tasks of this worker (changed on the worker's thread only): while
    /// there are any, the worker cannot move to another thread.
    pub(crate) local_tasks: AtomicUsize,
    /// `true` while the worker's thread blocks in `block_in_place` without handing the worker
    /// over: its reactor is not turned, so threads that pick a reactor avoid it.
    pub(crate) stalled: AtomicBool,
}

/// The value of `Header::queued_on`, written when a task is queued on a worker and read when
/// that worker polls it: the worker plus one in the high half (0 for a task queued off the
/// workers, whose wait no worker saw), the queue in bits 30–31 (one of the constants here), and
/// the worker's poll count then in the low 30 bits.
pub(crate) struct QueuedAt;

impl QueuedAt {
    pub(crate) const LOCAL: u64 = 0;
    pub(crate) const LIFO: u64 = 1 << 30;
    pub(crate) const BACKLOG: u64 = 2 << 30;
    pub(crate) const PINNED: u64 = 3 << 30;
    const QUEUE: u64 = 3 << 30;
    const POLLS: u64 = (1 << 30) - 1;

    #[inline]
    pub(crate) fn stamp(worker: usize, queue: u64, polls: u64) -> u64 {
        ((worker as u64 + 1) << 32) | queue | (polls & Self::POLLS)
    }

    /// `stamp` moved to the backlog.
    #[inline]
    pub(crate) fn to_backlog(stamp: u64) -> u64 {
        (stamp & !Self::QUEUE) | Self::BACKLOG
    }

    /// The queue (index into `polls_waited`) and the polls `worker` made since `stamp`, if
    /// `worker` queued it.
    #[inline]
    pub(crate) fn waited(stamp: u64, worker: usize, polls: u64) -> Option<(usize, u32)> {
        (stamp >> 32 == worker as u64 + 1).then(|| {
            let waited = (polls.wrapping_sub(stamp) & Self::POLLS) as u32;
            (((stamp & Self::QUEUE) >> 30) as usize, waited)
        })
    }
}

/// Everything a worker owns; moves to the thread that runs it.
pub(crate) struct Core {
    pub(crate) index: usize,
    pub(crate) driver: Driver,
    pub(crate) queues: Option<Queues>,
    pub(crate) tick: u32,
    pub(crate) rand: u32,
    pub(crate) lifo_polls: u32,
    pub(crate) searching: bool,
    /// Current-thread flavour: the thread whose `spawn_local` tasks this core holds.
    pub(crate) local_thread: Option<ThreadId>,
}

/// A worker's run queues.
pub(crate) struct Queues {
    pub(crate) local: Local<Task>,
    pub(crate) lifo: Option<Task>,
    /// Pinned tasks ready to run (never stolen).
    pub(crate) pinned: VecDeque<Task>,
}

/// A runtime's id: unique among the runtimes created by this process. See
/// [`Handle::id`](crate::Handle::id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(NonZeroU64);

impl Id {
    pub(crate) fn next() -> Id {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let v = NEXT.fetch_add(1, Ordering::Relaxed);
        Id(NonZeroU64::new(v).expect("runtime id counter wrapped"))
    }

    /// The id as a number.
    pub fn as_u64(&self) -> u64 {
        self.0.get()
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Shared {
    /// Builds the shared state and one core per worker.
    #[expect(
        clippy::vec_box,
        reason = "cores move between threads; see `idle_cores`"
    )]
    pub(crate) fn new(
        config: Config,
        drivers: Vec<Driver>,
        blocking: Arc<blocking::Pool>,
        current_thread: bool,
    ) -> (Arc<Shared>, Vec<Box<Core>>) {
        let n = drivers.len();
        let mut remotes = Vec::with_capacity(n);
        let mut cores = Vec::with_capacity(n);
        for (index, driver) in drivers.into_iter().enumerate() {
            let (steal, local) = queue::local();
            remotes.push(Remote {
                steal,
                backlog: SharedFifo::new(),
                reactor: driver.handle().clone(),
                inbox: Mutex::new(Vec::new()),
                inbox_len: AtomicUsize::new(0),
                metrics: WorkerMetrics::new(&config.timing),
                thread: parking_lot::Mutex::new(None),
                local_tasks: AtomicUsize::new(0),
                stalled: AtomicBool::new(false),
            });
            cores.push(Box::new(Core {
                index,
                driver,
                queues: Some(Queues {
                    local,
                    lifo: None,
                    pinned: VecDeque::new(),
                }),
                tick: 0,
                rand: 0x9E37_79B9 ^ (index as u32).wrapping_mul(0x85EB_CA6B) | 1,
                lifo_polls: 0,
                searching: false,
                local_thread: None,
            }));
        }
        let shared = Arc::new(Shared {
            remotes: remotes.into_boxed_slice(),
            inject: SharedFifo::new(),
            idle: Idle::new(n),
            owned: OwnedTasks::new(n * 4),
            config,
            blocking,
            id: Id::next(),
            spawned: Counter::default(),
            alive: Alive::new(if current_thread { 0 } else { n }),
            shutdown: AtomicBool::new(false),
            current_thread,
            next_reactor: AtomicUsize::new(0),
            idle_cores: parking_lot::Mutex::new(Vec::new()),
            stopped_cores: parking_lot::Mutex::new(Vec::new()),
            core_waiters: parking_lot::Mutex::new(Vec::new()),
            block_on_drivers: parking_lot::Mutex::new(Vec::new()),
        });
        tracing::debug!(target: "weir::worker", workers = n, current_thread, "runtime started");
        (shared, cores)
    }

    pub(crate) fn is_current_thread(&self) -> bool {
        self.current_thread
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// Starts shutdown: workers leave their loops at their next check.
    pub(crate) fn begin_shutdown(&self) {
        if !self.shutdown.swap(true, Ordering::AcqRel) {
            for r in self.remotes.iter() {
                r.reactor.unpark();
            }
            for w in self.core_waiters.lock().drain(..) {
                w.wake();
            }
        }
    }

    /// Wakes one sleeping worker if none is searching.
    pub(crate) fn notify_parked(&self) {
        if let Some(w) = self.idle.worker_to_notify() {
            tracing::trace!(target: "weir::sched", worker = w, "notify sleeping worker");
            self.remotes[w].reactor.unpark();
        }
    }
}

impl Core {
    pub(crate) fn local_thread(&self) -> Option<ThreadId> {
        self.local_thread
    }

    pub(crate) fn reactor(&self) -> &weir_reactor::ReactorHandle {
        self.driver.handle()
    }
}
