//! Spin, then park — the one home of the idea.
//!
//! A worker that has run out of work does not go to sleep at once. For up to
//! [`busy_poll`](crate::Builder::busy_poll) it spins: it polls its own reactor with a zero
//! timeout (which also fires due timers), looks at its queues and the inject queue, and tries to
//! steal. Work that arrives during the spin is picked up without the cost of a blocking wait, a
//! context switch and a wake-up (`spins_found`); a spin that sees nothing (`spins_gave_up`)
//! falls through to parking.
//!
//! While spinning, a worker is not registered as sleeping, so nobody spends an eventfd write to
//! wake it.
//!
//! Parking registers the worker as sleeping, re-checks every queue it could be handed work
//! through (the no-lost-wake-up half of `shared/idle.rs`), and blocks in its own reactor. The
//! reactor's timeout is the nearest timer, and its min_wait window applies. Whatever the wait
//! wakes is queued on this worker.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::Worker;
use crate::task_core::Task;

pub(super) enum Spin {
    /// Work was found: a task to run, or `None` when the root future was woken or tasks were
    /// queued for the next turn of the loop.
    Found(Option<Task>),
    GaveUp,
}

impl Worker<'_> {
    pub(super) fn spin(&mut self, root_woken: Option<&AtomicBool>) -> Spin {
        let busy = self.shared.config.busy_poll;
        if busy.is_zero() {
            return Spin::GaveUp;
        }
        let deadline = Instant::now() + busy;
        let m = &self.remote.metrics;
        loop {
            let woken = self.dispatch(|d| d.poll());
            let found = if let Some(t) = self.next_task() {
                Some(Some(t))
            } else if root_woken.is_some_and(|w| w.load(Ordering::SeqCst)) || woken > 0 {
                Some(None)
            } else {
                self.search().map(Some)
            };
            if let Some(found) = found {
                m.spins_found.add_owner(1);
                tracing::trace!(target: "weir::sched", worker = self.cx.index, "spin found work");
                return Spin::Found(found);
            }
            if self.shared.is_shutdown() || Instant::now() >= deadline {
                m.spins_gave_up.add_owner(1);
                tracing::trace!(target: "weir::sched", worker = self.cx.index, "spin gave up");
                return Spin::GaveUp;
            }
            std::hint::spin_loop();
        }
    }

    pub(super) fn park(&mut self, root_woken: Option<&AtomicBool>) {
        // `Builder::on_thread_park` runs first, so work it spawns is seen by the re-check below.
        let hooks = &self.shared.config.hooks;
        hooks.before_park();
        self.park_in_reactor(root_woken);
        hooks.after_unpark();
    }

    fn park_in_reactor(&mut self, root_woken: Option<&AtomicBool>) {
        let idle = &self.shared.idle;
        let index = self.cx.index;
        let last_searcher = idle.transition_to_sleeping(index, self.core().searching);
        self.core().searching = false;
        if self.has_work(last_searcher, root_woken) {
            self.core().searching = idle.remove_sleeper(index);
            return;
        }
        self.remote.metrics.parking();
        tracing::trace!(target: "weir::sched", worker = index, "park");
        self.cx.in_dispatch.set(true);
        if let Err(e) = self.core().driver.park(None) {
            tracing::error!(target: "weir::reactor", worker = index, error = %e, "reactor wait failed");
        }
        self.cx.in_dispatch.set(false);
        self.remote.metrics.unparked();
        // Off the sleepers list before announcing work, or the notification could pick us.
        self.core().searching = idle.remove_sleeper(index);
        self.notify_after_dispatch();
        tracing::trace!(
            target: "weir::sched",
            worker = index,
            notified = self.core().searching,
            "unpark"
        );
    }
}
