//! Tasks without the feature `console`: the same API as `enabled.rs`, and nothing in it. The
//! span and its id are zero bytes, entering and closing compile to nothing, the waker is
//! `std`'s `Waker::from(Arc)`, and a `block_on` future is polled as it is.

use std::mem::ManuallyDrop;
use std::panic::Location;
use std::sync::Arc;
use std::task::{Wake, Waker};

use crate::task_core::{Id, Kind, Placement, Runnable};

/// Nothing: a task has no span to name.
pub(crate) type SpanId = ();

/// Nothing: the console is compiled out.
pub(crate) struct TaskSpan;

/// What [`TaskSpan::enter`] returns: nothing to leave.
pub(crate) struct NotEntered;

impl TaskSpan {
    #[inline(always)]
    pub(crate) fn new(
        _id: Id,
        _kind: Kind,
        _placement: Placement,
        _location: &'static Location<'static>,
        _name: Option<&str>,
    ) -> (TaskSpan, SpanId) {
        (TaskSpan, ())
    }

    /// # Safety
    /// None needed here; the contract is `enabled.rs`'s.
    #[inline(always)]
    pub(crate) unsafe fn enter(&self) -> NotEntered {
        NotEntered
    }

    /// # Safety
    /// None needed here; the contract is `enabled.rs`'s.
    #[inline(always)]
    pub(crate) unsafe fn close(&self) {}
}

/// A `Waker` borrowing `task`'s reference instead of owning one.
///
/// Its clones are real `Waker`s (they increment the count through `Wake`).
#[inline(always)]
pub(crate) fn waker_ref<T>(task: &Arc<T>) -> ManuallyDrop<Waker>
where
    T: Runnable + Wake,
{
    // The header keeps its (empty) span id in both builds; nothing here names a task.
    let () = task.header().span_id;
    // SAFETY: `Arc::from_raw` re-creates an `Arc` from the pointer of a live one without
    // touching the count; `Waker::from` keeps that pointer as its data. The resulting `Waker` is
    // never dropped (`ManuallyDrop`) and never outlives `task`'s borrow, so the count it "owns"
    // is never decremented: it borrows `task`'s reference.
    let arc = unsafe { Arc::from_raw(Arc::as_ptr(task)) };
    ManuallyDrop::new(Waker::from(arc))
}

/// Pins `$future`, rebinding it: no task for the console (`$location` is not evaluated).
macro_rules! pin_block_on_task {
    ($future:ident, $location:expr) => {
        let $future = ::std::pin::pin!($future);
    };
}
pub(crate) use pin_block_on_task;
