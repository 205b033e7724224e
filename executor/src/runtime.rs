//! [`Runtime`]: owns a runtime's threads and shuts it down. Its [`Handle`] (`handle.rs`) is
//! what spawns, enters and blocks on it.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use weir_config::Flavor;
use weir_reactor::for_executor::ReactorControl;

use crate::context::{self, EnterGuard};
use crate::handle::Handle;
use crate::metrics::RuntimeMetrics;
use crate::metrics::monitor::Monitor;
use crate::shared::{Core, Shared};
use crate::task_core::JoinHandle;
use crate::tokio_runtimes::TokioRuntimes;
use crate::worker;

/// A weir runtime: workers (each with its own reactor), a blocking pool, timers.
///
/// Build one with [`Builder`](crate::Builder) or [`Runtime::new`], or let `#[weir::main]` do it.
/// Dropping the runtime shuts it down: workers stop, every task that has not completed is
/// cancelled (its future is dropped), the blocking pool runs the closures already queued and
/// stops, and the runtime's epoll fds, eventfds and threads are released. Dropping waits for
/// running tasks to reach their next `.await` and for blocking closures (running or queued);
/// use [`shutdown_timeout`](Self::shutdown_timeout) to bound the wait. A task blocked in
/// [`block_in_place`](crate::task::block_in_place) does not hold up the cancellation of the
/// others (its closure may be waiting for one of them to be dropped); its thread is waited for
/// afterwards.
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
    /// The tokio runtimes (tokio compatibility), shut down after weir's tasks.
    tokio: TokioRuntimes,
    /// The stall and dump-signal monitor, if either is on.
    monitor: Option<Monitor>,
    done: bool,
}

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
        tokio: TokioRuntimes,
        monitor: Option<Monitor>,
    ) -> Runtime {
        Runtime {
            handle: Handle { shared },
            flavor,
            threads,
            tokio,
            monitor,
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
        // tokio's current-thread `Runtime::block_on` refuses `block_in_place`; its
        // `Handle::block_on` does not.
        let refuse = self.handle.shared.is_current_thread();
        self.handle.block_on_refusing(future, refuse)
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

    /// Shuts down, waiting at most `timeout` for workers stuck in a task and for blocking
    /// closures, running or queued (queued ones run, as with tokio); closures still queued at
    /// the timeout are cancelled, and threads still busy are detached (they exit when their
    /// work returns).
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
                "Cannot drop a runtime in a context where blocking is not allowed. This happens \
                 when a runtime is dropped from within an asynchronous context. (weir: shutting a \
                 runtime down waits for its threads, which could stall the runtime this thread \
                 drives — a task, or a `block_on`. Drop it outside async code, move it to \
                 `weir::task::spawn_blocking`, or call `Runtime::shutdown_background`.)"
            );
        }
    }

    /// Shutdown, in this order:
    /// 1. flag shutdown and unpark every worker; workers leave their loop, cancel their own
    ///    pinned (`spawn_local`) tasks on their thread, and drop their queue entries;
    /// 2. wait (until `deadline`) until no core polls tasks any more: each stopped, or stays
    ///    with a thread blocked in `block_in_place`, whose closure may be waiting for what
    ///    dropping the other tasks releases (a channel's last sender);
    /// 3. cancel every other task that has not completed (drop its future) on this thread;
    /// 4. drain the inject queue and the workers' backlogs;
    /// 5. shut down the blocking pool (run the closures still queued, wait for them);
    /// 6. join the worker threads (until `deadline`), and collect the cores that stopped late;
    /// 7. shut down the tokio compat runtime, if any (its tasks are dropped);
    /// 8. drop the workers' drivers: each reactor wakes whatever is still registered, drops its
    ///    timers, and its epoll fd and eventfd close with the last reference; then the idle
    ///    reactors of `block_on` callers.
    fn shutdown(&mut self, deadline: Option<Instant>) {
        if self.done {
            return;
        }
        self.done = true;
        let shared = self.handle.shared.clone();
        shared.begin_shutdown();
        // Nothing to watch from here on: a stall would be shutdown's wait.
        if let Some(mut monitor) = self.monitor.take() {
            monitor.stop();
        }
        let mut cores: Vec<Box<Core>> = Vec::new();
        match self.flavor {
            Flavor::MultiThread => {
                shared.alive.wait_cores(deadline);
                // Each worker shut its core down on its thread and left it here.
                cores.extend(shared.stopped_cores.lock().drain(..));
            }
            Flavor::CurrentThread => {
                let core = shared.idle_cores.lock().pop();
                if let Some(mut core) = core {
                    let _enter = context::enter(&shared, Some(core.reactor().enter()));
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
                .close_and_take(|h| h.placement.worker().is_none_or(|w| joined.contains(&w)));
            for t in rest {
                t.shutdown();
            }
            drop(shared.inject.drain());
            for r in shared.remotes.iter() {
                drop(r.backlog.drain());
            }
            shared.blocking.shutdown(deadline);
        }
        if self.flavor == Flavor::MultiThread {
            let all = shared.alive.wait(deadline);
            for t in self.threads.drain(..) {
                if all || t.is_finished() {
                    let _ = t.join();
                }
            }
            // Cores that stayed with a `block_in_place` stopped once it returned.
            cores.extend(shared.stopped_cores.lock().drain(..));
        }
        // tokio-spawned tasks may hold weir sockets: drop them while the reactors still exist.
        self.tokio.shutdown(deadline);
        drop(cores);
        // The idle reactors of `block_on` callers: their fds close here, not with the last handle.
        drop(std::mem::take(&mut *shared.block_on_drivers.lock()));
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
