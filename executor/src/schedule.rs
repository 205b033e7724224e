//! Where a task goes when it is spawned or woken: the running worker's queues when the thread
//! runs a worker of the task's runtime, else the inject queue (or, for a task pinned to a
//! worker, that worker's inbox) and a sleeping worker is woken.
//!
//! On the worker: a task woken by a running task goes to the LIFO slot (unless it yielded, or
//! the slot is off); one woken while the reactor dispatches goes to the back of the worker's
//! line (the local queue, continued by the backlog once that is full), in event order, and the
//! wake-up of another worker is deferred to the end of the dispatch. Another worker is woken
//! only for work this one cannot start next.

use std::future::Future;
use std::panic::Location;
use std::ptr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use weir_reactor::for_executor::ReactorControl;

use crate::context::{self, WorkerCx};
use crate::line;
use crate::queue::Local;
use crate::shared::{QueuedAt, Shared};
use crate::shared_fifo::SharedFifo;
use crate::task_core::{self, Header, Id, JoinHandle, Placement, Queue, Schedule, Task};

impl Shared {
    /// Spawns a task that runs where `placement` says.
    pub(crate) fn spawn<F>(
        self: &Arc<Self>,
        future: F,
        placement: Placement,
        location: &'static Location<'static>,
    ) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let id = Id::next();
        self.spawned.add_shared(1);
        if let Placement::Local(w) = placement {
            self.remotes[w].local_tasks.fetch_add(1, Ordering::Relaxed);
        }
        let (task, join) = task_core::new_task(
            future,
            self.clone(),
            id,
            placement,
            location,
            task_core::Kind::Task,
        );
        tracing::trace!(
            target: "weir::task",
            task_id = id.as_u64(),
            location = %location,
            placement = ?placement,
            "spawn"
        );
        match self.owned.insert(task.clone()) {
            Ok(()) => {
                self.queued(task.header());
                self.schedule(task, Queue::Back)
            }
            Err(task) => task.shutdown(),
        }
        JoinHandle::new(join)
    }

    /// Runs `f` on the blocking pool, as a task of this runtime.
    pub(crate) fn spawn_blocking<F, R>(
        self: &Arc<Self>,
        f: F,
        location: &'static Location<'static>,
    ) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.spawned.add_shared(1);
        self.blocking.spawn(self, f, location)
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
        task.header().queued_on.store(0, Ordering::Relaxed);
        match task.header().placement.worker() {
            Some(w) => self.push_inbox(w, task),
            None => {
                self.inject.push(task);
                self.notify_parked();
            }
        }
    }
}

impl Schedule for Arc<Shared> {
    #[inline]
    fn queued(&self, header: &Header) {
        if self.config.timing.polls {
            // The start of its scheduling delay, which its next poll ends.
            header
                .queued_at
                .store(crate::recorder::ticks::now(), Ordering::Relaxed);
        }
    }

    fn schedule(&self, task: Task, at: Queue) {
        context::with_worker(|cx| match cx {
            Some(cx) if ptr::eq(&*cx.shared, &**self) => cx.schedule_local(task, at),
            _ => self.schedule_remote(task),
        })
    }

    fn release(&self, header: &Header) {
        if let Placement::Local(w) = header.placement {
            self.remotes[w].local_tasks.fetch_sub(1, Ordering::Relaxed);
        }
        let removed = self.owned.remove(header);
        drop(removed);
    }
}

impl WorkerCx {
    /// Queues a task woken or spawned on this worker. The common case — a task that may run
    /// anywhere, woken by the running task into an empty LIFO slot — is the short path here;
    /// the rest is out of line.
    #[inline]
    fn schedule_local(&self, task: Task, at: Queue) {
        let header = task.header();
        let last = header.last_worker.load(Ordering::Relaxed);
        if last != u32::MAX && last as usize != self.index {
            self.count_cross_worker_wake();
        }
        if header.placement != Placement::Any {
            return self.schedule_pinned(task);
        }
        if at == Queue::Next && !self.in_dispatch.get() && self.shared.config.lifo_slot {
            self.stamp(header, QueuedAt::LIFO);
            let displaced = self.queues().lifo.replace(task);
            match displaced {
                None => self.resume_nested(),
                // The task that held the slot goes to the back of the queue.
                Some(task) => {
                    self.stamp(task.header(), QueuedAt::LOCAL);
                    self.push_back(task);
                }
            }
        } else {
            self.stamp(header, QueuedAt::LOCAL);
            self.push_back(task);
        }
    }

    /// Notes in the task's header that it is queued in `queue` now (`WorkerStats::polls_waited`).
    #[inline]
    fn stamp(&self, header: &crate::task_core::Header, queue: u64) {
        let polls = self.shared.remotes[self.index].metrics.polls.get();
        header
            .queued_on
            .store(QueuedAt::stamp(self.index, queue, polls), Ordering::Relaxed);
    }

    #[cold]
    #[inline(never)]
    fn count_cross_worker_wake(&self) {
        self.shared.remotes[self.index]
            .metrics
            .cross_worker_wakes
            .add_owner(1);
    }

    /// A task pinned to a worker: that worker's inbox, or this worker's pinned queue.
    #[inline(never)]
    fn schedule_pinned(&self, task: Task) {
        match task.header().placement.worker() {
            Some(w) if w != self.index => self.shared.push_inbox(w, task),
            _ => {
                self.stamp(task.header(), QueuedAt::PINNED);
                self.queues().pinned.push_back(task);
                self.resume_nested();
            }
        }
    }

    /// Puts a task at the back of this worker's line: the local queue, or its backlog while
    /// the backlog holds tasks or the local queue is full. Wakes another worker for work this
    /// one cannot start next. The caller has stamped the task (`stamp`).
    fn push_back(&self, task: Task) {
        let shared = &*self.shared;
        let mut q = self.queues();
        let remote = &shared.remotes[self.index];
        let spilled = queue_back(&mut q.local, &remote.backlog, task);
        if spilled {
            remote.metrics.overflows.add_owner(1);
        }
        // With a single queued task this worker runs it as soon as the current poll returns.
        let surplus = spilled || q.local.len() + usize::from(q.lifo.is_some()) > 1;
        drop(q);
        self.resume_nested();
        if self.in_dispatch.get() {
            self.notify_pending.set(true);
        } else if surplus && shared.remotes.len() > 1 {
            shared.notify_parked();
        }
    }
}

/// Queues `task` at the back of a worker's line (`line.rs`); a task that goes to the backlog is
/// noted so (`WorkerStats::polls_waited`). Returns `true` if it did.
#[inline]
pub(crate) fn queue_back(local: &mut Local<Task>, backlog: &SharedFifo<Task>, task: Task) -> bool {
    line::push_back(local, backlog, task, |t| {
        // Only the thread that queues a task writes its stamp.
        let at = &t.header().queued_on;
        at.store(
            QueuedAt::to_backlog(at.load(Ordering::Relaxed)),
            Ordering::Relaxed,
        );
    })
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
    context::with_worker(|cx| {
        let cx = cx?;
        cx.local_thread.set(Some(std::thread::current().id()));
        let shared = cx.shared.clone();
        Some(shared.spawn(future, Placement::Local(cx.index), location))
    })
}
