//! The reactor: a [`Driver`] owned by one worker and a [`Handle`] shared with everyone else.

use std::cell::RefCell;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Waker;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use slab::Slab;

use crate::Interest;
use crate::io::ScheduledIo;
use crate::metrics::{ReactorMetrics, ReactorStats, event_bucket};
use crate::min_wait::{self, MinWait, Policy, WaitReport};
use crate::park::{ParkState, Prepare, Unpark};
use crate::sys::{self, Backend, Event, SysConfig, WAKE_TOKEN};
use crate::time::Clock;
use crate::time::queue::{self, TimerKey, TimerQueue};

/// Largest accepted `max_events`.
pub const MAX_EVENTS_LIMIT: usize = 1 << 16;

/// How a reactor is built.
#[derive(Clone, Debug)]
pub struct Config {
    /// Which backend to drive.
    pub backend: Backend,
    /// The min_wait policy of blocking waits.
    pub min_wait: MinWait,
    /// Events collected per wait at most (`maxevents`).
    pub max_events: usize,
    /// Use `epoll_pwait2` when available; `false` forces the millisecond `epoll_wait` fallback.
    pub epoll_pwait2: bool,
    /// The index of the worker that owns this reactor (for tracing).
    pub index: usize,
    /// Most a wait bounded by a timer may end early to spin until the deadline (`ZERO`: never
    /// spin). See [`Driver::park`].
    pub timer_spin: Duration,
    /// The reactor's clock may be paused ([`time::pause`](crate::time::pause)): set for the one
    /// reactor of a current-thread runtime.
    pub pausable_clock: bool,
    /// Start with the clock paused; needs `pausable_clock`.
    pub start_paused: bool,
}

/// Default of [`Config::timer_spin`].
pub const DEFAULT_TIMER_SPIN: Duration = Duration::from_micros(50);

impl Default for Config {
    fn default() -> Config {
        Config {
            backend: Backend::default(),
            min_wait: MinWait::Off,
            max_events: 1024,
            epoll_pwait2: true,
            index: 0,
            timer_spin: DEFAULT_TIMER_SPIN,
            pausable_clock: false,
            start_paused: false,
        }
    }
}

/// Registered fds: a slab of readiness entries. A token is `generation << 32 | index`; the
/// generation of a slot changes at every insert, so an event collected for a registration that
/// has since been removed (and its slot reused) is recognised as stale and dropped.
struct IoSet {
    slab: Slab<Arc<ScheduledIo>>,
    next_generation: u32,
    shutdown: bool,
}

pub(crate) struct Inner {
    registry: sys::Registry,
    io: Mutex<IoSet>,
    timers: Mutex<TimerQueue>,
    park: ParkState,
    pub(crate) metrics: ReactorMetrics,
    shutdown: AtomicBool,
    precise: AtomicBool,
    index: usize,
    /// The owner's last clock reading (ns since the timer base), taken when it expired timers.
    /// A deadline at or before it has certainly passed.
    clock_ns: AtomicU64,
    /// What timers are measured against: the OS clock, or a paused one (tests).
    pub(crate) clock: Clock,
}

/// A shared reference to a reactor: registers fds, arms timers, wakes the owner.
#[derive(Clone)]
pub struct Handle {
    pub(crate) inner: Arc<Inner>,
}

/// The owner's side of a reactor: waits for events and dispatches them. One per worker.
pub struct Driver {
    handle: Handle,
    selector: sys::Selector,
    events: Vec<Event>,
    max_events: usize,
    policy: Policy,
    wake: Vec<Waker>,
    /// Upper bound of the timer spin margin ([`Config::timer_spin`]).
    spin_max: Duration,
    /// Moving average (weight 1/4) of how late timer-bound waits returned, in ns.
    late_ns: u64,
}

