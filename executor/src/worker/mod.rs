//! Workers: each owns a reactor and a local run queue; together they share an inject queue,
//! the idle set and the owned-task list.
//!
//! # The worker loop
//!
//! ```text
//!            ┌──────────────────────────────────────────────────────────────┐
//!            ▼                                                              │
//!   next_task: every event_interval ticks → poll own reactor (no block)     │
//!              every global_queue_interval ticks → inject queue first       │
//!              LIFO slot → local queue / pinned (!Send) queue → inbox       │
//!              → inject batch                                               │
//!            │ found ─────────────────────────────► run task (budget 128) ──┤
//!            ▼ none                                                         │
//!   search:  steal half of a random other worker's queue (≤ half searching)│
//!            │ found ─────────────────────────────► run task ───────────────┤
//!            ▼ none                                                         │
//!   spin:    for busy_poll: poll own reactor (zero timeout), queues, steal  │
//!            │ found (spins_found++) ─────────────► run task ───────────────┤
//!            ▼ gave up (spins_gave_up++)                                    │
//!   park:    register as sleeping → re-check queues → block in own reactor  │
//!            (timeout = nearest timer; min_wait window) → wakers queue      │
//!            tasks on *this* worker ───────────────────────────────────────┘
//! ```
//!
//! Tasks woken while the worker dispatches its reactor go to the back of its local queue (in
//! event order), and another worker is woken to steal only if more than one task was queued;
//! tasks woken by a running task on the same worker go to the LIFO slot (at most
//! [`MAX_LIFO_POLLS`] in a row, so two tasks ping-ponging cannot starve the queue). New spawns and
//! yields go to the back, and wake a sleeper to steal when more than one task is queued. Wakes
//! from other threads go to the inject queue (or, for pinned tasks, to the owning worker's inbox)
//! and unpark a sleeper.
//!
//! A worker is not tied to a thread: while a task polls, its core is lent to the thread's
//! worker context, and a task that blocks in `block_in_place` hands it to another thread
//! (`handoff.rs`).

mod handoff;
mod idle;
mod park;

use std::cell::{Cell, RefCell, RefMut};
use std::collections::VecDeque;
use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::ptr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::ThreadId;
use std::time::Duration;

use weir_reactor::Driver;
use weir_reactor::coop;

pub(crate) use handoff::block_in_place;
pub(crate) use idle::Idle;

use crate::blocking;
use crate::config::Config;
use crate::inject::Inject;
use crate::loom::Mutex;
use crate::metrics::WorkerMetrics;
use crate::queue::{self, Local, Steal};
use crate::runtime::Alive;
use crate::task::{self, Header, Id, JoinHandle, OwnedTasks, Schedule, Task};

/// Polls of the LIFO slot in a row before it yields to the queue.
pub(crate) const MAX_LIFO_POLLS: u32 = 3;

/// A peer whose reactor has not been turned for this long while its owner is not parked is
/// considered stalled (descheduled, or stuck in a long poll): a busy worker's maintenance
/// collects its ready events. A busy worker turns its reactor at least every `event_interval`
/// polls, well within this.
pub(crate) const STALL: Duration = Duration::from_micros(500);

/// The same for a worker that ran out of work: it takes a peer's ready events only if the
/// peer has not turned its reactor for this long. Stealing from a peer that is merely busy
/// would make the idle worker co-poll the peer's epoll in a loop instead of parking, taking
/// CPU from whatever else runs on the machine for little gain.
pub(crate) const IDLE_STALL: Duration = Duration::from_micros(100);

/// Runtime-wide state.
pub(crate) struct Shared {
    pub(crate) remotes: Box<[Remote]>,
    pub(crate) inject: Inject<Task>,
    pub(crate) idle: Idle,
    pub(crate) owned: OwnedTasks,
    pub(crate) config: Config,
    pub(crate) blocking: Arc<blocking::Pool>,
    pub(crate) id: crate::runtime::Id,
    /// Threads running a worker loop (shutdown waits for them).
    pub(crate) alive: Alive,
    shutdown: AtomicBool,
    current_thread: bool,
    /// Round-robin choice of a reactor for threads that are not workers.
    next_reactor: AtomicUsize,
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
}

