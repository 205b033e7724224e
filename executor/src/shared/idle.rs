//! Which workers sleep, and how many are searching for work.
//!
//! # Protocol (no lost wake-up)
//!
//! * A **producer** (spawn from outside, inject push, local push that other workers could steal)
//!   first publishes the task, then calls [`Idle::worker_to_notify`]: if no worker is searching
//!   and one sleeps, that sleeper is taken off the list, counted as searching, and unparked.
//! * A worker **going to sleep** first registers itself ([`Idle::transition_to_sleeping`]), then
//!   re-checks the queues, and only then blocks. If it finds work it takes itself off the list
//!   again ([`Idle::remove_sleeper`]).
//!
//! Both sides are "publish, `fence(SeqCst)`, then look": the producer stores the task, fences,
//! then reads the counters; the sleeper updates the counters, fences, then reads the queues. The
//! two fences are totally ordered, so at least one side sees the other's write: either the
//! producer sees the sleeper or the sleeper sees the task. (Explicit fences rather than `SeqCst`
//! loads also make the argument checkable by loom, which models `SeqCst` accesses as `AcqRel`.) A producer that sees a searcher
//! does nothing: that searcher re-checks the queues after it stops searching (it decrements the
//! count before its re-check), and the last searcher to give up checks every queue.
//!
//! At most half of the workers search at once, so a burst of work wakes workers one at a time
//! (each that finds work wakes the next) instead of all at once.

use std::sync::atomic::Ordering::SeqCst;

use crate::loom::{AtomicUsize, Mutex, fence};

pub(crate) struct Idle {
    num_workers: usize,
    num_searching: AtomicUsize,
    num_sleeping: AtomicUsize,
    sleepers: Mutex<Vec<usize>>,
}

impl Idle {
    pub(crate) fn new(num_workers: usize) -> Idle {
        Idle {
            num_workers,
            num_searching: AtomicUsize::new(0),
            num_sleeping: AtomicUsize::new(0),
            sleepers: Mutex::new(Vec::with_capacity(num_workers)),
        }
    }

    /// After publishing work: the sleeper to unpark, if one should be. It is then counted as
    /// searching.
    pub(crate) fn worker_to_notify(&self) -> Option<usize> {
        fence(SeqCst);
        if self.num_searching.load(SeqCst) != 0 || self.num_sleeping.load(SeqCst) == 0 {
            return None;
        }
        let mut sleepers = self.sleepers.lock();
        if self.num_searching.load(SeqCst) != 0 {
            return None;
        }
        let w = sleepers.pop()?;
        self.num_sleeping.fetch_sub(1, SeqCst);
        self.num_searching.fetch_add(1, SeqCst);
        Some(w)
    }

    /// A worker out of local work wants to steal. Refused when half the workers already search.
    pub(crate) fn try_start_searching(&self) -> bool {
        let n = self.num_searching.load(SeqCst);
        if 2 * n >= self.num_workers.max(2) {
            return false;
        }
        self.num_searching.fetch_add(1, SeqCst);
        true
    }

    /// A searching worker found work. Returns `true` if it was the last searcher (it should then
    /// wake another worker if more work is visible).
    pub(crate) fn stop_searching(&self) -> bool {
        self.num_searching.fetch_sub(1, SeqCst) == 1
    }

    /// Registers `worker` as sleeping. Returns `true` if it was the last searcher, in which case
    /// it must check every queue before blocking.
    pub(crate) fn transition_to_sleeping(&self, worker: usize, searching: bool) -> bool {
        let mut sleepers = self.sleepers.lock();
        let last = searching && self.num_searching.fetch_sub(1, SeqCst) == 1;
        sleepers.push(worker);
        self.num_sleeping.fetch_add(1, SeqCst);
        drop(sleepers);
        // Pairs with the producer's fence in `worker_to_notify`; the caller re-checks the queues.
        fence(SeqCst);
        last
    }

    /// A worker woke up (or found work before blocking). Returns `true` if a producer had already
    /// taken it off the list — it is then counted as searching.
    pub(crate) fn remove_sleeper(&self, worker: usize) -> bool {
        let mut sleepers = self.sleepers.lock();
        match sleepers.iter().position(|&w| w == worker) {
            Some(i) => {
                sleepers.swap_remove(i);
                self.num_sleeping.fetch_sub(1, SeqCst);
                false
            }
            None => true,
        }
    }

    pub(crate) fn num_searching(&self) -> usize {
        self.num_searching.load(SeqCst)
    }

    pub(crate) fn num_sleeping(&self) -> usize {
        self.num_sleeping.load(SeqCst)
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! The whole "going to park" path against a producer: idle set, inject queue and the
    //! reactor's park state, with the eventfd modelled by a condvar.

    use super::*;
    use crate::shared_fifo::SharedFifo;
    use loom::sync::Arc;
    use loom::thread;
    use weir_reactor::for_executor::{ModelEventFd as EventFd, ParkState, Prepare, Unpark};

    struct World {
        idle: Idle,
        inject: SharedFifo<u32>,
        park: ParkState,
        efd: EventFd,
    }

    /// The worker side: look for work, else register as sleeping, re-check, park.
    fn worker(w: &World) -> u32 {
        let mut searching = false;
        loop {
            if let Some(v) = w.inject.pop() {
                if searching {
                    let _ = w.idle.stop_searching();
                }
                return v;
            }
            let _last = w.idle.transition_to_sleeping(0, searching);
            if !w.inject.is_empty() {
                searching = w.idle.remove_sleeper(0);
                continue;
            }
            if w.park.prepare_park() == Prepare::Block {
                w.efd.wait();
                let _ = w.park.finish_park();
            }
            searching = w.idle.remove_sleeper(0);
        }
    }

    fn producer(w: &World) {
        w.inject.push(7);
        if w.idle.worker_to_notify().is_some() && w.park.unpark() == Unpark::Signal {
            w.efd.write();
        }
    }

    #[test]
    fn task_pushed_while_worker_goes_to_sleep_is_not_lost() {
        loom::model(|| {
            let world = Arc::new(World {
                idle: Idle::new(1),
                inject: SharedFifo::new(),
                park: ParkState::new(),
                efd: EventFd::default(),
            });
            let p = {
                let world = world.clone();
                thread::spawn(move || producer(&world))
            };
            assert_eq!(worker(&world), 7);
            p.join().unwrap();
        });
    }
}
