//! Tasks as tokio-console sees them — the one module of this crate that names the feature
//! `console`. With it, `enabled.rs`: a task's span, its poll's entry, its waker's events, the
//! `block_on` future as a task. Without it, `stub.rs`: the same API, zero bytes and no code,
//! so the task cell (`cell.rs`) and `Handle::block_on` read the same either way.

#[cfg(feature = "console")]
mod enabled;
#[cfg(not(feature = "console"))]
mod stub;

#[cfg(feature = "console")]
pub(crate) use enabled::{BlockOnTask, SpanId, TaskSpan, pin_block_on_task, waker_ref};
#[cfg(not(feature = "console"))]
pub(crate) use stub::{SpanId, TaskSpan, pin_block_on_task, waker_ref};