/// The part of a worker other threads may touch.
pub(crate) struct Remote {
    pub(crate) steal: Steal<Task>,
    pub(crate) reactor: weir_reactor::ReactorHandle,
    /// Pinned (`spawn_local`) tasks of this worker woken on other threads.
    inbox: Mutex<Vec<Task>>,
    inbox_len: AtomicUsize,
    pub(crate) metrics: WorkerMetrics,
    /// The thread running this worker right now, if any.
    pub(crate) thread: parking_lot::Mutex<Option<std::thread::ThreadId>>,
    /// Live `spawn_local` tasks of this worker (changed on the worker's thread only): while
    /// there are any, the worker cannot move to another thread.
    local_tasks: AtomicUsize,
    /// `true` while the worker's thread blocks in `block_in_place` without handing the worker
    /// over: its reactor is not turned, so threads that pick a reactor avoid it.
    stalled: AtomicBool,
}

/// Everything a worker owns; moves to the thread that runs it.
pub(crate) struct Core {
    pub(crate) index: usize,
    driver: Driver,
    queues: Option<Queues>,
    tick: u32,
    rand: u32,
    lifo_polls: u32,
    searching: bool,
    /// Current-thread flavour: the thread whose `spawn_local` tasks this core holds.
    local_thread: Option<ThreadId>,
}

struct Queues {
    local: Local<Task>,
    lifo: Option<Task>,
    /// Pinned tasks ready to run (never stolen).
    pinned: VecDeque<Task>,
}

/// The thread-local view of the running worker. Lives on the worker loop's stack.
struct WorkerCx {
    shared: Arc<Shared>,
    index: usize,
    /// The worker's queues, out of its core while it runs; `None` once the core was handed to
    /// another thread (`block_in_place`), after which this thread is no longer the worker.
    queues: RefCell<Option<Queues>>,
    /// `true` while the reactor dispatches: woken tasks go to the back, notifies are deferred.
    in_dispatch: Cell<bool>,
    notify_pending: Cell<bool>,
    local_thread: Cell<Option<ThreadId>>,
    /// The core while a task polls (lent by `Worker::run_task`), where `block_in_place` can
    /// take it; `None` otherwise.
    lent: Cell<Option<Box<Core>>>,
    /// After a hand-off: this thread's entry of the worker's reactor as a guest (not its
    /// owner any more), dropped before the owner's entry it sits on.
    guest_reactor: RefCell<Option<weir_reactor::ReactorEnterGuard>>,
}

thread_local! {
    static WORKER: Cell<*const WorkerCx> = const { Cell::new(ptr::null()) };
}

/// Runs `f` with the worker running on this thread, if any.
fn with_current<R>(f: impl FnOnce(Option<&WorkerCx>) -> R) -> R {
    let p = WORKER.try_with(|c| c.get()).unwrap_or(ptr::null());
    // SAFETY: `WORKER` is non-null only between `SetWorker::new` and its drop, which bracket the
    // lifetime of the `WorkerCx` on `run`'s stack frame on this same thread.
    f(unsafe { p.as_ref() })
}

struct SetWorker(*const WorkerCx);

impl SetWorker {
    fn new(cx: &WorkerCx) -> SetWorker {
        SetWorker(WORKER.try_with(|c| c.replace(cx)).unwrap_or(ptr::null()))
    }
}

impl Drop for SetWorker {
    fn drop(&mut self) {
        let prev = self.0;
        let _ = WORKER.try_with(|c| c.set(prev));
    }
}

