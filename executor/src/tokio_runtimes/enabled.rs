//! The tokio runtimes, with the feature `tokio-compat`: starting, entering and shutting them
//! down, and what a worker needs to run its loop inside its own (`worker/nested.rs`): the
//! runtime held by the worker's thread, the fds it watches for the parked worker, and the
//! loop run as one of its tasks.

use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use parking_lot::MutexGuard;
use tokio::io::Interest;
use tokio::io::unix::{AsyncFd, AsyncFdReadyGuard};
use weir_reactor::coop;

use super::TokioMode;

/// The tokio runtime of one worker (per-worker mode). Held (locked) by the thread that runs
/// the worker inside it; a thread that finds it held (the worker was handed over by
/// `block_in_place` while its old thread still polls a task inside it) runs the worker without
/// nesting until it is free.
#[derive(Debug)]
pub(crate) struct WorkerTokio {
    handle: tokio::runtime::Handle,
    rt: parking_lot::Mutex<Option<tokio::runtime::Runtime>>,
}

impl WorkerTokio {
    /// Takes the runtime for this thread; `None` while another thread holds it.
    pub(crate) fn hold(&self) -> Option<HeldTokio<'_>> {
        self.rt.try_lock().map(HeldTokio)
    }

    /// `true` while a thread holds the runtime.
    pub(crate) fn is_held(&self) -> bool {
        self.rt.is_locked()
    }
}

/// A worker's tokio runtime, held by the thread that runs the worker inside it.
pub(crate) struct HeldTokio<'a>(MutexGuard<'a, Option<tokio::runtime::Runtime>>);

impl HeldTokio<'_> {
    /// `true` once the runtime was shut down (its worker runs without it).
    pub(crate) fn is_shut_down(&self) -> bool {
        self.0.is_none()
    }

    /// Registers the fds a parked worker waits for with this runtime: its reactor's and its
    /// timer's.
    ///
    /// # Safety
    /// Both fds stay open, and are not replaced by other files, while the [`NestWatch`] lives.
    pub(crate) unsafe fn watch(&self, reactor: RawFd, timer: RawFd) -> io::Result<NestWatch> {
        let rt = self.0.as_ref().ok_or_else(shut_down)?;
        let _enter = rt.enter();
        // SAFETY: the caller keeps both fds open and unreplaced while the registrations live.
        let (reactor, timer) = unsafe {
            (
                AsyncFd::register_with_interest(Fd(reactor), Interest::READABLE)?,
                AsyncFd::register_with_interest(Fd(timer), Interest::READABLE)?,
            )
        };
        Ok(NestWatch { reactor, timer })
    }

    /// Runs `task` as a task of this runtime, on this thread, until it completes; a panic of
    /// `task` resumes here.
    pub(crate) fn run(&self, task: Pin<Box<dyn Future<Output = ()> + '_>>) {
        let Some(rt) = self.0.as_ref() else {
            return;
        };
        // SAFETY: see `Scoped`: the task is polled only on this thread, and completes (or is
        // dropped, by `Scoped`'s guard) before this function returns, while everything it
        // borrows is alive.
        let task = unsafe { Scoped::new(task) };
        let joined = rt.block_on(async move {
            let handle = tokio::spawn(task);
            let mut guard = Joined(Some(handle.abort_handle()));
            let r = handle.await;
            // Completed: disarm (and release the task's last reference).
            guard.0 = None;
            r
        });
        if let Err(e) = joined {
            if e.is_panic() {
                std::panic::resume_unwind(e.into_panic());
            }
            tracing::error!(target: "weir::worker", error = %e, "the worker's tokio task was cancelled");
        }
    }
}

fn shut_down() -> io::Error {
    io::Error::other("the worker's tokio runtime was shut down")
}

