//! Asynchronous signal handling: [`ctrl_c`] for the common case, [`unix::signal`] for any
//! signal.
//!
//! ```no_run
//! use futures::FutureExt;
//! use weir::signal::unix::{SignalKind, signal};
//!
//! #[weir::main]
//! async fn main() -> std::io::Result<()> {
//!     let mut terminate = signal(SignalKind::terminate())?;
//!     let mut hangup = signal(SignalKind::hangup())?;
//!     loop {
//!         futures::select_biased! {
//!             _ = terminate.recv().fuse() => break,
//!             _ = hangup.recv().fuse() => println!("reload the configuration"),
//!         }
//!     }
//!     println!("shutting down");
//!     Ok(())
//! }
//! ```
//!
//! # Caveat: listening replaces the default action
//! The first listener of a signal installs a process-wide handler that is never removed. From
//! then on the signal's default action (for `SIGINT`, `SIGTERM`, `SIGHUP` and most others:
//! terminating the process) does not happen any more, for the rest of the process's life,
//! even after every listener is dropped. A program that listens for Ctrl-C must therefore
//! decide itself what a Ctrl-C does, including the ones that arrive while it no longer
//! listens.
//!
//! # Where it works
//! Listeners work on every worker of a multi-thread runtime, on the current-thread runtime,
//! and outside any weir runtime (under `futures::executor::block_on`, inside tokio, on a plain
//! thread), where weir's fallback reactor drives them, as it does sockets.
//!
//! # How it works
//! A signal is one more event of the reactor that already handles the task's I/O and timers;
//! there is no signal thread.
//!
//! - The handler, installed once per signal through `signal-hook-registry` (which keeps
//!   handlers installed by others running), does only async-signal-safe work: it sets the
//!   signal's bit in a process-wide pending mask and writes the signal's eventfd.
//! - Every listener registers its own duplicate of that eventfd with the reactor of the thread
//!   that created it, so a delivery wakes each reactor that has a listener of the signal, in
//!   its own epoll.
//! - The listener that runs first drains the eventfd and *dispatches*: each pending bit bumps
//!   its signal's generation counter and wakes every listener of that signal, because an epoll
//!   that had not yet collected the event finds the drained eventfd not readable and drops it.
//! - A listener remembers the last generation it saw; `recv` completes when the generation
//!   moved. A new listener first dispatches what is pending, then starts from the current
//!   generation, so it never sees a delivery that predates it.

mod globals;
mod sys;
pub mod unix;

use std::io;

/// Waits for the next `SIGINT` (Ctrl-C in the terminal) delivered after this future was first
/// polled.
///
/// The listener is created on the first poll, so a Ctrl-C that arrives before then is not
/// seen; to be sure not to miss one, create a [`unix::Signal`] for
/// [`SignalKind::interrupt`](unix::SignalKind::interrupt) early and wait on it later.
///
/// **Caveat:** the first listener replaces the default action of `SIGINT` (terminating the
/// process) for the rest of the process's life, even after this future completes or is
/// dropped; see the [module docs](self).
///
/// # Errors
/// As [`unix::signal`] (an fd that cannot be created or registered), and an error if the
/// reactor the listener was registered with shuts down before a `SIGINT` arrives.
///
/// # Cancel safety
/// Dropping the future drops its listener: a `SIGINT` that arrives before the next call
/// creates a new one is seen by no call. To wait for Ctrl-C repeatedly (e.g. in a `select!`
/// loop) without such gaps, keep one [`unix::Signal`] and call its cancel-safe
/// [`recv`](unix::Signal::recv).
///
/// # Example
/// ```no_run
/// #[weir::main]
/// async fn main() -> std::io::Result<()> {
///     println!("serving; press Ctrl-C to stop");
///     weir::signal::ctrl_c().await?;
///     println!("stopping");
///     Ok(())
/// }
/// ```
pub async fn ctrl_c() -> io::Result<()> {
    let mut interrupt = unix::signal(unix::SignalKind::interrupt())?;
    match interrupt.recv().await {
        Some(()) => Ok(()),
        None => Err(io::Error::other(
            "the weir reactor that the Ctrl-C listener was registered with has shut down",
        )),
    }
}
