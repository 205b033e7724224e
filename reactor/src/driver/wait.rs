//! One turn of the owner's wait ([`Driver::poll`](super::Driver::poll),
//! [`Driver::park`](super::Driver::park)): fire due timers, compute the timeout from the nearest
//! timer, wait in the backend (through the min_wait window), spin out the last stretch of a
//! timer-bound wait, account for the wait, and deliver what it collected. On a paused clock the
//! idle turn jumps the clock to the nearest timer instead of blocking.

use std::io;
use std::sync::atomic::Ordering;
use std::task::Waker;
use std::time::{Duration, Instant};

use super::{Driver, timer_queue};
use crate::metrics::event_bucket;
use crate::min_wait::{self, WaitReport};

impl Driver {
    /// One turn: makes the registrations handed to the owner, then waits (see the module
    /// docs). Thieves leave the reactor alone meanwhile (`Inner::turning`).
    pub(super) fn turn(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        let inner = &self.handle.inner;
        inner.turning.store(true, Ordering::Relaxed);
        self.handle.make_handed();
        let res = self.turn_once(timeout);
        self.handle.inner.turning.store(false, Ordering::Relaxed);
        res
    }

    fn turn_once(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        if self.handle.inner.clock.is_paused() {
            return self.turn_paused(timeout);
        }
        // A turn that may block reads the clock only when a timer is armed (the reading
        // bounds the wait); a poll reads it to record when the owner last turned.
        // `next`: the queue's top after expiring (deadline in its nanoseconds, live or not),
        // which bounds a blocking wait; only a turn that may block asks for it.
        let (mut woken, now, next) = if timeout == Some(Duration::ZERO) {
            let (n, now) = self.expire_timers();
            (n, Some(now), None)
        } else {
            match self.expire_timers_if_armed() {
                Some(e) => (e.fired, Some(e.now), e.next.map(|next| (e.now_ns, next))),
                None => (0, None, None),
            }
        };
        // Timers fired: their tasks are queued, so do not block.
        let blocking = woken == 0 && timeout != Some(Duration::ZERO);
        // Set when the nearest timer, not the caller, bounds this wait: its deadline, the
        // clock reading the wait starts from, and whether a live timer (not a cancelled one's
        // item) is due then. Expire after it.
        let mut bound = None;
        let timeout = if !blocking {
            Some(Duration::ZERO)
        } else {
            // In the queue's nanoseconds: no conversion unless the timer bounds the wait.
            match now.zip(next) {
                Some((now, (now_ns, (t, live)))) => {
                    let until = Duration::from_nanos(t.saturating_sub(now_ns));
                    if timeout.is_none_or(|d| until <= d) {
                        bound = Some((timer_queue::from_ns(t), now, live));
                    }
                    Some(timeout.map_or(until, |d| d.min(until)))
                }
                None => timeout,
            }
        };
        self.events.clear();
        let registry = &self.handle.inner.registry;
        if blocking && timeout != Some(Duration::ZERO) {
            // End a live timer's wait `margin` early and spin the rest (see `park`); a
            // cancelled timer's item needs no punctuality.
            let margin = if let Some((_, _, true)) = bound {
                self.spin_margin()
            } else {
                Duration::ZERO
            };
            let wait_for = timeout.map(|d| d.saturating_sub(margin));
            match bound {
                // Only a timer-bound wait can shrink to nothing (by its margin).
                Some((deadline, _, _)) if wait_for == Some(Duration::ZERO) => {
                    self.spin_until(deadline)?;
                }
                _ => {
                    let window = self.policy.window();
                    let report = min_wait::wait(
                        &mut self.selector,
                        registry,
                        &mut self.events,
                        self.max_events,
                        wait_for,
                        window,
                        self.policy.needs_timing(),
                    )?;
                    self.record_wait(&report);
                    if let Some((deadline, now, _)) = bound
                        && self.events.is_empty()
                    {
                        // The wait timed out: learn how late the OS woke us, then spin.
                        let target = now + wait_for.unwrap_or_default();
                        let late = self
                            .handle
                            .inner
                            .clock
                            .now()
                            .saturating_duration_since(target);
                        let late = u64::try_from(late.as_nanos()).unwrap_or(u64::MAX);
                        self.late_ns = self.late_ns - self.late_ns / 4 + late / 4;
                        if !margin.is_zero() {
                            self.spin_until(deadline)?;
                        }
                    }
                }
            }
        } else {
            self.selector
                .select(registry, &mut self.events, self.max_events, timeout)?;
            self.handle.inner.metrics.polls.add_owner(1);
        }
        woken += self.deliver_events();
        // After the wait: fire what came due, and record when the owner turned (a turn that
        // skipped the reading before its wait takes it here).
        if let Some((_, _, false)) = bound
            && self.events.is_empty()
        {
            // A cancelled timer's item may have ended this wait for nothing: drop the dead
            // items on top, so that the next wait is bounded by a live timer.
            woken += self.expire_timers_and_settle();
        } else if bound.is_some() || now.is_none() || !self.events.is_empty() {
            woken += self.expire_timers().0;
        }
        Ok(woken)
    }

