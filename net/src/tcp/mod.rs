//! TCP: [`TcpListener`], [`TcpStream`], [`TcpSocket`], and the halves of a split stream.
//!
//! The types follow `tokio::net`'s names and semantics. A socket is registered with the reactor
//! of the thread that creates it (a weir worker's own reactor, or the fallback reactor outside
//! any weir runtime), edge-triggered; operations that hit `WouldBlock` clear the readiness they
//! observed and wait for the next event.

mod listener;
mod socket;
mod split;
mod split_owned;
mod stream;

pub use listener::{Incoming, TcpListener};
pub use socket::TcpSocket;
pub use split::{ReadHalf, WriteHalf};
pub use split_owned::{OwnedReadHalf, OwnedWriteHalf, ReuniteError};
pub use stream::{IntoStdError, TcpStream};
