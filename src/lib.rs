//! # weir
//!
//! An async runtime for Linux servers. Every worker owns its own reactor (one epoll per worker
//! by default; see [Backends](#backends)) inside a work-stealing executor, so a task woken by a
//! worker's reactor runs on that worker.
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
//! timeout, interval), [`io`] (readiness of raw fds), [`net`] (sockets), [`fs`] (files on the
//! blocking pool), [`process`] (child processes), [`signal`] (Ctrl-C and Unix signals),
//! [`os::linux`] (Linux-only controls of a worker's reactor); with features, `serve` (axum and
//! tower services over HTTP) and `http` (what hyper, hyper-util and tower ask of a runtime).
//! The service clients are crates of their own: weir-pool, weir-postgres, weir-redis and
//! weir-grpc.
//! See `ARCHITECTURE.md` for how they fit.
//!
//! # Backends
//!
//! A worker's reactor drives epoll by default. [`runtime::Builder::backend`] (or
//! `#[weir::main(backend = "…")]`) picks another: `Backend::Mio` (portable),
//! `Backend::IoUring` (one io_uring per worker, readiness through multishot polls, the
//! kernel's own min_wait window on Linux 6.12+), or `Backend::Auto` (io_uring where the kernel
//! offers what weir needs, epoll otherwise). A runtime whose code does not pick one reads the
//! environment variable `WEIR_BACKEND` ([`runtime::BACKEND_ENV`]: `epoll`, `mio`, `io_uring`,
//! `auto`, or `io_uring!` for io_uring without fallback).
//!
//! Where the kernel refuses io_uring (`kernel.io_uring_disabled`, a seccomp filter, an old
//! kernel), an io_uring runtime runs on epoll and logs one warning per process naming the
//! cause; [`runtime::Builder::backend_strict`] makes that a build error instead.
//! [`runtime::Handle::backend`] tells which backend a runtime actually runs on.
//!
//! # Tracing targets
//!
//! weir reports what it does through the `tracing` crate; install a subscriber (e.g.
//! `tracing-subscriber` with `RUST_LOG`) to see it. The targets:
//!
//! | target | level | events |
//! |---|---|---|
//! | `weir::worker` | debug | runtime started and shut down, workers started and stopped, workers pinned to CPUs, kernel busy poll applied, the tokio compatibility runtime started and shut down |
//! | `weir::worker` | warn | a setting that could not be applied (CPU pinning, timer slack, kernel busy poll), `spawn_local` tasks leaked at shutdown |
//! | `weir::task` | error | a task panicked: the panic message (`panic`), the task id (`task_id`) and where it was spawned (`spawned_at`); also a blocking-pool thread that could not start |
//! | `weir::task` | trace | each spawn and completion (with its outcome), and a `poll` span around each poll of a task |
//! | `weir::net` | debug | connections accepted (local and peer address; for a `ShardedListener` also the NAPI id, the accepting worker and the serving worker), TCP connections made and closed (with the kernel's view of why: closed locally, peer closed first, reset…), sharded accept loops started, NAPI id assignments |
//! | `weir::net` | warn, info | accept out of file descriptors and its recovery, connections that could not be registered |
//! | `weir::serve` | debug, error | `serve` started on an address and its graceful shutdown (feature `axum`); accept errors it pauses on, make-service failures |
//! | `weir::reactor` | debug, error | reactor shut down, fallback reactor started, `epoll_pwait2` unavailable, the io_uring probe's answer; reactor errors |
//! | `weir::reactor` | warn, info | io_uring refused by the kernel and epoll used instead, with the cause (once per process); what `Backend::Auto` chose (once per process) |
//! | `weir::sched` | trace | the scheduler's per-event detail: task and I/O steals, spinning, park and unpark of workers and reactors, every reactor wait, min_wait windows and adaptive min_wait decisions |
//!
//! `RUST_LOG=weir=debug` shows lifecycle events and stays readable under load. `weir=trace`
//! adds a line per task event plus the scheduler's detail, which on a busy runtime is many lines
//! per millisecond; `RUST_LOG=weir=trace,weir::sched=off` keeps the task events without it.
//!
//! # tokio-console
//!
//! With the feature `console`, weir emits the instrumentation that
//! [console-subscriber](https://docs.rs/console-subscriber) reads, and `tokio-console` shows a
//! weir program as it shows a tokio one:
//!
//! - **tasks**: every `spawn`, `spawn_on`, `spawn_local`, `spawn_blocking` and `JoinSet` entry,
//!   the future of `block_on` (so `#[weir::main]`'s body), and `weir::serve`'s connection
//!   tasks (named `weir::serve connection`), each with its spawn location, the name given with
//!   [`task::Builder::name`], its kind (`task`, `local`, `blocking`, `block_on`), and its
//!   polls, wakes, self-wakes, waker count, busy, idle and scheduled time;
//! - **warnings**: tasks that wake themselves, tasks whose waker is lost (pending with no waker
//!   left), polls that take too long;
//! - **timers**: every [`time::sleep`], [`time::timeout`] and [`time::interval`] is a resource of
//!   kind timer with its location and duration, and the console's async-op view tells which
//!   task polls it. The sleeps of hyper's timer ([`http::WeirTimer`]) are not listed: one
//!   per request would fill the view, and
//!   console-subscriber keeps each for its retention period and scans them all on every turn
//!   ([`time::sleep_until_unlisted`] makes such a sleep).
//!
//! Turning it on:
//!
//! ```toml
//! [dependencies]
//! weir = { version = "0.1", features = ["console"] }
//! console-subscriber = "0.5"
//! ```
//!
//! ```ignore
//! #[weir::main]
//! async fn main() {
//!     console_subscriber::init(); // serves the console on 127.0.0.1:6669
//!     // ...
//! }
//! ```
//!
//! and build with `RUSTFLAGS="--cfg console_without_tokio_unstable"`: console-subscriber
//! refuses to start without that cfg (or tokio's `tokio_unstable`), which only `RUSTFLAGS` (or a
//! `.cargo/config.toml`) can set. weir itself needs neither; `tokio_unstable` is not required,
//! since it only changes tokio, which the console does not need here. Then run `tokio-console`.
//!
//! What differs from tokio's instrumentation:
//!
//! - a task's span has a `task.worker` field: the worker a `spawn_local` or `spawn_on` task is
//!   pinned to, `any` for a task that can be stolen. The console cannot show which worker ran
//!   each poll (console-subscriber reads a span's fields once, when it is created), so stealing
//!   is not visible, and neither are the per-worker reactors (registrations, events per wait,
//!   min_wait windows): [`runtime::RuntimeMetrics`] has those;
//! - a task's `task.id` field is [`task::id()`]'s number; the `block_on` future has none (it is
//!   not a task to weir either). Its wake-ups are not reported, so its wake counts stay zero;
//! - timers report their duration when created and when reset, not each tick of an interval.
//!
//! Without the feature none of it is compiled in ([`task::Builder`]'s names are still kept, for
//! stall reports and task dumps). With it,
//! each spawn creates a span and each poll and waker operation asks the subscriber whether it
//! is interested, even when no console is attached.

