//! Workers: the loop that runs a core (a reactor, run queues and counters; `shared/`) on a
//! thread. The workers share the runtime-wide state (`shared/`); where tasks they wake or spawn
//! go is `schedule.rs`; the thread's view of its worker is `context.rs`.
//!
//! Files by job: the loop and the local queues (here), stealing tasks and I/O from peers
//! (`steal.rs`), spin-then-park (`park.rs`), moving to another thread (`handoff.rs`).
//!
//! # The worker loop
//!
//! ```text
//!            ┌──────────────────────────────────────────────────────────────┐
//!            ▼                                                              │
//!   next_task: every event_interval ticks → poll own reactor (no block)     │
//!              (and steal I/O of a peer stalled ≥ STALL)                    │
//!              every global_queue_interval ticks → inject queue first       │
//!              LIFO slot → local queue (refilled from its backlog) /        │
//!              pinned (!Send) queue → inbox → inject batch                  │
//!            │ found ─────────────────────────────► run task (budget 128) ──┤
//!            ▼ none                                                         │
//!   search:  steal half of a random other worker's queue or backlog         │
//!            → inject batch → steal I/O of a peer stalled ≥ IDLE_STALL      │
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
//! I/O stealing (`steal.rs`) collects a peer's ready events while that peer cannot turn its
//! reactor; only the wake-up moves (the tasks queue here), the sockets stay registered where
//! they are.
//!
//! Tasks woken while the worker dispatches its reactor go to the back of its line (in event
//! order), and another worker is woken to steal only if more than one task was queued;
//! tasks woken by a running task on the same worker go to the LIFO slot (at most
//! [`MAX_LIFO_POLLS`] in a row, so two tasks ping-ponging cannot starve the queue). New spawns and
//! yields go to the back, and wake a sleeper to steal when more than one task is queued. Wakes
//! from other threads go to the inject queue (or, for pinned tasks, to the owning worker's inbox)
//! and unpark a sleeper. (`schedule.rs`)
//!
//! # One line per worker
//!
//! A worker's line is its local queue (a bounded ring, `queue.rs`, which idle workers steal
//! from) continued by an unbounded backlog (`shared_fifo.rs`): a task queued while the ring is
//! full, or while the backlog holds tasks, joins the backlog, and the backlog's front moves into
//! the ring whenever the ring is at most half full. So tasks run in the order they were queued
//! however many are ready: under overload (hundreds of connections ready at once) each waits at
//! most one round of the ready set, as in an event loop that serves its ready events in turn.
//! The reactor is still polled every `event_interval` polls; what it wakes queues behind every
//! task already waiting. (A ring that spills its oldest half into a rarely-read global queue,
//! as tokio's does, leaves those tasks waiting while newer ones run, round after round: the
//! second mode of the latency distribution at saturation. `WorkerStats::polls_waited` shows
//! the waits by queue.)
//!
//! A worker is not tied to a thread: while a task polls, its core is lent to the thread's
//! worker context, and a task that blocks in `block_in_place` hands it to another thread
//! (`handoff.rs`).

mod handoff;
mod nested;
mod park;
mod stall;
mod steal;

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use weir_reactor::for_executor::{self, Driver, ReactorControl};

pub(crate) use handoff::block_in_place;
pub(crate) use stall::{describe as describe_stalled_task, report_end as report_stall_end};

use crate::context::{self, SetWorker, WorkerCx};
use crate::recorder::{ticks, waited_bucket};
use crate::schedule::queue_back;
use crate::shared::{Core, QueuedAt, Remote, Shared};
use crate::task_core::{self, Header, Task};
use crate::{line, queue};

/// Polls of the LIFO slot in a row before it yields to the queue.
pub(crate) const MAX_LIFO_POLLS: u32 = 3;

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
        nested_waker: Cell::new(None),
    };
    let remote = &shared.remotes[index];
    let (core, out) = {
        // Tasks polled here must not block on a runtime (`block_on`), nor drop one.
        let _in_runtime = context::set_in_runtime(true);
        // On a blocking-pool thread (a worker handed over), not the pool task's id.
        let _no_task = task_core::set_no_current_id();
        let _worker = SetWorker::new(&cx);
        let owner = core.driver.enter();
        *remote.thread.lock() = Some(std::thread::current().id());
        remote.metrics.loop_started();
        let mut worker = Worker {
            cx: &cx,
            shared,
            remote,
            core: Some(core),
            timing: shared.config.timing.polls,
        };
        tracing::debug!(target: "weir::worker", worker = index, "worker started");
        // Task panics are caught per poll; only the root future's panic gets here. Each poll
        // fills the cooperative budget; the scope puts the thread's back afterwards.
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for_executor::budget_scope(|| worker.run_loop(root))
        }));
        let core = worker.core.take();
        if core.is_some() {
            remote.metrics.loop_stopped();
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

/// The root future of a current-thread `block_on`, with its waker.
struct Root<'r, F> {
    fut: Pin<&'r mut F>,
    woken: Arc<RootWaker>,
    waker: Waker,
}

