//! `block_on`: how the calling thread runs the future it blocks on, and how it waits.
//!
//! - **Current-thread runtime:** the caller takes the runtime's one core and runs the worker
//!   loop itself (tasks, I/O and timers all run here), or, while another thread holds the core,
//!   waits on a [`Parker`] for the future or for the core.
//! - **Multi-thread runtime:** the future is polled on the calling thread, the workers run the
//!   tasks. The caller waits in a reactor of its own, taken from the runtime's pool of them
//!   (`Shared::block_on_drivers`, each reused by the thread that created it): its sleeps are armed there ([`Driver::enter_timers`]) and end
//!   on this thread's own precise wait, with no other thread in the way. Its sockets still
//!   register with the workers' reactors, which serve them whether or not this thread is
//!   waiting. A wake from another thread (a task's `JoinHandle`, a channel) writes the
//!   reactor's wake handle, only if the caller is blocked. A future woken while it ran (one
//!   that wakes itself, say) is polled again at once; the reactor is then turned without
//!   blocking when one of its timers is due, and every `event_interval` such polls, so its
//!   timers fire even if it never lets the thread wait. When no reactor can be created
//!   (out of fds), the caller falls back to the [`Parker`], and its timers to the workers.
//!   After the runtime shut down it gets no reactor either: its timers go to the workers'
//!   reactors, which have shut down and refuse them (a panic, as with tokio).
//!
//! A reactor goes back to the pool when `block_on` returns, unless a timer armed on it is still
//! pending (its future outlives the call, e.g. moved into a task): then the reactor is dropped,
//! which wakes that timer's task, and the timer re-arms on the reactor of the thread that polls
//! it next.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;

use weir_reactor::ReactorHandle;
use weir_reactor::for_executor::{self, Driver, ReactorControl};

use crate::parker::Parker;
use crate::shared::Shared;
use crate::worker;

/// The index the reactors of `block_on` callers report in tracing and metrics.
pub(crate) const BLOCK_ON_INDEX: usize = usize::MAX - 1;

/// Runs `future` to completion on this thread (the caller has entered the runtime). Each poll
/// fills the cooperative budget; the thread's own comes back when this returns.
pub(crate) fn block_on<F: Future>(shared: &Arc<Shared>, future: Pin<&mut F>) -> F::Output {
    for_executor::budget_scope(|| polls(shared, future))
}

fn polls<F: Future>(shared: &Arc<Shared>, future: Pin<&mut F>) -> F::Output {
    if shared.is_shutdown() {
        // The future still runs here, as with tokio. No reactor of its own: a timer armed by
        // the future goes to the runtime's reactor, which has shut down, and refuses it (as
        // tokio does), rather than fire on a runtime that no longer runs.
        return parked(future, &Arc::new(Parker::new()));
    }
    if shared.is_current_thread() {
        return current_thread(shared, future);
    }
    match take_driver(shared) {
        Some(driver) => multi_thread(shared, driver, future),
        None => parked(future, &Arc::new(Parker::new())),
    }
}

/// Idle `block_on` reactors a runtime keeps at most; more are dropped when returned.
const POOL_MAX: usize = 8;

/// A reactor for a `block_on` caller of a multi-thread runtime: the one this thread used last,
/// or a new one. A reactor is reused only by the thread that created it: a backend may tie its
/// kernel object to that thread (an io_uring ring with a single issuer).
fn take_driver(shared: &Shared) -> Option<Driver> {
    let me = thread::current().id();
    {
        let mut pool = shared.block_on_drivers.lock();
        if let Some(i) = pool.iter().position(|(t, _)| *t == me) {
            return Some(pool.swap_remove(i).1);
        }
    }
    let cfg = shared.config.block_on_reactor.as_ref()?;
    match Driver::new(cfg) {
        Ok(d) => Some(d),
        Err(e) => {
            tracing::debug!(target: "weir::worker", error = %e, "block_on: no reactor of its own; waiting on a parker");
            None
        }
    }
}

/// Returns a `block_on` reactor to the pool, or drops it if timers are still armed on it (their
/// futures outlive the call; dropping wakes them and they re-arm where they are polled).
struct DriverLease<'a> {
    shared: &'a Shared,
    driver: Option<Driver>,
}

impl Drop for DriverLease<'_> {
    fn drop(&mut self) {
        if let Some(d) = self.driver.take()
            && d.next_timer().is_none()
            && !self.shared.is_shutdown()
        {
            let mut pool = self.shared.block_on_drivers.lock();
            if pool.len() < POOL_MAX {
                pool.push((thread::current().id(), d));
            }
        }
    }
}

/// The waker of a multi-thread `block_on`: flags the future for a poll and wakes the caller's
/// reactor (no syscall unless the caller is blocked in it, and none from the caller's own
/// thread, which is about to poll anyway).
struct DriverWaker {
    notified: AtomicBool,
    reactor: ReactorHandle,
}

impl DriverWaker {
    /// `true` on the thread blocked on this waker's future: it polls the future again before it
    /// waits, so it needs no unpark (and an unpark from inside its own wait would cost a write).
    fn on_owner_thread(&self) -> bool {
        crate::context::blocking_on() == std::ptr::from_ref(self) as usize
    }
}

