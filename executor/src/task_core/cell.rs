//! The task allocation and everything that touches its stage.
//!
//! One idea: the cell owns the future or its output, and every path that reads or replaces
//! that stage (poll, complete, abort, shutdown, join, the wakers; their console events are
//! `console/`'s) goes through the state machine's answer here, so the unsafe accesses to the
//! stage sit in one file next to the invariant that makes each of them sound.

use std::any::Any;
use std::future::Future;
use std::panic::{self, AssertUnwindSafe, Location};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::task::{Context, Poll, Wake, Waker};

use weir_reactor::for_executor;

use super::console::{self, TaskSpan};
use super::join::{Join, JoinError, panic_message};
use super::state::{AbortAction, IdleAction, RunAction, ShutdownAction, State, WakeAction};
use super::{Header, Id, Kind, Placement, Queue, Runnable, Schedule, Task};
use crate::loom::{Mutex, UnsafeCell};

enum Stage<F: Future> {
    Running(F),
    Finished(Result<F::Output, JoinError>),
    Consumed,
}

/// One task: the only allocation of a spawn.
pub(crate) struct Cell<F: Future, S> {
    header: Header,
    scheduler: S,
    /// # Invariant
    /// Accessed only by the holder of `RUNNING` (the future, and storing the output), or after
    /// `COMPLETE` by the owner of the output (see `state.rs`, "Who owns what").
    stage: UnsafeCell<Stage<F>>,
    join_waker: Mutex<Option<Waker>>,
    /// The task's `runtime.spawn` span while its future lives (`console/`; nothing without the
    /// feature `console`).
    ///
    /// # Invariant
    /// Accessed only by the holder of `RUNNING`, as the future is.
    span: TaskSpan,
}

// SAFETY: the stage is accessed by one thread at a time, as arbitrated by the state machine
// (`RUNNING` / `COMPLETE` + `JOIN_INTEREST`). For `Send` futures that is all `Send` needs. For
// `spawn_local` futures (not `Send`), the `RUNNING` bit is only ever taken on the owning worker's
// thread: wakes from elsewhere are routed to that worker's inbox, and runtime shutdown cancels
// local tasks on their worker. The output crosses threads only through a `JoinHandle<T>`, which
// is `Send` only if `T: Send`. Everything else in the cell is atomics and a mutex.
unsafe impl<F: Future, S: Send> Send for Cell<F, S> {}
// SAFETY: as above; shared access is only to the atomics, the mutex and the scheduler (`Sync`).
unsafe impl<F: Future, S: Sync> Sync for Cell<F, S> {}

/// Allocates a task. Returns it twice: as a queue entry and as the join side.
pub(crate) fn new_task<F, S>(
    future: F,
    scheduler: S,
    id: Id,
    placement: Placement,
    location: &'static Location<'static>,
    kind: Kind,
) -> (Task, Arc<dyn Join<F::Output>>)
where
    F: Future + 'static,
    F::Output: 'static,
    S: Schedule,
{
    let name = super::name::take_name();
    let (span, span_id) = TaskSpan::new(id, kind, placement, location, name.as_deref());
    let cell = Arc::new(Cell {
        header: Header {
            state: State::new(),
            id,
            placement,
            owned_key: AtomicUsize::new(usize::MAX),
            last_worker: std::sync::atomic::AtomicU32::new(u32::MAX),
            queued_on: std::sync::atomic::AtomicU64::new(0),
            location,
            name,
            spawned_at: crate::recorder::ticks::now(),
            queued_at: AtomicU64::new(0),
            last_polled_at: AtomicU64::new(0),
            polls: AtomicU64::new(0),
            span_id,
        },
        scheduler,
        stage: UnsafeCell::new(Stage::Running(future)),
        join_waker: Mutex::new(None),
        span,
    });
    (cell.clone(), cell)
}

