//! The task state machine, the waker and the join handle together: a real task, a
//! scheduler that queues into a shared list, and threads that wake, run and join it.

use super::*;
use crate::loom::Mutex;
use loom::thread;
use std::collections::VecDeque;

#[derive(Clone, Default)]
struct Queue(Arc<Mutex<VecDeque<Task>>>);

impl Schedule for Queue {
    fn schedule(&self, task: Task, _at: crate::task_core::Queue) {
        self.0.lock().push_back(task);
    }
    fn release(&self, _header: &Header) {}
}

impl Queue {
    fn run_all(&self) {
        loop {
            // Not `while let`: its temporary guard would hold the lock across `run`.
            let next = self.0.lock().pop_front();
            match next {
                Some(t) => t.run(),
                None => return,
            }
        }
    }
}

/// The waker slot a future fills and a waker thread blocks on (no spinning: loom bounds
/// the branches of a model).
#[derive(Default)]
struct Slot {
    waker: Mutex<Option<Waker>>,
    filled: loom::sync::Condvar,
    // loom's Condvar needs loom's own MutexGuard.
    gate: loom::sync::Mutex<bool>,
}

impl Slot {
    fn put(&self, w: &Waker) {
        *self.waker.lock() = Some(w.clone());
        *self.gate.lock().unwrap() = true;
        self.filled.notify_one();
    }
    fn take_blocking(&self) -> Waker {
        let mut g = self.gate.lock().unwrap();
        while !*g {
            g = self.filled.wait(g).unwrap();
        }
        drop(g);
        self.waker.lock().take().expect("filled")
    }
}

/// Pending on its first poll (handing out its waker), ready on the second.
struct ReadyOnSecondPoll {
    slot: Arc<Slot>,
    polls: usize,
}
impl Future for ReadyOnSecondPoll {
    type Output = usize;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        self.polls += 1;
        if self.polls == 1 {
            self.slot.put(cx.waker());
            return Poll::Pending;
        }
        Poll::Ready(self.polls)
    }
}

fn join_now<T: 'static>(join: &Arc<dyn Join<T>>) -> Result<T, JoinError> {
    let mut cx = Context::from_waker(Waker::noop());
    match join.poll_join(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the task did not complete: a wake-up was lost"),
    }
}

/// The wake races with the first poll (the task may be RUNNING when woken): either way it is
/// polled again and completes.
#[test]
fn wake_from_other_thread_while_running_or_idle() {
    loom::model(|| {
        let q = Queue::default();
        let slot = Arc::new(Slot::default());
        let (task, join) = new_task(
            ReadyOnSecondPoll {
                slot: slot.clone(),
                polls: 0,
            },
            q.clone(),
            Id::next(),
            crate::task_core::Placement::Any,
            Location::caller(),
            crate::task_core::Kind::Task,
        );
        q.schedule(task, crate::task_core::Queue::Next);
        let waker_thread = {
            let slot = slot.clone();
            thread::spawn(move || slot.take_blocking().wake())
        };
        q.run_all();
        waker_thread.join().unwrap();
        q.run_all();
        assert_eq!(join_now(&join).unwrap(), 2);
        join.drop_join_handle();
    });
}

#[test]
fn abort_races_with_completion() {
    loom::model(|| {
        let q = Queue::default();
        let (task, join) = new_task(
            async { 7 },
            q.clone(),
            Id::next(),
            crate::task_core::Placement::Any,
            Location::caller(),
            crate::task_core::Kind::Task,
        );
        q.schedule(task, crate::task_core::Queue::Next);
        let aborter = {
            let t = join.clone().into_task();
            thread::spawn(move || t.abort())
        };
        let runner = {
            let q = q.clone();
            thread::spawn(move || q.run_all())
        };
        aborter.join().unwrap();
        runner.join().unwrap();
        q.run_all();
        match join_now(&join) {
            Ok(7) => {}
            Err(e) => assert!(e.is_cancelled()),
            Ok(other) => panic!("unexpected output {other}"),
        }
        join.drop_join_handle();
    });
}

#[test]
fn join_handle_dropped_while_completing() {
    loom::model(|| {
        let q = Queue::default();
        let dropped = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        struct Out(Arc<std::sync::atomic::AtomicUsize>);
        impl Drop for Out {
            fn drop(&mut self) {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let d = dropped.clone();
        let (task, join) = new_task(
            async move { Out(d) },
            q.clone(),
            Id::next(),
            crate::task_core::Placement::Any,
            Location::caller(),
            crate::task_core::Kind::Task,
        );
        q.schedule(task, crate::task_core::Queue::Next);
        let runner = {
            let q = q.clone();
            thread::spawn(move || q.run_all())
        };
        join.drop_join_handle();
        runner.join().unwrap();
        q.run_all();
        // The output was dropped exactly once, by whichever side owned it.
        assert_eq!(dropped.load(std::sync::atomic::Ordering::SeqCst), 1);
    });
}
