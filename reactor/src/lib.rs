//! weir's reactor: the driver contract and its backends, fd registration and readiness,
//! wake-up of a parked worker, and nanosecond timers.
//!
//! # How it works
//!
//! Every worker of a weir runtime owns one driver: a backend's poller (an epoll instance by
//! default, a mio poller or an io_uring ring when asked for; see [`Backend`]) with a wake
//! handle, a slab of registrations and a timer queue. The worker is the only thread that waits
//! on it. Everyone else holds a [`ReactorHandle`], through which they register fds (from any
//! thread: `epoll_ctl` and mio's registry are thread-safe, and on io_uring the registration
//! goes into the reactor's inbox, which its owner drains), arm timers and wake the owner.
//!
//! * **Registration.** An fd is registered once, edge-triggered, under a token made of its slab
//!   index and a generation. Its [`ScheduledIo`](crate::io) entry holds the readiness bits the
//!   driver has seen, a tick bumped by each event, and the wakers of the tasks waiting in each
//!   direction. Operations that hit `WouldBlock` clear the readiness they observed — unless the
//!   tick moved, i.e. a new event arrived in between.
//! * **Waiting.** The driver's park computes its timeout from the earliest timer, blocks in the
//!   backend (with the [`min_wait`] window if configured), marks readiness for the
//!   collected events and wakes their tasks. Because a worker wakes tasks from its own thread,
//!   the executor queues them on that worker.
//! * **Waking.** An unpark signals the wake handle (an eventfd on epoll and
//!   io_uring, a `mio::Waker` on mio) only if the owner is actually blocked (see
//!   `park_state.rs`); waking a running worker costs no syscall.
//! * **Timers.** An indexed binary heap of nanosecond deadlines per reactor (see [`time`]).
//! * **Backends.** One contract, checked by the compiler, that the epoll, mio and io_uring
//!   backends implement (`sys/`), with the capabilities each has: mio's timeouts are whole
//!   milliseconds, and a ring's events cannot be collected by another thread (no I/O
//!   stealing; for an owner stuck in a task, another thread can still ask the kernel which of
//!   the fds its tasks wait on are ready: a readiness rescue). The io_uring machinery is a
//!   crate of its own, `weir-io-uring-compat`; its opt-in completion fast paths take a
//!   stream's bytes or a listener's connections ahead of the program, which reads then take
//!   through one hook ([`io::Ahead`]). Linux-only controls of a reactor (its epoll fd, kernel
//!   busy poll) are in [`os::linux`].
//!
//! # Two faces
//!
//! What this documentation shows is the API a user reaches, through weir or directly: handles
//! and their counters, readiness and registrations, timers, the cooperative budget's leaf
//! operations, the Linux controls. The executor's side of the contract — the driver a worker
//! owns and parks, waking and shutting a reactor down, I/O stealing, nesting in another event
//! loop, filling the budget per task poll — is one module hidden from these docs,
//! `for_executor`, which lists every such item; it is for `weir-executor` alone and not a
//! stable API.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod ahead;
mod config;
mod context;
pub mod coop;
mod driver;
pub mod fallback;
#[doc(hidden)]
pub mod for_executor;
pub mod io;
pub mod metrics;
pub mod min_wait;
pub mod os;
mod park_state;
mod ready;
mod sys;
pub mod thread;
pub mod time;

pub use driver::ReactorHandle;
pub use io::{AsyncFd, AsyncFdReadyGuard, ReadyEvent, Registration};
pub use metrics::ReactorStats;
pub use min_wait::MinWait;
pub use ready::{Direction, Interest, Ready};
pub use sys::Backend;
/// Fault injection for the io_uring backend's tests (ring sizes). Not a stable API.
#[cfg(all(feature = "test-hooks", target_os = "linux"))]
#[doc(hidden)]
pub use sys::uring::{UringDebug, UringTestHooks, set_test_hooks as set_uring_test_hooks};
