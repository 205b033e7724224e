//! Where a task goes when it is spawned or woken: the running worker's queues when the thread
//! runs a worker of the task's runtime, else the inject queue (or, for a task pinned to a
//! worker, that worker's inbox) and a sleeping worker is woken.
//!
//! On the worker: a task woken by a running task goes to the LIFO slot (unless it yielded, or
//! the slot is off); one woken while the reactor dispatches goes to the back of the local queue,
//! in event order, and the wake-up of another worker is deferred to the end of the dispatch.
//! Another worker is woken only for work this one cannot start next.

use std::future::Future;
use std::panic::Location;
use std::ptr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::context::{self, WorkerCx};
use crate::shared::Shared;
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
            let displaced = self.queues().lifo.replace(task);
            match displaced {
                None => self.resume_nested(),
                // The task that held the slot goes to the back of the queue.
                Some(task) => self.push_back(task),
            }
        } else {
            self.push_back(task);
        }
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
                self.queues().pinned.push_back(task);
                self.resume_nested();
            }
        }
    }

    /// Puts a task at the back of the local queue (the inject queue takes half of a full
    /// one), and wakes another worker for work this one cannot start next.
    fn push_back(&self, task: Task) {
        let shared = &*self.shared;
        let mut q = self.queues();
        if q.local.push_back(task, &shared.inject) {
            shared.remotes[self.index].metrics.overflows.add_owner(1);
        }
        // With a single queued task this worker runs it as soon as the current poll returns.
        let surplus = q.local.len() + usize::from(q.lifo.is_some()) > 1;
        drop(q);
        self.resume_nested();
        if self.in_dispatch.get() {
            self.notify_pending.set(true);
        } else if surplus && shared.remotes.len() > 1 {
            shared.notify_parked();
        }
    }
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
