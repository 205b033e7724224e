//! The reactor: a [`Driver`] owned by one worker and a [`ReactorHandle`] shared with everyone
//! else, over one shared state (`Inner`). Split by job:
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | the two types and their shared state; building, parking, unparking, shutdown |
//! | `registrations.rs` | registered fds and their generation tokens; the one delivery of events to them (owner, stealing, rescue) |
//! | `scheduled_io.rs` | the readiness and wakers of one registered fd |
//! | `wait.rs` | one turn of the owner: timeout, min_wait wait, timer spin, wait accounting, auto-advance |
//! | `nested.rs` | waiting for the reactor from inside another event loop (its fd, the park's begin and end) |
//! | `steal.rs` | I/O stealing: another thread collects this reactor's events |
//! | `rescue.rs` | readiness rescue: another thread polls a stuck owner's waited-on fds (backends that cannot steal) |
//! | `timers.rs` | the timer API of the handle, and expiry by the owner |
//! | `timer_queue.rs` | the timer queue (an indexed binary heap of nanosecond deadlines) |
//! | `clock.rs` | the clock the timers read: the OS clock, or a paused one |
//!
//! The backend behind it is `sys`; which reactor is current on a thread (`enter`, `current`) is
//! the crate's `context` module, and the settings it is built with are [`DriverConfig`].

use std::fmt;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::Waker;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::config::DriverConfig;
use crate::metrics::{ReactorMetrics, ReactorStats};
use crate::min_wait::Policy;
use crate::park_state::{ParkState, Prepare, Unpark};
use crate::sys::{self, AnyRegistry, AnySelector, Backend, Event};

pub(crate) mod clock;
mod nested;
mod registrations;
mod rescue;
mod scheduled_io;
mod steal;
mod timer_queue;
mod timers;
mod wait;

use clock::Clock;
pub use nested::{NestTimer, NestedPark};
pub(crate) use registrations::gone;
use registrations::{Handed, Registrations};
pub use scheduled_io::ReadyEvent;
pub(crate) use scheduled_io::ScheduledIo;
use timer_queue::TimerQueue;
pub(crate) use timer_queue::{FAR_FUTURE, TimerKey};

/// The state a reactor's owner and its handles share.
pub(crate) struct Inner {
    pub(crate) registry: AnyRegistry,
    /// The backend actually built (never `Auto`).
    backend: Backend,
    registrations: Mutex<Registrations>,
    timers: Mutex<TimerQueue>,
    park: ParkState,
    pub(crate) metrics: ReactorMetrics,
    shutdown: AtomicBool,
    precise: AtomicBool,
    /// The owner is inside a turn (its backend wait, or the work around it). Thieves leave such
    /// a reactor alone: an owner that is slow to come back from its epoll call is held by the
    /// epoll's mutex (a reader of its fdinfo, say), and a thief's `epoll_wait` on that epoll
    /// would wait for the same mutex.
    turning: AtomicBool,
    /// Registrations other threads handed to the owner ([`ReactorHandle::add_source_handed`]),
    /// made by the owner at its next turn, under this lock: a deregistration, which looks here
    /// first, either takes one back before it is made or finds it made.
    handed: Mutex<Vec<Handed>>,
    /// `handed.len()`, read without the lock.
    handed_len: AtomicUsize,
    /// `registrations.len()`, read without the lock: placement compares reactors by it for
    /// every accepted connection.
    registered: AtomicUsize,
    index: usize,
    /// The owner's last clock reading (ns since the timer base), taken when it expired timers.
    /// A deadline at or before it has certainly passed.
    clock_ns: AtomicU64,
    /// What timers are measured against: the OS clock, or a paused one (tests).
    pub(crate) clock: Clock,
}

/// A shared reference to a reactor: registers fds, arms timers, wakes the owner.
#[derive(Clone)]
pub struct ReactorHandle {
    pub(crate) inner: Arc<Inner>,
}

