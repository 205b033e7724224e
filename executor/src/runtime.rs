//! [`Runtime`] and its [`Handle`].

use std::fmt;
use std::future::Future;
use std::num::NonZeroU64;
use std::panic::Location;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use weir_reactor::coop;
use weir_reactor::os::linux::{KernelBusyPoll, ReactorHandleExt};

use crate::compat::CompatRuntime;
use crate::context::{self, EnterGuard};
use crate::metrics::RuntimeMetrics;
use crate::parker::Parker;
use crate::task::JoinHandle;
use crate::worker::{self, Core, Shared};

/// Which scheduler a runtime runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavor {
    CurrentThread,
    MultiThread,
}

/// Threads running a worker loop, so shutdown can wait for them with a deadline. A worker
/// handed over by `block_in_place` is counted from the hand-over on (see [`AliveGuard`]).
#[derive(Default)]
pub(crate) struct Alive {
    count: Mutex<usize>,
    cv: Condvar,
}

impl Alive {
    pub(crate) fn started(&self) {
        *self.count.lock() += 1;
    }
    pub(crate) fn exited(&self) {
        *self.count.lock() -= 1;
        self.cv.notify_all();
    }
    /// Waits until every worker exited or `deadline` passed; `true` if all exited.
    pub(crate) fn wait(&self, deadline: Option<Instant>) -> bool {
        let mut c = self.count.lock();
        while *c > 0 {
            match deadline {
                Some(d) => {
                    if self.cv.wait_until(&mut c, d).timed_out() {
                        return *c == 0;
                    }
                }
                None => self.cv.wait(&mut c),
            }
        }
        true
    }
}

/// Counts a worker thread out of [`Alive`] when dropped (also when its job is dropped unrun).
pub(crate) struct AliveGuard(pub(crate) Arc<Shared>);

impl AliveGuard {
    /// Counts one more worker thread in.
    pub(crate) fn start(shared: &Arc<Shared>) -> AliveGuard {
        shared.alive.started();
        AliveGuard(shared.clone())
    }
}

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.alive.exited();
    }
}

/// A weir runtime: workers (each with its own reactor), a blocking pool, timers.
///
/// Build one with [`Builder`](crate::Builder) or [`Runtime::new`], or let `#[weir::main]` do it.
/// Dropping the runtime shuts it down: workers stop, every task that has not completed is
/// cancelled (its future is dropped), the blocking pool is drained, and the runtime's epoll fds,
/// eventfds and threads are released. Dropping waits for running tasks to reach their next
/// `.await` and for running blocking closures; use [`shutdown_timeout`](Self::shutdown_timeout)
/// to bound the wait.
///
/// # Panics
/// Dropping a runtime inside asynchronous code — in a task, or inside a `block_on` — panics
/// (unless the thread is already panicking): the wait could stall the runtime that thread
/// drives. The runtime is shut down without waiting first. Drop it outside async code, in
/// [`spawn_blocking`](crate::spawn_blocking), or use
/// [`shutdown_background`](Self::shutdown_background), which never waits.
pub struct Runtime {
    handle: Handle,
    flavor: Flavor,
    /// The threads started for the workers (a worker may move to a blocking-pool thread).
    threads: Vec<thread::JoinHandle<()>>,
    /// The tokio compat runtime (feature `tokio-compat`), shut down after weir's tasks.
    compat: CompatRuntime,
    done: bool,
}

/// A cheap, cloneable reference to a runtime: spawn onto it, enter it, read its metrics.
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

/// A runtime's id: unique among the runtimes created by this process. See [`Handle::id`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(NonZeroU64);

impl Id {
    pub(crate) fn next() -> Id {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let v = NEXT.fetch_add(1, Ordering::Relaxed);
        Id(NonZeroU64::new(v).expect("runtime id counter wrapped"))
    }

    /// The id as a number.
    pub fn as_u64(&self) -> u64 {
        self.0.get()
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// `Handle::try_current` found no runtime.
#[derive(Debug)]
pub struct TryCurrentError(());

impl fmt::Display for TryCurrentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "there is no weir runtime on this thread: call this from a task, inside \
             `Runtime::block_on`, or after `Runtime::enter`",
        )
    }
}

