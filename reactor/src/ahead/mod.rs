//! The queues io_uring's completion fast paths fill ahead of the program: bytes received for a
//! stream ([`ReadAhead`]) and connections accepted for a listener ([`AcceptQueue`]). Kept apart
//! from `io` and `sys`, which both use them, so neither imports the other.

pub mod accept_queue;
pub mod read_ahead;

pub use accept_queue::AcceptQueue;
pub use read_ahead::ReadAhead;

/// What kind of source a registration is: a stream socket or a listener may get a completion
/// fast path on io_uring (when it is on), anything else is polled for readiness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SourceKind {
    Plain,
    Stream,
    Listener,
}

/// The queue a fast path fills for a registration, if it has one.
#[derive(Debug, Clone)]
pub(crate) enum Ahead {
    None,
    Read(std::sync::Arc<ReadAhead>),
    Accept(std::sync::Arc<AcceptQueue>),
}
