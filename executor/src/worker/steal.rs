//! Stealing from peers: half of a random peer's run queue (or of its backlog, when the queue is
//! empty) when this worker runs out of work,
//! and a peer's ready I/O events while that peer cannot turn its reactor (I/O stealing).
//!
//! A per-worker epoll has one weakness a shared one lacks: when its owner cannot run (the OS
//! descheduled it, or a task hogs it), its ready connections wait although another worker may
//! be idle. So a worker also collects a *peer's* ready events (`weir_reactor::ReactorHandle::steal_events`)
//! and runs their wakers here, so the tasks queue here: when it runs out of work (`search`,
//! from a peer not parked that has not turned its reactor for [`IDLE_STALL`]) and in its
//! periodic maintenance (from one stalled for [`STALL`]). A parked owner is left alone: it gets
//! the events itself. Idle workers sleep in their own reactors and steal nothing: while every
//! other worker sleeps, the runtime's monitor thread collects a stuck worker's ready I/O
//! instead (`metrics/monitor.rs`: its events on epoll; on io_uring and mio, whose events no
//! other thread can collect, the readiness of the fds tasks wait on), and their tasks go to an
//! idle worker it wakes.

use std::time::Duration;

use weir_reactor::for_executor::ReactorControl;

use super::Worker;
use crate::queue;
use crate::task_core::Task;

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

impl Worker<'_> {
    pub(super) fn search(&mut self) -> Option<Task> {
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
            let victim = &self.shared.remotes[w];
            // The local queue holds the victim's oldest tasks; its backlog only newer ones.
            let stolen = victim.steal.steal_into(&mut q.local).or_else(|| {
                let half = victim.backlog.len().div_ceil(2).min(queue::CAPACITY / 2);
                victim
                    .backlog
                    .pop_batch_into(half.saturating_sub(1), &mut q.local)
            });
            if let Some(t) = stolen {
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
    pub(super) fn steal_io(&mut self, start: usize, min_stall: Duration) -> usize {
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

    pub(super) fn next_rand(&mut self) -> u32 {
        // xorshift32
        let mut x = self.core().rand;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.core().rand = x;
        x
    }
}
