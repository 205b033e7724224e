//! # weir
//!
//! An async runtime for Linux servers. Every worker owns its own reactor (one epoll per worker)
//! inside a work-stealing executor, so a task woken by a worker's epoll runs on that worker.
//! Blocking waits can gather events for a *min_wait* window at medium load, idle workers can
//! busy-poll before they sleep, and timers are nanosecond-precise (`epoll_pwait2`, timer slack
//! 1 ns).
//!
//! ```
//! use std::time::Duration;
//!
//! #[weir::main(workers = 2)]
//! async fn main() {
//!     let handles: Vec<_> = (0..4u64)
//!         .map(|i| weir::spawn(async move {
//!             weir::time::sleep(Duration::from_micros(100 * i)).await;
//!             i * 2
//!         }))
//!         .collect();
//!     let mut sum = 0;
//!     for h in handles {
//!         sum += h.await.unwrap();
//!     }
//!     assert_eq!(sum, 12);
//! }
//! ```
//!
//! The parts: [`runtime`] (build and run), [`task`] (spawn, join, yield), [`time`] (sleep,
//! timeout, interval), [`io`] (readiness of raw fds), [`signal`] (Ctrl-C and Unix signals).
//! See `ARCHITECTURE.md` for how they fit.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

/// Building and running a runtime; metrics.
pub mod runtime {
    pub use weir_executor::{
        Builder, EnterGuard, Handle, MAX_BUSY_POLL, MAX_MIN_WAIT, MAX_TIMER_SPIN, MAX_WORKERS,
        MIN_STACK_SIZE, Runtime, RuntimeMetrics, TryCurrentError, WorkerStats,
    };
    pub use weir_reactor::metrics::EVENT_BUCKETS;
    pub use weir_reactor::{Backend, KernelBusyPoll, MinWait, ReactorStats};

    /// The CPUs this thread may run on; see [`Builder::pin_workers`].
    ///
    /// # Errors
    /// The OS error of `sched_getaffinity`.
    pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
        weir_reactor::thread::allowed_cpus()
    }

    /// Pins the calling thread to `cpu` (e.g. a load generator or client thread in a test).
    ///
    /// # Errors
    /// The OS error of `sched_setaffinity`.
    pub fn pin_thread_to_cpu(cpu: usize) -> std::io::Result<()> {
        weir_reactor::thread::pin_to_cpu(cpu)
    }

    /// The index of the worker running the current task; `None` off the workers.
    pub fn worker_index() -> Option<usize> {
        weir_executor::current_worker_index()
    }
}

/// Spawning tasks and waiting for them.
pub mod task {
    pub use weir_executor::task::{Id, JoinSet, id, try_id, yield_now};
    pub use weir_executor::{
        AbortHandle, JoinError, JoinHandle, spawn, spawn_blocking, spawn_local,
    };
}

/// Timers with nanosecond resolution.
pub mod time {
    pub use weir_reactor::time::*;
}

/// Readiness-based I/O on raw fds.
pub mod io {
    pub use weir_reactor::{Interest, Ready};

    /// Unix-specific I/O.
    pub mod unix {
        pub use weir_reactor::io::{AsyncFd, AsyncFdReadyGuard, TryIoError};
    }
}

/// TCP, UDP and Unix-domain sockets, and NAPI-sharded accept.
pub mod net {
    pub use weir_net::*;
}

pub mod signal;

#[cfg(feature = "hyper")]
pub mod compat;

#[cfg(feature = "axum")]
pub mod serve;
#[cfg(feature = "axum")]
pub use serve::serve;

pub use task::spawn;

/// Checked by `#[weir::main(tokio_compat = true)]`: the feature is enabled.
#[cfg(feature = "tokio-compat")]
#[doc(hidden)]
#[macro_export]
macro_rules! __require_tokio_compat {
    () => {};
}

/// Checked by `#[weir::main(tokio_compat = true)]`: the feature is missing.
#[cfg(not(feature = "tokio-compat"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __require_tokio_compat {
    () => {
        ::core::compile_error!(
            "`tokio_compat = true` needs weir's `tokio-compat` feature: in Cargo.toml, \
             weir = { version = \"…\", features = [\"tokio-compat\"] }"
        );
    };
}
pub use weir_macros::{main, test};
