//! tokio compatibility (feature `tokio-compat`): a small tokio runtime owned by the weir runtime,
//! whose handle is entered wherever weir runs code — on every worker thread, inside `block_on`,
//! on blocking-pool threads and under `Runtime::enter`. Library code that calls
//! `tokio::spawn`, `tokio::time`, `tokio::net` or `tokio::fs` then finds a tokio runtime
//! instead of panicking.
//!
//! What runs where:
//! - tasks spawned with `tokio::spawn` (and `JoinSet`), tokio's timers and tokio's sockets are
//!   driven by the compat runtime's threads;
//! - weir's tasks, timers and sockets stay on weir's workers. A weir task that awaits a tokio
//!   timer or socket is woken by a compat thread: one cross-thread wake-up per event.
//!
//! Without the feature every type here is empty and entering it does nothing.

use std::io;
use std::time::Instant;

/// The compat runtime's handle, entered by weir's threads.
#[derive(Clone, Debug, Default)]
pub(crate) struct CompatHandle {
    #[cfg(feature = "tokio-compat")]
    handle: Option<tokio::runtime::Handle>,
}

/// Keeps the compat runtime current on this thread while it lives.
#[must_use = "the compat runtime stays current only while the guard lives"]
pub(crate) struct CompatGuard<'a> {
    #[cfg(feature = "tokio-compat")]
    _guard: Option<tokio::runtime::EnterGuard<'a>>,
    #[cfg(not(feature = "tokio-compat"))]
    _lt: std::marker::PhantomData<&'a ()>,
}

impl CompatHandle {
    /// Makes the compat runtime (if any) current on this thread until the guard drops. Does
    /// nothing while the thread exits after tokio's thread-local is gone (tokio's `enter`
    /// would panic there, and a weir runtime kept in a thread-local shuts down then).
    pub(crate) fn enter(&self) -> CompatGuard<'_> {
        CompatGuard {
            #[cfg(feature = "tokio-compat")]
            _guard: self
                .handle
                .as_ref()
                .filter(|_| {
                    !tokio::runtime::Handle::try_current()
                        .is_err_and(|e| e.is_thread_local_destroyed())
                })
                .map(tokio::runtime::Handle::enter),
            #[cfg(not(feature = "tokio-compat"))]
            _lt: std::marker::PhantomData,
        }
    }
}

/// The compat runtime, owned by weir's `Runtime` and shut down with it.
#[derive(Debug, Default)]
pub(crate) struct CompatRuntime {
    #[cfg(feature = "tokio-compat")]
    runtime: Option<tokio::runtime::Runtime>,
}

impl CompatRuntime {
    /// Starts a compat runtime of `threads` threads (`0`: none).
    #[cfg_attr(not(feature = "tokio-compat"), allow(unused_variables))]
    pub(crate) fn start(
        threads: usize,
        thread_name: &str,
    ) -> io::Result<(CompatRuntime, CompatHandle)> {
        #[cfg(feature = "tokio-compat")]
        if threads > 0 {
            let name = format!("{thread_name}-tokio");
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .thread_name(name)
                .enable_all()
                .build()?;
            let handle = runtime.handle().clone();
            tracing::debug!(target: "weir::worker", threads, "tokio compat runtime started");
            return Ok((
                CompatRuntime {
                    runtime: Some(runtime),
                },
                CompatHandle {
                    handle: Some(handle),
                },
            ));
        }
        Ok((CompatRuntime::default(), CompatHandle::default()))
    }

    /// Shuts the compat runtime down: its tasks are dropped, and its blocking threads are
    /// waited for until `deadline` (forever if `None`).
    ///
    /// tokio refuses to block while dropping a runtime inside one of its async contexts (the
    /// weir runtime may be dropped there), so the shutdown runs on a thread of its own.
    #[cfg_attr(not(feature = "tokio-compat"), allow(unused_variables))]
    pub(crate) fn shutdown(&mut self, deadline: Option<Instant>) {
        #[cfg(feature = "tokio-compat")]
        if let Some(runtime) = self.runtime.take() {
            let stop = move || match deadline {
                Some(d) => runtime.shutdown_timeout(d.saturating_duration_since(Instant::now())),
                None => drop(runtime),
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