/// A borrowed fd, registered with tokio (its owner outlives the registration).
struct Fd(RawFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// The fds tokio watches for a parked worker: its reactor (readable with weir's I/O and
/// wake-ups from other threads) and the timer set to its nearest deadline.
///
/// Their readiness is polled without tokio's cooperative budget: the worker's weir tasks may
/// have spent it, and a check of the worker's own fds is no task's work.
pub(crate) struct NestWatch {
    reactor: AsyncFd<Fd>,
    timer: AsyncFd<Fd>,
}

impl NestWatch {
    /// `true` if tokio already saw either fd readable; otherwise `cx` is woken when one is.
    pub(crate) fn poll_any(&self, cx: &mut Context<'_>) -> bool {
        coop::unconstrained(|| {
            self.reactor.poll_read_ready(cx).is_ready() || self.timer.poll_read_ready(cx).is_ready()
        })
    }

    /// `true` if the timer fired; its readiness is cleared.
    pub(crate) fn take_timer(&self, cx: &mut Context<'_>) -> bool {
        match coop::unconstrained(|| self.timer.poll_read_ready(cx)) {
            Poll::Ready(Ok(mut g)) => {
                g.clear_ready();
                true
            }
            _ => false,
        }
    }

    /// The reactor's readiness as tokio saw it; cleared with [`ReactorReady::clear`].
    pub(crate) fn poll_reactor(&self, cx: &mut Context<'_>) -> Option<ReactorReady<'_>> {
        match coop::unconstrained(|| self.reactor.poll_read_ready(cx)) {
            Poll::Ready(Ok(g)) => Some(ReactorReady(g)),
            _ => None,
        }
    }
}

/// The reactor's fd seen readable by tokio.
pub(crate) struct ReactorReady<'a>(AsyncFdReadyGuard<'a, Fd>);

impl ReactorReady<'_> {
    /// Everything there was has been collected: the next event is a new edge for tokio.
    pub(crate) fn clear(mut self) {
        self.0.clear_ready();
    }
}

/// The worker loop's future with its lifetime and `!Send` erased, so that `tokio::spawn`
/// takes it.
///
/// # Safety contract (upheld by [`HeldTokio::run`])
/// - it is polled and dropped only on the thread that created it: a current-thread runtime
///   polls its tasks only inside `block_on`, which only this thread may call while it holds
///   the runtime's lock, and the task completes before `block_on` returns;
/// - it does not outlive what it borrows: `block_on` returns only once the task has
///   completed (the `JoinHandle` resolved); if `block_on` unwinds before that, [`Joined`]
///   aborts the process rather than leave a task that points into a dead frame.
struct Scoped(Pin<Box<dyn Future<Output = ()> + 'static>>);

impl Scoped {
    /// # Safety
    /// The caller upholds the contract above.
    unsafe fn new(f: Pin<Box<dyn Future<Output = ()> + '_>>) -> Scoped {
        // SAFETY: only the lifetime changes (same layout); the caller guarantees the future is
        // gone before the borrow ends.
        Scoped(unsafe {
            std::mem::transmute::<
                Pin<Box<dyn Future<Output = ()> + '_>>,
                Pin<Box<dyn Future<Output = ()> + 'static>>,
            >(f)
        })
    }
}

// SAFETY: a `Scoped` never leaves the thread that created it (the contract above); tokio
// requires `Send` only because a multi-thread runtime could move it.
unsafe impl Send for Scoped {}

impl Future for Scoped {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

/// Armed while `block_on` waits for the loop's task: dropped only by an unwind out of
/// `block_on` with the task unfinished, which would leave it pointing into a dead frame.
struct Joined(Option<tokio::task::AbortHandle>);

impl Drop for Joined {
    fn drop(&mut self) {
        if self.0.as_ref().is_some_and(|h| !h.is_finished()) {
            eprintln!(
                "weir: the tokio runtime of a worker unwound while it ran the worker; aborting"
            );
            std::process::abort();
        }
    }
}

/// The tokio runtimes' handles, entered by weir's threads.
#[derive(Clone, Debug, Default)]
pub(crate) struct TokioHandles {
    /// The handle entered off the workers (and on the workers beside which it runs).
    handle: Option<tokio::runtime::Handle>,
    /// Per-worker mode: one runtime per worker, by index.
    workers: Arc<[WorkerTokio]>,
}

/// Keeps a tokio runtime current on this thread while it lives.
#[must_use = "the tokio runtime stays current only while the guard lives"]
pub(crate) struct TokioEnterGuard<'a> {
    _guard: Option<tokio::runtime::EnterGuard<'a>>,
}

/// tokio's `enter` panics while the thread exits after tokio's thread-local is gone (a weir
/// runtime kept in a thread-local shuts down then): enter nothing there.
fn enter_handle(h: &tokio::runtime::Handle) -> Option<tokio::runtime::EnterGuard<'_>> {
    (!tokio::runtime::Handle::try_current().is_err_and(|e| e.is_thread_local_destroyed()))
        .then(|| h.enter())
}