    /// [`turn`](Self::turn) on a paused clock: poll without blocking; when idle, jump the
    /// clock to the nearest timer instead of waiting for it (see [`park`](Self::park)).
    pub(super) fn turn_paused(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        self.handle.make_handed();
        let (mut woken, _) = self.expire_timers();
        self.events.clear();
        let inner = &*self.handle.inner;
        self.selector.select(
            &inner.registry,
            &mut self.events,
            self.max_events,
            Some(Duration::ZERO),
        )?;
        inner.metrics.polls.add_owner(1);
        let events = !self.events.is_empty();
        woken += self.deliver_events();
        if woken > 0 || events || timeout == Some(Duration::ZERO) {
            return Ok(woken);
        }
        // Idle: nothing was runnable (the caller's contract), and no I/O, no wake-up came.
        if let Some(next) = self.next_timer()
            && self.handle.inner.clock.auto_advance_to(next)
        {
            return Ok(self.expire_timers().0);
        }
        // No timer to jump to, or blocking closures hold the clock (their end unparks us).
        self.events.clear();
        let inner = &*self.handle.inner;
        self.selector
            .select(&inner.registry, &mut self.events, self.max_events, timeout)?;
        inner.metrics.polls.add_owner(1);
        inner.metrics.waits.add_owner(1);
        Ok(self.deliver_events() + self.expire_timers().0)
    }

    /// How early a timer-bound wait ends: four times the average lateness (the tail of the
    /// OS's wake-up latency is several times its mean), at most `spin_max`.
    pub(super) fn spin_margin(&self) -> Duration {
        Duration::from_nanos(self.late_ns.saturating_mul(4)).min(self.spin_max)
    }

    /// Polls without blocking until `deadline` (on the reactor's clock), an I/O event or an
    /// unpark.
    pub(super) fn spin_until(&mut self, deadline: Instant) -> io::Result<()> {
        let inner = &*self.handle.inner;
        let start = inner.clock.now();
        let mut now = start;
        while now < deadline {
            self.selector.select(
                &inner.registry,
                &mut self.events,
                self.max_events,
                Some(Duration::ZERO),
            )?;
            inner.metrics.polls.add_owner(1);
            if !self.events.is_empty() {
                break;
            }
            std::hint::spin_loop();
            now = inner.clock.now();
        }
        let spent = now.saturating_duration_since(start);
        inner
            .metrics
            .timer_spin_ns
            .add_owner(u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX));
        Ok(())
    }

    pub(super) fn record_wait(&mut self, report: &WaitReport) {
        let m = &self.handle.inner.metrics;
        let worker = self.handle.inner.index;
        m.waits.add_owner(1);
        m.events_per_wait[event_bucket(report.events)].add_owner(1);
        if let Some(w) = &report.window {
            m.windows_opened.add_owner(1);
            m.window_ns
                .add_owner(u64::try_from(w.spent.as_nanos()).unwrap_or(u64::MAX));
            m.window_events.add_owner(w.gathered as u64);
            if w.full {
                m.windows_full.add_owner(1);
            }
            tracing::trace!(
                target: "weir::sched",
                worker,
                gathered = w.gathered,
                spent_ns = w.spent.as_nanos() as u64,
                reason = if w.full { "full" } else { match w.end {
                    min_wait::WindowEnd::Elapsed => "min_wait elapsed",
                    min_wait::WindowEnd::Deadline => "timer deadline",
                }},
                "min_wait window closed"
            );
        }
        tracing::trace!(
            target: "weir::sched",
            worker,
            events = report.events,
            blocked_ns = report.blocked.as_nanos() as u64,
            window = report.window.is_some(),
            "wait"
        );
        if let Some((_, end)) = report.span
            && let Some(v) = self.policy.measure(end, m.events.get())
        {
            if v.on {
                m.window_probes_kept.add_owner(1);
            } else {
                m.window_probes_refused.add_owner(1);
            }
            tracing::debug!(
                target: "weir::sched",
                worker,
                windows = v.on,
                with_ns_per_event = v.with_ns,
                without_ns_per_event = v.without_ns,
                "adaptive min_wait: measured what windows save"
            );
        }
        if let Some(open) = self.policy.record(report) {
            // A decision per wait near the threshold: scheduler detail, not a lifecycle event.
            tracing::trace!(
                target: "weir::sched",
                worker,
                open,
                gap_ns = self.policy.gap().as_nanos() as u64,
                "adaptive min_wait window {}",
                if open { "opened: medium load" } else { "closed" }
            );
        }
    }

    /// Sets readiness for the collected events and wakes their tasks.
    pub(super) fn deliver_events(&mut self) -> usize {
        if self.events.is_empty() {
            return 0;
        }
        let inner = &*self.handle.inner;
        let delivered = inner
            .registrations
            .lock()
            .deliver(&self.events, &mut self.wake);
        if delivered.wakes > 0 {
            inner.metrics.wakes_received.add_owner(delivered.wakes);
        }
        inner.metrics.events.add_owner(delivered.io_events);
        let n = self.wake.len();
        self.wake.drain(..).for_each(Waker::wake);
        n
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::{Wake, Waker};
    use std::time::{Duration, Instant};

    use crate::config::DriverConfig;
    use crate::driver::Driver;

    struct Flag(AtomicBool);

    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// Timers cancelled before a live one leave items that bound the owner's wait; the first
    /// wait they end for nothing drops them all, so the next one lasts until the live timer.
    #[test]
    fn cancelled_timers_end_at_most_one_wait_for_nothing() {
        let mut driver = Driver::new(&DriverConfig::default()).unwrap();
        let handle = driver.handle().clone();
        let start = Instant::now();
        let cancelled: Vec<_> = (1..=5)
            .map(|ms| {
                let at = start + Duration::from_millis(ms);
                handle.timer_insert(at, Waker::noop().clone(), true)
            })
            .collect();
        let fired = Arc::new(Flag(AtomicBool::new(false)));
        let at = start + Duration::from_millis(20);
        handle.timer_insert(at, Waker::from(fired.clone()), true);
        for key in cancelled {
            handle.timer_cancel(key);
        }
        let mut waits = 0;
        while !fired.0.load(Ordering::SeqCst) {
            driver.park(None).unwrap();
            waits += 1;
            assert!(
                waits <= 2,
                "a wait ended for nothing after the dead items were dropped"
            );
        }
        assert!(Instant::now() >= at);
    }
}