/// The owner's side of a reactor: waits for events and delivers them. One per worker.
///
/// Dropping an io_uring driver collects its ring's pending completions, closes the ring and
/// waits until the kernel has finished tearing it down — about 36 ms on Linux 6.18 — so that
/// no thread is interrupted afterwards by work the kernel queues for a closed ring (a blocking
/// socket read with a receive timeout would fail with `EINTR`). Before moving a driver to
/// another thread, see [`leave_thread`](Self::leave_thread).
pub struct Driver {
    handle: ReactorHandle,
    selector: AnySelector,
    events: Vec<Event>,
    max_events: usize,
    policy: Policy,
    wake: Vec<Waker>,
    /// Upper bound of the timer spin margin ([`DriverConfig::timer_spin`]).
    spin_max: Duration,
    /// Moving average (weight 1/4) of how late timer-bound waits returned, in ns.
    late_ns: u64,
}

impl Driver {
    /// Creates a reactor on [`DriverConfig::backend`]: an epoll instance and an eventfd, a mio
    /// poller, or an io_uring ring and an eventfd.
    ///
    /// `Backend::IoUring` and `Backend::Auto` ask the kernel once per process whether it offers
    /// what the io_uring backend needs; where it does not, the reactor is built on epoll with
    /// one warning per process naming the cause, unless
    /// [`DriverConfig::backend_strict`] makes that an error. [`ReactorHandle::backend`] tells
    /// which backend was built.
    ///
    /// # Errors
    /// `InvalidInput` for a `max_events` of 0 or above
    /// [`MAX_EVENTS_LIMIT`](crate::MAX_EVENTS_LIMIT), or `start_paused` without
    /// `pausable_clock`; the OS error when the poller or its wake handle cannot be created
    /// (e.g. `EMFILE`); with `backend_strict`, the kernel's refusal of io_uring (`Unsupported`
    /// or `PermissionDenied`, naming the cause).
    pub fn new(cfg: &DriverConfig) -> io::Result<Driver> {
        cfg.validate()?;
        let (selector, registry, backend) = sys::choice::build(&cfg.sys(), cfg.backend_strict)?;
        let precise = selector.precise();
        debug_assert!(
            !precise || registry.capabilities().precise_timeouts,
            "a selector is precise only if its backend can be"
        );
        let clock = Clock::new(cfg.pausable_clock);
        if cfg.start_paused {
            clock
                .pause()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        }
        let inner = Arc::new(Inner {
            registry,
            backend,
            registrations: Mutex::new(Registrations::new()),
            timers: Mutex::new(TimerQueue::default()),
            park: ParkState::new(),
            metrics: ReactorMetrics::default(),
            shutdown: AtomicBool::new(false),
            precise: AtomicBool::new(precise),
            turning: AtomicBool::new(false),
            handed: Mutex::new(Vec::new()),
            handed_len: AtomicUsize::new(0),
            registered: AtomicUsize::new(0),
            index: cfg.index,
            clock_ns: AtomicU64::new(0),
            clock,
        });
        Ok(Driver {
            handle: ReactorHandle { inner },
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
    pub fn handle(&self) -> &ReactorHandle {
        &self.handle
    }

    /// Delivers ready I/O and expired timers without blocking. Returns how many wakers were
    /// woken.
    ///
    /// # Errors
    /// Only unexpected OS errors from the poller.
    pub fn poll(&mut self) -> io::Result<usize> {
        self.turn(Some(Duration::ZERO))
    }

    /// Blocks until I/O is ready, a timer fires, `timeout` passes or
    /// [`ReactorHandle::unpark`] is called — with the min_wait window applied. Returns how many
    /// wakers were woken.
    ///
    /// A wait that the nearest timer bounds ends a little early and spins (non-blocking polls)
    /// until the deadline, so that the OS's wake-up latency does not make the timer late. The
    /// margin is four times the moving average of how late such waits return, at most
    /// [`DriverConfig::timer_spin`]; I/O or an unpark ends the spin at once.
    ///
    /// Returns at once (without a syscall) if an unpark is pending.
    ///
    /// While the clock is paused ([`time::pause`](crate::time::pause)), the caller is idle by
    /// contract (it has nothing to run): the wait first polls for I/O and wake-ups without
    /// blocking, and if there are none, it advances the clock to the nearest timer and fires it
    /// instead of blocking (auto-advance). Only with no timer armed, or while
    /// [`ReactorHandle::inhibit_auto_advance`] holds the clock, does it block — until I/O, an
    /// unpark or `timeout`. No timer spin, no min_wait window.
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
            .map(timer_queue::from_ns)
    }

    /// `true` if waits honour sub-millisecond timeouts (epoll with `epoll_pwait2`, io_uring).
    pub fn is_precise(&self) -> bool {
        self.selector.precise()
    }

    /// Prepares the driver to be moved to another thread, leaving nothing of it on this one.
    ///
    /// On io_uring, the thread that waits on a ring is the ring's issuer, and the kernel
    /// delivers work to it when the ring is closed — which interrupts a blocking call the
    /// thread makes then (a socket `read` with a receive timeout fails with `EINTR`). Call this
    /// on the thread that turned the driver before handing it over: it collects every pending
    /// completion (bytes received ahead go to their queues), closes the ring and waits for the
    /// kernel to finish with it (tens of milliseconds), and queues every registration on a
    /// new ring that the next turn, on whatever thread, takes over. A driver moved without it
    /// still works: its new thread rebuilds the ring, and the old thread gets the
    /// interruption.
    ///
    /// Other backends have nothing to do.
    ///
    /// # Errors
    /// The OS error of building the new ring (e.g. `EMFILE`).
    pub fn leave_thread(&mut self) -> io::Result<()> {
        self.selector.leave_thread(&self.handle.inner.registry)
    }

    /// Test hook (io_uring): makes the kernel end every armed poll at the next turn, as a CQ
    /// overflow may; each must be re-armed. Returns `false` on other backends.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn terminate_polls_for_test(&mut self) -> bool {
        self.selector.terminate_polls()
    }

    /// Test introspection (io_uring): the ring's fd, the poll slots in use, how often the
    /// overflow, re-arm and thread-change paths ran. `None` on other backends.
    #[cfg(all(feature = "test-hooks", target_os = "linux"))]
    #[doc(hidden)]
    pub fn uring_debug_info(&self) -> Option<crate::UringDebug> {
        self.selector.uring_debug_info()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.handle.shutdown();
    }
}

impl ReactorHandle {
    /// Wakes the owner if it is parked (one eventfd write); costs no syscall if it is running.
    pub(crate) fn unpark(&self) {
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
    pub(crate) fn is_parked(&self) -> bool {
        self.inner.park.is_parked()
    }

    /// How many fds are registered with this reactor right now (one atomic load: no lock).
    pub fn registrations(&self) -> usize {
        self.inner.registered.load(Ordering::Relaxed)
    }

    /// A snapshot of this reactor's counters.
    pub fn stats(&self) -> ReactorStats {
        let regs = self.inner.registrations.lock().len() as u64;
        let timers = self.inner.timers.lock().len() as u64;
        self.inner.metrics.snapshot(regs, timers)
    }

    /// The index of the worker that owns this reactor.
    pub fn index(&self) -> usize {
        self.inner.index
    }

    /// The backend this reactor was built on: `Epoll`, `Mio` or `IoUring`, never `Auto` (what
    /// `Auto` chose, or epoll where io_uring was asked for and fell back).
    pub fn backend(&self) -> Backend {
        self.inner.backend
    }

    /// `true` if both handles point to the same reactor.
    pub fn ptr_eq(&self, other: &ReactorHandle) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// `true` once the reactor has shut down.
    pub fn is_shutdown(&self) -> bool {
        self.inner.shutdown.load(Ordering::Acquire)
    }

    /// `true` if timers and waits on this reactor are nanosecond-precise.
    pub fn is_precise(&self) -> bool {
        self.inner.precise.load(Ordering::Relaxed)
    }

    /// Shuts the reactor down: every registration's waiters are woken and see an error, every
    /// timer waker is dropped. Idempotent.
    pub(crate) fn shutdown(&self) {
        let inner = &*self.inner;
        if inner.shutdown.swap(true, Ordering::AcqRel) {
            return;
        }
        let entries = inner.registrations.lock().shut_down();
        inner.registered.store(0, Ordering::Relaxed);
        for io in entries {
            io.shutdown();
        }
        let mut wakers = Vec::new();
        inner.timers.lock().drain(&mut wakers);
        wakers.into_iter().for_each(Waker::wake);
        tracing::debug!(target: "weir::reactor", worker = inner.index, "reactor shut down");
    }
}

impl fmt::Debug for ReactorHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReactorHandle")
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