impl TokioHandles {
    /// Makes the tokio runtime (if any) current on this thread until the guard drops.
    pub(crate) fn enter(&self) -> TokioEnterGuard<'_> {
        TokioEnterGuard {
            _guard: self.handle.as_ref().and_then(enter_handle),
        }
    }

    /// Makes worker `index`'s tokio runtime current (per-worker mode; else as
    /// [`enter`](Self::enter)).
    pub(crate) fn enter_worker(&self, index: usize) -> TokioEnterGuard<'_> {
        if let Some(w) = self.workers.get(index) {
            return TokioEnterGuard {
                _guard: enter_handle(&w.handle),
            };
        }
        self.enter()
    }

    /// Worker `index`'s own tokio runtime, in per-worker mode.
    pub(crate) fn worker(&self, index: usize) -> Option<&WorkerTokio> {
        self.workers.get(index)
    }
}

/// The tokio runtimes, owned by weir's `Runtime` and shut down with it.
#[derive(Debug, Default)]
pub(crate) struct TokioRuntimes {
    sidecar: Option<tokio::runtime::Runtime>,
    workers: Arc<[WorkerTokio]>,
}

impl TokioRuntimes {
    /// Starts the tokio runtime(s) of `mode` for a runtime of `workers` workers.
    pub(crate) fn start(
        mode: TokioMode,
        workers: usize,
        thread_name: &str,
    ) -> io::Result<(TokioRuntimes, TokioHandles)> {
        match mode {
            TokioMode::Off => Ok((TokioRuntimes::default(), TokioHandles::default())),
            TokioMode::Sidecar(threads) => {
                let name = format!("{thread_name}-tokio");
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(threads)
                    .thread_name(name)
                    .enable_all()
                    .build()?;
                let handle = runtime.handle().clone();
                tracing::debug!(target: "weir::worker", threads, "tokio compat runtime started beside the workers");
                Ok((
                    TokioRuntimes {
                        sidecar: Some(runtime),
                        workers: Arc::new([]),
                    },
                    TokioHandles {
                        handle: Some(handle),
                        workers: Arc::new([]),
                    },
                ))
            }
            TokioMode::PerWorker => {
                let name = format!("{thread_name}-tokio-blocking");
                let all = (0..workers)
                    .map(|_| {
                        let rt = tokio::runtime::Builder::new_current_thread()
                            .thread_name(name.clone())
                            .enable_all()
                            .build()?;
                        Ok(WorkerTokio {
                            handle: rt.handle().clone(),
                            rt: parking_lot::Mutex::new(Some(rt)),
                        })
                    })
                    .collect::<io::Result<Vec<_>>>()?;
                let all: Arc<[WorkerTokio]> = all.into();
                tracing::debug!(target: "weir::worker", workers, "tokio compat runtime started in every worker");
                Ok((
                    TokioRuntimes {
                        sidecar: None,
                        workers: all.clone(),
                    },
                    TokioHandles {
                        handle: Some(all[0].handle.clone()),
                        workers: all,
                    },
                ))
            }
        }
    }

    /// Shuts the tokio runtimes down: their tasks are dropped, and their blocking threads are
    /// waited for until `deadline` (forever if `None`). Called once weir's workers stopped.
    ///
    /// tokio refuses to block while dropping a runtime inside one of its async contexts (the
    /// weir runtime may be dropped there), so the shutdown runs on a thread of its own.
    pub(crate) fn shutdown(&mut self, deadline: Option<Instant>) {
        let mut all: Vec<tokio::runtime::Runtime> = self.sidecar.take().into_iter().collect();
        // The workers have left their runtimes, unless one did not stop by the deadline: its
        // runtime is left to it.
        all.extend(
            self.workers
                .iter()
                .filter_map(|w| w.rt.try_lock().and_then(|mut rt| rt.take())),
        );
        if all.is_empty() {
            return;
        }
        let stop = move || {
            for runtime in all {
                match deadline {
                    Some(d) => {
                        runtime.shutdown_timeout(d.saturating_duration_since(Instant::now()))
                    }
                    None => drop(runtime),
                }
            }
        };
        match std::thread::Builder::new()
            .name("weir-tokio-shutdown".into())
            .spawn(stop)
        {
            Ok(t) => {
                let _ = t.join();
            }
            Err(e) => {
                tracing::warn!(target: "weir::worker", error = %e, "could not start a thread to shut the tokio compat runtime down; its threads are left to exit on their own");
            }
        }
        tracing::debug!(target: "weir::worker", "tokio compat runtime shut down");
    }
}
