//! The tokio runtimes a weir runtime owns (feature `tokio-compat`), so that library code
//! calling `tokio::spawn`, `tokio::time`, `tokio::net` or `tokio::fs` finds a tokio runtime
//! instead of panicking. Two modes ([`TokioMode`]):
//!
//! - **per worker** (the default of `Builder::tokio_compat`): every worker owns a tokio
//!   current-thread runtime and runs inside it (`worker/nested.rs`). tokio's tasks spawned on a
//!   worker, tokio's timers and sockets created there are driven by that worker's thread, next
//!   to the weir tasks that use them. Threads that are not workers (`block_on`, the blocking
//!   pool, `Runtime::enter`) enter worker 0's tokio runtime.
//! - **beside the workers** (`Builder::tokio_compat_threads(n)`): one tokio multi-thread
//!   runtime of `n` threads, entered on every weir thread. Each event crossing between the two
//!   is a cross-thread wake-up; it is kept for libraries that need tokio's multi-thread runtime
//!   (`tokio::task::block_in_place`), and for io_uring, whose ring cannot be waited on from
//!   inside tokio.
//!
//! This module is the one place that names the feature: with it, `enabled.rs` holds the
//! runtimes; without it, `stub.rs` has the same API with nothing inside (its types that stand
//! for a tokio runtime have no values), so the rest of the executor — the worker loop's nested
//! mode included — compiles unchanged either way and never runs a tokio branch.
//!
//! tokio's cooperative budget is not this module's: every task poll fills it whether a tokio
//! runtime runs or not (`weir_reactor::coop`).

#[cfg(feature = "tokio-compat")]
mod enabled;
#[cfg(not(feature = "tokio-compat"))]
mod stub;

#[cfg(feature = "tokio-compat")]
pub(crate) use enabled::*;
#[cfg(not(feature = "tokio-compat"))]
pub(crate) use stub::*;

/// Whether this build has the `tokio-compat` feature (else the builder refuses tokio modes).
pub(crate) const ENABLED: bool = cfg!(feature = "tokio-compat");

/// Which tokio runtimes a weir runtime gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum TokioMode {
    #[default]
    Off,
    /// A tokio current-thread runtime inside each worker.
    PerWorker,
    /// A tokio multi-thread runtime of this many threads beside the workers.
    Sidecar(usize),
}
