//! tokio compatibility (feature `tokio-compat`): tokio runtimes owned by the weir runtime, so
//! that library code calling `tokio::spawn`, `tokio::time`, `tokio::net` or `tokio::fs` finds
//! a tokio runtime instead of panicking. Two modes:
//!
//! - **per worker** (the default of `Builder::tokio_compat`): every worker owns a tokio
//!   current-thread runtime and runs inside it (`worker/nested.rs`). tokio's tasks spawned on a
//!   worker, tokio's timers and sockets created there are driven by that worker's thread, next
//!   to the weir tasks that use them. Threads that are not workers (`block_on`, the blocking
//!   pool, `Runtime::enter`) enter worker 0's tokio runtime.
//! - **sidecar** (`Builder::tokio_compat_threads(n)`): one tokio multi-thread runtime of `n`
//!   threads beside weir's workers, entered on every weir thread. Each event crossing between
//!   the two is a cross-thread wake-up; it is kept for libraries that need tokio's
//!   multi-thread runtime (`tokio::task::block_in_place`), and for io_uring, whose ring cannot
//!   be waited on from inside tokio.
//!
//! Without the feature every type here is empty and entering it does nothing.
//!
//! # tokio's cooperative budget
//!
//! tokio's `tokio::sync` primitives, `tokio::select!` and `tokio::io` utilities spend tokio's
//! budget, a thread-local that tokio fills only around the polls it makes itself; elsewhere it
//! is unlimited, so a weir task looping on an always-ready tokio channel would never yield.
//! With a compat runtime, every poll of a weir task or `block_on` future gets a full tokio
//! budget of its own ([`fresh_tokio_budget`]), as a tokio task's poll does: tokio's
//! primitives then return `Pending` (and wake the task) once it is spent, and the task goes to
//! the back of its worker's queue.
//!
//! tokio exposes no call that fills its budget, but `coop::poll_proceed` hands out a guard
//! that, dropped without progress, puts back the budget it was taken from: a guard taken from
//! a full budget refills it. The first such guard on a thread is taken inside a task that a
//! throwaway `LocalSet` polls (with a full budget); after that, each refill drops the guard
//! and takes the next one from the refilled budget, so a poll starts one unit short of tokio's
//! full budget (127 of 128). Without a compat runtime nothing of this runs.

use std::io;
#[cfg(feature = "tokio-compat")]
use std::sync::Arc;
use std::time::Instant;

/// Which compatibility runtime a weir runtime gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum CompatMode {
    #[default]
    Off,
    /// A tokio current-thread runtime inside each worker.
    PerWorker,
    /// A tokio multi-thread runtime of this many threads beside the workers.
    Sidecar(usize),
}

/// The tokio runtime of one worker (per-worker mode). Held (locked) by the thread that runs
/// the worker inside it; a thread that finds it held (the worker was handed over by
/// `block_in_place` while its old thread still polls a task inside it) runs the worker without
/// nesting until it is free.
#[cfg(feature = "tokio-compat")]
#[derive(Debug)]
pub(crate) struct WorkerTokio {
    pub(crate) handle: tokio::runtime::Handle,
    pub(crate) rt: parking_lot::Mutex<Option<tokio::runtime::Runtime>>,
}

/// The compat runtimes' handles, entered by weir's threads.
#[derive(Clone, Debug, Default)]
pub(crate) struct CompatHandle {
    /// The handle entered off the workers (and on the workers in sidecar mode).
    #[cfg(feature = "tokio-compat")]
    handle: Option<tokio::runtime::Handle>,
    /// Per-worker mode: one runtime per worker, by index.
    #[cfg(feature = "tokio-compat")]
    workers: Arc<[WorkerTokio]>,
}

/// Keeps the compat runtime current on this thread while it lives.
#[must_use = "the compat runtime stays current only while the guard lives"]
pub(crate) struct CompatGuard<'a> {
    #[cfg(feature = "tokio-compat")]
    _guard: Option<tokio::runtime::EnterGuard<'a>>,
    #[cfg(not(feature = "tokio-compat"))]
    _lt: std::marker::PhantomData<&'a ()>,
}

/// tokio's `enter` panics while the thread exits after tokio's thread-local is gone (a weir
/// runtime kept in a thread-local shuts down then): enter nothing there.
#[cfg(feature = "tokio-compat")]
fn enter_handle(h: &tokio::runtime::Handle) -> Option<tokio::runtime::EnterGuard<'_>> {
    (!tokio::runtime::Handle::try_current().is_err_and(|e| e.is_thread_local_destroyed()))
        .then(|| h.enter())
}

