//! I/O registration and readiness: what the network types build on.

mod async_fd;
pub mod read_ahead;
mod registration;

pub use crate::driver::ReadyEvent;
pub use async_fd::{AsyncFd, AsyncFdReadyGuard, TryIoError};
pub use read_ahead::ReadAhead;
pub use registration::{Readiness, Registration};