/// What one [`Worker::step`] did.
enum Step<T> {
    /// Ran a task, or found work for the next step.
    Ran,
    /// Nothing to do: park.
    Idle,
    /// The root future completed.
    Done(T),
    /// Shutdown, or a task handed the worker to another thread: leave the loop.
    Exit,
}

/// Why a loop ended.
enum Exit<T> {
    Done(T),
    Stopped,
    /// Only in tokio compatibility: the worker's tokio runtime is free again; go run inside it.
    Nest,
}

impl<T> Exit<T> {
    fn done(self) -> Option<T> {
        match self {
            Exit::Done(v) => Some(v),
            Exit::Stopped | Exit::Nest => None,
        }
    }
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
    /// Polls are timed (`Timing::polls`).
    timing: bool,
}

impl Worker<'_> {
    fn core(&mut self) -> &mut Core {
        self.core
            .as_mut()
            .expect("the worker loop runs only while it holds its core")
    }

    fn run_loop<F: Future>(&mut self, root: Option<Pin<&mut F>>) -> Option<F::Output> {
        let mut root = root.map(|fut| {
            let waker = Arc::new(RootWaker {
                woken: AtomicBool::new(true),
                reactor: self.remote.reactor.clone(),
            });
            Root {
                fut,
                waker: Waker::from(waker.clone()),
                woken: waker,
            }
        });
        if let Some(tokio) = self.shared.config.tokio.worker(self.cx.index) {
            return nested::run_modes(self, &mut root, tokio).done();
        }
        self.plain_loop(&mut root, || false).done()
    }

    /// The loop on its own thread: park in the reactor when idle. Leaves it with
    /// [`Exit::Nest`] when `nest` says so (checked every turn).
    fn plain_loop<F: Future>(
        &mut self,
        root: &mut Option<Root<'_, F>>,
        nest: impl Fn() -> bool,
    ) -> Exit<F::Output> {
        loop {
            match self.step(root) {
                Step::Ran => {}
                Step::Idle => self.park(root.as_ref().map(|r| &r.woken.woken)),
                Step::Done(v) => return Exit::Done(v),
                Step::Exit => return Exit::Stopped,
            }
            if nest() {
                return Exit::Nest;
            }
        }
    }

    /// One turn of the loop: poll the root future if it was woken, then run one task — or
    /// spin for one, or report that there is none.
    fn step<F: Future>(&mut self, root: &mut Option<Root<'_, F>>) -> Step<F::Output> {
        if let Some(r) = root.as_mut()
            && r.woken.woken.swap(false, Ordering::SeqCst)
        {
            let mut cx = Context::from_waker(&r.waker);
            self.remote.metrics.polls.add_owner(1);
            let marker = self.poll_begins(None);
            let poll = for_executor::budget(|| r.fut.as_mut().poll(&mut cx));
            self.poll_ended(marker);
            if let Poll::Ready(v) = poll {
                return Step::Done(v);
            }
        }
        if self.shared.is_shutdown() {
            return Step::Exit;
        }
        let root_woken = root.as_ref().map(|r| &r.woken.woken);
        let task = match self.next_task().or_else(|| self.search()) {
            Some(task) => task,
            None => match self.spin(root_woken) {
                park::Spin::Found(Some(task)) => task,
                park::Spin::Found(None) => return Step::Ran,
                park::Spin::GaveUp => return Step::Idle,
            },
        };
        match self.run_task(task) {
            Ran::Here => Step::Ran,
            Ran::HandedOver => Step::Exit,
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
        let index = self.cx.index;
        let m = &self.remote.metrics;
        let polls = m.polls.add_owner_get(1);
        let header = task.header();
        if let Some((queue, waited)) =
            QueuedAt::waited(header.queued_on.load(Ordering::Relaxed), index, polls)
        {
            m.polls_waited[queue][waited_bucket(waited)].add_owner(1);
        }
        header.last_worker.store(index as u32, Ordering::Relaxed);
        let marker = self.poll_begins(Some(header));
        // While the task polls, the core is lent to the thread's worker context, where
        // `block_in_place` may hand it to another thread.
        self.cx.lent.set(self.core.take());
        task.run();
        self.core = self.cx.lent.take();
        if self.core.is_some() {
            self.poll_ended(marker);
            Ran::Here
        } else {
            Ran::HandedOver
        }
    }

    /// A poll begins: its task's (`None`: a `block_on` future) scheduling delay and poll
    /// count, and the poll published for the stall monitor. Returns the poll's marker: its
    /// start in ticks when polls are timed, else the worker's poll count (never 0).
    #[inline]
    fn poll_begins(&self, task: Option<&Header>) -> u64 {
        let m = &self.remote.metrics;
        let marker = if self.timing {
            ticks::now()
        } else {
            m.polls.get()
        };
        match task {
            Some(h) => {
                if self.timing {
                    let queued = h.queued_at.load(Ordering::Relaxed);
                    if queued != 0 {
                        m.schedule_delay.record(ticks::ns_between(queued, marker));
                    }
                    h.last_polled_at.store(marker, Ordering::Relaxed);
                }
                // Only the holder of `RUNNING` writes it.
                h.polls
                    .store(h.polls.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                m.current.begin(marker, h.id.as_u64());
            }
            None => m.current.begin(marker, 0),
        }
        marker
    }

    /// The poll that [`poll_begins`](Self::poll_begins) returned `marker` for ended here:
    /// its duration, and the end of a stall if it was one.
    #[inline]
    fn poll_ended(&self, marker: u64) {
        let m = &self.remote.metrics;
        m.current.end();
        if self.timing {
            let ns = ticks::ns_between(marker, ticks::now());
            m.poll_time.record(ns);
            m.longest_poll(ns);
            if ns >= m.stall_ns {
                stall::ended(self.shared, self.cx.index, marker, ns);
            }
        }
    }

    fn has_stealable_work(&self) -> bool {
        !self.cx.queues().local.is_empty()
            || !self.remote.backlog.is_empty()
            || !self.shared.inject.is_empty()
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
            if queue_back(&mut q.local, &self.remote.backlog, t) {
                self.remote.metrics.overflows.add_owner(1);
            }
        }
        self.core().lifo_polls = 0;
        if self.remote.inbox_len.load(Ordering::Acquire) > 0 {
            let mut inbox = self.remote.inbox.lock();
            q.pinned.extend(inbox.drain(..));
            self.remote.inbox_len.store(0, Ordering::Release);
        }
        // The backlog continues the local queue: its front moves in as the queue drains, so
        // its tasks run before any queued after them.
        line::refill(&mut q.local, &self.remote.backlog);
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
    /// of a peer that has not turned its reactor for [`STALL`](steal::STALL) (see `steal.rs`).
    fn maintenance(&mut self) {
        self.dispatch(|d| d.poll());
        if self.shared.remotes.len() > 1 {
            let start = self.next_rand() as usize;
            // Whatever it wakes is queued here; the caller goes on with the queue.
            self.steal_io(start, steal::STALL);
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
            && (self.cx.queues().local.len() > 1 || !self.remote.backlog.is_empty())
        {
            self.shared.notify_parked();
        }
    }

    /// `true` if there is anything this worker should do instead of blocking.
    fn has_work(&self, check_all: bool, root_woken: Option<&AtomicBool>) -> bool {
        if self.shared.is_shutdown()
            || root_woken.is_some_and(|w| w.load(Ordering::SeqCst))
            || !self.shared.inject.is_empty()
            || !self.remote.backlog.is_empty()
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
                .any(|(i, r)| i != self.cx.index && (!r.steal.is_empty() || !r.backlog.is_empty()))
    }
}

/// A multi-thread worker leaves its loop at shutdown: shuts its core down on this thread and
/// leaves it for the runtime to drop after everything else.
pub(crate) fn stop(shared: &Arc<Shared>, mut core: Box<Core>) {
    shutdown_core(shared, &mut core);
    shared.stopped_cores.lock().push(core);
    shared.alive.core_idle();
}

/// Worker exit: cancel this worker's pinned tasks on its own thread, drop queued references.
pub(crate) fn shutdown_core(shared: &Arc<Shared>, core: &mut Core) {
    let index = core.index;
    let on_owner_thread = core
        .local_thread
        .is_none_or(|t| t == std::thread::current().id());
    let pinned = shared
        .owned
        .close_and_take(|h| h.placement.worker() == Some(index));
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
    drop(shared.remotes[index].backlog.drain());
}