thread_local! {
    /// Reused buffers of [`Handle::steal_events`] (events, wakers), per stealing thread.
    static STEAL_BUF: std::cell::Cell<(Vec<Event>, Vec<Waker>)> =
        const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

fn token(generation: u32, index: usize) -> u64 {
    (u64::from(generation) << 32) | index as u64
}

fn split(token: u64) -> (u32, usize) {
    ((token >> 32) as u32, (token & 0xFFFF_FFFF) as usize)
}

impl Driver {
    /// Creates a reactor (an epoll instance and an eventfd, or a mio poller).
    ///
    /// # Errors
    /// `InvalidInput` for a `max_events` of 0 or above [`MAX_EVENTS_LIMIT`], or `start_paused`
    /// without `pausable_clock`; the OS error when the poller or its wake handle cannot be
    /// created (e.g. `EMFILE`).
    pub fn new(cfg: &Config) -> io::Result<Driver> {
        if cfg.start_paused && !cfg.pausable_clock {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "start_paused needs a pausable clock (a current-thread runtime)",
            ));
        }
        if cfg.max_events == 0 || cfg.max_events > MAX_EVENTS_LIMIT {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "max_events = {} is out of range 1..={MAX_EVENTS_LIMIT}",
                    cfg.max_events
                ),
            ));
        }
        let (selector, registry) = sys::new(&SysConfig {
            backend: cfg.backend,
            epoll_pwait2: cfg.epoll_pwait2,
            max_events: cfg.max_events,
        })?;
        let precise = selector.precise();
        let clock = Clock::new(cfg.pausable_clock);
        if cfg.start_paused {
            clock
                .pause()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        }
        let inner = Arc::new(Inner {
            registry,
            io: Mutex::new(IoSet {
                slab: Slab::new(),
                next_generation: 0,
                shutdown: false,
            }),
            timers: Mutex::new(TimerQueue::default()),
            park: ParkState::new(),
            metrics: ReactorMetrics::default(),
            shutdown: AtomicBool::new(false),
            precise: AtomicBool::new(precise),
            index: cfg.index,
            clock_ns: AtomicU64::new(0),
            clock,
        });
        Ok(Driver {
            handle: Handle { inner },
            selector,
            events: Vec::with_capacity(cfg.max_events),
            max_events: cfg.max_events,
            policy: Policy::new(cfg.min_wait),
            wake: Vec::new(),
            spin_max: cfg.timer_spin,
            late_ns: 0,
        })
    }

    /// The shared handle of this reactor.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Makes this reactor the current one of this thread, as its owner (timers armed from
    /// this thread then never need to wake it).
    pub fn enter(&self) -> EnterGuard {
        enter(self.handle.clone(), true)
    }

    /// Dispatches ready I/O and expired timers without blocking. Returns how many wakers were
    /// woken.
    ///
    /// # Errors
    /// Only unexpected OS errors from the poller.
    pub fn poll(&mut self) -> io::Result<usize> {
        self.turn(Some(Duration::ZERO))
    }

    /// Blocks until I/O is ready, a timer fires, `timeout` passes or [`Handle::unpark`] is
    /// called — with the min_wait window applied. Returns how many wakers were woken.
    ///
    /// A wait that the nearest timer bounds ends a little early and spins (non-blocking polls)
    /// until the deadline, so that the OS's wake-up latency does not make the timer late. The
    /// margin is four times the moving average of how late such waits return, at most
    /// [`Config::timer_spin`]; I/O or an unpark ends the spin at once.
    ///
    /// Returns at once (without a syscall) if an unpark is pending.
    ///
    /// While the clock is paused ([`time::pause`](crate::time::pause)), the caller is idle by
    /// contract (it has nothing to run): the wait first polls for I/O and wake-ups without
    /// blocking, and if there are none, it advances the clock to the nearest timer and fires it
    /// instead of blocking (auto-advance). Only with no timer armed, or while
    /// [`Handle::inhibit_auto_advance`] holds the clock, does it block — until I/O, an unpark or
    /// `timeout`. No timer spin, no min_wait window.
    ///
    /// # Errors
    /// Only unexpected OS errors from the poller.
    pub fn park(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        match self.handle.inner.park.prepare_park() {
            Prepare::Notified => return Ok(0),
            Prepare::Block => {}
        }
        let worker = self.handle.inner.index;
        tracing::trace!(target: "weir::sched", worker, ?timeout, "reactor park");
        let res = self.turn(timeout);
        let notified = self.handle.inner.park.finish_park();
        tracing::trace!(target: "weir::sched", worker, notified, "reactor unpark");
        res
    }

    /// The deadline of the earliest armed timer.
    pub fn next_timer(&self) -> Option<Instant> {
        self.handle
            .inner
            .timers
            .lock()
            .next_deadline()
            .map(queue::from_ns)
    }

    fn turn(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        if self.handle.inner.clock.is_paused() {
            return self.turn_paused(timeout);
        }
        let (mut woken, now) = self.expire_timers();
        // Timers fired: their tasks are queued, so do not block.
        let blocking = woken == 0 && timeout != Some(Duration::ZERO);
        // Set when the nearest timer, not the caller, bounds this wait: expire after it.
        let mut timer_bound = false;
        let mut deadline = now;
        let timeout = if !blocking {
            Some(Duration::ZERO)
        } else {
            match self.next_timer() {
                Some(t) => {
                    let until = t.saturating_duration_since(now);
                    timer_bound = timeout.is_none_or(|d| until <= d);
                    deadline = t;
                    Some(timeout.map_or(until, |d| d.min(until)))
                }
                None => timeout,
            }
        };
        self.events.clear();
        let registry = &self.handle.inner.registry;
        if blocking && timeout != Some(Duration::ZERO) {
            // End a timer-bound wait `margin` early and spin the rest (see `park`).
            let margin = if timer_bound {
                self.spin_margin()
            } else {
                Duration::ZERO
            };
            let wait_for = timeout.map(|d| d.saturating_sub(margin));
            if wait_for == Some(Duration::ZERO) {
                self.spin_until(deadline)?;
            } else {
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
                if timer_bound && self.events.is_empty() {
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
        } else {
            self.selector
                .select(registry, &mut self.events, self.max_events, timeout)?;
            self.handle.inner.metrics.polls.add_owner(1);
        }
        woken += self.dispatch();
        if timer_bound || !self.events.is_empty() {
            woken += self.expire_timers().0;
        }
        Ok(woken)
    }

    /// [`turn`](Self::turn) on a paused clock: poll without blocking; when idle, jump the
    /// clock to the nearest timer instead of waiting for it (see [`park`](Self::park)).
    fn turn_paused(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
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
        woken += self.dispatch();
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
        Ok(self.dispatch() + self.expire_timers().0)
    }

    /// How early a timer-bound wait ends: four times the average lateness (the tail of the
    /// OS's wake-up latency is several times its mean), at most `spin_max`.
    fn spin_margin(&self) -> Duration {
        Duration::from_nanos(self.late_ns.saturating_mul(4)).min(self.spin_max)
    }

    /// Polls without blocking until `deadline` (on the reactor's clock), an I/O event or an
    /// unpark.
    fn spin_until(&mut self, deadline: Instant) -> io::Result<()> {
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

    fn record_wait(&mut self, report: &WaitReport) {
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

    /// Sets readiness for the collected events and wakes their waiters.
    fn dispatch(&mut self) -> usize {
        if self.events.is_empty() {
            return 0;
        }
        let inner = &*self.handle.inner;
        let mut io_events = 0u64;
        {
            let set = inner.io.lock();
            for ev in &self.events {
                if ev.token == WAKE_TOKEN {
                    inner.metrics.wakes_received.add_owner(1);
                    continue;
                }
                io_events += 1;
                let (generation, index) = split(ev.token);
                if let Some(io) = set.slab.get(index)
                    && io.generation() == generation
                {
                    io.set_readiness(ev.ready, &mut self.wake);
                }
            }
        }
        inner.metrics.events.add_owner(io_events);
        let n = self.wake.len();
        self.wake.drain(..).for_each(Waker::wake);
        n
    }

    /// Fires due timers; returns how many and the clock reading it used.
    fn expire_timers(&mut self) -> (usize, Instant) {
        let inner = &*self.handle.inner;
        let instant = inner.clock.now();
        let now = queue::to_ns(instant);
        inner.clock_ns.store(now, Ordering::Relaxed);
        let n = {
            let mut timers = inner.timers.lock();
            match timers.next_deadline() {
                Some(d) if d <= now => timers.expire(now, &mut self.wake),
                _ => 0,
            }
        };
        if n > 0 {
            inner.metrics.timers_fired.add_owner(n as u64);
            self.wake.drain(..).for_each(Waker::wake);
        }
        (n, instant)
    }

    /// `true` if waits honour sub-millisecond timeouts (epoll with `epoll_pwait2`).
    pub fn is_precise(&self) -> bool {
        self.selector.precise()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.handle.shutdown();
    }
}

impl Handle {
    /// The reactor of the current thread.
    ///
    /// # Panics
    /// Outside a weir runtime (no reactor entered on this thread), with a message that says so.
    #[track_caller]
    pub fn current() -> Handle {
        match Handle::try_current() {
            Some(h) => h,
            None => panic!(
                "there is no weir reactor on this thread: this must be called from inside a weir \
                 runtime (in `Runtime::block_on`, a spawned task, or after `Runtime::enter`)"
            ),
        }
    }

    /// The reactor of the current thread and whether this thread owns it, in one lookup.
    /// Outside a runtime, the [fallback reactor](crate::fallback) (never the owner).
    pub(crate) fn current_for_timer() -> (Handle, bool) {
        let found = CURRENT
            .try_with(|c| c.borrow().as_ref().map(|c| (c.handle.clone(), c.owner)))
            .ok()
            .flatten();
        match found {
            Some(f) => f,
            None => match crate::fallback::handle() {
                Ok(h) => (h, false),
                Err(e) => panic!("no weir runtime on this thread and {e}"),
            },
        }
    }

    /// The reactor of the current thread or, outside any weir runtime, the lazily started
    /// [fallback reactor](crate::fallback).
    ///
    /// # Errors
    /// Only when the fallback reactor is needed and could not start.
    pub fn current_or_fallback() -> io::Result<Handle> {
        match Handle::try_current() {
            Some(h) => Ok(h),
            None => crate::fallback::handle(),
        }
    }

    /// The reactor of the current thread, if any.
    pub fn try_current() -> Option<Handle> {
        CURRENT
            .try_with(|c| c.borrow().as_ref().map(|c| c.handle.clone()))
            .ok()
            .flatten()
    }

    /// Makes this reactor the current one of this thread until the guard is dropped.
    pub fn enter(&self) -> EnterGuard {
        enter(self.clone(), false)
    }

    /// Wakes the owner if it is parked (one eventfd write); costs no syscall if it is running.
    pub fn unpark(&self) {
        let inner = &*self.inner;
        match inner.park.unpark() {
            Unpark::Signal => {
                inner.metrics.wakes_sent.add_shared(1);
                if let Err(e) = inner.registry.wake() {
                    tracing::error!(target: "weir::reactor", error = %e, "failed to wake reactor");
                }
            }
            Unpark::Done => inner.metrics.unparks_running.add_shared(1),
        }
    }

    /// `true` if the owner is blocked in its driver right now (racy; for tests and metrics).
    pub fn is_parked(&self) -> bool {
        self.inner.park.is_parked()
    }

    /// I/O stealing: when this reactor's owner is not blocked in it (it is running tasks, or
    /// the OS has descheduled it) and has not turned it for at least `min_stall`, collects up
    /// to 64 ready events without blocking and wakes their tasks **on the calling thread**. An
    /// idle worker calls this on its peers' reactors before it parks (`min_stall` zero), and a
    /// busy one during its periodic maintenance (a stall of a few hundred µs: the peer was
    /// descheduled or is stuck in a long poll), so a connection whose worker cannot run is not
    /// left waiting. Returns how many wakers were woken (0 when the owner is parked: it will
    /// see the events itself).
    ///
    /// A wake-up meant for the owner that this collects is passed on (the eventfd is written
    /// again). Never blocks; the mio backend never steals.
    ///
    /// # Errors
    /// Unexpected OS errors of `epoll_wait`.
    pub fn steal_events(&self, min_stall: Duration) -> io::Result<usize> {
        let inner = &*self.inner;
        if inner.park.is_parked() || inner.shutdown.load(Ordering::Acquire) {
            return Ok(0);
        }
        if !min_stall.is_zero() {
            let last = inner.clock_ns.load(Ordering::Relaxed);
            let now = queue::to_ns(inner.clock.now());
            if now.saturating_sub(last) < u64::try_from(min_stall.as_nanos()).unwrap_or(u64::MAX) {
                return Ok(0);
            }
        }
        // Fresh buffers while the thread exits (its thread-locals are gone).
        let (mut events, mut wake) = STEAL_BUF.try_with(|cell| cell.take()).unwrap_or_default();
        events.clear();
        let res = inner.registry.poll_now(&mut events, 64);
        let mut io_events = 0u64;
        let mut saw_wake = false;
        if !events.is_empty() {
            let set = inner.io.lock();
            for ev in &events {
                if ev.token == WAKE_TOKEN {
                    saw_wake = true;
                    continue;
                }
                io_events += 1;
                let (generation, index) = split(ev.token);
                if let Some(io) = set.slab.get(index)
                    && io.generation() == generation
                {
                    io.set_readiness(ev.ready, &mut wake);
                }
            }
        }
        if saw_wake {
            // The owner may have parked since the check above: hand its wake-up back.
            let _ = inner.registry.wake();
        }
        inner.metrics.events_stolen.add_shared(io_events);
        let n = wake.len();
        wake.drain(..).for_each(Waker::wake);
        let _ = STEAL_BUF.try_with(|cell| cell.set((events, wake)));
        res.map(|_| n)
    }

    /// How many fds are registered with this reactor right now.
    pub fn registrations(&self) -> usize {
        self.inner.io.lock().slab.len()
    }

    /// A snapshot of this reactor's counters.
    pub fn stats(&self) -> ReactorStats {
        let regs = self.inner.io.lock().slab.len() as u64;
        let timers = self.inner.timers.lock().len() as u64;
        self.inner.metrics.snapshot(regs, timers)
    }

    /// The index of the worker that owns this reactor.
    pub fn index(&self) -> usize {
        self.inner.index
    }

    /// `true` if both handles point to the same reactor.
    pub fn ptr_eq(&self, other: &Handle) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// `true` if the current thread owns this reactor (entered through [`Driver::enter`]).
    pub fn is_owned_by_current_thread(&self) -> bool {
        CURRENT
            .try_with(|c| {
                c.borrow()
                    .as_ref()
                    .is_some_and(|c| c.owner && Arc::ptr_eq(&c.handle.inner, &self.inner))
            })
            .unwrap_or(false)
    }

    /// `true` once the reactor has shut down.
    pub fn is_shutdown(&self) -> bool {
        self.inner.shutdown.load(Ordering::Acquire)
    }

    /// `true` if timers and waits on this reactor are nanosecond-precise.
    pub fn is_precise(&self) -> bool {
        self.inner.precise.load(Ordering::Relaxed)
    }

    /// The raw epoll fd, for backend-specific controls. `None` on the mio backend.
    pub fn epoll_fd(&self) -> Option<RawFd> {
        self.inner.registry.epoll_fd()
    }

    /// Applies kernel busy poll parameters to this reactor's epoll instance (`EPIOCSPARAMS`).
    ///
    /// # Errors
    /// `Unsupported` on the mio backend (no epoll fd is exposed); otherwise the errors of
    /// [`busy_poll::set`](crate::busy_poll::set).
    pub fn set_kernel_busy_poll(&self, params: crate::KernelBusyPoll) -> io::Result<()> {
        let fd = self.epoll_fd().ok_or_else(no_epoll_fd)?;
        crate::busy_poll::set(fd, params)
    }

    /// Reads back this reactor's kernel busy poll parameters (`EPIOCGPARAMS`).
    ///
    /// # Errors
    /// As [`set_kernel_busy_poll`](Self::set_kernel_busy_poll).
    pub fn kernel_busy_poll(&self) -> io::Result<crate::KernelBusyPoll> {
        let fd = self.epoll_fd().ok_or_else(no_epoll_fd)?;
        crate::busy_poll::get(fd)
    }

    /// Shuts the reactor down: every registration's waiters are woken and see an error, every
    /// timer waker is dropped. Idempotent.
    pub fn shutdown(&self) {
        let inner = &*self.inner;
        if inner.shutdown.swap(true, Ordering::AcqRel) {
            return;
        }
        let entries: Vec<Arc<ScheduledIo>> = {
            let mut set = inner.io.lock();
            set.shutdown = true;
            set.slab.drain().collect()
        };
        for io in entries {
            io.shutdown();
        }
        let mut wakers = Vec::new();
        inner.timers.lock().drain(&mut wakers);
        wakers.into_iter().for_each(Waker::wake);
        tracing::debug!(target: "weir::reactor", worker = inner.index, "reactor shut down");
    }

    // ----- registrations -----

    pub(crate) fn add_source(
        &self,
        fd: RawFd,
        interest: Interest,
    ) -> io::Result<(Arc<ScheduledIo>, u64)> {
        let inner = &*self.inner;
        let (io, tok) = {
            let mut set = inner.io.lock();
            if set.shutdown {
                return Err(gone());
            }
            let generation = set.next_generation;
            set.next_generation = (generation + 1) & 0x7FFF_FFFF;
            let entry = set.slab.vacant_entry();
            if entry.key() > u32::MAX as usize {
                return Err(io::Error::other("too many registrations on one reactor"));
            }
            let io = Arc::new(ScheduledIo::new(generation));
            let tok = token(generation, entry.key());
            entry.insert(io.clone());
            (io, tok)
        };
        if let Err(e) = inner.registry.register(fd, tok, interest) {
            self.remove_source(tok);
            return Err(e);
        }
        Ok((io, tok))
    }

    pub(crate) fn reregister_source(
        &self,
        fd: RawFd,
        tok: u64,
        interest: Interest,
    ) -> io::Result<()> {
        self.inner.registry.reregister(fd, tok, interest)
    }

    pub(crate) fn deregister_source(&self, fd: RawFd) -> io::Result<()> {
        self.inner.registry.deregister(fd)
    }

    pub(crate) fn remove_source(&self, tok: u64) {
        let (generation, index) = split(tok);
        let removed = {
            let mut set = self.inner.io.lock();
            match set.slab.get(index) {
                Some(io) if io.generation() == generation => Some(set.slab.remove(index)),
                _ => None,
            }
        };
        drop(removed);
    }

    // ----- timers -----

    /// Arms a timer; wakes the owner if the timer is now the earliest and the caller is not the
    /// owner (the owner recomputes its timeout before every wait).
    ///
    /// `owner`: the caller is the owning worker (from [`Handle::current_for_timer`]).
    pub(crate) fn timer_insert(&self, deadline: Instant, waker: Waker, owner: bool) -> TimerKey {
        let inner = &*self.inner;
        if inner.shutdown.load(Ordering::Acquire) {
            panic!("a timer was armed on a weir runtime that has shut down; it would never fire");
        }
        let (key, earliest) = inner.timers.lock().insert(queue::to_ns(deadline), waker);
        if earliest && !owner {
            self.unpark();
        }
        key
    }

    /// `true` if `deadline` is at or before the owner's last clock reading (so it has passed).
    /// Costs no clock read; `false` says nothing.
    pub(crate) fn has_passed(&self, deadline: Instant) -> bool {
        queue::to_ns(deadline) <= self.inner.clock_ns.load(Ordering::Relaxed)
    }

    /// `true` if the timer was armed and has fired (its entry is gone, and not because the
    /// reactor shut down). Only meaningful for a key that was not cancelled.
    pub(crate) fn timer_has_fired(&self, key: TimerKey) -> bool {
        !self.inner.timers.lock().contains(key) && !self.is_shutdown()
    }

    /// Fires the timers due at the clock's current reading, from any thread (after
    /// [`time::advance`](crate::time::advance) moved a paused clock). Returns how many.
    pub(crate) fn expire_due_timers(&self) -> usize {
        let inner = &*self.inner;
        let now = queue::to_ns(inner.clock.now());
        inner.clock_ns.fetch_max(now, Ordering::Relaxed);
        let mut wake = Vec::new();
        let n = inner.timers.lock().expire(now, &mut wake);
        if n > 0 {
            inner.metrics.timers_fired.add_shared(n as u64);
            wake.into_iter().for_each(Waker::wake);
        }
        n
    }

    /// Keeps an idle reactor from advancing its paused clock until the matching
    /// [`allow_auto_advance`](Self::allow_auto_advance): for work whose result comes in real
    /// time, such as a `spawn_blocking` closure. Calls nest; each needs its own `allow`. No-op
    /// on a reactor whose clock cannot be paused.
    pub fn inhibit_auto_advance(&self) {
        if self.inner.clock.is_pausable() {
            self.inner.clock.inhibit();
        }
    }

    /// Ends one [`inhibit_auto_advance`](Self::inhibit_auto_advance). Call it once the work's
    /// result is published and its waiters woken, or the idle reactor may advance the clock
    /// first. The last one unparks the owner if the clock is paused, so that an idle reactor
    /// advances again (a clock paused later is unparked by `pause` itself).
    pub fn allow_auto_advance(&self) {
        let clock = &self.inner.clock;
        if clock.is_pausable() && clock.release() && clock.is_paused() {
            self.unpark();
        }
    }

    pub(crate) fn timer_update(&self, key: TimerKey, waker: &Waker) -> bool {
        self.inner.timers.lock().update(key, waker)
    }

    pub(crate) fn timer_cancel(&self, key: TimerKey) {
        let waker = self.inner.timers.lock().remove(key);
        drop(waker);
    }
}

fn no_epoll_fd() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "kernel busy poll needs the epoll backend (the mio backend exposes no epoll fd)",
    )
}

pub(crate) fn gone() -> io::Error {
    io::Error::other("the weir reactor this I/O object was registered with has shut down")
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("worker", &self.inner.index)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver")
            .field("worker", &self.handle.inner.index)
            .field("max_events", &self.max_events)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

// ----- the current reactor of a thread -----

struct Current {
    handle: Handle,
    owner: bool,
}

thread_local! {
    /// Every access uses `try_with`: a runtime kept in a thread-local may shut down (and enter
    /// its reactors) while the thread exits, after this one has been destroyed.
    static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
}

/// Restores the previously current reactor when dropped.
#[must_use = "the reactor stays current only while the guard lives"]
pub struct EnterGuard {
    prev: Option<Current>,
    /// `false` if the thread-local was already destroyed when entering: nothing to restore.
    entered: bool,
    _not_send: PhantomData<*const ()>,
}

/// Runs `f` with the clock of the current thread's reactor, if any.
pub(crate) fn with_current_clock<R>(f: impl FnOnce(Option<&Clock>) -> R) -> R {
    let mut f = Some(f);
    let r = CURRENT.try_with(|c| {
        let current = c.borrow();
        let f = f.take().expect("called once");
        f(current.as_ref().map(|c| &c.handle.inner.clock))
    });
    match r {
        Ok(r) => r,
        // The thread-local is gone (thread exit): no reactor.
        Err(_) => (f.take().expect("not called yet"))(None),
    }
}

fn enter(handle: Handle, owner: bool) -> EnterGuard {
    match CURRENT.try_with(|c| c.replace(Some(Current { handle, owner }))) {
        Ok(prev) => EnterGuard {
            prev,
            entered: true,
            _not_send: PhantomData,
        },
        Err(_) => EnterGuard {
            prev: None,
            entered: false,
            _not_send: PhantomData,
        },
    }
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        if !self.entered {
            return;
        }
        let prev = self.prev.take();
        // Replaced, then dropped outside the borrow (a last handle's destructor may look here).
        let entered = CURRENT.try_with(|c| c.replace(prev));
        drop(entered);
    }
}

impl fmt::Debug for EnterGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnterGuard").finish_non_exhaustive()
    }
}
