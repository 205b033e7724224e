//! [`Builder`]: the settings of a [`Runtime`](crate::Runtime) and their defaults. Checking them and building
//! the runtime is `build.rs`.
//!
//! One idea: every setting with its default, its setter and its documentation, in one place,
//! so that a reader compares the knobs where they are defined (nearly half of the file
//! is their rustdoc).

mod build;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use weir_config::Flavor;
use weir_reactor::os::linux::KernelBusyPoll;
use weir_reactor::{Backend, MinWait};

use crate::config::Hooks;
use crate::recorder::HistogramConfig;
use crate::tokio_runtimes::TokioMode;

/// The environment variable that chooses the reactor backend of a runtime whose builder was
/// not given one ([`Builder::backend`]): `epoll`, `mio`, `io_uring` or `auto`, or `io_uring!`
/// for io_uring without the fallback to epoll ([`Builder::backend_strict`]). Read by every
/// [`Builder::build`]; unset or empty means the default backend, any other value fails the
/// build with `InvalidInput`.
pub const BACKEND_ENV: &str = "WEIR_BACKEND";

/// The environment variable that sets the min_wait policy when the program did not
/// ([`Builder::min_wait`], [`Builder::min_wait_adaptive`], [`Builder::min_wait_policy`]):
/// `off` (or `0`), a fixed window such as `200us` or `1ms`, or `adaptive:500us` (an adaptive
/// window of at most that). Unset or empty means off; any other value fails the build with
/// `InvalidInput`. It lets a deployment try a window without a rebuild.
pub const MIN_WAIT_ENV: &str = "WEIR_MIN_WAIT";

/// The environment variable that turns io_uring's receive fast path on (`1`) or off (`0`) when
/// [`Builder::io_uring_recv_multishot`] was not called.
pub const RECV_MULTISHOT_ENV: &str = "WEIR_URING_RECV_MULTISHOT";

/// The environment variable that turns io_uring's accept fast path on (`1`) or off (`0`) when
/// [`Builder::io_uring_accept_multishot`] was not called.
pub const ACCEPT_MULTISHOT_ENV: &str = "WEIR_URING_ACCEPT_MULTISHOT";

// The limits are shared with `#[weir::main]`, which checks its arguments against them.
pub use weir_config::{MAX_BUSY_POLL, MAX_MIN_WAIT, MAX_TIMER_SPIN, MAX_WORKERS, MIN_STACK_SIZE};

/// Builds a [`Runtime`](crate::Runtime) with custom settings.
///
/// ```
/// use std::time::Duration;
/// let rt = weir_executor::Builder::new_multi_thread()
///     .workers(2)
///     .min_wait(Duration::from_micros(200))
///     .busy_poll(Duration::from_micros(50))
///     .build()?;
/// assert_eq!(rt.block_on(async { 1 + 1 }), 2);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// Invalid values are reported by [`build`](Self::build) as `InvalidInput` errors that name the
/// setting and the value.
#[derive(Clone)]
pub struct Builder {
    flavor: Flavor,
    workers: Option<usize>,
    /// `None`: not set; `WEIR_MIN_WAIT` decides, else off.
    min_wait: Option<MinWait>,
    busy_poll: Duration,
    /// Set by [`Builder::backend`]; `None`: `WEIR_BACKEND`, else the default.
    backend: Option<Backend>,
    backend_strict: bool,
    /// Set by [`Builder::io_uring_recv_multishot`]; `None`: `WEIR_URING_RECV_MULTISHOT`.
    recv_multishot: Option<bool>,
    /// Set by [`Builder::io_uring_accept_multishot`]; `None`: `WEIR_URING_ACCEPT_MULTISHOT`.
    accept_multishot: Option<bool>,
    thread_name: String,
    thread_stack_size: Option<usize>,
    event_interval: u32,
    global_queue_interval: u32,
    max_blocking_threads: usize,
    blocking_keep_alive: Duration,
    max_events: usize,
    epoll_pwait2: bool,
    lifo_slot: bool,
    kernel_busy_poll: Option<KernelBusyPoll>,
    kernel_busy_poll_strict: bool,
    pin_workers: bool,
    timer_spin: Duration,
    tokio_compat: TokioMode,
    name: Option<String>,
    hooks: Hooks,
    start_paused: bool,
    stall_threshold: Option<Duration>,
    stall_backtrace: bool,
    dump_signal: Option<i32>,
    /// `None`: polls are timed where the cycle counter is usable.
    time_polls: Option<bool>,
    poll_time_histogram: HistogramConfig,
    schedule_delay_histogram: HistogramConfig,
}

