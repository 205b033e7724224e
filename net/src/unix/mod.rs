//! Unix-domain sockets: [`UnixListener`], [`UnixStream`] (with its split halves),
//! [`UnixDatagram`], and [`UnixSocket`] to set a socket up before it becomes one of those.
//!
//! The types follow `tokio::net`'s Unix types in names and semantics. Every socket is
//! non-blocking and close-on-exec, and registers with the reactor of the thread that creates
//! it (a worker's own reactor, or weir's fallback reactor outside any runtime). Writes on
//! streams and datagram sockets pass `MSG_NOSIGNAL`, so a closed peer is reported as an
//! `EPIPE` error ([`std::io::ErrorKind::BrokenPipe`]) and never raises `SIGPIPE`.

mod addr;
mod datagram;
mod listener;
mod socket;
mod split;
mod split_owned;
mod stream;
mod ucred;

pub use datagram::UnixDatagram;
pub use listener::{Incoming, UnixListener};
pub use socket::UnixSocket;
pub use split::{ReadHalf, WriteHalf};
pub use split_owned::{OwnedReadHalf, OwnedWriteHalf, ReuniteError};
pub use stream::UnixStream;
pub use ucred::UCred;

/// The address of a Unix-domain socket: a path, an abstract name, or unnamed.
///
/// This is the standard library's type; `as_pathname`, `is_unnamed` and (through
/// `std::os::linux::net::SocketAddrExt`) `as_abstract_name` inspect it.
pub use std::os::unix::net::SocketAddr;