/// The index of the worker running on this thread, if it belongs to `shared`'s runtime.
pub(crate) fn current_index() -> Option<usize> {
    with_current(|cx| cx.map(|cx| cx.index))
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
                reactor: driver.handle().clone(),
                inbox: Mutex::new(Vec::new()),
                inbox_len: AtomicUsize::new(0),
                metrics: WorkerMetrics::default(),
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
            inject: Inject::new(),
            idle: Idle::new(n),
            owned: OwnedTasks::new(n * 4),
            config,
            blocking,
            id: crate::runtime::Id::next(),
            alive: Alive::default(),
            shutdown: AtomicBool::new(false),
            current_thread,
            next_reactor: AtomicUsize::new(0),
            idle_cores: parking_lot::Mutex::new(Vec::new()),
            stopped_cores: parking_lot::Mutex::new(Vec::new()),
            core_waiters: parking_lot::Mutex::new(Vec::new()),
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

    /// A reactor for a thread that is not a worker (block_on, blocking pool, `enter`).
    pub(crate) fn pick_reactor(&self) -> &weir_reactor::ReactorHandle {
        if let Some(i) = current_index()
            && i < self.remotes.len()
            && with_current(|cx| cx.is_some_and(|cx| ptr::eq(&*cx.shared, self)))
        {
            return &self.remotes[i].reactor;
        }
        let n = self.remotes.len();
        let start = self.next_reactor.fetch_add(1, Ordering::Relaxed);
        (0..n)
            .map(|k| &self.remotes[(start + k) % n])
            .find(|r| !r.stalled.load(Ordering::Relaxed))
            .map_or(&self.remotes[start % n].reactor, |r| &r.reactor)
    }

    /// Spawns a task; `owner` pins it to a worker, `local` marks a `!Send` (`spawn_local`)
    /// task, which must stay on that worker's thread.
    pub(crate) fn spawn<F>(
        self: &Arc<Self>,
        future: F,
        owner: Option<usize>,
        local: bool,
        location: &'static Location<'static>,
    ) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let id = Id::next();
        if local && let Some(w) = owner {
            self.remotes[w].local_tasks.fetch_add(1, Ordering::Relaxed);
        }
        let (task, join) = task::new_task(future, self.clone(), id, owner, local, location);
        tracing::trace!(
            target: "weir::task",
            task_id = id.as_u64(),
            location = %location,
            local = owner.is_some(),
            "spawn"
        );
        match self.owned.insert(task.clone()) {
            Ok(()) => self.schedule(task, true),
            Err(task) => task.shutdown(),
        }
        JoinHandle::new(join)
    }

    /// Wakes one sleeping worker if none is searching.
    pub(crate) fn notify_parked(&self) {
        if let Some(w) = self.idle.worker_to_notify() {
            tracing::trace!(target: "weir::sched", worker = w, "notify sleeping worker");
            self.remotes[w].reactor.unpark();
        }
    }

    fn push_inbox(&self, worker: usize, task: Task) {
        let remote = &self.remotes[worker];
        {
            let mut inbox = remote.inbox.lock();
            inbox.push(task);
            remote.inbox_len.store(inbox.len(), Ordering::SeqCst);
        }
        remote.reactor.unpark();
    }

    fn schedule_remote(&self, task: Task) {
        if self.is_shutdown() {
            // Shutdown cancels every owned task; this queue entry would never run.
            return;
        }
        match task.header().owner {
            Some(w) => self.push_inbox(w, task),
            None => {
                self.inject.push(task);
                self.notify_parked();
            }
        }
    }
}

impl Schedule for Arc<Shared> {
    fn schedule(&self, task: Task, yielded: bool) {
        with_current(|cx| match cx {
            Some(cx) if ptr::eq(&*cx.shared, &**self) => cx.schedule_local(task, yielded),
            _ => self.schedule_remote(task),
        })
    }

