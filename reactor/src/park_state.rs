//! Parking the reactor's owner thread, and waking it only when it sleeps: the one word of state
//! that tells an unpark whether the wake handle must be written. (The executor's spin-then-park
//! of an idle worker, which ends in [`Driver::park`](crate::Driver::park), is its own module.)
//!
//! # State machine
//!
//! One word per reactor, shared by its owner (the worker that waits on it) and every thread that
//! may wake it:
//!
//! | state      | meaning                                                             |
//! |------------|---------------------------------------------------------------------|
//! | `EMPTY`    | the owner is running; nobody asked it to wake                      |
//! | `PARKED`   | the owner is blocked in the driver, or committed to block            |
//! | `NOTIFIED` | a wake was requested and not yet consumed by the owner              |
//!
//! Transitions:
//!
//! * owner, before blocking: `EMPTY → PARKED` ([`ParkState::prepare_park`]). If the state is
//!   `NOTIFIED` the wake is consumed (`→ EMPTY`) and the owner must not block.
//! * owner, after the wait returns: `* → EMPTY` ([`ParkState::finish_park`]), consuming any wake.
//! * any thread: `* → NOTIFIED` ([`ParkState::unpark`]). Only when the previous state was
//!   `PARKED` does the caller write the wake handle (an eventfd): **waking a running worker costs
//!   no syscall**, and of several concurrent wakers of a parked worker only the first writes.
//!
//! No lost wake-up: work published before `unpark` is seen by the owner, because either the
//! owner's `EMPTY → PARKED` comes first (then `unpark` sees `PARKED` and signals the eventfd,
//! which makes the blocking wait return), or `unpark`'s store comes first (then the owner's
//! transition fails and it does not block). Both are `SeqCst`, so the owner's later reads of the
//! queues happen after the producer's writes. Modelled in `loom_tests` below.

#[cfg(loom)]
use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

const EMPTY: usize = 0;
const PARKED: usize = 1;
const NOTIFIED: usize = 2;

/// What the owner must do after [`ParkState::prepare_park`].
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub enum Prepare {
    /// Block in the driver: a waker will signal the wake handle.
    Block,
    /// A wake was pending and has been consumed: do not block.
    Notified,
}

/// What a waker must do after [`ParkState::unpark`].
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub enum Unpark {
    /// The owner is parked: write the wake handle.
    Signal,
    /// The owner is running (or already notified): nothing more to do.
    Done,
}

/// The park state of one reactor (see the module docs).
#[derive(Debug)]
pub struct ParkState {
    state: AtomicUsize,
}

impl Default for ParkState {
    fn default() -> ParkState {
        ParkState::new()
    }
}

impl ParkState {
    /// A new state: `EMPTY`.
    pub fn new() -> ParkState {
        ParkState {
            state: AtomicUsize::new(EMPTY),
        }
    }

    /// Owner only: commit to blocking.
    pub fn prepare_park(&self) -> Prepare {
        match self.state.compare_exchange(EMPTY, PARKED, SeqCst, SeqCst) {
            Ok(_) => Prepare::Block,
            Err(NOTIFIED) => {
                self.state.store(EMPTY, SeqCst);
                Prepare::Notified
            }
            Err(actual) => unreachable!("only the owner parks; state was {actual}"),
        }
    }

    /// Owner only: the wait returned. Returns `true` if a wake had been requested.
    pub fn finish_park(&self) -> bool {
        self.state.swap(EMPTY, SeqCst) == NOTIFIED
    }

    /// Any thread: request that the owner wake up (or not go to sleep).
    pub fn unpark(&self) -> Unpark {
        match self.state.swap(NOTIFIED, SeqCst) {
            PARKED => Unpark::Signal,
            _ => Unpark::Done,
        }
    }

    /// `true` if the owner is parked (for metrics and tests; racy by nature).
    pub fn is_parked(&self) -> bool {
        self.state.load(SeqCst) == PARKED
    }
}

/// A loom model of the eventfd wake handle: a counter the owner blocks on. Shared with the
/// executor's loom model of the idle protocol.
#[cfg(loom)]
#[derive(Debug, Default)]
pub struct ModelEventFd {
    count: loom::sync::Mutex<usize>,
    cv: loom::sync::Condvar,
}

#[cfg(loom)]
impl ModelEventFd {
    /// A wake-handle write.
    pub fn write(&self) {
        *self.count.lock().unwrap() += 1;
        self.cv.notify_one();
    }

    /// Blocks until written, consuming one write.
    pub fn wait(&self) {
        let mut c = self.count.lock().unwrap();
        while *c == 0 {
            c = self.cv.wait(c).unwrap();
        }
        *c -= 1;
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::sync::atomic::AtomicBool;
    use loom::thread;

    type EventFd = ModelEventFd;

    fn owner_waits_for(park: &ParkState, efd: &EventFd, work: &AtomicBool) {
        loop {
            if work.load(SeqCst) {
                return;
            }
            match park.prepare_park() {
                Prepare::Notified => continue,
                Prepare::Block => {
                    efd.wait();
                    let _ = park.finish_park();
                }
            }
        }
    }

    #[test]
    fn no_lost_wakeup_with_one_waker() {
        loom::model(|| {
            let park = Arc::new(ParkState::new());
            let efd = Arc::new(EventFd::default());
            let work = Arc::new(AtomicBool::new(false));
            let t = {
                let (park, efd, work) = (park.clone(), efd.clone(), work.clone());
                thread::spawn(move || {
                    work.store(true, SeqCst);
                    if park.unpark() == Unpark::Signal {
                        efd.write();
                    }
                })
            };
            owner_waits_for(&park, &efd, &work);
            t.join().unwrap();
        });
    }

    #[test]
    fn two_wakers_signal_at_most_once_per_park() {
        loom::model(|| {
            let park = Arc::new(ParkState::new());
            let efd = Arc::new(EventFd::default());
            let work = Arc::new(AtomicBool::new(false));
            let signals = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    let (park, efd, work, signals) =
                        (park.clone(), efd.clone(), work.clone(), signals.clone());
                    thread::spawn(move || {
                        work.store(true, SeqCst);
                        if park.unpark() == Unpark::Signal {
                            signals.fetch_add(1, SeqCst);
                            efd.write();
                        }
                    })
                })
                .collect();
            owner_waits_for(&park, &efd, &work);
            for h in handles {
                h.join().unwrap();
            }
            // The owner parks at most once before it sees the work, so at most one signal.
            assert!(signals.load(SeqCst) <= 1);
        });
    }
}
