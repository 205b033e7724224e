//! The parker of a thread blocked in `block_on` (or waiting there for the current-thread
//! runtime's core): weir's own, not the thread's park token.
//!
//! `std::thread::park` shares one token per thread with everything else running on that
//! thread. A future polled by `block_on` may use that token itself (its own park/unpark, a
//! nested `futures::executor::block_on`, a lock that parks), and consume the unpark meant for
//! `block_on`, which would then sleep through its wake-up. This parker's notification belongs
//! to one `block_on` call alone.
//!
//! # States
//!
//! `state` is one of:
//! - `EMPTY`: no notification pending, nobody asleep;
//! - `PARKED`: the owner is asleep (or about to be) on the condvar, holding nothing;
//! - `NOTIFIED`: a notification is pending; the next `park` consumes it and returns at once.
//!
//! Only the owner thread parks. `unpark` swaps in `NOTIFIED`; only if it replaced `PARKED`
//! does it take the mutex and signal. The owner moves `EMPTY → PARKED` under the mutex and
//! re-checks the state after every wake-up of the condvar, so a notification that lands
//! between its check and its wait is not lost: the notifier cannot signal before the owner
//! waits (it needs the mutex), and a spurious condvar wake-up finds no `NOTIFIED` and waits
//! again. Modelled in loom below.

use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::task::Wake;

use crate::loom::{AtomicUsize, Condvar, Mutex};

const EMPTY: usize = 0;
const PARKED: usize = 1;
const NOTIFIED: usize = 2;

/// One `block_on` call's parker; its `Waker` is `Waker::from(Arc<Parker>)`.
#[derive(Debug)]
pub(crate) struct Parker {
    state: AtomicUsize,
    lock: Mutex<()>,
    cvar: Condvar,
}

impl Parker {
    pub(crate) fn new() -> Parker {
        Parker {
            state: AtomicUsize::new(EMPTY),
            lock: Mutex::new(()),
            cvar: Condvar::new(),
        }
    }

    /// Blocks until notified; returns at once (consuming it) if a notification is pending.
    /// Called by the owner thread only.
    pub(crate) fn park(&self) {
        if self
            .state
            .compare_exchange(NOTIFIED, EMPTY, SeqCst, SeqCst)
            .is_ok()
        {
            return;
        }
        let mut guard = self.lock.lock();
        match self.state.compare_exchange(EMPTY, PARKED, SeqCst, SeqCst) {
            Ok(_) => {}
            Err(NOTIFIED) => {
                // Notified since the first check: consume it. A swap, not a store: reading the
                // latest value synchronizes with every notifier that swapped in NOTIFIED
                // meanwhile, so their writes before `unpark` are visible (loom found the
                // store losing a second notifier's flag).
                let _ = self.state.swap(EMPTY, SeqCst);
                return;
            }
            Err(other) => unreachable!("a parker is parked by one thread only (state {other})"),
        }
        loop {
            guard = self.cvar.wait(guard);
            if self
                .state
                .compare_exchange(NOTIFIED, EMPTY, SeqCst, SeqCst)
                .is_ok()
            {
                return;
            }
            // Spurious wake-up: still PARKED.
        }
    }

    /// Wakes the owner, or makes its next `park` return at once.
    pub(crate) fn unpark(&self) {
        match self.state.swap(NOTIFIED, SeqCst) {
            EMPTY | NOTIFIED => {}
            PARKED => {
                // The owner set PARKED under the mutex and releases it only by waiting: once we
                // hold it, the owner is waiting (or re-checking after a wake-up).
                drop(self.lock.lock());
                self.cvar.notify_one();
            }
            other => unreachable!("invalid parker state {other}"),
        }
    }
}

impl Wake for Parker {
    fn wake(self: Arc<Self>) {
        self.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.unpark();
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicBool;
    use loom::thread;

    /// The owner waits for a flag another thread sets before it unparks: whatever the
    /// interleaving (unpark before the park, between the owner's checks, while it waits), the
    /// owner sees the flag and returns.
    #[test]
    fn unpark_is_never_lost() {
        loom::model(|| {
            let parker = Arc::new(Parker::new());
            let flag = Arc::new(AtomicBool::new(false));
            let notifier = {
                let (parker, flag) = (parker.clone(), flag.clone());
                thread::spawn(move || {
                    flag.store(true, SeqCst);
                    parker.unpark();
                })
            };
            while !flag.load(SeqCst) {
                parker.park();
            }
            notifier.join().unwrap();
        });
    }

    /// Two notifiers (the future's waker and a released core, say): both coalesce into one
    /// notification, and the owner returns once both flags are up.
    #[test]
    fn concurrent_unparks_coalesce() {
        loom::model(|| {
            let parker = Arc::new(Parker::new());
            let flags = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
            let notifiers: Vec<_> = (0..2)
                .map(|i| {
                    let (parker, flags) = (parker.clone(), flags.clone());
                    thread::spawn(move || {
                        flags[i].store(true, SeqCst);
                        parker.unpark();
                    })
                })
                .collect();
            while !(flags[0].load(SeqCst) && flags[1].load(SeqCst)) {
                parker.park();
            }
            for n in notifiers {
                n.join().unwrap();
            }
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_pending_notification_makes_park_return_once() {
        let p = Parker::new();
        p.unpark();
        p.unpark();
        p.park();
        assert_eq!(p.state.load(SeqCst), EMPTY);
    }

    #[test]
    fn unpark_from_another_thread_wakes_the_owner() {
        let p = Arc::new(Parker::new());
        let q = p.clone();
        let t = std::thread::spawn(move || q.unpark());
        p.park();
        t.join().unwrap();
    }
}
