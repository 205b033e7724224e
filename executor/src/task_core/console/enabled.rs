//! The instrumentation tokio-console reads (feature `console`): a task is a `runtime.spawn`
//! span, a poll enters it, and the task's waker reports its clones, drops and wakes as
//! `runtime::waker` events naming the span. console-subscriber builds its task list, poll
//! counts, busy and idle times and its self-wake and lost-waker warnings from these alone.
//!
//! The span's fields: `kind` (`task`, `local`, `blocking`, `block_on`), `task.name` (from
//! [`Builder::name`](crate::task::Builder::name)), `task.id` (the same number as
//! [`task::id()`](crate::task::id)), `task.worker` (the worker a pinned task runs on, `any`
//! for a stealable one) and `loc.file`, `loc.line`, `loc.col` (the spawn location).
//!
//! The span lives as long as the future: it closes when the future is dropped (completion,
//! cancellation), not when the last waker goes, so the console sees the task end when it does.
//! Waker events name the span by its id, kept in the header for the waker's use.
//!
//! Without the feature none of this is compiled (`stub.rs`): the cell holds no span, and the
//! waker is `std`'s `Waker::from(Arc<Cell>)`.

use std::cell::UnsafeCell;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::Location;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, RawWaker, Wake, Waker};

use tracing::Span;
use tracing::span::Entered;

use crate::task_core::{Id, Kind, Placement, Runnable};

/// The id of a task's span, kept in its header for its waker's events.
pub(crate) type SpanId = Option<tracing::span::Id>;

/// A task's `runtime.spawn` span while its future lives.
///
/// # Invariant
/// Accessed only by the holder of the task's `RUNNING` bit, as the future is.
pub(crate) struct TaskSpan(UnsafeCell<Option<Span>>);

impl TaskSpan {
    /// The `runtime.spawn` span of a new task, and its id for the task's header.
    pub(crate) fn new(
        id: Id,
        kind: Kind,
        placement: Placement,
        location: &'static Location<'static>,
        name: Option<&str>,
    ) -> (TaskSpan, SpanId) {
        let kind = match (kind, placement) {
            (Kind::Blocking, _) => "blocking",
            (Kind::Task, Placement::Local(_)) => "local",
            (Kind::Task, _) => "task",
        };
        let worker = placement.worker();
        let span = tracing::trace_span!(
            target: "weir::task",
            parent: None,
            "runtime.spawn",
            kind,
            task.name = name.unwrap_or_default(),
            task.id = id.as_u64(),
            task.worker = %WorkerField(worker),
            loc.file = location.file(),
            loc.line = location.line(),
            loc.col = location.column(),
        );
        let span_id = span.id();
        (TaskSpan(UnsafeCell::new(Some(span))), span_id)
    }

    /// Enters the span for one poll (none once it is closed).
    ///
    /// # Safety
    /// The caller holds the task's `RUNNING` bit until the guard drops.
    pub(crate) unsafe fn enter(&self) -> Option<Entered<'_>> {
        // SAFETY: exclusive access is the caller's contract.
        unsafe { (*self.0.get()).as_ref() }.map(Span::enter)
    }

    /// Closes the span: the task's future is gone.
    ///
    /// # Safety
    /// The caller holds the task's `RUNNING` bit (or has exclusive access, as to the stage).
    pub(crate) unsafe fn close(&self) {
        // SAFETY: exclusive access is the caller's contract.
        drop(unsafe { (*self.0.get()).take() });
    }
}

/// A `Waker` borrowing `task`'s reference instead of owning one, whose clones, drops and wakes
/// are reported to the console.
pub(crate) fn waker_ref<T>(task: &Arc<T>) -> ManuallyDrop<Waker>
where
    T: Runnable + Wake,
{
    let raw = RawWaker::new(Arc::as_ptr(task).cast(), traced_waker::vtable::<T>());
    // SAFETY: the vtable's functions treat the data pointer as one strong count of an
    // `Arc<T>`, which is what `Arc::as_ptr` points into. The resulting `Waker` is never
    // dropped (`ManuallyDrop`) and never outlives `task`'s borrow: it borrows `task`'s
    // reference.
    ManuallyDrop::new(unsafe { Waker::from_raw(raw) })
}

/// The task's waker with the console's waker events: the data pointer is an `Arc<T>`'s,
/// holding one strong count (as `std`'s `Waker::from(Arc)` does).
mod traced_waker {
    use std::mem::ManuallyDrop;
    use std::sync::Arc;
    use std::task::{RawWaker, RawWakerVTable, Wake};

    use super::{WakerOp, waker_op};
    use crate::task_core::Runnable;