impl<F, S> Cell<F, S>
where
    F: Future + 'static,
    S: Schedule,
{
    /// # Safety
    /// The caller holds `RUNNING`.
    unsafe fn poll_future(&self, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.stage.with_mut(|p| {
            // SAFETY: RUNNING gives exclusive access to the stage (caller's contract).
            match unsafe { &mut *p } {
                // SAFETY: the cell lives in an `Arc` and the stage is never moved while
                // `Running`, so the future stays pinned.
                Stage::Running(f) => unsafe { Pin::new_unchecked(f) }.poll(cx),
                _ => unreachable!("a task was polled after it completed"),
            }
        })
    }

    /// # Safety
    /// The caller has exclusive access to the stage (holds `RUNNING`, or owns the output).
    unsafe fn set_stage(&self, stage: Stage<F>) {
        // SAFETY: exclusive access is the caller's contract.
        self.stage.with_mut(|p| unsafe { *p = stage });
    }

    /// Drops the future, with the task's id current for its destructors. Returns the payload
    /// if a destructor panicked.
    ///
    /// # Safety
    /// The caller holds `RUNNING`.
    unsafe fn drop_future(&self) -> std::thread::Result<()> {
        let _id = super::set_current_id(self.header.id);
        // SAFETY: RUNNING is held (caller's contract).
        let r = panic::catch_unwind(AssertUnwindSafe(|| unsafe {
            self.set_stage(Stage::Consumed)
        }));
        // SAFETY: RUNNING is held (caller's contract).
        unsafe { self.span.close() };
        r
    }

    /// Stores the output, publishes `COMPLETE`, notifies the join side, releases the task.
    ///
    /// # Safety
    /// The caller holds `RUNNING` and the stage is `Consumed`.
    unsafe fn complete(self: &Arc<Self>, out: Result<F::Output, JoinError>) {
        let outcome = match &out {
            Ok(_) => "ok",
            Err(e) if e.is_cancelled() => "cancelled",
            Err(_) => "panicked",
        };
        // SAFETY: RUNNING is held; storing over `Consumed` drops nothing.
        unsafe { self.set_stage(Stage::Finished(out)) };
        let done = self.header.state.transition_to_complete();
        if done.join_interest {
            // From here the output belongs to the JoinHandle.
            if let Some(w) = self.join_waker.lock().take() {
                w.wake();
            }
        } else {
            // No JoinHandle: the output is ours to drop.
            let _id = super::set_current_id(self.header.id);
            // SAFETY: with JOIN_INTEREST unset when COMPLETE was set, nobody else touches it.
            let r = panic::catch_unwind(AssertUnwindSafe(|| unsafe {
                self.set_stage(Stage::Consumed)
            }));
            if let Err(payload) = r {
                forget_payload(payload);
            }
        }
        tracing::trace!(target: "weir::task", task_id = self.header.id.as_u64(), outcome, "complete");
        self.scheduler.release(&self.header);
    }

    /// Drops the future and completes with a cancellation — or with a panic if the future's
    /// destructor panicked (the caller of `abort` learns of it, as with tokio).
    ///
    /// # Safety
    /// The caller holds `RUNNING`.
    unsafe fn cancel(self: &Arc<Self>) {
        let id = self.header.id;
        // SAFETY: forwarded.
        let out = match unsafe { self.drop_future() } {
            Ok(()) => JoinError::cancelled(id),
            Err(payload) => {
                tracing::error!(
                    target: "weir::task",
                    task_id = id.as_u64(),
                    spawned_at = %self.header.location,
                    panic = panic_message(&*payload).unwrap_or("Box<dyn Any>"),
                    "task panicked while being cancelled"
                );
                JoinError::panic(id, payload)
            }
        };
        // SAFETY: RUNNING is still held and the stage is `Consumed`.
        unsafe { self.complete(Err(out)) };
    }
}

/// Drops the future of a task whose poll is unwinding.
struct DropFutureOnUnwind<'a, F: Future, S>(&'a Cell<F, S>);

impl<F: Future, S> Drop for DropFutureOnUnwind<'_, F, S> {
    fn drop(&mut self) {
        // SAFETY: created (and forgotten unless unwinding) inside a poll, while the thread holds
        // `RUNNING`, which gives it exclusive access to the stage.
        self.0.stage.with_mut(|p| unsafe { *p = Stage::Consumed });
        // SAFETY: as above, `RUNNING` is held.
        unsafe { self.0.span.close() };
    }
}

/// Drops a panic payload, ignoring a panic raised by its own destructor.
fn forget_payload(payload: Box<dyn Any + Send>) {
    if let Err(p) = panic::catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(p);
    }
}

