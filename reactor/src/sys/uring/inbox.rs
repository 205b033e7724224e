//! The inbox: registration requests from any thread to the ring's one issuer, and the wake-up
//! protocol that makes sure the owner sees them.
//!
//! A ring has a single issuer (the owner), so [`Registry`](super::Registry) calls from other
//! threads cannot touch it: they push an operation here and the owner drains the inbox at the
//! start of every `select`, before it submits and reaps. The owner is woken (an eventfd write)
//! only if it is blocked in the ring's wait, with the same one-word protocol as the driver's
//! park ([`ParkState`]): the owner commits to blocking (`EMPTY → PARKED`), re-drains if it was
//! notified meanwhile, and a pusher writes the wake handle only when its `unpark` finds
//! `PARKED`. A push while the owner runs costs a lock and an atomic swap, no syscall; a push
//! from the owner's own thread never needs a wake-up (it is not blocked).
//!
//! No lost wake-up: an operation is pushed (under the lock) before the pusher's `unpark`. If
//! the owner's drain comes after the push, it sees the operation. Otherwise the owner's later
//! `prepare_park` either finds `NOTIFIED` (and drains again instead of blocking) or wins, and
//! then the pusher's swap finds `PARKED` and writes the eventfd, which ends the wait. Modelled
//! in `loom_tests` below.

#[cfg(loom)]
use loom::sync::Mutex;
#[cfg(not(loom))]
use parking_lot::Mutex;

use crate::park_state::{ParkState, Prepare, Unpark};

/// Operations for the owner, and the owner's blocked/running state.
#[derive(Debug)]
pub(super) struct Inbox<T> {
    ops: Mutex<Vec<T>>,
    park: ParkState,
}

/// What the owner must do after [`Inbox::prepare_block`].
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Block {
    /// Block: any later push will write the wake handle.
    Yes,
    /// An operation arrived since the last drain: drain again before blocking.
    DrainFirst,
}

impl<T> Inbox<T> {
    pub(super) fn new() -> Inbox<T> {
        Inbox {
            ops: Mutex::new(Vec::new()),
            park: ParkState::new(),
        }
    }

    #[cfg(not(loom))]
    fn lock(&self) -> parking_lot::MutexGuard<'_, Vec<T>> {
        self.ops.lock()
    }

    #[cfg(loom)]
    fn lock(&self) -> loom::sync::MutexGuard<'_, Vec<T>> {
        self.ops.lock().unwrap()
    }

    /// Any thread: queues `op` for the owner. Returns `true` if the caller must write the wake
    /// handle (the owner is blocked in the ring's wait).
    pub(super) fn push(&self, op: T) -> bool {
        self.lock().push(op);
        self.park.unpark() == Unpark::Signal
    }

    /// Owner: moves every queued operation into `into` (in push order).
    pub(super) fn drain(&self, into: &mut Vec<T>) {
        let mut ops = self.lock();
        if !ops.is_empty() {
            into.append(&mut ops);
        }
    }

    /// Owner, after a drain and before a blocking wait: commit to blocking.
    pub(super) fn prepare_block(&self) -> Block {
        match self.park.prepare_park() {
            Prepare::Block => Block::Yes,
            Prepare::Notified => Block::DrainFirst,
        }
    }

    /// Owner, after the blocking wait returned (whatever woke it).
    pub(super) fn finish_block(&self) {
        let _ = self.park.finish_park();
    }

    /// `true` if the owner is blocked in the ring's wait (racy; tests).
    #[cfg(test)]
    pub(super) fn is_blocked(&self) -> bool {
        self.park.is_parked()
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::park_state::ModelEventFd;
    use loom::sync::Arc;
    use loom::thread;

    /// The owner's select loop, reduced to the inbox: drain, commit to blocking, block on the
    /// eventfd; until it has seen `want` operations.
    fn owner(inbox: &Inbox<u32>, efd: &ModelEventFd, want: usize) -> Vec<u32> {
        let mut seen = Vec::new();
        loop {
            inbox.drain(&mut seen);
            if seen.len() == want {
                return seen;
            }
            match inbox.prepare_block() {
                Block::DrainFirst => continue,
                Block::Yes => {
                    efd.wait();
                    inbox.finish_block();
                }
            }
        }
    }

    #[test]
    fn an_op_pushed_while_the_owner_decides_to_block_is_seen() {
        loom::model(|| {
            let inbox = Arc::new(Inbox::new());
            let efd = Arc::new(ModelEventFd::default());
            let t = {
                let (inbox, efd) = (inbox.clone(), efd.clone());
                thread::spawn(move || {
                    if inbox.push(1) {
                        efd.write();
                    }
                })
            };
            assert_eq!(owner(&inbox, &efd, 1), vec![1]);
            t.join().unwrap();
        });
    }

    #[test]
    fn ops_from_one_thread_keep_their_order_and_wake_at_most_once_per_block() {
        loom::model(|| {
            let inbox = Arc::new(Inbox::new());
            let efd = Arc::new(ModelEventFd::default());
            let signals = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
            let t = {
                let (inbox, efd, signals) = (inbox.clone(), efd.clone(), signals.clone());
                thread::spawn(move || {
                    // One thread's ops arrive in its order (a deregister before a register).
                    for op in [1, 2] {
                        if inbox.push(op) {
                            signals.fetch_add(1, loom::sync::atomic::Ordering::SeqCst);
                            efd.write();
                        }
                    }
                })
            };
            let seen = owner(&inbox, &efd, 2);
            assert_eq!(seen, vec![1, 2]);
            t.join().unwrap();
            // The owner blocks at most twice (once per op), so at most two writes.
            assert!(signals.load(loom::sync::atomic::Ordering::SeqCst) <= 2);
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn blocked_flag_is_clear_when_idle() {
        let inbox: Inbox<u32> = Inbox::new();
        assert!(!inbox.is_blocked());
        assert!(
            !inbox.push(1),
            "a push while the owner runs needs no wake-up"
        );
    }
}