    fn release(&self, header: &Header) {
        if header.local
            && let Some(w) = header.owner
        {
            self.remotes[w].local_tasks.fetch_sub(1, Ordering::Relaxed);
        }
        let removed = self.owned.remove(header);
        drop(removed);
    }
}

impl WorkerCx {
    /// The queues of the worker running on this thread.
    fn queues(&self) -> RefMut<'_, Queues> {
        RefMut::map(self.queues.borrow_mut(), |q| {
            q.as_mut().expect("a running worker has its queues")
        })
    }

    fn schedule_local(&self, task: Task, yielded: bool) {
        let shared = &*self.shared;
        match task.header().owner {
            Some(w) if w != self.index => shared.push_inbox(w, task),
            Some(_) => self.queues().pinned.push_back(task),
            None => {
                let metrics = &shared.remotes[self.index].metrics;
                let mut q = self.queues();
                let to_queue = if yielded || self.in_dispatch.get() || !shared.config.lifo_slot {
                    Some(task)
                } else {
                    q.lifo.replace(task)
                };
                let Some(task) = to_queue else { return };
                if q.local.push_back(task, &shared.inject) {
                    metrics.overflows.add_owner(1);
                }
                // Wake another worker only for work this one cannot start next: with a single
                // queued task this worker runs it as soon as the current poll returns.
                let surplus = q.local.len() + usize::from(q.lifo.is_some()) > 1;
                drop(q);
                if self.in_dispatch.get() {
                    self.notify_pending.set(true);
                } else if surplus && shared.remotes.len() > 1 {
                    shared.notify_parked();
                }
            }
        }
    }
}

/// The waker of a `block_on` future driven by a current-thread worker.
struct RootWaker {
    woken: AtomicBool,
    reactor: weir_reactor::ReactorHandle,
}

impl Wake for RootWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        self.reactor.unpark();
    }
}

/// Runs a worker on this thread until `root` completes (current-thread `block_on`) or, without
/// a root, until the runtime shuts down (a multi-thread worker). Returns the core — also when
/// `root` panics, with the panic to resume once the core is put back — or `None` if a task
/// handed it to another thread (`block_in_place`; multi-thread only), after which this thread
/// stopped being the worker once that task's poll returned.
pub(crate) fn run<F: Future>(
    shared: &Arc<Shared>,
    mut core: Box<Core>,
    root: Option<Pin<&mut F>>,
) -> (Option<Box<Core>>, std::thread::Result<Option<F::Output>>) {
    let index = core.index;
    let cx = WorkerCx {
        shared: shared.clone(),
        index,
        queues: RefCell::new(Some(core.queues.take().expect("core queues present"))),
        in_dispatch: Cell::new(false),
        notify_pending: Cell::new(false),
        local_thread: Cell::new(core.local_thread),
        lent: Cell::new(None),
        guest_reactor: RefCell::new(None),
    };
    let remote = &shared.remotes[index];
    let (core, out) = {
        // Tasks polled here must not block on a runtime (`block_on`), nor drop one.
        let _in_runtime = crate::context::set_in_runtime(true);
        // On a blocking-pool thread (a worker handed over), not the pool task's id.
        let _no_task = task::set_no_current_id();
        let _worker = SetWorker::new(&cx);
        let owner = core.driver.enter();
        *remote.thread.lock() = Some(std::thread::current().id());
        let mut worker = Worker {
            cx: &cx,
            shared,
            remote,
            core: Some(core),
        };
        tracing::debug!(target: "weir::worker", worker = index, "worker started");
        // Task panics are caught per poll; only the root future's panic gets here.
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker.run_loop(root)));
        let core = worker.core.take();
        if core.is_some() {
            *remote.thread.lock() = None;
            tracing::debug!(target: "weir::worker", worker = index, "worker stopped");
        } else {
            tracing::debug!(target: "weir::worker", worker = index, "worker left this thread");
        }
        // The guest entry sits on the owner's entry: it goes first.
        drop(cx.guest_reactor.take());
        drop(owner);
        (core, out)
    };
    let core = core.map(|mut core| {
        core.local_thread = cx.local_thread.get();
        core.queues = cx.queues.take();
        core
    });
    (core, out)
}

