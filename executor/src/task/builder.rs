//! `task::Builder`: spawning with a name, for stall reports, task dumps and tokio-console.

use std::future::Future;
use std::io;

use crate::{Handle, JoinHandle};

/// Spawns a task with a name, as tokio's `task::Builder` does.
///
/// The name is kept with the task: stall reports and the task dump
/// ([`Handle::dump`](crate::Handle::dump)) show it, and tokio-console lists the task under it
/// (feature `console`). It costs one allocation per named spawn.
///
/// ```
/// # let rt = weir_executor::Builder::new_current_thread().build().unwrap();
/// # rt.block_on(async {
/// let h = weir_executor::task::Builder::new()
///     .name("answer")
///     .spawn(async { 42 })
///     .unwrap();
/// assert_eq!(h.await.unwrap(), 42);
/// # });
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Builder<'a> {
    name: Option<&'a str>,
}

impl<'a> Builder<'a> {
    /// A builder with no name.
    pub fn new() -> Builder<'a> {
        Builder { name: None }
    }

    /// The task's name.
    pub fn name(self, name: &'a str) -> Builder<'a> {
        Builder { name: Some(name) }
    }

    /// Runs `f` with the name pending for the next spawn on this thread.
    fn named<R>(self, f: impl FnOnce() -> R) -> R {
        let _name = self.name.map(crate::task_core::name_next);
        f()
    }

    /// Spawns `future` on the current runtime, as [`spawn`](crate::spawn). Always `Ok`: the
    /// `Result` is tokio's signature.
    ///
    /// # Panics
    /// Outside a weir runtime.
    #[track_caller]
    pub fn spawn<F>(self, future: F) -> io::Result<JoinHandle<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handle = Handle::current();
        self.spawn_on(future, &handle)
    }

    /// Spawns `future` on `handle`'s runtime, as [`Handle::spawn`]. Always `Ok`.
    #[track_caller]
    pub fn spawn_on<F>(self, future: F, handle: &Handle) -> io::Result<JoinHandle<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let location = std::panic::Location::caller();
        Ok(self.named(|| handle.spawn_at(future, location)))
    }

    /// Spawns `future` pinned to worker `worker` of `handle`'s runtime, as
    /// [`Handle::spawn_on`]. Always `Ok`.
    ///
    /// # Panics
    /// If `worker >= handle.num_workers()`.
    #[track_caller]
    pub fn spawn_on_worker<F>(
        self,
        worker: usize,
        future: F,
        handle: &Handle,
    ) -> io::Result<JoinHandle<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let n = handle.num_workers();
        assert!(
            worker < n,
            "spawn_on_worker: worker {worker} does not exist (the runtime has {n} workers)"
        );
        let location = std::panic::Location::caller();
        Ok(self.named(|| handle.spawn_on_at(worker, future, location)))
    }

    /// Spawns a `!Send` future on the current worker, as [`spawn_local`](crate::spawn_local).
    /// Always `Ok`.
    ///
    /// # Panics
    /// As [`spawn_local`](crate::spawn_local).
    #[track_caller]
    pub fn spawn_local<F>(self, future: F) -> io::Result<JoinHandle<F::Output>>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let location = std::panic::Location::caller();
        Ok(self.named(|| crate::spawn_local_at(future, location)))
    }

    /// Runs `f` on the current runtime's blocking pool, as
    /// [`spawn_blocking`](crate::spawn_blocking). Always `Ok`.
    ///
    /// # Panics
    /// Outside a weir runtime.
    #[track_caller]
    pub fn spawn_blocking<F, R>(self, f: F) -> io::Result<JoinHandle<R>>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let handle = Handle::current();
        let location = std::panic::Location::caller();
        Ok(self.named(|| handle.spawn_blocking_at(f, location)))
    }
}
