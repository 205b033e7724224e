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
            Ok(()) => self.schedule(task, Queue::Back),
            Err(task) => task.shutdown(),
        }
        JoinHandle::new(join)
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
    fn schedule(&self, task: Task, at: Queue) {
        context::with_worker(|cx| match cx {
            Some(cx) if ptr::eq(&*cx.shared, &**self) => {
                let last = task.header().last_worker.load(Ordering::Relaxed);
                if last != u32::MAX && last as usize != cx.index {
                    self.remotes[cx.index]
                        .metrics
                        .cross_worker_wakes
                        .add_owner(1);
                }
                cx.schedule_local(task, at)
            }
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
    fn schedule_local(&self, task: Task, at: Queue) {
        let shared = &*self.shared;
        match task.header().placement.worker() {
            Some(w) if w != self.index => shared.push_inbox(w, task),
            Some(_) => {
                self.queues().pinned.push_back(task);
                self.resume_nested();
            }
            None => {
                let metrics = &shared.remotes[self.index].metrics;
                let mut q = self.queues();
                let to_queue =
                    if at == Queue::Back || self.in_dispatch.get() || !shared.config.lifo_slot {
                        Some(task)
                    } else {
                        q.lifo.replace(task)
                    };
                let Some(task) = to_queue else {
                    drop(q);
                    self.resume_nested();
                    return;
                };
                if q.local.push_back(task, &shared.inject) {
                    metrics.overflows.add_owner(1);
                }
                // Wake another worker only for work this one cannot start next: with a single
                // queued task this worker runs it as soon as the current poll returns.
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