/// Marks this thread as blocked on a [`DriverWaker`] until dropped.
struct BlockingOn(usize);

impl BlockingOn {
    fn set(waker: &DriverWaker) -> BlockingOn {
        let addr = std::ptr::from_ref(waker) as usize;
        BlockingOn(crate::context::replace_blocking_on(addr))
    }
}

impl Drop for BlockingOn {
    fn drop(&mut self) {
        crate::context::replace_blocking_on(self.0);
    }
}

impl Wake for DriverWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.notified.swap(true, Ordering::SeqCst) && !self.on_owner_thread() {
            self.reactor.unpark();
        }
    }
}

fn multi_thread<F: Future>(shared: &Shared, driver: Driver, mut future: Pin<&mut F>) -> F::Output {
    let mut lease = DriverLease {
        shared,
        driver: Some(driver),
    };
    let driver = lease.driver.as_mut().expect("just leased");
    let state = Arc::new(DriverWaker {
        notified: AtomicBool::new(false),
        reactor: driver.handle().clone(),
    });
    let _blocking_on = BlockingOn::set(&state);
    let waker = Waker::from(state.clone());
    let mut cx = Context::from_waker(&waker);
    let _timers = driver.enter_timers();
    // Timers end on this thread's waits: no slack on them (the default is 50 µs).
    let _slack = TimerSlack::exact();
    // Polls in a row that ended with the future woken (it woke itself, or was woken while it
    // ran): it is polled again at once, without a wait in the reactor.
    let mut rewoken = 0u32;
    loop {
        state.notified.store(false, Ordering::SeqCst);
        if let Poll::Ready(v) = poll_root(future.as_mut(), &mut cx) {
            return v;
        }
        if state.notified.load(Ordering::SeqCst) {
            // The timers of this thread fire only in this reactor's turns: turn it without
            // blocking when one is due, and every `event_interval` such polls for the rest.
            rewoken = rewoken.wrapping_add(1);
            let due = driver
                .next_timer()
                .is_some_and(|t| t <= std::time::Instant::now());
            if (due || rewoken.is_multiple_of(shared.config.event_interval))
                && let Err(e) = driver.poll()
            {
                tracing::error!(target: "weir::worker", error = %e, "block_on: reactor poll failed");
            }
            continue;
        }
        rewoken = 0;
        // Returns on a timer of this thread, a wake-up, or a pending unpark.
        if let Err(e) = driver.park(None) {
            tracing::error!(target: "weir::worker", error = %e, "block_on: reactor wait failed");
            thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// One poll of a `block_on` future, with a full cooperative budget.
fn poll_root<F: Future>(fut: Pin<&mut F>, cx: &mut Context<'_>) -> Poll<F::Output> {
    for_executor::budget(|| fut.poll(cx))
}

/// Sets this thread's timer slack to 1 ns until dropped (restoring the previous value).
struct TimerSlack(Option<u64>);

impl TimerSlack {
    fn exact() -> TimerSlack {
        TimerSlack(for_executor::set_timer_slack(1).ok())
    }
}

impl Drop for TimerSlack {
    fn drop(&mut self) {
        if let Some(prev) = self.0 {
            let _ = for_executor::set_timer_slack(prev);
        }
    }
}

/// Polls `future` here, parking on `parker` between polls (its waker unparks it).
fn parked<F: Future>(mut future: Pin<&mut F>, parker: &Arc<Parker>) -> F::Output {
    let waker = Waker::from(parker.clone());
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = poll_root(future.as_mut(), &mut cx) {
            return v;
        }
        parker.park();
    }
}

/// Current-thread flavour: drive the runtime here whenever its core is free; otherwise poll the
/// future and wait for it or for the core.
fn current_thread<F: Future>(shared: &Arc<Shared>, mut future: Pin<&mut F>) -> F::Output {
    // Not the thread's park token: the future may use that one itself.
    let parker = Arc::new(Parker::new());
    let waker = Waker::from(parker.clone());
    let mut cx = Context::from_waker(&waker);
    loop {
        let core = shared.idle_cores.lock().pop();
        if let Some(core) = core {
            if core
                .local_thread()
                .is_some_and(|t| t != thread::current().id())
            {
                shared.idle_cores.lock().push(core);
                panic!(
                    "this current-thread runtime holds spawn_local tasks of another thread; \
                     call block_on from that thread"
                );
            }
            let slack = TimerSlack::exact();
            let (core, out) = worker::run(shared, core, Some(future.as_mut()));
            let core = core.expect("a current-thread worker is never handed over");
            drop(slack);
            shared.idle_cores.lock().push(core);
            for w in shared.core_waiters.lock().drain(..) {
                w.wake();
            }
            match out {
                Ok(Some(v)) => return v,
                // Shut down (through another handle) while this thread drove it.
                Ok(None) => return parked(future, &parker),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        if let Poll::Ready(v) = poll_root(future.as_mut(), &mut cx) {
            return v;
        }
        if shared.is_shutdown() {
            return parked(future, &parker);
        }
        {
            let mut waiters = shared.core_waiters.lock();
            if !waiters.iter().any(|w| w.will_wake(&waker)) {
                waiters.push(waker.clone());
            }
        }
        if shared.idle_cores.lock().is_empty() {
            parker.park();
        }
    }
}
