//! Tests of `JoinSet`: handle polls per completion, and (under loom) the ready list against a
//! task completing on another thread.

use super::*;

#[cfg(all(test, not(loom)))]
mod handle_polls {
    use super::*;

    /// Each entry is polled once to register its waker and once after its task completed: never
    /// once per `join_next` call.
    fn polls_each_handle_at_most_twice(rt: crate::Runtime) {
        const N: usize = 10_000;
        let polls = rt.block_on(async {
            let mut set = JoinSet::new();
            for i in 0..N {
                set.spawn(async move {
                    if i % 2 == 0 {
                        crate::task::yield_now().await;
                    }
                    i
                });
            }
            let mut sum = 0;
            while let Some(r) = set.join_next().await {
                sum += r.unwrap();
            }
            assert_eq!(sum, N * (N - 1) / 2);
            set.handle_polls
        });
        assert!(polls <= 2 * N, "{polls} handle polls to join {N} tasks");
    }

    #[test]
    fn current_thread_polls_each_handle_at_most_twice() {
        polls_each_handle_at_most_twice(crate::Builder::new_current_thread().build().unwrap());
    }

    #[test]
    fn multi_thread_polls_each_handle_at_most_twice() {
        polls_each_handle_at_most_twice(
            crate::Builder::new_multi_thread()
                .workers(2)
                .build()
                .unwrap(),
        );
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! The ready list against a task completing on another thread: a `join_next` that returned
    //! `Pending` is always woken, and the next poll returns the output.

    use std::panic::Location;
    use std::sync::atomic::Ordering::SeqCst;

    use loom::thread;

    use super::*;
    use crate::task_core::{Header, Schedule, Task, new_task};

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
                let next = self.0.lock().pop_front();
                match next {
                    Some(t) => t.run(),
                    None => return,
                }
            }
        }
    }

    #[derive(Default)]
    struct Flag(std::sync::atomic::AtomicBool);

    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, SeqCst);
        }
    }

    #[test]
    fn completion_on_another_thread_wakes_the_owner() {
        loom::model(|| {
            let q = Queue::default();
            let mut set = JoinSet::new();
            for v in [1u32, 2] {
                let (task, join) = new_task(
                    async move { v },
                    q.clone(),
                    Id::next(),
                    crate::task_core::Placement::Any,
                    Location::caller(),
                    crate::task_core::Kind::Task,
                );
                q.schedule(task, crate::task_core::Queue::Next);
                set.insert(JoinHandle::new(join));
            }
            let runner = {
                let q = q.clone();
                thread::spawn(move || q.run_all())
            };
            let flag = Arc::new(Flag::default());
            let waker = Waker::from(flag.clone());
            let mut cx = Context::from_waker(&waker);
            let mut got = Vec::new();
            let mut pending = false;
            // Poll until it would block once, while the runner completes the tasks.
            while got.len() < 2 {
                match set.poll_next(&mut cx, Wait::Register) {
                    Poll::Ready(Some(r)) => got.push(r.unwrap().1),
                    Poll::Ready(None) => unreachable!("two tasks in the set"),
                    Poll::Pending => {
                        pending = true;
                        break;
                    }
                }
            }
            runner.join().unwrap();
            if pending {
                assert!(
                    flag.0.load(SeqCst),
                    "join_next returned Pending and was never woken"
                );
                while let Poll::Ready(Some(r)) = set.poll_next(&mut cx, Wait::Register) {
                    got.push(r.unwrap().1);
                }
            }
            got.sort_unstable();
            assert_eq!(got, [1, 2]);
            assert!(set.is_empty());
        });
    }
}