//!
//! # Differences from tokio
//!
//! weir behaves like tokio wherever code ported from tokio would notice: the same misuse panics
//! (`block_on` inside async code, dropping a runtime there, enter guards dropped out of order),
//! the same task semantics (the task id is set while a task's future or output is dropped, a
//! panicking poll drops its future during the unwind, an abort whose `Drop` panics reports the
//! panic), [`task::block_in_place`], [`task_local!`], [`task::unconstrained`] and
//! [`task::consume_budget`]. Where it deliberately differs:
//!
//! - **`block_in_place` on a worker that runs `spawn_local` tasks.** weir's
//!   [`task::spawn_local`] pins `!Send` tasks to a worker of a multi-thread runtime (tokio
//!   needs a `LocalSet` for them). Such a worker cannot move to another thread, so
//!   `block_in_place` runs the closure in place: the worker's queued tasks go to the other
//!   workers first, but its pinned tasks and its timers wait until the closure returns, and its
//!   ready I/O waits for an idle worker to collect it. A runtime with one worker stalls
//!   meanwhile. Elsewhere, as with tokio, the worker carries on on another thread — in weir,
//!   its epoll and its timers along with its run queue, since each worker owns a reactor.
//! - **Where a handed-over worker runs.** `block_in_place` hands the worker to a blocking-pool
//!   thread (named `{thread_name}-blocking-{n}`, not pinned to a CPU even with
//!   [`pin_workers`](runtime::Builder::pin_workers)), started past
//!   [`max_blocking_threads`](runtime::Builder::max_blocking_threads) if none is idle: a worker
//!   must never queue behind blocking closures. weir's workers otherwise run on threads of
//!   their own (tokio runs every worker on its blocking pool). The caller's thread takes the
//!   worker back if the closure returns before another thread picked it up;
//!   [`RuntimeMetrics::worker_thread_id`](runtime::RuntimeMetrics::worker_thread_id) follows
//!   the worker either way.
//! - **An empty [`Builder::name`](runtime::Builder::name)** makes `build()` return an
//!   `InvalidInput` error, like every invalid setting of weir's builder, instead of panicking
//!   in `name`.
//! - **Runtime ids** ([`Handle::id`](runtime::Handle::id)) are never reused within a process;
//!   tokio's are unique among the runtimes alive at the same time.
//! - **`enable_all`, `enable_io` and `enable_time`** are accepted and do nothing: I/O and
//!   timers are always enabled.
//!
//! Time:
//! - **`start_paused(true)` on a multi-thread runtime** makes `build()` return an
//!   `InvalidInput` error (tokio panics); `#[weir::test(start_paused = true)]` needs the
//!   current-thread flavour, checked at compile time. No `test-util` feature is needed.
//! - **[`time::advance`]** fires the timers that became due itself and yields once; tokio's
//!   yield waits for a driver turn. Either way, the sleeps that are due have completed when it
//!   returns.
//! - **`Sleep::reset`** re-arms the timer on the next poll instead of at once.
//! - **`Interval`**: a tick counts as missed as soon as `now` is past its scheduled time plus
//!   the period; tokio allows 5 ms of grace.
//! - **`WeirTimer`** (hyper) converts hyper's `std::time::Instant`s, as hyper-util's
//!   `TokioTimer` does, so under a paused clock they are off by the time paused and advanced.
//!
//! Cooperative budget — one budget with tokio's:
//! - **tokio's primitives yield on weir.** With the default feature `tokio-budget`, weir's
//!   budget *is* tokio's: every poll of a task or of a `block_on` future fills tokio's budget,
//!   and weir's I/O operations, timers and join handles spend it as `tokio::sync`'s channels
//!   and `Semaphore`, `tokio::select!` and `tokio::io`'s utilities (`empty`, `repeat`, `copy`…)
//!   do. A loop on an always-ready tokio channel yields once it is spent, and its worker's
//!   other tasks, timers and I/O run, with or without tokio compatibility, on every flavour and
//!   backend; a loop that mixes a weir read and a tokio receive spends one count.
//!   [`task::unconstrained`] and [`task::consume_budget`] act on it, as tokio's own do.
//! - **127 units per poll, not 128.** tokio has no call that sets its budget from outside its
//!   scheduler; weir refills it by dropping a guard taken from a full budget, and taking the
//!   next guard spends one unit. A poll can therefore complete 127 operations before it yields
//!   (tokio's `select_is_budget_aware` and `test_has_budget_remaining` count 128). A full 128
//!   would take a tokio scheduler poll per task poll, several times the refill's cost.
//! - **What `tokio-budget` costs:** tokio compiled with its `rt` feature only (about 3 s of
//!   CPU time in a debug build, 5.5 s in a release one; about 50 KiB of a stripped release
//!   binary), a refill per task poll and a read of tokio's thread-local per completed I/O
//!   operation (hello-http counts about 45 instructions, 0.5 %, more per request than with
//!   weir's own count; docs/production.md, "What each costs"). With `default-features =
//!   false` weir keeps a budget of its own that tokio's primitives do not see: they never
//!   yield on weir, and a loop whose every iteration is ready at once (an always-full tokio
//!   channel, `tokio::io::empty()`) holds its worker — add
//!   `weir::task::consume_budget().await` to it.
//! - As in tokio, the I/O operations spend once per completed read, write, send, receive or
//!   accept, and the readiness futures (`readable`, `writable`, `ready`) spend nothing; unlike
//!   tokio, `TcpStream::connect` spends nothing, and an operation whose fd is not ready
//!   returns `Pending` to wait for its event without looking at the budget (tokio's yields
//!   first when the budget is spent; either way the task does not run on). tokio's `Notify` spends nothing either (in
//!   tokio too): wrap `notified()` in `tokio::task::coop::cooperative` for a loop that must
//!   yield.
//! - **`yield_now`** puts the task at the back of its worker's queue, behind every task queued
//!   before it, without turning the reactor first (tokio's yield waits for a driver turn): I/O
//!   that became ready is collected at the worker's next reactor poll, at most
//!   `event_interval` task polls later.
//!
//! Runtimes and handles:
//! - **[`Handle::block_on`](runtime::Handle::block_on) on a current-thread runtime** drives
//!   the runtime (its tasks, I/O and timers) on the calling thread when no other thread does;
//!   tokio's only polls the future. So a `Handle::block_on` nested in `block_in_place` inside
//!   such a `block_on` (tokio's `yield_in_block_in_place`) would wait for this thread's own
//!   runtime: weir refuses it with tokio's panic for a nested runtime instead of hanging on a
//!   timer or a socket. After the runtime shut down, `Handle::block_on` runs its future on the
//!   calling thread on every flavour, as tokio's does (a timer armed there panics).
//! - **Misuse** panics with tokio's message word for word, followed by weir's advice in
//!   parentheses: `block_on` inside async code ("Cannot start a runtime from within a
//!   runtime…"), dropping a runtime there ("Cannot drop a runtime in a context where blocking
//!   is not allowed…"), [`task::spawn_local`] off a worker ("`spawn_local` called from outside of
//!   a `task::LocalSet` or `runtime::LocalRuntime`"), [`task::block_in_place`] on a
//!   current-thread runtime, in a task or in the future of its `Runtime::block_on` — the body
//!   of a `#[weir::test]` or of a `#[weir::main(flavor = "current_thread")]` function ("can
//!   call blocking only when running on the multi-threaded runtime"). In the future of a
//!   `Handle::block_on` it runs the closure, as tokio's does.
//! - **`JoinError`'s `Debug`** is tokio's (`JoinError::Panic(Id(7), "message", ...)`).
//!
//! Networking, files, processes:
//! - **The `ReadBuf` forms** of `poll_recv`, `poll_recv_from`, `poll_peek` and
//!   `poll_peek_from` are named `poll_*_read_buf` (feature `tokio-io`), beside the slice forms
//!   that keep the plain names: one name cannot have both signatures, and switching with the
//!   feature would break other crates in the same build.
//! - **Unix socket addresses** are std's `std::os::unix::net::SocketAddr` (tokio has a wrapper
//!   type); `UnixDatagram::bind_addr` exists, which tokio lacks.
//! - **`File::sync_all` and `sync_data`** report an error of a background write still pending,
//!   instead of keeping it for the next write or flush.
//! - **A file operation after the runtime shut down** fails as tokio's does: `Other`, "background
//!   task failed". `Debug` of [`fs::File`] is tokio's layout with weir's name
//!   (`weir::fs::File { std: File { fd: 3, .. }, .. }`). [`fs::try_exists`] is
//!   `Path::try_exists` on the blocking pool, as tokio's is (for root, a directory's permission
//!   bits hide nothing: `Ok(true)` where tokio's test, run unprivileged, expects
//!   `PermissionDenied`).
//! - **`UnixStream::connect`** completes as soon as `connect(2)` has (a Unix stream connects
//!   at once or fails); tokio's also waits for the socket to be writable. A listener closed
//!   before accepting the connection makes the first read fail with `ConnectionReset`, where
//!   tokio's connect fails itself; waiting as tokio does would cost a reactor turn per connect.
//!   [`UnixSocket`](net::UnixSocket)'s conversions refused for the wrong kind of socket fail
//!   with tokio's messages ("connect cannot be called on a datagram socket"), of kind
//!   `InvalidInput` (tokio's: `Other`).
//! - **Child processes** are waited for with a pidfd in the reactor (no SIGCHLD handler); on
//!   kernels without `pidfd_open` a wait holds a blocking-pool thread until the child exits.
//!   A child may be waited for anywhere, also in another runtime after the spawning one was
//!   dropped, as with tokio; its pipes work while the spawning runtime runs
//!   ([`process`](crate::process#where-a-child-may-be-waited-for)).
//!
//! tokio compatibility: with [`Builder::tokio_compat`](runtime::Builder::tokio_compat), each
//! worker runs inside a tokio runtime of its own, so a task started with `tokio::spawn` runs on
//! the worker that spawned it, never stolen by another, and `weir::spawn` works inside it. With
//! [`Builder::tokio_compat_threads`](runtime::Builder::tokio_compat_threads) (and on io_uring)
//! tokio's tasks run on a separate tokio runtime's threads instead, where code is outside weir
//! (`weir::spawn` panics there; weir sockets made there use the fallback reactor).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// Building and running a runtime; metrics.
pub mod runtime {
    pub use weir_executor::{
        ACCEPT_MULTISHOT_ENV, BACKEND_ENV, Builder, DEFAULT_STALL_THRESHOLD, DurationHistogram,
        EnterGuard, Handle, HistogramConfig, MAX_BUSY_POLL, MAX_HISTOGRAM_BUCKETS, MAX_MIN_WAIT,
        MAX_TIMER_SPIN, MAX_WORKERS, MIN_STACK_SIZE, MIN_WAIT_ENV, PollsWaited, RECV_MULTISHOT_ENV,
        Runtime, RuntimeId as Id, RuntimeInterval, RuntimeIntervals, RuntimeMetrics, TaskDump,
        TaskInfo, TaskState, TryCurrentError, WorkerStats,
    };
    pub use weir_reactor::metrics::EVENT_BUCKETS;
    pub use weir_reactor::os::linux::KernelBusyPoll;
    pub use weir_reactor::{Backend, MinWait, ReactorStats};

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
    pub use weir_executor::task::{
        AccessError, Builder, Id, JoinSet, LocalKey, block_in_place, consume_budget, coop, futures,
        id, try_id, unconstrained, yield_now,
    };
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

/// OS-specific controls, outside the portable API.
pub mod os {
    /// Linux-only controls of a worker's reactor
    /// ([`Handle::worker_reactor`](crate::runtime::Handle::worker_reactor)): its epoll fd and
    /// kernel busy poll on it.
    #[cfg(target_os = "linux")]
    pub mod linux {
        pub use weir_reactor::os::linux::{KernelBusyPoll, ReactorHandleExt};
    }
}

pub mod fs;

pub mod process;

pub mod signal;

#[cfg(feature = "hyper")]
#[cfg_attr(docsrs, doc(cfg(feature = "hyper")))]
pub mod http;

#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub mod prometheus;

#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub mod serve;
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub use serve::serve;

#[cfg(feature = "rustls")]
#[cfg_attr(docsrs, doc(cfg(feature = "rustls")))]
pub mod tls;

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
pub use weir_executor::task_local;
pub use weir_macros::{main, test};

/// The README's Rust examples, compiled as doctests of this crate.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