impl std::error::Error for TryCurrentError {}

impl Runtime {
    /// A multi-thread runtime with default settings (one worker per available CPU).
    ///
    /// # Errors
    /// When an epoll instance, eventfd or thread cannot be created.
    pub fn new() -> std::io::Result<Runtime> {
        crate::Builder::new_multi_thread().build()
    }

    pub(crate) fn from_parts(
        shared: Arc<Shared>,
        flavor: Flavor,
        threads: Vec<thread::JoinHandle<()>>,
        compat: CompatRuntime,
    ) -> Runtime {
        Runtime {
            handle: Handle { shared },
            flavor,
            threads,
            compat,
            done: false,
        }
    }

    /// Runs `future` to completion on the current thread and returns its output.
    ///
    /// On a current-thread runtime this thread is the worker: spawned tasks, I/O and timers run
    /// here while the future is pending. On a multi-thread runtime the future is polled on this
    /// thread while the workers run the spawned tasks.
    ///
    /// # Panics
    /// Inside asynchronous code — in a task, or inside another `block_on`, of any weir runtime
    /// — where blocking would stall the runtime being driven (inside
    /// [`block_in_place`](crate::task::block_in_place) and on the blocking pool it is allowed);
    /// when `future` panics; when the runtime shuts down while blocked.
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.handle.block_on(future)
    }

    /// Spawns a task onto the runtime; see [`spawn`](crate::spawn).
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(future)
    }

    /// Runs `f` on the blocking pool; see [`spawn_blocking`](crate::spawn_blocking).
    #[track_caller]
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.handle.spawn_blocking(f)
    }

    /// The runtime's handle.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Makes the runtime current on this thread until the guard drops (so `spawn`, timers and
    /// I/O constructors work outside `block_on`).
    pub fn enter(&self) -> EnterGuard<'_> {
        self.handle.enter()
    }

    /// The runtime's metrics.
    pub fn metrics(&self) -> RuntimeMetrics {
        self.handle.metrics()
    }

    /// Shuts down, waiting at most `timeout` for workers stuck in a task and for running
    /// blocking closures; threads still busy after that are detached (they exit when their work
    /// returns).
    ///
    /// # Panics
    /// Inside an asynchronous context (a task, or a `block_on`) with a non-zero `timeout`: the
    /// wait would stall the runtime this thread drives. The runtime is shut down without
    /// waiting before the panic. Use [`shutdown_background`](Self::shutdown_background) there.
    #[track_caller]
    pub fn shutdown_timeout(mut self, timeout: Duration) {
        if !timeout.is_zero() {
            self.refuse_blocking_in_async();
        }
        self.shutdown(Some(Instant::now() + timeout));
    }

    /// Shuts down without waiting for anything that is still running. Unlike dropping the
    /// runtime, this is allowed inside asynchronous code.
    pub fn shutdown_background(mut self) {
        self.shutdown(Some(Instant::now()));
    }

    /// Inside async code, shuts down without waiting, then panics (unless already panicking):
    /// waiting for the workers and the blocking pool there could stall the caller's runtime for
    /// good.
    #[track_caller]
    fn refuse_blocking_in_async(&mut self) {
        if self.done || !context::is_in_runtime() {
            return;
        }
        self.shutdown(Some(Instant::now()));
        if !thread::panicking() {
            panic!(
                "cannot drop a weir runtime inside an asynchronous context (a task, or a \
                 `block_on`): shutting it down waits for its threads, which could stall the \
                 runtime this thread drives. Drop it outside async code, move it to \
                 `weir::task::spawn_blocking`, or call `Runtime::shutdown_background`"
            );
        }
    }

    /// Shutdown, in this order:
    /// 1. flag shutdown and unpark every worker; workers leave their loop, cancel their own
    ///    pinned (`spawn_local`) tasks on their thread, and drop their queue entries;
    /// 2. join the workers (until `deadline`);
    /// 3. cancel every other task that has not completed (drop its future) on this thread;
    /// 4. drain the inject queue;
    /// 5. shut down the blocking pool (cancel queued closures, wait for running ones);
    /// 6. shut down the tokio compat runtime, if any (its tasks are dropped);
    /// 7. drop the workers' drivers: each reactor wakes whatever is still registered, drops its
    ///    timers, and its epoll fd and eventfd close with the last reference.
    fn shutdown(&mut self, deadline: Option<Instant>) {
        if self.done {
            return;
        }
        self.done = true;
        let shared = self.handle.shared.clone();
        shared.begin_shutdown();
        let mut cores: Vec<Box<Core>> = Vec::new();
        match self.flavor {
            Flavor::MultiThread => {
                let all = shared.alive.wait(deadline);
                for t in self.threads.drain(..) {
                    if all || t.is_finished() {
                        let _ = t.join();
                    }
                }
                // Each worker shut its core down on its thread and left it here.
                cores.extend(shared.stopped_cores.lock().drain(..));
            }
            Flavor::CurrentThread => {
                let core = shared.idle_cores.lock().pop();
                if let Some(mut core) = core {
                    let _enter = context::enter(&self.handle, Some(core.reactor().enter()));
                    worker::shutdown_core(&shared, &mut core);
                    cores.push(core);
                }
            }
        }
        {
            let _enter = self.handle.enter();
            let joined: Vec<usize> = cores.iter().map(|c| c.index).collect();
            let rest = shared
                .owned
                .close_and_take(|h| h.owner.is_none_or(|w| joined.contains(&w)));
            for t in rest {
                t.shutdown();
            }
            drop(shared.inject.drain());
            shared.blocking.shutdown(deadline);
        }
        // tokio-spawned tasks may hold weir sockets: drop them while the reactors still exist.
        self.compat.shutdown(deadline);
        drop(cores);
        tracing::debug!(target: "weir::worker", "runtime shut down");
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.refuse_blocking_in_async();
        self.shutdown(None);
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("flavor", &self.flavor)
            .field("workers", &self.handle.shared.remotes.len())
            .finish_non_exhaustive()
    }
}

