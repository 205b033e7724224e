//! Threads running a worker loop, and cores that may still run a task, so shutdown can wait for
//! them with a deadline.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use super::Shared;

/// Threads running a worker loop (a worker handed over by `block_in_place` is counted from the
/// hand-over on, see [`AliveGuard`]), and the workers' cores that may still poll tasks: those
/// neither stopped at shutdown nor left to a thread blocked in `block_in_place`.
#[derive(Default)]
pub(crate) struct Alive {
    count: Mutex<Counts>,
    cv: Condvar,
}

#[derive(Default)]
struct Counts {
    threads: usize,
    cores: usize,
}

impl Alive {
    /// Counts `n` cores that run (a multi-thread runtime's workers).
    pub(crate) fn new(cores: usize) -> Alive {
        Alive {
            count: Mutex::new(Counts { threads: 0, cores }),
            cv: Condvar::new(),
        }
    }
    pub(crate) fn started(&self) {
        self.count.lock().threads += 1;
    }
    pub(crate) fn exited(&self) {
        self.count.lock().threads -= 1;
        self.cv.notify_all();
    }
    /// A core stopped at shutdown, or stays with a thread that blocks in `block_in_place`
    /// (which polls no other task until [`core_resumed`](Self::core_resumed)).
    pub(crate) fn core_idle(&self) {
        let mut c = self.count.lock();
        c.cores = c.cores.saturating_sub(1);
        self.cv.notify_all();
    }
    /// The `block_in_place` that kept a core returned: the core runs again.
    pub(crate) fn core_resumed(&self) {
        self.count.lock().cores += 1;
    }
    /// Waits until every worker thread exited or `deadline` passed; `true` if all exited.
    pub(crate) fn wait(&self, deadline: Option<Instant>) -> bool {
        self.wait_for(deadline, |c| c.threads == 0)
    }
    /// Waits until no core polls tasks any more (every one stopped, or left to a thread blocked
    /// in `block_in_place`), every worker thread exited, or `deadline` passed; `true` unless
    /// the deadline passed first.
    pub(crate) fn wait_cores(&self, deadline: Option<Instant>) -> bool {
        self.wait_for(deadline, |c| c.cores == 0 || c.threads == 0)
    }
    fn wait_for(&self, deadline: Option<Instant>, done: impl Fn(&Counts) -> bool) -> bool {
        let mut c = self.count.lock();
        while !done(&c) {
            match deadline {
                Some(d) => {
                    if self.cv.wait_until(&mut c, d).timed_out() {
                        return done(&c);
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
