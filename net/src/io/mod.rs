//! What the socket types share: the readiness-driven operations on a registered socket
//! (`AsyncFd`), the I/O trait implementations of the stream types ([`TcpStream`],
//! [`UnixStream`]) and their halves, and the ownership logic of owned write halves.
//!
//! Every operation goes through `Registration::poll_io`/`poll_stream_io`/`try_io`/`async_io`,
//! which clear the observed readiness when the socket returns `WouldBlock` — and, for stream
//! reads and writes, after a short transfer, which saves the `EAGAIN` syscall. Writes use
//! `send(2)` with `MSG_NOSIGNAL`, so a closed peer is reported as `EPIPE` and never raises
//! `SIGPIPE`.
//!
//! `readiness` holds what every socket type has (waiting for readiness), `ops` the reads,
//! writes and shutdown of stream sockets, `traits` the trait implementations built on them,
//! `owned` the write half's share of a split stream, and `uninit` the reads into
//! uninitialised memory of hyper's and tokio's read traits (tokio's own are
//! `crate::tokio_io`'s).
//!
//! [`TcpStream`]: crate::TcpStream
//! [`UnixStream`]: crate::UnixStream

mod ops;
mod owned;
mod readiness;
mod traits;
#[cfg(any(feature = "tokio-io", feature = "hyper"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "tokio-io", feature = "hyper"))))]
pub(crate) mod uninit;

pub(crate) use ops::{
    poll_read, poll_read_vectored, poll_write, poll_write_vectored, read_ahead_or, shutdown_write,
    stream_try_methods, try_read, try_read_vectored, try_write, try_write_vectored,
};
pub(crate) use owned::OwnedWrite;
pub(crate) use readiness::{poll_ready, readiness_methods, ready};
pub(crate) use traits::{StreamIo, fd_traits, half_methods, poll_shutdown, stream_io_impls};