impl Handle {
    /// The handle of the runtime current on this thread.
    ///
    /// # Panics
    /// Outside a runtime, with a message saying how to enter one.
    #[track_caller]
    pub fn current() -> Handle {
        match Handle::try_current() {
            Ok(h) => h,
            Err(e) => panic!("{e}"),
        }
    }

    /// The handle of the runtime current on this thread, if any.
    ///
    /// # Errors
    /// [`TryCurrentError`] outside a runtime.
    pub fn try_current() -> Result<Handle, TryCurrentError> {
        context::with_current(|h| h.cloned()).ok_or(TryCurrentError(()))
    }

    /// Spawns a task onto this runtime; see [`spawn`](crate::spawn).
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.shared.spawn(future, None, false, Location::caller())
    }

    /// Runs `f` on this runtime's blocking pool; see [`spawn_blocking`](crate::spawn_blocking).
    #[track_caller]
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.shared.blocking.spawn(f, Location::caller())
    }

    /// Spawns a task pinned to worker `worker`: it is queued on that worker, runs only there
    /// (never stolen) and, when woken from anywhere, goes back to that worker. The building
    /// block of NAPI-sharded serving: a connection registered with worker `worker`'s reactor is
    /// served by a task on the same worker.
    ///
    /// # Panics
    /// If `worker >= self.num_workers()`.
    #[track_caller]
    pub fn spawn_on<F>(&self, worker: usize, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let n = self.num_workers();
        assert!(
            worker < n,
            "spawn_on: worker {worker} does not exist (the runtime has {n} workers)"
        );
        self.shared
            .spawn(future, Some(worker), false, Location::caller())
    }

    /// The runtime's id, unique among the runtimes of this process.
    ///
    /// ```
    /// let a = weir_executor::Builder::new_current_thread().build()?;
    /// let b = weir_executor::Builder::new_current_thread().build()?;
    /// assert_ne!(a.handle().id(), b.handle().id());
    /// assert_eq!(a.handle().id(), a.handle().clone().id());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn id(&self) -> Id {
        self.shared.id
    }

    /// The name given with [`Builder::name`](crate::Builder::name), if any.
    ///
    /// ```
    /// let rt = weir_executor::Builder::new_current_thread().name("ingest").build()?;
    /// assert_eq!(rt.handle().name(), Some("ingest"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.shared.config.name.as_deref()
    }

    /// The number of workers (1 for the current-thread flavour).
    pub fn num_workers(&self) -> usize {
        self.shared.remotes.len()
    }

    /// The reactor owned by worker `worker`, e.g. to register a socket with that worker's epoll
    /// from another thread. `None` if there is no such worker. Its Linux-only controls (the
    /// epoll fd, kernel busy poll) are on the extension trait [`ReactorHandleExt`].
    pub fn worker_reactor(&self, worker: usize) -> Option<weir_reactor::ReactorHandle> {
        self.shared.remotes.get(worker).map(|r| r.reactor.clone())
    }

    /// Reads back worker `worker`'s kernel busy poll parameters (`EPIOCGPARAMS`); see
    /// [`Builder::kernel_busy_poll`](crate::Builder::kernel_busy_poll).
    ///
    /// # Errors
    /// `InvalidInput` for a worker that does not exist; otherwise as
    /// [`ReactorHandleExt::kernel_busy_poll`].
    pub fn kernel_busy_poll(&self, worker: usize) -> std::io::Result<KernelBusyPoll> {
        let r = self.worker_reactor(worker).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("worker {worker} does not exist"),
            )
        })?;
        r.kernel_busy_poll()
    }

    /// Makes this runtime current on this thread until the guard drops.
    pub fn enter(&self) -> EnterGuard<'_> {
        let reactor = self.shared.pick_reactor().enter();
        context::enter(self, Some(reactor))
    }

    /// The runtime's metrics.
    pub fn metrics(&self) -> RuntimeMetrics {
        RuntimeMetrics {
            shared: self.shared.clone(),
        }
    }

    /// Runs `future` to completion on this thread; see [`Runtime::block_on`].
    ///
    /// # Panics
    /// As [`Runtime::block_on`].
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        if context::is_in_runtime() {
            panic!(
                "cannot block_on inside an asynchronous context: this thread is already driving \
                 a weir runtime (it runs a task, or another `block_on`), and blocking it would \
                 stall that runtime. Use `.await` instead; run blocking code with \
                 `weir::task::spawn_blocking`, or wrap it in `weir::task::block_in_place` on a \
                 multi-thread runtime"
            );
        }
        let _in_runtime = context::set_in_runtime(true);
        let _enter = self.enter();
        let mut future = pin!(future);
        let shared = &self.shared;
        // Not the thread's park token: the future may use that one itself.
        let parker = Arc::new(Parker::new());
        let waker = Waker::from(parker.clone());
        let mut cx = Context::from_waker(&waker);
        loop {
            // Current-thread flavour: drive the runtime here if its core is free.
            let core = if self.flavor_is_current_thread() {
                shared.idle_cores.lock().pop()
            } else {
                None
            };
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
                let prev_slack = weir_reactor::thread::set_timer_slack(1).ok();
                let (core, out) = worker::run(shared, core, Some(future.as_mut()));
                let core = core.expect("a current-thread worker is never handed over");
                if let Some(prev) = prev_slack {
                    let _ = weir_reactor::thread::set_timer_slack(prev);
                }
                shared.idle_cores.lock().push(core);
                for w in shared.core_waiters.lock().drain(..) {
                    w.wake();
                }
                match out {
                    Ok(Some(v)) => return v,
                    Ok(None) => panic!("the weir runtime shut down while block_on was waiting"),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            if let Poll::Ready(v) = coop::budget(|| future.as_mut().poll(&mut cx)) {
                return v;
            }
            if shared.is_shutdown() && self.flavor_is_current_thread() {
                panic!("the weir runtime shut down while block_on was waiting");
            }
            if self.flavor_is_current_thread() {
                {
                    let mut waiters = shared.core_waiters.lock();
                    if !waiters.iter().any(|w| w.will_wake(&waker)) {
                        waiters.push(waker.clone());
                    }
                }
                if shared.idle_cores.lock().is_empty() {
                    parker.park();
                }
            } else {
                parker.park();
            }
        }
    }

    fn flavor_is_current_thread(&self) -> bool {
        self.shared.is_current_thread()
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("workers", &self.shared.remotes.len())
            .finish_non_exhaustive()
    }
}