/// The default of [`Builder::stall_threshold`].
pub const DEFAULT_STALL_THRESHOLD: Duration = Duration::from_millis(100);

impl Builder {
    fn new(flavor: Flavor) -> Builder {
        Builder {
            flavor,
            workers: None,
            min_wait: None,
            busy_poll: Duration::ZERO,
            backend: None,
            backend_strict: false,
            recv_multishot: None,
            accept_multishot: None,
            thread_name: "weir".to_string(),
            thread_stack_size: None,
            event_interval: 61,
            global_queue_interval: 31,
            max_blocking_threads: 512,
            blocking_keep_alive: Duration::from_secs(10),
            max_events: 1024,
            epoll_pwait2: true,
            lifo_slot: true,
            kernel_busy_poll: None,
            kernel_busy_poll_strict: false,
            timer_spin: weir_reactor::for_executor::DEFAULT_TIMER_SPIN,
            pin_workers: false,
            tokio_compat: TokioMode::Off,
            name: None,
            hooks: Hooks::default(),
            start_paused: false,
            stall_threshold: Some(DEFAULT_STALL_THRESHOLD),
            stall_backtrace: false,
            dump_signal: None,
            time_polls: None,
            poll_time_histogram: HistogramConfig::DEFAULT,
            schedule_delay_histogram: HistogramConfig::DEFAULT,
        }
    }

    /// A runtime with `workers` threads (default: available parallelism), each owning a reactor.
    pub fn new_multi_thread() -> Builder {
        Builder::new(Flavor::MultiThread)
    }

    /// A runtime that runs everything on the thread calling `block_on` (tests, embedding).
    pub fn new_current_thread() -> Builder {
        Builder::new(Flavor::CurrentThread)
    }

    /// Number of workers (multi-thread flavour). Must be 1..=[`MAX_WORKERS`].
    pub fn workers(&mut self, n: usize) -> &mut Builder {
        self.workers = Some(n);
        self
    }

    /// Alias of [`workers`](Self::workers), for code written for tokio.
    pub fn worker_threads(&mut self, n: usize) -> &mut Builder {
        self.workers(n)
    }

    /// The min_wait window of every worker's blocking waits (`Duration::ZERO` turns it off).
    /// At most [`MAX_MIN_WAIT`]. See [`weir_reactor::min_wait`].
    pub fn min_wait(&mut self, d: Duration) -> &mut Builder {
        self.min_wait = Some(MinWait::from(d));
        self
    }

    /// An adaptive min_wait window, sized from the worker's recent load so that it adds at most
    /// `max` to an event's latency: `max × (1 − utilisation)` while events arrive faster than
    /// the window, none at low load (nothing is delayed) and none near saturation (where a
    /// window would cut the worker's capacity). See [`weir_reactor::min_wait`].
    pub fn min_wait_adaptive(&mut self, max: Duration) -> &mut Builder {
        self.min_wait = Some(MinWait::Adaptive { max });
        self
    }

    /// Sets the min_wait policy directly.
    pub fn min_wait_policy(&mut self, policy: MinWait) -> &mut Builder {
        self.min_wait = Some(policy);
        self
    }

    /// How long a worker that ran out of work spins (polling its reactor without blocking,
    /// checking queues, stealing) before it parks. Default: zero (park at once). At most
    /// [`MAX_BUSY_POLL`].
    pub fn busy_poll(&mut self, d: Duration) -> &mut Builder {
        self.busy_poll = d;
        self
    }

