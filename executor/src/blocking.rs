//! The blocking pool: threads for `spawn_blocking`, started on demand up to a bound and retired
//! after an idle timeout.
//!
//! The pool knows no runtime. Each spawn passes the runtime it is for ([`Enter`]), which a
//! thread started for it enters for its whole life, so closures may use `Handle::current`,
//! spawn, timers and I/O.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::panic::Location;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use weir_reactor::for_executor::{self, ReactorControl};

use crate::config::Hooks;
use crate::task_core::{self, Header, Id, JoinHandle, Schedule, Task};

/// The runtime a closure is spawned for, as its pool thread needs it.
pub(crate) trait Enter: Clone + Send + 'static {
    /// Runs `f` with the runtime current on this thread (a pool thread, for its whole life).
    fn enter<R>(&self, f: impl FnOnce() -> R) -> R;
}

pub(crate) struct Pool {
    state: Mutex<State>,
    /// Idle threads wait here for work.
    work: Condvar,
    /// Shutdown waits here for threads to exit.
    exited: Condvar,
    max_threads: usize,
    keep_alive: Duration,
    thread_name: String,
    stack_size: Option<usize>,
    /// `on_thread_start` / `on_thread_stop`.
    hooks: Hooks,
    /// A current-thread runtime's reactor, whose clock can be paused: each closure holds it
    /// from spawn to completion, so the idle runtime does not jump the paused clock ahead of a
    /// result that comes in real time. `None` on a multi-thread runtime.
    clock: Option<weir_reactor::ReactorHandle>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Task>,
    num_threads: usize,
    num_idle: usize,
    /// Wake-ups sent to idle threads and not yet consumed.
    num_notify: usize,
    shutdown: bool,
    next_id: usize,
    threads: Vec<thread::JoinHandle<()>>,
}

/// A closure run as a task on the pool.
struct BlockingTask<F>(Option<F>);

impl<F> Unpin for BlockingTask<F> {}

impl<F: FnOnce() -> R, R> Future for BlockingTask<F> {
    type Output = R;

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<R> {
        let f = self.0.take().expect("a blocking task is polled once");
        Poll::Ready(weir_reactor::coop::unconstrained(f))
    }
}

impl Pool {
    pub(crate) fn new(
        max_threads: usize,
        keep_alive: Duration,
        thread_name: String,
        stack_size: Option<usize>,
        hooks: Hooks,
        clock: Option<weir_reactor::ReactorHandle>,
    ) -> Arc<Pool> {
        Arc::new(Pool {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            exited: Condvar::new(),
            max_threads,
            keep_alive,
            thread_name,
            stack_size,
            hooks,
            clock,
        })
    }

    fn pausable_reactor(&self) -> Option<&weir_reactor::ReactorHandle> {
        self.clock.as_ref()
    }

