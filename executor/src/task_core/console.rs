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
//! Without the feature none of this is compiled: the cell holds no span, and the waker is
//! `std`'s `Waker::from(Arc<Cell>)`.

use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::task::{Context, Poll};

use tracing::Span;
use tracing::span::Id as SpanId;

use super::{Id, Kind, Placement};

/// The `runtime.spawn` span of a new task.
pub(crate) fn spawn_span(
    id: Id,
    kind: Kind,
    placement: Placement,
    location: &'static Location<'static>,
    name: Option<&str>,
) -> Span {
    let kind = match (kind, placement) {
        (Kind::Blocking, _) => "blocking",
        (Kind::Task, Placement::Local(_)) => "local",
        (Kind::Task, _) => "task",
    };
    let worker = placement.worker();
    tracing::trace_span!(
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
    )
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
pub(crate) enum WakerOp {
    Clone,
    Drop,
    Wake,
    WakeByRef,
}

/// Reports a waker operation on the task whose span is `span`.
#[inline]
pub(crate) fn waker_op(span: Option<&SpanId>, op: WakerOp) {
    let Some(span) = span else { return };
    let op = match op {
        WakerOp::Clone => "waker.clone",
        WakerOp::Drop => "waker.drop",
        WakerOp::Wake => "waker.wake",
        WakerOp::WakeByRef => "waker.wake_by_ref",
    };
    tracing::trace!(target: "runtime::waker", op, task.id = span.into_u64());
}

/// The future of a `block_on` call, seen by the console as a task of kind `block_on`.
pub(crate) struct BlockOnTask<'a, F> {
    span: Span,
    future: Pin<&'a mut F>,
}

impl<'a, F: Future> BlockOnTask<'a, F> {
    pub(crate) fn new(future: Pin<&'a mut F>, location: &'static Location<'static>) -> Self {
        let name = super::name::take_name();
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
