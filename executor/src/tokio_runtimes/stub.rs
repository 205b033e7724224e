//! The tokio runtimes' API without the feature `tokio-compat`: nothing is started or entered,
//! and the types that stand for a worker's tokio runtime have no values, so the code that
//! would use one type-checks and never runs (the builder refuses a tokio mode first).

use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::Context;
use std::time::Instant;

use super::TokioMode;

/// A worker's tokio runtime: none exists without the feature.
#[derive(Debug)]
pub(crate) enum WorkerTokio {}

impl WorkerTokio {
    pub(crate) fn hold(&self) -> Option<HeldTokio<'_>> {
        match *self {}
    }

    pub(crate) fn is_held(&self) -> bool {
        match *self {}
    }
}

/// A held worker runtime: none exists without the feature.
pub(crate) struct HeldTokio<'a>(Never, PhantomData<&'a ()>);

/// No value: what holds one cannot exist.
#[derive(Debug)]
enum Never {}

/// Releases the runtime, as the feature's does (so that callers drop it the same way).
impl Drop for HeldTokio<'_> {
    fn drop(&mut self) {
        match self.0 {}
    }
}

impl HeldTokio<'_> {
    pub(crate) fn is_shut_down(&self) -> bool {
        match self.0 {}
    }

    /// # Safety
    /// As with the feature: the fds outlive the watch.
    pub(crate) unsafe fn watch(&self, _reactor: RawFd, _timer: RawFd) -> io::Result<NestWatch> {
        match self.0 {}
    }

    pub(crate) fn run(&self, _task: Pin<Box<dyn Future<Output = ()> + '_>>) {
        match self.0 {}
    }
}

/// The fds watched by a worker's tokio runtime: none exists without the feature.
pub(crate) enum NestWatch {}

impl NestWatch {
    pub(crate) fn poll_any(&self, _cx: &mut Context<'_>) -> bool {
        match *self {}
    }

    pub(crate) fn take_timer(&self, _cx: &mut Context<'_>) -> bool {
        match *self {}
    }

    pub(crate) fn poll_reactor(&self, _cx: &mut Context<'_>) -> Option<ReactorReady<'_>> {
        match *self {}
    }
}

/// The reactor's fd seen readable: never, without the feature.
pub(crate) struct ReactorReady<'a>(Never, PhantomData<&'a ()>);

impl ReactorReady<'_> {
    pub(crate) fn clear(self) {
        match self.0 {}
    }
}

/// No tokio runtime to enter.
#[derive(Clone, Debug, Default)]
pub(crate) struct TokioHandles;

/// Enters nothing.
#[must_use = "the tokio runtime stays current only while the guard lives"]
pub(crate) struct TokioEnterGuard<'a>(PhantomData<&'a ()>);

impl TokioHandles {
    pub(crate) fn enter(&self) -> TokioEnterGuard<'_> {
        TokioEnterGuard(PhantomData)
    }

    pub(crate) fn enter_worker(&self, _index: usize) -> TokioEnterGuard<'_> {
        TokioEnterGuard(PhantomData)
    }

    pub(crate) fn worker(&self, _index: usize) -> Option<&WorkerTokio> {
        None
    }
}

/// No tokio runtimes.
#[derive(Debug, Default)]
pub(crate) struct TokioRuntimes;

impl TokioRuntimes {
    pub(crate) fn start(
        _mode: TokioMode,
        _workers: usize,
        _thread_name: &str,
    ) -> io::Result<(TokioRuntimes, TokioHandles)> {
        Ok((TokioRuntimes, TokioHandles))
    }

    pub(crate) fn shutdown(&mut self, _deadline: Option<Instant>) {}
}