/// What became of the worker while a task ran.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
enum Ran {
    /// This thread still runs the worker.
    Here,
    /// The task handed the worker to another thread (`block_in_place`): leave the loop.
    HandedOver,
}

struct Worker<'a> {
    cx: &'a WorkerCx,
    shared: &'a Arc<Shared>,
    remote: &'a Remote,
    /// `None` only while a task polls (the core is lent to `cx`) or after it was handed over.
    core: Option<Box<Core>>,
}

impl Worker<'_> {
    fn core(&mut self) -> &mut Core {
        self.core
            .as_mut()
            .expect("the worker loop runs only while it holds its core")
    }

    fn run_loop<F: Future>(&mut self, mut root: Option<Pin<&mut F>>) -> Option<F::Output> {
        let root_waker = root.as_ref().map(|_| {
            Arc::new(RootWaker {
                woken: AtomicBool::new(true),
                reactor: self.remote.reactor.clone(),
            })
        });
        let waker = root_waker.clone().map(Waker::from);
        loop {
            if let (Some(fut), Some(rw), Some(waker)) = (root.as_mut(), &root_waker, &waker)
                && rw.woken.swap(false, Ordering::SeqCst)
            {
                let mut cx = Context::from_waker(waker);
                if let Poll::Ready(v) = coop::budget(|| fut.as_mut().poll(&mut cx)) {
                    return Some(v);
                }
            }
            if self.shared.is_shutdown() {
                return None;
            }
            let root_woken = root_waker.as_deref().map(|rw| &rw.woken);
            let task = match self.next_task().or_else(|| self.search()) {
                Some(task) => Some(task),
                None => match self.spin(root_woken) {
                    park::Spin::Found(task) => task,
                    park::Spin::GaveUp => {
                        self.park(root_woken);
                        None
                    }
                },
            };
            if let Some(task) = task
                && self.run_task(task) == Ran::HandedOver
            {
                return None;
            }
        }
    }

    fn run_task(&mut self, task: Task) -> Ran {
        let core = self.core();
        if core.searching {
            core.searching = false;
            if self.shared.idle.stop_searching() && self.has_stealable_work() {
                self.shared.notify_parked();
            }
        }
        self.remote.metrics.polls.add_owner(1);
        // While the task polls, the core is lent to the thread's worker context, where
        // `block_in_place` may hand it to another thread.
        self.cx.lent.set(self.core.take());
        task.run();
        self.core = self.cx.lent.take();
        if self.core.is_some() {
            Ran::Here
        } else {
            Ran::HandedOver
        }
    }

    fn has_stealable_work(&self) -> bool {
        !self.cx.queues().local.is_empty() || !self.shared.inject.is_empty()
    }

    fn next_task(&mut self) -> Option<Task> {
        let core = self.core();
        core.tick = core.tick.wrapping_add(1);
        let tick = core.tick;
        let cfg = &self.shared.config;
        if tick.is_multiple_of(cfg.event_interval) {
            self.maintenance();
        }
        if tick.is_multiple_of(cfg.global_queue_interval)
            && let Some(t) = self.shared.inject.pop()
        {
            return Some(t);
        }
        let cx = self.cx;
        let mut q = cx.queues();
        if let Some(t) = q.lifo.take() {
            if self.core().lifo_polls < MAX_LIFO_POLLS {
                self.core().lifo_polls += 1;
                self.remote.metrics.lifo_polls.add_owner(1);
                return Some(t);
            }
            if q.local.push_back(t, &self.shared.inject) {
                self.remote.metrics.overflows.add_owner(1);
            }
        }
        self.core().lifo_polls = 0;
        if self.remote.inbox_len.load(Ordering::Acquire) > 0 {
            let mut inbox = self.remote.inbox.lock();
            q.pinned.extend(inbox.drain(..));
            self.remote.inbox_len.store(0, Ordering::Release);
        }
        let local_first = tick & 1 == 0;
        let t = if local_first {
            q.local.pop().or_else(|| q.pinned.pop_front())
        } else {
            q.pinned.pop_front().or_else(|| q.local.pop())
        };
        if t.is_some() {
            return t;
        }
        let n = (self.shared.inject.len() / self.shared.remotes.len()).min(queue::CAPACITY / 2);
        self.shared.inject.pop_batch_into(n, &mut q.local)
    }

    /// Polls the reactor without blocking (fairness with busy tasks), and collects the events
    /// of a peer that has not turned its reactor for [`STALL`] (see [`Worker::steal_io`]).
    fn maintenance(&mut self) {
        self.dispatch(|d| d.poll());
        if self.shared.remotes.len() > 1 {
            let start = self.next_rand() as usize;
            // Whatever it wakes is queued here; the caller goes on with the queue.
            self.steal_io(start, STALL);
        }
    }

    /// Runs a driver operation with dispatch semantics: woken tasks go to the back of the local
    /// queue and one notification is sent afterwards.
    fn dispatch(&mut self, f: impl FnOnce(&mut Driver) -> std::io::Result<usize>) -> usize {
        self.cx.in_dispatch.set(true);
        let r = f(&mut self.core().driver);
        self.cx.in_dispatch.set(false);
        self.notify_after_dispatch();
        match r {
            Ok(n) => n,
            Err(e) => {
                tracing::error!(target: "weir::reactor", worker = self.cx.index, error = %e, "reactor wait failed");
                0
            }
        }
    }

    /// After a dispatch queued tasks here: wake another worker only if there is more than
    /// this worker runs next. A lone task woken by this worker's reactor stays on this worker
    /// (nobody is woken to steal it), which keeps a connection's task next to its epoll.
    pub(super) fn notify_after_dispatch(&self) {
        if self.cx.notify_pending.replace(false)
            && self.shared.remotes.len() > 1
            && self.cx.queues().local.len() > 1
        {
            self.shared.notify_parked();
        }
    }

    fn search(&mut self) -> Option<Task> {
        let n = self.shared.remotes.len();
        if n == 1 {
            return None;
        }
        if !self.core().searching {
            if !self.shared.idle.try_start_searching() {
                return None;
            }
            self.core().searching = true;
        }
        let start = self.next_rand() as usize % n;
        let cx = self.cx;
        let mut q = cx.queues();
        for i in 0..n {
            let w = (start + i) % n;
            if w == self.cx.index {
                continue;
            }
            if let Some(t) = self.shared.remotes[w].steal.steal_into(&mut q.local) {
                let m = &self.remote.metrics;
                m.steals.add_owner(1);
                m.stolen_tasks.add_owner(q.local.len() as u64 + 1);
                tracing::trace!(target: "weir::sched", worker = self.cx.index, from = w, "stole tasks");
                return Some(t);
            }
        }
        let batch = (self.shared.inject.len() / n).min(queue::CAPACITY / 2);
        if let Some(t) = self.shared.inject.pop_batch_into(batch, &mut q.local) {
            return Some(t);
        }
        drop(q);
        if self.steal_io(start, IDLE_STALL) == 0 {
            return None;
        }
        let mut q = self.cx.queues();
        q.local.pop().or_else(|| q.pinned.pop_front())
    }

    /// I/O stealing: collects the ready events of peers' reactors whose owners are not parked
    /// and have not turned their reactor for `min_stall` (see
    /// `weir_reactor::ReactorHandle::steal_events`), and queues their tasks here. Returns how many
    /// were woken. The tasks' sockets stay registered where they are; only this wake-up moves.
    fn steal_io(&mut self, start: usize, min_stall: Duration) -> usize {
        let n = self.shared.remotes.len();
        let mut total = 0;
        for i in 0..n {
            let w = (start + i) % n;
            if w == self.cx.index {
                continue;
            }
            self.cx.in_dispatch.set(true);
            let woken = self.shared.remotes[w].reactor.steal_events(min_stall);
            self.cx.in_dispatch.set(false);
            self.notify_after_dispatch();
            match woken {
                Ok(0) => {}
                Ok(k) => {
                    self.remote.metrics.io_steals.add_owner(1);
                    tracing::trace!(target: "weir::sched", worker = self.cx.index, from = w, woken = k, "stole I/O events");
                    total += k;
                }
                Err(e) => {
                    tracing::error!(target: "weir::reactor", worker = self.cx.index, from = w, error = %e, "stealing I/O events failed");
                }
            }
        }
        total
    }

    fn next_rand(&mut self) -> u32 {
        // xorshift32
        let mut x = self.core().rand;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.core().rand = x;
        x
    }

    /// `true` if there is anything this worker should do instead of blocking.
    fn has_work(&self, check_all: bool, root_woken: Option<&AtomicBool>) -> bool {
        if self.shared.is_shutdown()
            || root_woken.is_some_and(|w| w.load(Ordering::SeqCst))
            || !self.shared.inject.is_empty()
            || self.remote.inbox_len.load(Ordering::SeqCst) > 0
        {
            return true;
        }
        {
            let q = self.cx.queues();
            if q.lifo.is_some() || !q.local.is_empty() || !q.pinned.is_empty() {
                return true;
            }
        }
        check_all
            && self
                .shared
                .remotes
                .iter()
                .enumerate()
                .any(|(i, r)| i != self.cx.index && !r.steal.is_empty())
    }
}