    /// The reactor backend of every worker. Without this call, the environment variable
    /// [`BACKEND_ENV`] (`WEIR_BACKEND`) chooses, and without that, epoll (on Linux). This call
    /// (and `#[weir::main(backend = "…")]`, which makes it) wins over the variable.
    ///
    /// - `Backend::Epoll`, `Backend::Mio`: as asked.
    /// - `Backend::IoUring`: one io_uring per worker. The kernel is asked once per process
    ///   whether it offers what the backend needs (Linux 6.1's `SINGLE_ISSUER`,
    ///   `DEFER_TASKRUN` and `COOP_TASKRUN` rings, `EXT_ARG`, `NODROP`, the poll and cancel
    ///   operations, multishot poll). `MIN_TIMEOUT` (Linux 6.12) is optional: with it the
    ///   kernel holds the min_wait window, without it weir builds the window as on epoll.
    ///   Where the kernel refuses — `kernel.io_uring_disabled`, a seccomp filter such as the
    ///   default profiles of container runtimes, an old kernel — the runtime runs on epoll and
    ///   logs one `tracing` warning per process (target `weir::reactor`) naming the cause, unless
    ///   [`backend_strict`](Self::backend_strict) makes that an error. Dropping an io_uring
    ///   runtime waits for the kernel to finish tearing each ring down (about 36 ms per
    ///   reactor on Linux 6.18), so that no thread of the program is interrupted afterwards by
    ///   work the kernel queues for a closed ring.
    /// - `Backend::Auto`: io_uring where the kernel offers it, epoll otherwise; the choice and
    ///   its reason are logged once per process.
    ///
    /// [`Handle::backend`](crate::Handle::backend) tells which backend the runtime runs on.
    pub fn backend(&mut self, backend: Backend) -> &mut Builder {
        self.backend = Some(backend);
        self
    }

    /// Makes [`build`](Self::build) fail, naming the cause, when `Backend::IoUring` was asked
    /// for and the kernel refuses it, instead of warning and running on epoll (default:
    /// `false`). Also set by `WEIR_BACKEND=io_uring!`. No effect on the other backends:
    /// `Backend::Auto` chooses and never fails for want of io_uring.
    pub fn backend_strict(&mut self, strict: bool) -> &mut Builder {
        self.backend_strict = strict;
        self
    }

    /// On the io_uring backend, receives the bytes of TCP streams (accepted ones, and those
    /// made with `from_std`) with a multishot receive into a ring of provided buffers, instead
    /// of polling them for read readiness and reading them with `recv(2)` (default: off, or what
    /// [`RECV_MULTISHOT_ENV`] (`WEIR_URING_RECV_MULTISHOT`) says: `1` on, `0` off). No effect on
    /// the other backends.
    ///
    /// With it on, each worker keeps 256 buffers of 4 KiB for its ring; the worker copies every
    /// completion's bytes into the stream's read-ahead queue (at most 64 KiB per stream; past
    /// that it stops receiving until a reader drains the queue, so flow control still reaches
    /// the peer) and gives the buffer back at once. Reads then take the bytes without a
    /// syscall. What changes for you:
    /// - `peek` sees the read-ahead bytes first, then waits as usual;
    /// - `into_std` first stops the stream's receive and collects what it took, so no byte is
    ///   lost in the handover; it fails with `InvalidData` when bytes were received ahead and
    ///   not read, and the error carries them with the std stream
    ///   (`weir::net::tcp::IntoStdError::from_io`); with none pending it hands over the socket
    ///   as usual;
    /// - reading the fd yourself (`as_raw_fd`) misses what was already received ahead.
    ///
    /// Streams made with `connect` keep readiness (a receive armed during the handshake would
    /// take its error). Writes stay one `send(2)` each: a send queued by the runtime would
    /// report success before the kernel took the bytes.
    ///
    /// Measured against plain readiness on the same ring (the project's benchmark report): one
    /// syscall fewer per request, and more requests/s with two workers sharing the CPUs with
    /// the load, but no lower CPU cost per request on a pinned worker, and more with a new
    /// connection per request. Hence off by default. If the kernel refuses the buffer ring,
    /// the runtime warns once and polls as usual.
    pub fn io_uring_recv_multishot(&mut self, on: bool) -> &mut Builder {
        self.recv_multishot = Some(on);
        self
    }

    /// On the io_uring backend, accepts the connections of TCP listeners with a multishot
    /// accept that stays armed, instead of polling the listener for readiness and calling
    /// `accept4(2)` (default: off, or what [`ACCEPT_MULTISHOT_ENV`]
    /// (`WEIR_URING_ACCEPT_MULTISHOT`) says: `1` on, `0` off). No effect on the other
    /// backends.
    ///
    /// The worker queues what the kernel accepts (at most 64 connections per listener; past
    /// that the kernel's backlog holds them) and `accept` takes them from there, asking the
    /// peer's address with `getpeername(2)`, since a multishot accept cannot return it. The
    /// behaviour of `accept` is unchanged, including its back-off when the process runs out of
    /// file descriptors, with one difference: connections are accepted ahead, so peers see them
    /// established even while the program does not call `accept` (up to the queue's bound,
    /// plus the backlog).
    ///
    /// Measured against plain readiness on the same ring: about 5 % less CPU per request when
    /// every request comes on a new connection, nothing for keep-alive connections. Off by
    /// default.
    pub fn io_uring_accept_multishot(&mut self, on: bool) -> &mut Builder {
        self.accept_multishot = Some(on);
        self
    }

