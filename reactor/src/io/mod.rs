//! I/O registration and readiness: what the network types build on.

mod async_fd;
mod registration;
mod scheduled;

pub use async_fd::{AsyncFd, AsyncFdReadyGuard, TryIoError};
pub use registration::{Readiness, Registration};
pub use scheduled::ReadyEvent;
pub(crate) use scheduled::ScheduledIo;
