//! I/O registration and readiness: what the network types build on.

mod async_fd;
mod registration;

pub use crate::ahead::Ahead;
pub use crate::driver::ReadyEvent;
pub use async_fd::{AsyncFd, AsyncFdReadyGuard, TryIoError};
pub use registration::{Readiness, Registration};
