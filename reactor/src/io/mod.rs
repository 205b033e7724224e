//! I/O registration and readiness: what the network types build on.

pub mod accept_queue;
mod async_fd;
pub mod read_ahead;
mod registration;

pub use crate::driver::ReadyEvent;
pub use accept_queue::AcceptQueue;
pub use async_fd::{AsyncFd, AsyncFdReadyGuard, TryIoError};
pub use read_ahead::ReadAhead;
pub use registration::{Readiness, Registration};

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
