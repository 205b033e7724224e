//! [`Handle`]: a cheap reference to a runtime — spawn onto it, enter it, block on it, read
//! its metrics.

use std::fmt;
use std::future::Future;
use std::panic::Location;
use std::sync::Arc;

use weir_reactor::for_executor::ReactorControl;
use weir_reactor::os::linux::{KernelBusyPoll, ReactorHandleExt};

use crate::block_on;
use crate::blocking;
use crate::context::{self, EnterGuard};
use crate::metrics::{RuntimeMetrics, TaskDump};
use crate::placement;
use crate::shared::{Id, Shared};
use crate::task_core::{JoinHandle, Placement, console};

/// A cheap, cloneable reference to a runtime: spawn onto it, enter it, read its metrics.
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
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
        context::with_current(|shared| {
            shared.map(|shared| Handle {
                shared: shared.clone(),
            })
        })
        .ok_or(TryCurrentError(()))
    }

    /// Spawns a task onto this runtime; see [`spawn`](crate::spawn).
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_at(future, Location::caller())
    }

    pub(crate) fn spawn_at<F>(
        &self,
        future: F,
        location: &'static Location<'static>,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.shared.spawn(future, Placement::Any, location)
    }

    /// Runs `f` on this runtime's blocking pool; see [`spawn_blocking`](crate::spawn_blocking).
    #[track_caller]
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.spawn_blocking_at(f, Location::caller())
    }

    pub(crate) fn spawn_blocking_at<F, R>(
        &self,
        f: F,
        location: &'static Location<'static>,
    ) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.shared.spawn_blocking(f, location)
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
        self.spawn_on_at(worker, future, Location::caller())
    }

    /// `spawn_on` with the spawn location given; `worker` is checked by the caller.
    pub(crate) fn spawn_on_at<F>(
        &self,
        worker: usize,
        future: F,
        location: &'static Location<'static>,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.shared
            .spawn(future, Placement::Worker(worker), location)
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

    /// The reactor backend this runtime's workers actually use: `Epoll`, `Mio` or `IoUring`,
    /// never `Auto`. It differs from the one asked for when `Backend::Auto` chose, or when
    /// `Backend::IoUring` fell back to epoll because the kernel refused io_uring (see
    /// [`Builder::backend`](crate::Builder::backend)).
    ///
    /// ```
    /// use weir_reactor::Backend;
    /// let rt = weir_executor::Builder::new_current_thread().backend(Backend::Mio).build()?;
    /// assert_eq!(rt.handle().backend(), Backend::Mio);
    /// let rt = weir_executor::Builder::new_current_thread().backend(Backend::Auto).build()?;
    /// assert!(matches!(rt.handle().backend(), Backend::Epoll | Backend::IoUring));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn backend(&self) -> weir_reactor::Backend {
        self.shared.remotes[0].reactor.backend()
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
        enter(&self.shared)
    }

    /// The runtime's metrics.
    pub fn metrics(&self) -> RuntimeMetrics {
        RuntimeMetrics {
            shared: self.shared.clone(),
        }
    }

    /// Every live task of the runtime: its id, name, spawn location, state (idle, scheduled,
    /// running on worker N, blocking in `block_in_place`), polls, the time since its last poll
    /// and its age. Its `Display` is one line per task.
    ///
    /// Safe to call from anywhere, often: the task list is read one shard at a time, a few
    /// words per task under the shard's lock, so no worker waits more than one shard's copy
    /// (about 10 µs per thousand tasks); [`TaskDump::longest_lock`] says how long it was.
    ///
    /// While a task blocks a worker, the dump lists it as running on that worker (the worker
    /// of its stall report), and the task taking the dump as running on its own; whoever
    /// takes it: a task on another worker, a thread outside the runtime, the monitor on a
    /// signal. On a current-thread runtime no task can run while one blocks its only worker:
    /// take the dump from another thread, or on a signal.
    /// During or after shutdown it returns what is left, with
    /// [`TaskDump::shutting_down`] set. [`Builder::dump_on_signal`](crate::Builder::dump_on_signal)
    /// writes it through `tracing` on a signal.
    ///
    /// ```
    /// # fn main() -> std::io::Result<()> {
    /// let rt = weir_executor::Builder::new_current_thread().build()?;
    /// rt.block_on(async {
    ///     let h = weir_executor::task::Builder::new()
    ///         .name("sleeper")
    ///         .spawn(std::future::pending::<()>())?;
    ///     weir_executor::task::yield_now().await;
    ///     let dump = weir_executor::Handle::current().dump();
    ///     assert_eq!(dump.tasks.len(), 1);
    ///     assert_eq!(dump.tasks[0].name.as_deref(), Some("sleeper"));
    ///     h.abort();
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// # }
    /// ```
    pub fn dump(&self) -> TaskDump {
        crate::metrics::dump::take(&self.shared)
    }

    /// Runs `future` to completion on this thread; see [`Runtime::block_on`](crate::Runtime::block_on).
    ///
    /// After the runtime has shut down (the handle outlived it), the future still runs here,
    /// but the runtime's reactors are gone, as with tokio: a timer it arms panics, and an I/O
    /// object it creates or uses fails with an error saying that the reactor has shut down.
    ///
    /// # Panics
    /// As [`Runtime::block_on`](crate::Runtime::block_on), and when the future arms a timer
    /// after the runtime shut down.
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.block_on_refusing(future, false)
    }

    /// [`block_on`](Self::block_on); `refuse_block_in_place` for a current-thread runtime's
    /// `Runtime::block_on`, in whose future `block_in_place` panics, as tokio's does.
    #[track_caller]
    pub(crate) fn block_on_refusing<F: Future>(
        &self,
        future: F,
        refuse_block_in_place: bool,
    ) -> F::Output {
        if context::is_in_runtime() {
            panic!(
                "Cannot start a runtime from within a runtime. This happens because a function \
                 (like `block_on`) attempted to block the current thread while the thread is \
                 being used to drive asynchronous tasks. (weir: this thread already drives a \
                 weir runtime — it runs a task, or another `block_on` — and blocking it would \
                 stall that runtime. Use `.await` instead; run blocking code with \
                 `weir::task::spawn_blocking`, or wrap it in `weir::task::block_in_place` on a \
                 multi-thread runtime.)"
            );
        }
        let _in_runtime = context::set_in_runtime(true);
        let _refuse = context::refuse_block_in_place(refuse_block_in_place);
        let _enter = self.enter();
        console::pin_block_on_task!(future, Location::caller());
        block_on::block_on(&self.shared, future)
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("workers", &self.shared.remotes.len())
            .finish_non_exhaustive()
    }
}

/// Makes the runtime of `shared` current on this thread, with one of its reactors
/// (`placement.rs`), until the guard drops.
fn enter(shared: &Arc<Shared>) -> EnterGuard<'_> {
    let reactor = placement::reactor_for_thread(shared).enter();
    context::enter(shared, Some(reactor))
}

/// A blocking-pool thread started for a closure of this runtime enters it as
/// [`Handle::enter`] does.
impl blocking::Enter for Arc<Shared> {
    fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        let _enter = enter(self);
        f()
    }
}