    pub(super) fn vtable<T: Runnable + Wake>() -> &'static RawWakerVTable {
        &RawWakerVTable::new(clone::<T>, wake::<T>, wake_by_ref::<T>, drop::<T>)
    }

    /// # Safety
    /// `p` is the data pointer of a waker of this vtable, which holds a strong count.
    unsafe fn clone<T: Runnable + Wake>(p: *const ()) -> RawWaker {
        let task = p.cast::<T>();
        // SAFETY: the waker holds a strong count, so the task is alive; the new waker gets
        // its own count.
        unsafe { Arc::increment_strong_count(task) };
        // SAFETY: alive, as above.
        waker_op(unsafe { &*task }.header().span_id.as_ref(), WakerOp::Clone);
        RawWaker::new(p, vtable::<T>())
    }

    /// # Safety
    /// As `clone`; the waker's count is consumed.
    unsafe fn wake<T: Runnable + Wake>(p: *const ()) {
        // SAFETY: the waker's strong count is moved into this `Arc`.
        let task = unsafe { Arc::from_raw(p.cast::<T>()) };
        waker_op(task.header().span_id.as_ref(), WakerOp::Wake);
        Wake::wake(task);
    }

    /// # Safety
    /// As `clone`; the waker keeps its count.
    unsafe fn wake_by_ref<T: Runnable + Wake>(p: *const ()) {
        // SAFETY: borrows the waker's count; `ManuallyDrop` leaves it untouched.
        let task = ManuallyDrop::new(unsafe { Arc::from_raw(p.cast::<T>()) });
        waker_op(task.header().span_id.as_ref(), WakerOp::WakeByRef);
        Wake::wake_by_ref(&*task);
    }

    /// # Safety
    /// As `clone`; the waker's count is released.
    unsafe fn drop<T: Runnable + Wake>(p: *const ()) {
        let task = p.cast::<T>();
        // SAFETY: the waker's count keeps the task alive until released below.
        waker_op(unsafe { &*task }.header().span_id.as_ref(), WakerOp::Drop);
        // SAFETY: releases the count this waker held.
        unsafe { Arc::decrement_strong_count(task) };
    }
}

/// The `task.worker` field: the worker a pinned task runs on, `any` for a stealable one.
struct WorkerField(Option<usize>);

impl std::fmt::Display for WorkerField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(w) => w.fmt(f),
            None => f.write_str("any"),
        }
    }
}

/// A waker operation, as console-subscriber names it.
#[derive(Clone, Copy)]
enum WakerOp {
    Clone,
    Drop,
    Wake,
    WakeByRef,
}

/// Reports a waker operation on the task whose span is `span`.
#[inline]
fn waker_op(span: Option<&tracing::span::Id>, op: WakerOp) {
    let Some(span) = span else { return };
    let op = match op {
        WakerOp::Clone => "waker.clone",
        WakerOp::Drop => "waker.drop",
        WakerOp::Wake => "waker.wake",
        WakerOp::WakeByRef => "waker.wake_by_ref",
    };
    tracing::trace!(target: "runtime::waker", op, task.id = span.into_u64());
}

/// Pins `$future`, the future of a `block_on` call at `$location`, inside a [`BlockOnTask`]
/// (what the console sees as a task of kind `block_on`), rebinding `$future` to it. A macro,
/// as the stub's is, so that without the feature `block_on` polls the caller's future itself:
/// one type, and the same code as without the console.
macro_rules! pin_block_on_task {
    ($future:ident, $location:expr) => {
        let $future = ::std::pin::pin!($future);
        let $future = ::std::pin::pin!($crate::task_core::console::BlockOnTask::new(
            $future, $location
        ));
    };
}
pub(crate) use pin_block_on_task;

/// The future of a `block_on` call, seen by the console as a task of kind `block_on`.
pub(crate) struct BlockOnTask<'a, F> {
    span: Span,
    future: Pin<&'a mut F>,
}

impl<'a, F: Future> BlockOnTask<'a, F> {
    pub(crate) fn new(future: Pin<&'a mut F>, location: &'static Location<'static>) -> Self {
        let name = crate::task_core::name::take_name();
        let span = tracing::trace_span!(
            target: "weir::task",
            parent: None,
            "runtime.spawn",
            kind = "block_on",
            task.name = name.as_deref().unwrap_or("block_on"),
            loc.file = location.file(),
            loc.line = location.line(),
            loc.col = location.column(),
        );
        BlockOnTask { span, future }
    }
}

impl<F: Future> Future for BlockOnTask<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let _entered = this.span.enter();
        this.future.as_mut().poll(cx)
    }
}
