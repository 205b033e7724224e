//! The inbox: registration requests from any thread to the ring's one issuer, and the wake-up
//! protocol that makes sure the owner sees them.
//!
//! A ring has a single issuer (the owner), so [`Registry`](crate::Registry) calls from other
//! threads cannot touch it: they push an operation here and the owner drains the inbox at the
//! start of every `select`, before it submits and reaps. The owner is woken (an eventfd write)
//! only if it is blocked in the ring's wait, by one word of state: the owner commits to
//! blocking (`RUNNING → BLOCKED`), re-drains if a push came meanwhile (`NOTIFIED`), and a
//! pusher writes the wake handle only when its swap to `NOTIFIED` finds `BLOCKED`. A push
//! while the owner runs costs a lock and an atomic swap, no syscall; a push from the owner's
//! own thread never needs a wake-up (it is not blocked).
//!
//! No lost wake-up: an operation is pushed (under the lock) before the pusher's swap. If the
//! owner's drain comes after the push, it sees the operation. Otherwise the owner's later
//! [`prepare_block`](Inbox::prepare_block) either finds `NOTIFIED` (and drains again instead
//! of blocking) or wins, and then the pusher's swap finds `BLOCKED` and writes the eventfd,
//! which ends the wait. Both are `SeqCst`. Modelled in `loom_tests` below.

#[cfg(loom)]
use loom::sync::Mutex;
#[cfg(loom)]
use loom::sync::atomic::{AtomicU8, Ordering::SeqCst};
#[cfg(not(loom))]
use parking_lot::Mutex;
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU8, Ordering::SeqCst};

/// The owner runs (or is about to drain): a push needs no wake-up.
const RUNNING: u8 = 0;
/// The owner is blocked in the ring's wait, or committed to block.
const BLOCKED: u8 = 1;
/// An operation was pushed since the owner last committed to block or woke.
const NOTIFIED: u8 = 2;

/// Operations for the owner, and the owner's blocked/running state.
#[derive(Debug)]
pub(crate) struct Inbox<T> {
    ops: Mutex<Vec<T>>,
    state: AtomicU8,
}

/// What the owner must do after [`Inbox::prepare_block`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Block {
    /// Block: any later push will write the wake handle.
    Yes,
    /// An operation arrived since the last drain: drain again before blocking.
    DrainFirst,
}

impl<T> Inbox<T> {
    pub(crate) fn new() -> Inbox<T> {
        Inbox {
            ops: Mutex::new(Vec::new()),
            state: AtomicU8::new(RUNNING),
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
    pub(crate) fn push(&self, op: T) -> bool {
        self.lock().push(op);
        self.state.swap(NOTIFIED, SeqCst) == BLOCKED
    }

    /// Owner: moves every queued operation into `into` (in push order).
    pub(crate) fn drain(&self, into: &mut Vec<T>) {
        let mut ops = self.lock();
        if !ops.is_empty() {
            into.append(&mut ops);
        }
    }

    /// Owner, after a drain and before a blocking wait: commit to blocking.
    pub(crate) fn prepare_block(&self) -> Block {
        match self
            .state
            .compare_exchange(RUNNING, BLOCKED, SeqCst, SeqCst)
        {
            Ok(_) => Block::Yes,
            // Only the owner blocks, so the state was NOTIFIED: consume it, and do not block.
            Err(_) => {
                self.state.store(RUNNING, SeqCst);
                Block::DrainFirst
            }
        }
    }

    /// Owner, after the blocking wait returned (whatever woke it).
    pub(crate) fn finish_block(&self) {
        self.state.store(RUNNING, SeqCst);
    }

    /// `true` if the owner is blocked in the ring's wait (racy; tests).
    #[cfg(test)]
    pub(crate) fn is_blocked(&self) -> bool {
        self.state.load(SeqCst) == BLOCKED
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// The eventfd: a counter the owner blocks on.
    #[derive(Debug, Default)]
    struct ModelEventFd {
        count: loom::sync::Mutex<usize>,
        cv: loom::sync::Condvar,
    }

    impl ModelEventFd {
        fn write(&self) {
            *self.count.lock().unwrap() += 1;
            self.cv.notify_one();
        }

        fn wait(&self) {
            let mut c = self.count.lock().unwrap();
            while *c == 0 {
                c = self.cv.wait(c).unwrap();
            }
            *c -= 1;
        }
    }

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