impl<F, S> Runnable for Cell<F, S>
where
    F: Future + 'static,
    S: Schedule,
{
    fn header(&self) -> &Header {
        &self.header
    }

    fn run(self: Arc<Self>) {
        match self.header.state.transition_to_running() {
            RunAction::Skip => return,
            // SAFETY: RUNNING acquired.
            RunAction::Cancel => return unsafe { self.cancel() },
            RunAction::Poll => {}
        }
        let id = self.header.id;
        let span = tracing::trace_span!(
            target: "weir::task",
            "poll",
            task_id = id.as_u64(),
            spawned_at = %self.header.location
        );
        let _span = span.enter();
        let _current = super::set_current_id(id);
        let res = {
            // SAFETY: RUNNING acquired above; the span is only closed after this block.
            let _console = unsafe { self.span.enter() };
            let waker = console::waker_ref(&self);
            let mut cx = Context::from_waker(&waker);
            panic::catch_unwind(AssertUnwindSafe(|| {
                // A poll that panics drops its future during the unwind, as tokio does (its
                // destructors see `thread::panicking()`); a destructor that panics then aborts.
                let on_unwind = DropFutureOnUnwind(&*self);
                // SAFETY: RUNNING acquired above.
                let poll = for_executor::budget(|| unsafe { self.poll_future(&mut cx) });
                std::mem::forget(on_unwind);
                poll
            }))
        };
        match res {
            Ok(Poll::Pending) => match self.header.state.transition_to_idle() {
                IdleAction::Idle => {}
                IdleAction::Resubmit => {
                    self.scheduler.queued(&self.header);
                    self.scheduler.schedule(self.clone(), Queue::Back)
                }
                // SAFETY: still RUNNING.
                IdleAction::Cancel => unsafe { self.cancel() },
            },
            Ok(Poll::Ready(out)) => {
                // A panic in the future's destructor is lost: the output is what counts.
                // SAFETY: still RUNNING.
                if let Err(payload) = unsafe { self.drop_future() } {
                    forget_payload(payload);
                }
                // SAFETY: still RUNNING; the stage is `Consumed`.
                unsafe { self.complete(Ok(out)) }
            }
            Err(payload) => {
                tracing::error!(
                    target: "weir::task",
                    task_id = id.as_u64(),
                    spawned_at = %self.header.location,
                    panic = panic_message(&*payload).unwrap_or("Box<dyn Any>"),
                    "task panicked"
                );
                // SAFETY: still RUNNING; `DropFutureOnUnwind` left the stage `Consumed`.
                unsafe { self.complete(Err(JoinError::panic(id, payload))) }
            }
        }
    }

    fn shutdown(self: Arc<Self>) {
        match self.header.state.transition_to_shutdown() {
            // SAFETY: RUNNING acquired.
            ShutdownAction::Cancel => unsafe { self.cancel() },
            ShutdownAction::None => {}
        }
    }

    fn abort(self: Arc<Self>) {
        match self.header.state.transition_to_cancelled_by_abort() {
            AbortAction::Submit => {
                self.scheduler.queued(&self.header);
                self.scheduler.schedule(self.clone(), Queue::Next)
            }
            AbortAction::None => {}
        }
    }
}

impl<F, S> Wake for Cell<F, S>
where
    F: Future + 'static,
    S: Schedule,
{
    fn wake(self: Arc<Self>) {
        if self.header.state.transition_to_notified_by_wake() == WakeAction::Submit {
            self.scheduler.queued(&self.header);
            self.scheduler.schedule(self.clone(), Queue::Next);
        }
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.header.state.transition_to_notified_by_wake() == WakeAction::Submit {
            self.scheduler.queued(&self.header);
            self.scheduler.schedule(self.clone(), Queue::Next);
        }
    }
}

impl<F, S> Join<F::Output> for Cell<F, S>
where
    F: Future + 'static,
    S: Schedule,
{
    fn header(&self) -> &Header {
        &self.header
    }

    fn poll_join(&self, cx: &mut Context<'_>) -> Poll<Result<F::Output, JoinError>> {
        if !self.header.state.is_complete() {
            {
                let mut w = self.join_waker.lock();
                match &*w {
                    Some(old) if old.will_wake(cx.waker()) => {}
                    _ => *w = Some(cx.waker().clone()),
                }
            }
            // The task sets COMPLETE before it takes the waker: re-check after storing it.
            if !self.header.state.is_complete() {
                return Poll::Pending;
            }
        }
        // SAFETY: COMPLETE is set and this JoinHandle still holds JOIN_INTEREST, so the output is
        // ours alone.
        let stage = self
            .stage
            .with_mut(|p| unsafe { std::mem::replace(&mut *p, Stage::Consumed) });
        match stage {
            Stage::Finished(r) => Poll::Ready(r),
            _ => panic!("JoinHandle polled after it returned its output"),
        }
    }

    fn drop_join_handle(&self) {
        if self.header.state.drop_join_interest().is_err() {
            // Complete while we still held JOIN_INTEREST: the output is ours to drop, with the
            // task's id current for its destructors.
            let _id = super::set_current_id(self.header.id);
            // SAFETY: as in `poll_join`.
            let r = panic::catch_unwind(AssertUnwindSafe(|| unsafe {
                self.set_stage(Stage::Consumed)
            }));
            if let Err(payload) = r {
                forget_payload(payload);
            }
        }
        let waker = self.join_waker.lock().take();
        drop(waker);
    }

    fn into_task(self: Arc<Self>) -> Task {
        self
    }
}

#[cfg(all(test, loom))]
#[path = "cell_tests.rs"]
mod loom_tests;