    /// Prefix of thread names: `{name}-worker-{i}` and `{name}-blocking-{n}`. Default `weir`.
    pub fn thread_name(&mut self, name: impl Into<String>) -> &mut Builder {
        self.thread_name = name.into();
        self
    }

    /// The runtime's name, returned by [`Handle::name`](crate::Handle::name) (default: none). It does not change
    /// thread names; see [`thread_name`](Self::thread_name) for those. [`build`](Self::build)
    /// rejects an empty name.
    pub fn name(&mut self, name: impl Into<String>) -> &mut Builder {
        self.name = Some(name.into());
        self
    }

    /// Runs `f` on every thread the runtime starts (its workers and its blocking-pool threads),
    /// on that thread, before the thread does any work. The current-thread flavour runs its
    /// worker on the thread calling `block_on`, which it does not start: `f` runs only on its
    /// blocking-pool threads.
    pub fn on_thread_start<F>(&mut self, f: F) -> &mut Builder
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.hooks.start = Some(Arc::new(f));
        self
    }

    /// Runs `f` on every thread the runtime started, just before the thread exits (a worker at
    /// shutdown, a blocking-pool thread when it retires or at shutdown).
    pub fn on_thread_stop<F>(&mut self, f: F) -> &mut Builder
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.hooks.stop = Some(Arc::new(f));
        self
    }

    /// Runs `f` on a worker (of either flavour) just before it blocks in its reactor because
    /// it found no work. `f` runs inside the runtime: it may spawn tasks, in which case the
    /// worker does not block.
    pub fn on_thread_park<F>(&mut self, f: F) -> &mut Builder
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.hooks.park = Some(Arc::new(f));
        self
    }

    /// Runs `f` on a worker just after it returns from blocking in its reactor (see
    /// [`on_thread_park`](Self::on_thread_park)).
    pub fn on_thread_unpark<F>(&mut self, f: F) -> &mut Builder
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.hooks.unpark = Some(Arc::new(f));
        self
    }

    /// Stack size of worker and blocking threads; at least [`MIN_STACK_SIZE`].
    pub fn thread_stack_size(&mut self, bytes: usize) -> &mut Builder {
        self.thread_stack_size = Some(bytes);
        self
    }

    /// Task polls between two non-blocking polls of a busy worker's reactor (default 61), so
    /// I/O and timers make progress while tasks keep the worker busy.
    pub fn event_interval(&mut self, polls: u32) -> &mut Builder {
        self.event_interval = polls;
        self
    }

    /// Task polls between two looks at the global inject queue ahead of the local queue
    /// (default 31), so tasks woken from outside cannot be starved by local ones.
    pub fn global_queue_interval(&mut self, polls: u32) -> &mut Builder {
        self.global_queue_interval = polls;
        self
    }

    /// Most threads of the blocking pool (default 512).
    pub fn max_blocking_threads(&mut self, n: usize) -> &mut Builder {
        self.max_blocking_threads = n;
        self
    }

    /// How long an idle blocking-pool thread lives (default 10 s).
    pub fn thread_keep_alive(&mut self, d: Duration) -> &mut Builder {
        self.blocking_keep_alive = d;
        self
    }

    /// Events one reactor wait collects at most (`maxevents`, default 1024).
    pub fn max_events(&mut self, n: usize) -> &mut Builder {
        self.max_events = n;
        self
    }

    /// Uses `epoll_wait` (millisecond timeouts) even where `epoll_pwait2` exists — the fallback
    /// path of kernels before 5.11, selectable so it can be tested.
    pub fn disable_epoll_pwait2(&mut self) -> &mut Builder {
        self.epoll_pwait2 = false;
        self
    }

    /// The longest a thread waiting for a timer may wake early and spin until the deadline.
    /// The default is 50 µs; `Duration::ZERO` never spins; the most is [`MAX_TIMER_SPIN`].
    /// This applies to workers and to the thread in `block_on`.
    ///
    /// The margin actually used is four times the measured average lateness of the OS's
    /// wake-ups, capped by this value. Without the spin, a timer fires the OS's wake-up latency
    /// after its deadline; with it, a µs or so after.
    ///
    /// Only waits that a timer ends spin; I/O and wake-ups end a spin at once. A runtime with
    /// nothing due never spins.
    ///
    /// The cost is CPU. Where wake-ups are slow (tens of µs on a VM that halts idle vCPUs), the
    /// margin sits at the cap. A loop of 100 µs sleeps then spends about 40 µs of CPU per sleep
    /// at the default. With 1 ms, sleeps of up to a millisecond are spun out nearly whole: the
    /// p99 error comes close to what the machine allows a busy-wait, and the core stays busy
    /// while the loop runs.
    pub fn timer_spin(&mut self, max: Duration) -> &mut Builder {
        self.timer_spin = max;
        self
    }

    /// Disables the LIFO slot: every woken task goes to the back of the local queue.
    pub fn disable_lifo_slot(&mut self) -> &mut Builder {
        self.lifo_slot = false;
        self
    }

    /// Kernel busy poll on every worker's epoll instance (`EPIOCSPARAMS`, Linux 6.9): a wait
    /// that would block first spins in the kernel for up to `usecs` on the NAPI instance (NIC
    /// receive queue) its sockets arrive on, handling up to `budget` packets per poll (0 = the
    /// kernel's default of 8); `prefer` sets `prefer_busy_poll`. The kernel polls one NAPI id
    /// per epoll, which is why it pays off with `weir::net::ShardedListener` (one NAPI id per
    /// worker). `usecs = 0` turns it off.
    ///
    /// If the kernel refuses (`ENOTTY` before 6.9, `EOPNOTSUPP` without
    /// `CONFIG_NET_RX_BUSY_POLL`, `EPERM` for a budget above 64 without `CAP_NET_ADMIN`, or the
    /// mio backend), the runtime logs one `tracing` warning (target `weir::worker`) and runs
    /// without it — unless [`kernel_busy_poll_strict`](Self::kernel_busy_poll_strict) is set.
    pub fn kernel_busy_poll(&mut self, usecs: u32, budget: u16, prefer: bool) -> &mut Builder {
        self.kernel_busy_poll = Some(KernelBusyPoll {
            usecs,
            budget,
            prefer,
        });
        self
    }

    /// Makes [`build`](Self::build) fail when kernel busy poll cannot be applied, instead of
    /// warning and running without it.
    pub fn kernel_busy_poll_strict(&mut self, strict: bool) -> &mut Builder {
        self.kernel_busy_poll_strict = strict;
        self
    }

    /// Pins worker `i` to the `i`-th CPU this process may use (modulo their number), so a
    /// worker's reactor, its NAPI busy polling and its tasks stay on one CPU; pair it with
    /// CPU-steered accept in `weir::net::ShardedListener`. A CPU that cannot be set is logged
    /// and ignored. The current-thread flavour runs on the caller's thread and is not pinned,
    /// and neither is a worker handed to a blocking-pool thread by `block_in_place`.
    pub fn pin_workers(&mut self, pin: bool) -> &mut Builder {
        self.pin_workers = pin;
        self
    }

    /// Gives every worker a tokio runtime of its own and runs the worker inside it, so that
    /// libraries calling `tokio::spawn`, `tokio::time`, `tokio::net` or `tokio::fs`
    /// (tokio-postgres, deadpool, redis, reqwest, tower-http's `TimeoutLayer`, axum's WebSocket
    /// upgrade, `tokio::task::JoinSet`) work on weir instead of panicking with "there is no
    /// reactor running", and run on the thread of the weir code that uses them.
    ///
    /// What runs where:
    /// - a task started with `tokio::spawn` on a worker runs on that worker's thread, between
    ///   weir's tasks; it is never stolen by another worker (weir's own tasks still are);
    /// - a tokio timer or socket created on a worker is driven by that worker: the worker
    ///   waits for weir's reactor and tokio's at once (when weir has nothing to run it parks
    ///   inside tokio, whose epoll then watches weir's reactor and a timerfd set to weir's
    ///   nearest deadline), weir's timers keep their nanosecond deadlines, and min_wait windows
    ///   and busy polling apply as without tokio;
    /// - a wake-up between a weir task and a tokio task of the same worker costs no syscall;
    ///   one from another worker costs what any cross-thread wake-up costs (one eventfd write
    ///   when the worker sleeps);
    /// - off the workers (`block_on`'s caller, the blocking pool, [`Runtime::enter`](crate::Runtime::enter)),
    ///   tokio calls go to worker 0's tokio runtime;
    /// - tokio tasks still alive at shutdown are dropped after weir's tasks, while weir's
    ///   reactors still exist;
    /// - a weir task in [`block_in_place`](crate::task::block_in_place) moves its worker to
    ///   another thread; the worker's tokio tasks wait until the blocking call returns.
    ///
    /// tokio's rules hold inside: `tokio::runtime::Handle::current()` works, and blocking on
    /// a runtime (`Handle::block_on`) is refused as tokio refuses it. tokio's
    /// `task::block_in_place` needs tokio's multi-thread runtime: for libraries that call it,
    /// use [`tokio_compat_threads`](Self::tokio_compat_threads). With the io_uring backend,
    /// whose ring cannot be waited on from inside tokio, the compat runtime runs beside the
    /// workers (as with `tokio_compat_threads(1)`).
    ///
    /// Needs the `tokio-compat` feature: without it, [`build`](Self::build) fails with
    /// `InvalidInput`.
    pub fn tokio_compat(&mut self, on: bool) -> &mut Builder {
        self.tokio_compat = match (on, self.tokio_compat) {
            (false, _) => TokioMode::Off,
            (true, TokioMode::Sidecar(n)) => TokioMode::Sidecar(n),
            (true, _) => TokioMode::PerWorker,
        };
        self
    }

    /// Runs tokio's work on a tokio multi-thread runtime of `n` threads beside the weir
    /// runtime instead of inside the workers (`0` turns tokio compatibility off). Every event
    /// between weir code and tokio's tasks, timers or sockets is then a cross-thread wake-up:
    /// use it only for libraries that need tokio's multi-thread runtime
    /// (`tokio::task::block_in_place`). At most [`MAX_WORKERS`].
    pub fn tokio_compat_threads(&mut self, n: usize) -> &mut Builder {
        self.tokio_compat = if n == 0 {
            TokioMode::Off
        } else {
            TokioMode::Sidecar(n)
        };
        self
    }

    /// Starts the runtime with its clock paused, for tests: time stands still, moves with
    /// `weir::time::advance`, and jumps to the next timer whenever the runtime is idle (see
    /// `weir::time::pause`). Only for the current-thread flavour, whose single clock every
    /// thread of the runtime reads; on a multi-thread runtime [`build`](Self::build) fails
    /// with `InvalidInput`. A runtime built without it can still be paused by
    /// `weir::time::pause` (current-thread flavour).
    pub fn start_paused(&mut self, paused: bool) -> &mut Builder {
        self.start_paused = paused;
        self
    }

    /// How long one poll may run before it is reported as a stall (default
    /// [`DEFAULT_STALL_THRESHOLD`], 100 ms); `None` turns stall detection off.
    ///
    /// A task that blocks its worker thread — `std::thread::sleep`, a blocking syscall, a
    /// loop that never reaches an `.await` that returns `Pending` — holds up every task queued
    /// behind it on that worker. A monitor thread (one per runtime, waking every quarter of
    /// the threshold, between 1 and 250 ms) compares what the workers publish about their current poll; a poll that
    /// has run for the threshold is reported once through `tracing` at warn level, target
    /// `weir::stall`, with the task's id, name, spawn location, the worker and how long so far;
    /// and again when it ends, with its total. Stalls are counted in
    /// [`WorkerStats::stalls`](crate::WorkerStats::stalls). The workers pay nothing per poll
    /// for it beyond what the metrics already record. Polls inside
    /// [`block_in_place`](crate::task::block_in_place) are not stalls (the worker carries on
    /// elsewhere).
    ///
    /// Must be at least 1 ms ([`build`](Self::build) checks).
    pub fn stall_threshold(&mut self, threshold: Option<Duration>) -> &mut Builder {
        self.stall_threshold = threshold;
        self
    }

    /// Adds the stalled worker thread's stack backtrace to each stall report (default off).
    ///
    /// At detection the monitor sends the worker thread a real-time signal; its handler
    /// records the return addresses on the thread's stack with glibc's `backtrace(3)` into a
    /// buffer set aside beforehand, and the monitor prints them, as `module+offset` (resolve
    /// them with `addr2line -e <binary>`) and with the symbol name where the dynamic symbol
    /// table has one. `backtrace(3)` is not on POSIX's list of async-signal-safe functions: it
    /// is safe here because glibc's unwinder is loaded (by a first call) before any signal is
    /// sent, and glibc 2.35+ finds unwind tables without a lock (`_dl_find_object`); on an
    /// older glibc a signal that lands while the worker is inside `dlopen` could deadlock the
    /// worker, which is why this is off by default. Linux with glibc only; elsewhere reports
    /// carry no backtrace.
    pub fn stall_backtrace(&mut self, on: bool) -> &mut Builder {
        self.stall_backtrace = on;
        self
    }

    /// Writes a task dump ([`Handle::dump`](crate::Handle::dump)) through `tracing` (info
    /// level, target `weir::dump`) whenever the process receives signal `signal` (e.g.
    /// `libc::SIGUSR2`); `None` (the default) installs nothing. The handler only sets a
    /// flag; the runtime's monitor thread takes the dump at its next wake-up (every quarter of
    /// the stall threshold, between 1 and 250 ms; every 250 ms with stall detection off). Other
    /// handlers of the same signal (`weir::signal`'s too) keep working. Signals that cannot
    /// be caught, or that report faults (`SIGKILL`, `SIGSTOP`, `SIGSEGV`, `SIGBUS`, `SIGILL`,
    /// `SIGFPE`), fail the build.
    pub fn dump_on_signal(&mut self, signal: Option<i32>) -> &mut Builder {
        self.dump_signal = signal;
        self
    }

    /// Whether every poll is timed (its duration, its scheduling delay, the longest poll).
    /// By default they are wherever the CPU has a counter that can be read without a syscall
    /// and runs at a fixed rate (an invariant TSC on x86_64, the virtual counter on aarch64):
    /// two counter reads per poll and one per wake-up. Elsewhere timing a poll takes two
    /// reads of the OS clock, so it is off unless this turns it on. Busy and parked time are
    /// measured either way (at parks).
    pub fn time_polls(&mut self, on: bool) -> &mut Builder {
        self.time_polls = Some(on);
        self
    }

    /// The buckets of each worker's poll-time histogram (default: log scale from 1.024 µs, 20
    /// buckets).
    pub fn poll_time_histogram(&mut self, config: HistogramConfig) -> &mut Builder {
        self.poll_time_histogram = config;
        self
    }

    /// The buckets of each worker's scheduling-delay histogram — the time from a task's
    /// wake-up (or spawn) to the start of its poll (default as
    /// [`poll_time_histogram`](Self::poll_time_histogram)).
    pub fn schedule_delay_histogram(&mut self, config: HistogramConfig) -> &mut Builder {
        self.schedule_delay_histogram = config;
        self
    }

    /// No-op, for code written for tokio: I/O and timers are always enabled.
    pub fn enable_all(&mut self) -> &mut Builder {
        self
    }

    /// No-op, for code written for tokio.
    pub fn enable_io(&mut self) -> &mut Builder {
        self
    }

    /// No-op, for code written for tokio.
    pub fn enable_time(&mut self) -> &mut Builder {
        self
    }
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("flavor", &self.flavor)
            .field("workers", &self.workers)
            .field("min_wait", &self.min_wait)
            .field("busy_poll", &self.busy_poll)
            .field("backend", &self.backend)
            .field("backend_strict", &self.backend_strict)
            .field("recv_multishot", &self.recv_multishot)
            .field("accept_multishot", &self.accept_multishot)
            .field("thread_name", &self.thread_name)
            .field("event_interval", &self.event_interval)
            .field("global_queue_interval", &self.global_queue_interval)
            .field("kernel_busy_poll", &self.kernel_busy_poll)
            .field("pin_workers", &self.pin_workers)
            .field("tokio_compat", &self.tokio_compat)
            .field("name", &self.name)
            .field("hooks", &self.hooks)
            .field("start_paused", &self.start_paused)
            .field("stall_threshold", &self.stall_threshold)
            .field("stall_backtrace", &self.stall_backtrace)
            .field("dump_signal", &self.dump_signal)
            .field("time_polls", &self.time_polls)
            .field("poll_time_histogram", &self.poll_time_histogram)
            .field("schedule_delay_histogram", &self.schedule_delay_histogram)
            .finish_non_exhaustive()
    }
}
