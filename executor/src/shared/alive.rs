//! Threads running a worker loop, so shutdown can wait for them with a deadline.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use super::Shared;

/// Threads running a worker loop. A worker handed over by `block_in_place` is counted from the
/// hand-over on (see [`AliveGuard`]).
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