impl CompatHandle {
    /// Makes the compat runtime (if any) current on this thread until the guard drops.
    pub(crate) fn enter(&self) -> CompatGuard<'_> {
        CompatGuard {
            #[cfg(feature = "tokio-compat")]
            _guard: self.handle.as_ref().and_then(enter_handle),
            #[cfg(not(feature = "tokio-compat"))]
            _lt: std::marker::PhantomData,
        }
    }

    /// Makes worker `index`'s tokio runtime current (per-worker mode; else as [`enter`](Self::enter)).
    #[cfg_attr(not(feature = "tokio-compat"), allow(unused_variables, dead_code))]
    pub(crate) fn enter_worker(&self, index: usize) -> CompatGuard<'_> {
        #[cfg(feature = "tokio-compat")]
        if let Some(w) = self.workers.get(index) {
            return CompatGuard {
                _guard: enter_handle(&w.handle),
            };
        }
        self.enter()
    }

    /// `true` if this runtime has a tokio compatibility runtime (either mode).
    #[cfg_attr(not(feature = "tokio-compat"), allow(dead_code))]
    pub(crate) fn is_on(&self) -> bool {
        #[cfg(feature = "tokio-compat")]
        return self.handle.is_some();
        #[cfg(not(feature = "tokio-compat"))]
        false
    }

    /// Worker `index`'s own tokio runtime, in per-worker mode.
    #[cfg(feature = "tokio-compat")]
    pub(crate) fn worker(&self, index: usize) -> Option<&WorkerTokio> {
        self.workers.get(index)
    }
}

/// The compat runtimes, owned by weir's `Runtime` and shut down with it.
#[derive(Debug, Default)]
pub(crate) struct CompatRuntime {
    #[cfg(feature = "tokio-compat")]
    sidecar: Option<tokio::runtime::Runtime>,
    #[cfg(feature = "tokio-compat")]
    workers: Arc<[WorkerTokio]>,
}

impl CompatRuntime {
    /// Starts the compat runtime(s) of `mode` for a runtime of `workers` workers.
    #[cfg_attr(not(feature = "tokio-compat"), allow(unused_variables))]
    pub(crate) fn start(
        mode: CompatMode,
        workers: usize,
        thread_name: &str,
    ) -> io::Result<(CompatRuntime, CompatHandle)> {
        #[cfg(feature = "tokio-compat")]
        match mode {
            CompatMode::Off => {}
            CompatMode::Sidecar(threads) => {
                let name = format!("{thread_name}-tokio");
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(threads)
                    .thread_name(name)
                    .enable_all()
                    .build()?;
                let handle = runtime.handle().clone();
                tracing::debug!(target: "weir::worker", threads, "tokio compat runtime started beside the workers");
                return Ok((
                    CompatRuntime {
                        sidecar: Some(runtime),
                        workers: Arc::new([]),
                    },
                    CompatHandle {
                        handle: Some(handle),
                        workers: Arc::new([]),
                    },
                ));
            }
            CompatMode::PerWorker => {
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
                return Ok((
                    CompatRuntime {
                        sidecar: None,
                        workers: all.clone(),
                    },
                    CompatHandle {
                        handle: Some(all[0].handle.clone()),
                        workers: all,
                    },
                ));
            }
        }
        Ok((CompatRuntime::default(), CompatHandle::default()))
    }

    /// Shuts the compat runtimes down: their tasks are dropped, and their blocking threads are
    /// waited for until `deadline` (forever if `None`). Called once weir's workers stopped.
    ///
    /// tokio refuses to block while dropping a runtime inside one of its async contexts (the
    /// weir runtime may be dropped there), so the shutdown runs on a thread of its own.
    #[cfg_attr(not(feature = "tokio-compat"), allow(unused_variables))]
    pub(crate) fn shutdown(&mut self, deadline: Option<Instant>) {
        #[cfg(feature = "tokio-compat")]
        {
            let mut all: Vec<tokio::runtime::Runtime> = self.sidecar.take().into_iter().collect();
            // The workers have left their runtimes, unless one did not stop by the deadline:
            // its runtime is left to it.
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
}

#[cfg(feature = "tokio-compat")]
thread_local! {
    /// A guard taken from a full tokio budget on this thread: dropping it refills the budget.
    static FULL: std::cell::Cell<Option<tokio::task::coop::RestoreOnPending>> =
        const { std::cell::Cell::new(None) };
}

/// Fills tokio's cooperative budget of this thread for the poll that follows (see the
/// module docs).
#[cfg(feature = "tokio-compat")]
pub(crate) fn fresh_tokio_budget() {
    use std::task::{Context, Poll, Waker};
    let _ = FULL.try_with(|full| {
        match full.take() {
            // Puts back the full budget it was taken from.
            Some(guard) => drop(guard),
            None => first_full_budget(),
        }
        // Never `Pending`: the budget is full, or unlimited if the first guard failed.
        if let Poll::Ready(guard) =
            tokio::task::coop::poll_proceed(&mut Context::from_waker(Waker::noop()))
        {
            full.set(Some(guard));
        }
    });
}

/// Fills this thread's tokio budget for the first time: a `LocalSet` polls a task with a full
/// budget, the task takes a guard from it, and dropping the guard afterwards, outside the
/// `LocalSet`, puts that full budget in place.
#[cfg(feature = "tokio-compat")]
fn first_full_budget() {
    use std::future::{Future, poll_fn};
    use std::task::{Context, Poll, Waker};
    let local = tokio::task::LocalSet::new();
    local.spawn_local(poll_fn(|cx| {
        if let Poll::Ready(guard) = tokio::task::coop::poll_proceed(cx) {
            FULL.set(Some(guard));
        }
        Poll::Ready(())
    }));
    {
        // One poll: the (pending) future, then the `LocalSet`'s tick, which runs the task.
        let mut run = std::pin::pin!(local.run_until(std::future::pending::<()>()));
        let _ = run.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    }
    drop(local);
    drop(FULL.take());
}
