//! A FIFO any thread may push to and take from: a mutex-protected deque with an atomic length,
//! so that emptiness checks take no lock.
//!
//! Two queues of the runtime are one: the inject queue (tasks spawned or woken from outside a
//! worker) and each worker's backlog (the tasks its local run queue had no room for; see
//! `queue.rs` and `worker/mod.rs`). The backlog is the local queue's continuation: the owner
//! moves its front into the local queue as that drains, so its tasks keep their place in line,
//! and an idle worker may take from it as it steals from the local queue.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::{Acquire, Release, SeqCst};

use crate::loom::{AtomicUsize, Mutex};
use crate::queue::{Local, Overflow};

pub(crate) struct SharedFifo<T> {
    queue: Mutex<VecDeque<T>>,
    len: AtomicUsize,
}

impl<T> SharedFifo<T> {
    pub(crate) fn new() -> SharedFifo<T> {
        SharedFifo {
            queue: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
        }
    }

    /// Queued values. `SeqCst` so a worker that registered as sleeping and then reads an empty
    /// queue is ordered after any push whose pusher then found no sleeper (see `shared/idle.rs`).
    pub(crate) fn len(&self) -> usize {
        self.len.load(SeqCst)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn push(&self, value: T) {
        let mut q = self.queue.lock();
        q.push_back(value);
        self.len.store(q.len(), SeqCst);
    }

    pub(crate) fn pop(&self) -> Option<T> {
        if self.len.load(Acquire) == 0 {
            return None;
        }
        let mut q = self.queue.lock();
        let v = q.pop_front();
        self.len.store(q.len(), Release);
        v
    }

    /// Moves up to `max` values into `dst` and returns one more to run, or `None` if empty.
    pub(crate) fn pop_batch_into(&self, max: usize, dst: &mut Local<T>) -> Option<T> {
        if self.len.load(Acquire) == 0 {
            return None;
        }
        let mut q = self.queue.lock();
        let first = q.pop_front()?;
        Self::move_locked(&mut q, max, dst);
        self.len.store(q.len(), Release);
        Some(first)
    }

    /// Moves up to `max` values from the front into the back of `dst` (no more than it has room
    /// for). Returns how many moved.
    pub(crate) fn move_batch_into(&self, max: usize, dst: &mut Local<T>) -> usize {
        if self.len.load(Acquire) == 0 {
            return 0;
        }
        let mut q = self.queue.lock();
        let n = Self::move_locked(&mut q, max, dst);
        self.len.store(q.len(), Release);
        n
    }

    fn move_locked(q: &mut VecDeque<T>, max: usize, dst: &mut Local<T>) -> usize {
        let n = max.min(q.len()).min(dst.remaining());
        for _ in 0..n {
            let v = q.pop_front().expect("counted");
            // `n <= remaining`, so this never overflows back into us.
            dst.push_back(v, &NoOverflow);
        }
        n
    }

    /// Takes everything (shutdown).
    pub(crate) fn drain(&self) -> Vec<T> {
        let mut q = self.queue.lock();
        self.len.store(0, Release);
        q.drain(..).collect()
    }
}

impl<T> Overflow<T> for SharedFifo<T> {
    fn push(&self, value: T) {
        SharedFifo::push(self, value);
    }
}

struct NoOverflow;

impl<T> Overflow<T> for NoOverflow {
    fn push(&self, _value: T) {
        unreachable!("the batch moves push no more than the room left");
    }
}