    /// Runs `f` on a pool thread; a thread started for it enters `rt`.
    pub(crate) fn spawn<E: Enter, F, R>(
        self: &Arc<Self>,
        rt: &E,
        f: F,
        location: &'static Location<'static>,
    ) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let id = Id::next();
        let (task, join) = task_core::new_task(
            BlockingTask(Some(f)),
            self.clone(),
            id,
            crate::task_core::Placement::Any,
            location,
            crate::task_core::Kind::Blocking,
        );
        tracing::trace!(target: "weir::task", task_id = id.as_u64(), location = %location, "spawn_blocking");
        // Released in `release`, once the output is published and the join side woken.
        if let Some(reactor) = self.pausable_reactor() {
            reactor.inhibit_auto_advance();
        }
        self.submit(task, Some(rt));
        JoinHandle::new(join)
    }

    /// Queues `task`: an idle thread takes it, or (below `max_threads`, and given the runtime
    /// to enter) a new thread is started for it.
    fn submit<E: Enter>(self: &Arc<Self>, task: Task, rt: Option<&E>) {
        let mut s = self.state.lock();
        if s.shutdown {
            drop(s);
            task.shutdown();
            return;
        }
        s.queue.push_back(task);
        if s.num_idle > s.num_notify {
            s.num_notify += 1;
            drop(s);
            self.work.notify_one();
        } else if let Some(rt) = rt
            && s.num_threads < self.max_threads
        {
            s.num_threads += 1;
            if let Err(e) = self.spawn_thread(&mut s, rt) {
                s.num_threads -= 1;
                tracing::error!(
                    target: "weir::task",
                    error = %e,
                    threads = s.num_threads,
                    "failed to start a blocking-pool thread; the closure waits for a running one"
                );
            }
        }
    }

    /// Runs `f` on a pool thread now: an idle thread if there is one, else a new thread even
    /// beyond `max_threads` (it carries a worker that must not wait for a blocking closure to
    /// end). `Err` if no thread could be had; `f` is then dropped unrun.
    #[track_caller]
    pub(crate) fn spawn_mandatory<E: Enter, F>(self: &Arc<Self>, rt: &E, f: F) -> io::Result<()>
    where
        F: FnOnce() + Send + 'static,
    {
        let id = Id::next();
        let (task, join) = task_core::new_task(
            BlockingTask(Some(f)),
            self.clone(),
            id,
            crate::task_core::Placement::Any,
            Location::caller(),
            crate::task_core::Kind::Blocking,
        );
        drop(JoinHandle::new(join));
        // As in `spawn`: `release` undoes it (multi-thread runtimes, the only users, have no
        // pausable clock).
        if let Some(reactor) = self.pausable_reactor() {
            reactor.inhibit_auto_advance();
        }
        let mut s = self.state.lock();
        if s.shutdown {
            drop(s);
            // Not run: `shutdown` completes it, which releases it.
            task.shutdown();
            return Err(io::Error::other("the blocking pool is shut down"));
        }
        s.queue.push_back(task);
        if s.num_idle > s.num_notify {
            s.num_notify += 1;
            drop(s);
            self.work.notify_one();
            return Ok(());
        }
        s.num_threads += 1;
        if let Err(e) = self.spawn_thread(&mut s, rt) {
            s.num_threads -= 1;
            let unrun = s.queue.pop_back();
            drop(s);
            // Completed as cancelled (so released), its closure dropped unrun.
            if let Some(t) = unrun {
                t.shutdown();
            }
            return Err(e);
        }
        Ok(())
    }

    fn spawn_thread<E: Enter>(self: &Arc<Self>, state: &mut State, rt: &E) -> io::Result<()> {
        let id = state.next_id;
        state.next_id += 1;
        let mut b = thread::Builder::new().name(format!("{}-blocking-{id}", self.thread_name));
        if let Some(s) = self.stack_size {
            b = b.stack_size(s);
        }
        let pool = self.clone();
        let rt = rt.clone();
        // Its tasks' polls fill the cooperative budget; nothing else runs on the thread.
        let h = b.spawn(move || rt.enter(|| for_executor::budget_scope(|| pool.thread_main())))?;
        state.threads.retain(|t| !t.is_finished());
        state.threads.push(h);
        Ok(())
    }

    /// A pool thread, inside the runtime it was started for.
    fn thread_main(self: Arc<Self>) {
        // Inside the runtime: the callbacks may use `Handle::current`.
        self.hooks.thread_start();
        let mut s = self.state.lock();
        'outer: loop {
            while let Some(task) = s.queue.pop_front() {
                drop(s);
                task.run();
                s = self.state.lock();
            }
            if s.shutdown {
                break;
            }
            s.num_idle += 1;
            loop {
                let timed_out = self.work.wait_for(&mut s, self.keep_alive).timed_out();
                if s.num_notify > 0 {
                    s.num_notify -= 1;
                    s.num_idle -= 1;
                    continue 'outer;
                }
                if s.shutdown {
                    // Run what is still queued first (the loop above ends at shutdown).
                    s.num_idle -= 1;
                    continue 'outer;
                }
                if timed_out && s.queue.is_empty() {
                    s.num_idle -= 1;
                    break 'outer;
                }
            }
        }
        s.num_threads -= 1;
        drop(s);
        self.exited.notify_all();
        // Shutdown joins this thread, so it waits for the callback too. The runtime is left
        // after it, when `thread_main` returns.
        self.hooks.thread_stop();
    }

    /// Stops the pool: new closures are refused (cancelled), the threads run the closures
    /// already queued and exit, as tokio's do. They are waited for until `deadline` (forever
    /// if `None`); closures still queued then are cancelled, and finished threads are joined.
    pub(crate) fn shutdown(&self, deadline: Option<Instant>) {
        self.state.lock().shutdown = true;
        self.work.notify_all();
        let mut s = self.state.lock();
        while s.num_threads > 0 {
            match deadline {
                Some(d) => {
                    if self.exited.wait_until(&mut s, d).timed_out() {
                        break;
                    }
                }
                None => self.exited.wait(&mut s),
            }
        }
        // Left by the deadline, or with no thread to run it (none could be started).
        let queued = std::mem::take(&mut s.queue);
        let threads = std::mem::take(&mut s.threads);
        let all_exited = s.num_threads == 0;
        drop(s);
        for t in queued {
            t.shutdown();
        }
        for t in threads {
            if all_exited || t.is_finished() {
                let _ = t.join();
            }
        }
    }

    pub(crate) fn num_threads(&self) -> usize {
        self.state.lock().num_threads
    }

    pub(crate) fn num_idle(&self) -> usize {
        let s = self.state.lock();
        s.num_idle - s.num_notify
    }

    pub(crate) fn queue_depth(&self) -> usize {
        self.state.lock().queue.len()
    }
}

impl Schedule for Arc<Pool> {
    /// Only `spawn` queues a blocking task: its one poll always completes, so it is never woken
    /// after. Were it woken, it would go to a running thread (there is no runtime at hand here
    /// to start one with).
    fn schedule(&self, task: Task, _at: crate::task_core::Queue) {
        self.submit::<NoRuntime>(task, None);
    }

    fn release(&self, _header: &Header) {
        if let Some(reactor) = self.pausable_reactor() {
            reactor.allow_auto_advance();
        }
    }
}

/// No runtime to start a thread with (see `Schedule::schedule`).
#[derive(Clone)]
enum NoRuntime {}

impl Enter for NoRuntime {
    fn enter<R>(&self, _f: impl FnOnce() -> R) -> R {
        match *self {}
    }
}
