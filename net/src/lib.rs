//! weir's network types: TCP, UDP and Unix-domain sockets whose readiness comes from the
//! reactor of the worker they were created on (except a [`TcpListener`]'s accepted
//! connections, which a multi-worker runtime spreads over its workers' reactors, each going to
//! the less loaded of two), and [`ShardedListener`], which serves one address on every worker
//! and keeps each NAPI id (NIC receive queue) on one worker.
//!
//! The API follows tokio's `tokio::net` names and semantics, so porting is mechanical.
//! Every stream type implements `futures_io::AsyncRead`/`AsyncWrite`; with feature `tokio-io`
//! also tokio's, and with feature `hyper` hyper 1.x's `rt::Read`/`rt::Write`; with feature
//! `hyper-client` they implement hyper-util's client `Connection` too.
//!
//! # Outside a weir runtime
//! Created outside any weir runtime (inside tokio, `futures::executor::block_on`, smol, a
//! plain thread), a socket registers with weir's fallback reactor — one background thread
//! started on first use — and works under that executor.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod addr;
#[cfg(feature = "hyper-client")]
#[cfg_attr(docsrs, doc(cfg(feature = "hyper-client")))]
mod hyper_client;
mod io;
pub mod shard;
pub mod tcp;
#[cfg(feature = "tokio-io")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio-io")))]
mod tokio_io;
mod udp;
pub mod unix;

pub use addr::{ToSocketAddrs, lookup_host};
#[cfg(feature = "hyper-client")]
#[cfg_attr(docsrs, doc(cfg(feature = "hyper-client")))]
pub use hyper_client::HttpInfo;
pub use shard::{NapiStats, Serving, ShardStats, ShardedListener, ShardedListenerBuilder};
pub use tcp::{TcpListener, TcpSocket, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixDatagram, UnixListener, UnixSocket, UnixStream};