/// A multi-thread worker leaves its loop at shutdown: shuts its core down on this thread and
/// leaves it for the runtime to drop after everything else.
pub(crate) fn stop(shared: &Arc<Shared>, mut core: Box<Core>) {
    shutdown_core(shared, &mut core);
    shared.stopped_cores.lock().push(core);
}

/// Worker exit: cancel this worker's pinned tasks on its own thread, drop queued references.
pub(crate) fn shutdown_core(shared: &Arc<Shared>, core: &mut Core) {
    let index = core.index;
    let on_owner_thread = core
        .local_thread
        .is_none_or(|t| t == std::thread::current().id());
    let pinned = shared.owned.close_and_take(|h| h.owner == Some(index));
    if on_owner_thread {
        for t in pinned {
            t.shutdown();
        }
    } else if !pinned.is_empty() {
        tracing::warn!(
            target: "weir::worker",
            count = pinned.len(),
            "spawn_local tasks leaked: the runtime was dropped on another thread than the one \
             that ran them, and !Send futures cannot be dropped there"
        );
        for t in pinned {
            std::mem::forget(t);
        }
    }
    if let Some(q) = core.queues.as_mut() {
        q.lifo = None;
        q.pinned.clear();
        while q.local.pop().is_some() {}
    }
    shared.remotes[index].inbox.lock().clear();
    shared.remotes[index].inbox_len.store(0, Ordering::Release);
}

/// Spawns a task pinned to the worker running on this thread; `None` off the workers.
pub(crate) fn spawn_local<F>(
    future: F,
    location: &'static Location<'static>,
) -> Option<JoinHandle<F::Output>>
where
    F: Future + 'static,
    F::Output: 'static,
{
    with_current(|cx| {
        let cx = cx?;
        cx.local_thread.set(Some(std::thread::current().id()));
        let shared = cx.shared.clone();
        Some(shared.spawn(future, Some(cx.index), true, location))
    })
}

impl Core {
    pub(crate) fn local_thread(&self) -> Option<ThreadId> {
        self.local_thread
    }

    pub(crate) fn reactor(&self) -> &weir_reactor::ReactorHandle {
        self.driver.handle()
    }
}
